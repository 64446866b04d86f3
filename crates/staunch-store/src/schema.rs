//! The schema, identical on SQLite and PostgreSQL, and SQL fragments both drivers share.
//!
//! Every table is prefixed `staunch_` so the store can live in a database that holds other
//! things. Times are epoch-millisecond BIGINTs on both backends (one code path, no time zone
//! surprises). Migrations are append-only: never edit one that has shipped, add the next.

/// Migration `i` moves the schema from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE staunch_sessions (
    id TEXT PRIMARY KEY,
    protocol_version TEXT NOT NULL,
    client_info_json TEXT NOT NULL,
    client_capabilities_json TEXT NOT NULL,
    principal TEXT,
    log_level TEXT,
    created_ms BIGINT NOT NULL,
    last_seen_ms BIGINT NOT NULL
);
CREATE INDEX staunch_sessions_seen ON staunch_sessions (last_seen_ms);

-- last_seq is bumped under this row's lock in the same transaction as the event insert, so
-- sequence numbers commit in order. purged_through is the highest seq retention removed:
-- a replay cursor below it would skip events, and is answered with Gone.
CREATE TABLE staunch_sse_streams (
    stream_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    last_seq BIGINT NOT NULL DEFAULT 0,
    purged_through BIGINT NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL,
    closed_ms BIGINT
);
CREATE INDEX staunch_sse_streams_session ON staunch_sse_streams (session_id);

CREATE TABLE staunch_sse_events (
    stream_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    payload TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (stream_id, seq)
);

CREATE TABLE staunch_jobs (
    id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    session_id TEXT,
    tool TEXT NOT NULL,
    args_json TEXT NOT NULL,
    args_fingerprint TEXT NOT NULL,
    idem_key TEXT,
    idem_expires_ms BIGINT,
    state TEXT NOT NULL
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    cancel_requested_ms BIGINT,
    cancel_requested_by TEXT,
    attempt BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL DEFAULT 1,
    retry_safe BOOLEAN NOT NULL DEFAULT FALSE,
    lease_owner TEXT,
    lease_token BIGINT NOT NULL DEFAULT 0,
    lease_expires_ms BIGINT,
    heartbeat_ms BIGINT,
    progress_json TEXT,
    checkpoint_json TEXT,
    result_json TEXT,
    error_json TEXT,
    error_reason TEXT,
    created_ms BIGINT NOT NULL,
    started_ms BIGINT,
    finished_ms BIGINT,
    updated_ms BIGINT NOT NULL,
    ttl_ms BIGINT NOT NULL,
    purge_after_ms BIGINT
);
-- The idempotency claim: one job per (principal, tool, key) while the key is live.
CREATE UNIQUE INDEX staunch_jobs_idem ON staunch_jobs (principal, tool, idem_key)
    WHERE idem_key IS NOT NULL;
CREATE INDEX staunch_jobs_queued ON staunch_jobs (created_ms, id) WHERE state = 'queued';
CREATE INDEX staunch_jobs_leases ON staunch_jobs (lease_expires_ms) WHERE state = 'running';
CREATE INDEX staunch_jobs_owner ON staunch_jobs (lease_owner) WHERE state = 'running';
CREATE INDEX staunch_jobs_inflight ON staunch_jobs (principal, tool, args_fingerprint)
    WHERE state IN ('queued', 'running');
CREATE INDEX staunch_jobs_list ON staunch_jobs (principal, created_ms, id);
CREATE INDEX staunch_jobs_purge ON staunch_jobs (purge_after_ms) WHERE purge_after_ms IS NOT NULL;
CREATE INDEX staunch_jobs_idem_expiry ON staunch_jobs (idem_expires_ms) WHERE idem_key IS NOT NULL;
"#,
    // 2: shared secrets.
    r#"
-- Secrets every instance sharing the store must agree on (the key that seals input-required
-- rounds' requestState, so any instance can continue a round). Written once, never changed.
CREATE TABLE staunch_secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
"#,
    // 3: what a running job asked its client (the tasks extension's `input_required`), and the
    // answers, which any instance may write (`tasks/update`) and the lease holder reads.
    r#"
CREATE TABLE staunch_job_inputs (
    job_id TEXT NOT NULL,
    input_key TEXT NOT NULL,
    request_json TEXT NOT NULL,
    response_json TEXT,
    asked_ms BIGINT NOT NULL,
    answered_ms BIGINT,
    PRIMARY KEY (job_id, input_key)
);
"#,
    // 4: the W3C `traceparent` of the request span that started a job, so the job's attempt
    // spans can link to it (NULL when traces were off, and for jobs created before).
    r#"
ALTER TABLE staunch_jobs ADD COLUMN trace_parent TEXT;
"#,
    // 5: the fair claim between owners (`claim_next`, see `job::FAIR_CLAIM`): an owner's queued
    // jobs oldest first, its running jobs counted, and the last time one of its jobs started,
    // each an index seek however many finished rows the table holds.
    r#"
CREATE INDEX staunch_jobs_owner_queued ON staunch_jobs (principal, created_ms, id)
    WHERE state = 'queued';
CREATE INDEX staunch_jobs_owner_running ON staunch_jobs (principal) WHERE state = 'running';
CREATE INDEX staunch_jobs_owner_started ON staunch_jobs (principal, started_ms)
    WHERE started_ms IS NOT NULL;
"#,
    // 6: a client's answer to a server→client request (sampling, elicitation, roots) that
    // reached an instance other than the one that asked, kept until that one takes it.
    r#"
CREATE TABLE staunch_client_answers (
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    answer_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (session_id, request_id)
);
CREATE INDEX staunch_client_answers_age ON staunch_client_answers (created_ms);
"#,
    // 7: when each process that writes SSE streams was last alive, so that another instance
    // following one of its streams can tell a slow request from a dead writer.
    r#"
CREATE TABLE staunch_stream_writers (
    writer TEXT PRIMARY KEY,
    seen_ms BIGINT NOT NULL
);
"#,
];

/// The job columns in the order both drivers' row readers expect.
pub(crate) const JOB_COLS: &str = "id, principal, session_id, tool, args_json, args_fingerprint, \
    idem_key, idem_expires_ms, state, cancel_requested_ms, cancel_requested_by, attempt, \
    max_attempts, retry_safe, lease_owner, lease_token, lease_expires_ms, heartbeat_ms, \
    progress_json, checkpoint_json, result_json, error_json, error_reason, created_ms, \
    started_ms, finished_ms, updated_ms, ttl_ms, purge_after_ms, trace_parent";

/// How many owners a claim tries, fairest first, before it falls back to the oldest job of
/// anyone (only reachable on PostgreSQL, when other instances hold those owners' jobs locked).
pub(crate) const FAIR_TRIES: i64 = 4;

/// The owners (the `principal` column: see `staunch_jobs::OwnerScope`) that have a queued job
/// a worker may claim, fairest first; `tool_filter` is the driver's `tool IN …` condition and
/// `limit` the placeholder of how many to return.
///
/// Fairest is: the fewest jobs running now (every instance's), then the owner whose last job
/// started longest ago (never is longest: -1), then the owner whose oldest queued job is
/// oldest. The first rule shares the workers between owners; the second makes a round-robin
/// of owners with equal shares, which matters most with one worker, where nothing is running
/// when the next job is chosen and the first rule alone would be plain FIFO. So an owner who
/// queues a long backlog delays another owner's job by at most one job per worker slot,
/// whatever the order they queued in.
///
/// Cost, with no pass over all queued jobs and none over finished ones: the owners with queued
/// jobs are found by skipping through `staunch_jobs_owner_queued` (one seek per owner, the
/// recursive `o`), then per owner three index seeks — its oldest claimable job (`head_ms`;
/// NULL when none of its jobs is of these tools), its running jobs
/// (`staunch_jobs_owner_running`), its last start (`staunch_jobs_owner_started`).
///
/// Owners that already run `cap` jobs (the placeholder of the per-owner cap on running jobs)
/// are left out: the workers they would take are kept for other owners' jobs.
pub(crate) fn fair_owners_sql(tool_filter: &str, limit: &str, cap: &str) -> String {
    format!(
        "WITH RECURSIVE o(p) AS ( \
           SELECT MIN(principal) FROM staunch_jobs WHERE state = 'queued' \
           UNION ALL \
           SELECT (SELECT MIN(principal) FROM staunch_jobs \
                   WHERE state = 'queued' AND principal > o.p) \
           FROM o WHERE o.p IS NOT NULL), \
         c AS ( \
           SELECT o.p AS principal, \
             (SELECT j.created_ms FROM staunch_jobs j WHERE j.principal = o.p \
              AND j.state = 'queued' AND j.cancel_requested_ms IS NULL AND {tool_filter} \
              ORDER BY j.created_ms LIMIT 1) AS head_ms \
           FROM o WHERE o.p IS NOT NULL) \
         SELECT c.principal FROM c WHERE c.head_ms IS NOT NULL \
           AND (SELECT COUNT(*) FROM staunch_jobs r \
                WHERE r.state = 'running' AND r.principal = c.principal) < {cap} \
         ORDER BY (SELECT COUNT(*) FROM staunch_jobs r \
                   WHERE r.state = 'running' AND r.principal = c.principal), \
         COALESCE((SELECT MAX(s.started_ms) FROM staunch_jobs s \
                   WHERE s.principal = c.principal AND s.started_ms IS NOT NULL), -1), \
         c.head_ms, c.principal LIMIT {limit}"
    )
}

/// The error stored when a lease expires and the job may not run again.
pub(crate) const LEASE_LOST_ERROR_JSON: &str = r#"{"code":"lease_lost","message":"the worker stopped renewing its lease before the job finished; the job was not run again because it is not retry-safe or has used all its attempts"}"#;

/// The SET list of the lease-expiry transition, shared by the reaper and `release_owner` on
/// both backends (`now` is the placeholder of the current time). All right-hand sides read the
/// row as it was before the update, so the order of assignments does not matter.
pub(crate) fn expire_set_clause(now: &str) -> String {
    const REQUEUE: &str = "(cancel_requested_ms IS NULL AND retry_safe AND attempt < max_attempts)";
    const CANCEL: &str = "(cancel_requested_ms IS NOT NULL)";
    format!(
        "state = CASE WHEN {CANCEL} THEN 'cancelled' WHEN {REQUEUE} THEN 'queued' ELSE 'failed' END, \
         error_reason = CASE WHEN {CANCEL} THEN 'cancelled' WHEN {REQUEUE} THEN error_reason \
             ELSE 'lease_lost' END, \
         error_json = CASE WHEN {CANCEL} OR {REQUEUE} THEN error_json ELSE '{LEASE_LOST_ERROR_JSON}' END, \
         finished_ms = CASE WHEN {REQUEUE} THEN NULL ELSE {now} END, \
         purge_after_ms = CASE WHEN {REQUEUE} THEN NULL ELSE {now} + ttl_ms END, \
         lease_owner = CASE WHEN {REQUEUE} THEN NULL ELSE lease_owner END, \
         lease_expires_ms = NULL, \
         updated_ms = {now}"
    )
}
