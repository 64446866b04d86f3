//! Durable jobs: the record, the state machine and the [`JobStore`] trait.
//!
//! ```text
//! queued ──claim──▶ running ──finish──▶ succeeded | failed | cancelled
//!   │                 └─lease expired (reaper / release_owner):
//!   │                      cancel requested?           → cancelled
//!   │                      retry_safe && attempt < max → queued (claimable again, token + 1)
//!   │                      otherwise                   → failed(lease_lost)
//!   └─request_cancel──────────────────────────────────▶ cancelled
//! ```
//!
//! Every write is guarded by the state it expects, and every worker write also by
//! `(lease_owner, lease_token)`: a worker whose lease was taken away (the fencing token moved
//! on) gets `Lost` and changes nothing. Terminal states never change.

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::{Signal, StoreError};

/// Idempotency keys are honoured for at least this long (jobs.md §1: ≥ 24 h).
pub const DEFAULT_IDEM_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// Terminal jobs are kept this long after they finish unless the caller says otherwise.
pub const DEFAULT_JOB_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// Longest idempotency key accepted (Stripe's limit, which clients already respect).
pub const MAX_IDEM_KEY_CHARS: usize = 255;
/// `error_reason` written by the reaper when a lease expired and the job may not re-run.
pub const REASON_LEASE_LOST: &str = "lease_lost";
/// `error_reason` of a cancelled job.
pub const REASON_CANCELLED: &str = "cancelled";

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting to be claimed.
    Queued,
    /// Claimed: a worker holds its lease.
    Running,
    /// Finished with a result.
    Succeeded,
    /// Ended with an error; `error_reason` says why.
    Failed,
    /// Cancelled: before it started, by its worker, or by the reaper after a cancel request.
    Cancelled,
}

impl JobState {
    /// The stored name: `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Reads a name written by [`JobState::as_str`]; an unknown one is [`StoreError::Corrupt`].
    pub fn parse(s: &str) -> Result<JobState, StoreError> {
        Ok(match s {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "succeeded" => JobState::Succeeded,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            other => return Err(StoreError::Corrupt(format!("unknown job state {other:?}"))),
        })
    }

    /// Terminal states never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One job row (jobs.md §4). Times are epoch milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// 128 random bits as 32 lowercase hex digits: unguessable, so it can be handed out as a
    /// task id even where requests carry no auth context.
    pub id: String,
    /// The caller the job belongs to; "" when requests carry no identity.
    pub principal: String,
    /// The HTTP session that started it, as the lifecycle log names it (a hash: the session id
    /// is a credential). Rows written before staunch recorded the hash hold the raw id.
    pub session_id: Option<String>,
    /// Name of the tool the job runs.
    pub tool: String,
    /// The tool's arguments, as JSON text.
    pub args_json: String,
    /// Hash of the canonical arguments, computed by the caller; compared on key reuse.
    pub args_fingerprint: String,
    /// Cleared once `idem_expires_ms` has passed, so the key can start a new job.
    pub idem_key: Option<String>,
    /// When `idem_key` stops being honoured; None for a job created without a key.
    pub idem_expires_ms: Option<i64>,
    /// Where the job is now; the module docs show the transitions.
    pub state: JobState,
    /// Set when a cancel was asked for while running; a flag, not a state.
    pub cancel_requested_ms: Option<i64>,
    /// What asked for the cancel, as free text (e.g. `tasks/cancel (session …)`).
    pub cancel_requested_by: Option<String>,
    /// How many times the job was claimed.
    pub attempt: u32,
    /// Claims allowed in all; a lost lease re-queues a retry-safe job only while `attempt` is
    /// below this.
    pub max_attempts: u32,
    /// May the job run again after its worker vanished? Side-effecting tools say no.
    pub retry_safe: bool,
    /// Owner id ([`owner_id`]) of the latest claim; None until claimed and after a re-queue.
    pub lease_owner: Option<String>,
    /// Fencing token: +1 on every claim; worker writes must present the current one.
    pub lease_token: u64,
    /// When the current lease runs out unless a heartbeat extends it; None when not running.
    pub lease_expires_ms: Option<i64>,
    /// Time of the latest claim or heartbeat; None until claimed.
    pub heartbeat_ms: Option<i64>,
    /// Latest progress, `{"progress":…,"total":…,"message":…}`.
    pub progress_json: Option<String>,
    /// The latest checkpoint the worker saved (JSON), which a re-run attempt resumes from.
    pub checkpoint_json: Option<String>,
    /// The tool's result (JSON) once `succeeded`.
    pub result_json: Option<String>,
    /// `{"code":…,"message":…}` once `failed`.
    pub error_json: Option<String>,
    /// Machine-readable cause of `failed`/`cancelled`: `lease_lost`, `panic`, `cancelled`, …
    pub error_reason: Option<String>,
    /// When the job was created.
    pub created_ms: i64,
    /// When it was first claimed; None until then.
    pub started_ms: Option<i64>,
    /// When it reached a terminal state; None before.
    pub finished_ms: Option<i64>,
    /// When the row last changed.
    pub updated_ms: i64,
    /// How long the row is kept after it reaches a terminal state.
    pub ttl_ms: i64,
    /// `finished_ms + ttl_ms`; [`JobStore::purge`] deletes the row after it.
    pub purge_after_ms: Option<i64>,
    /// The W3C `traceparent` of the request span that started the job (traces on), for the
    /// attempt spans' link.
    #[serde(default)]
    pub trace_parent: Option<String>,
}

/// What [`JobStore::create`] needs. Build it with [`NewJob::new`] and adjust the fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// The caller the job belongs to ([`JobRecord::principal`]).
    pub principal: String,
    /// As [`JobRecord::session_id`]: the log's hash of the session, never the id.
    pub session_id: Option<String>,
    /// Name of the tool to run.
    pub tool: String,
    /// The tool's arguments, as JSON text.
    pub args_json: String,
    /// Hash of the canonical arguments, compared when the idempotency key is reused.
    pub args_fingerprint: String,
    /// At most [`MAX_IDEM_KEY_CHARS`] characters.
    pub idem_key: Option<String>,
    /// How long the key is honoured from `now_ms` (default [`DEFAULT_IDEM_TTL_MS`]).
    pub idem_ttl_ms: i64,
    /// Claims allowed in all, at least 1 (default 1).
    pub max_attempts: u32,
    /// May the job run again after its worker vanished? (default false).
    pub retry_safe: bool,
    /// Retention after the terminal state (default [`DEFAULT_JOB_TTL_MS`]).
    pub ttl_ms: i64,
    /// Return an existing queued/running job with the same (principal, tool, fingerprint)
    /// instead of creating another one, even without an idempotency key.
    pub dedupe_inflight: bool,
    /// Refuse ([`CreateOutcome::TooManyActive`]) when the principal already has this many
    /// queued or running jobs. A key or dedupe that finds an existing job still returns it.
    pub max_active: Option<u64>,
    /// Creation time; the key's and the row's deadlines count from it.
    pub now_ms: i64,
    /// The starting request span's `traceparent` (recorded as [`JobRecord::trace_parent`]).
    pub trace_parent: Option<String>,
}

impl NewJob {
    /// A side-effecting job (one attempt, never re-run) with default retention and no key.
    pub fn new(
        principal: impl Into<String>,
        tool: impl Into<String>,
        args_json: impl Into<String>,
        args_fingerprint: impl Into<String>,
        now_ms: i64,
    ) -> NewJob {
        NewJob {
            principal: principal.into(),
            session_id: None,
            tool: tool.into(),
            args_json: args_json.into(),
            args_fingerprint: args_fingerprint.into(),
            idem_key: None,
            idem_ttl_ms: DEFAULT_IDEM_TTL_MS,
            max_attempts: 1,
            retry_safe: false,
            ttl_ms: DEFAULT_JOB_TTL_MS,
            dedupe_inflight: false,
            max_active: None,
            now_ms,
            trace_parent: None,
        }
    }

    /// Checks what the database cannot express, before anything is written.
    pub(crate) fn validate(&self) -> Result<(), StoreError> {
        if self.tool.is_empty() {
            return Err(StoreError::InvalidInput("tool name is empty".into()));
        }
        if let Some(key) = &self.idem_key {
            if key.is_empty() {
                return Err(StoreError::InvalidInput("idempotency key is empty".into()));
            }
            if key.chars().count() > MAX_IDEM_KEY_CHARS {
                return Err(StoreError::InvalidInput(format!(
                    "idempotency key is longer than {MAX_IDEM_KEY_CHARS} characters"
                )));
            }
        }
        if self.max_attempts == 0 {
            return Err(StoreError::InvalidInput(
                "max_attempts must be at least 1".into(),
            ));
        }
        if self.idem_ttl_ms < 0 || self.ttl_ms < 0 {
            return Err(StoreError::InvalidInput("ttl must not be negative".into()));
        }
        Ok(())
    }
}

/// The answer to [`JobStore::create`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    /// A new job, queued.
    Created(JobRecord),
    /// Same key and same arguments (or an in-flight duplicate): this job, in whatever state.
    Existing(JobRecord),
    /// Same key, other arguments: refuse, never attach the call to the old job.
    KeyReused {
        /// The job the key belongs to.
        existing_job_id: String,
    },
    /// The principal has `NewJob::max_active` jobs queued or running already: nothing was
    /// recorded.
    TooManyActive {
        /// The principal's limit ([`NewJob::max_active`]).
        limit: u64,
    },
}

/// A claimed job: the worker presents `token` (with its owner id) on every later write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The job as claimed: `running`, its `attempt` and `lease_token` already advanced.
    pub job: JobRecord,
    /// Fencing token of this claim (the job's `lease_token`).
    pub token: u64,
}

/// The answer to [`JobStore::heartbeat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// The lease was extended. `cancel_requested` tells the worker to stop.
    Held {
        /// A cancel was requested: the worker stops.
        cancel_requested: bool,
    },
    /// The lease is gone (expired and reaped, or the job is terminal): stop, write nothing more.
    Lost,
}

/// How a worker ends its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// The tool returned a result: recorded as `succeeded`.
    Succeeded {
        /// The result, as JSON text.
        result_json: String,
    },
    /// The job failed: recorded as `failed`.
    Failed {
        /// `{"code":…,"message":…}` by convention.
        error_json: String,
        /// Machine-readable cause, stored as [`JobRecord::error_reason`].
        reason: String,
    },
    /// The worker saw the cancel flag and stopped.
    Cancelled,
}

/// The answer to [`JobStore::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishOutcome {
    /// The terminal state was written.
    Recorded,
    /// Another claim holds the job now (the token moved on) or it is not running: nothing written.
    Lost,
    /// This worker's own attempt was already ended (by the reaper, or an earlier `finish`).
    AlreadyTerminal(JobState),
}

/// The answer to [`JobStore::request_cancel`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It had not started: it is `cancelled` now.
    CancelledQueued(JobRecord),
    /// It is running: the flag is set and the worker learns it at its next heartbeat (or at
    /// once through a [`Signal::Cancel`]).
    Requested(JobRecord),
    /// Nothing to do; here is how it ended.
    AlreadyTerminal(JobRecord),
    /// No job has this id.
    NotFound,
}

/// One job moved by [`JobStore::reap_expired`] or [`JobStore::release_owner`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReapedJob {
    /// The job's id.
    pub id: String,
    /// `queued` (it runs again), `failed` or `cancelled`.
    pub new_state: JobState,
}

/// One question a running job asked its client (the tasks extension's `input_required`), and
/// the answer once one came. A key is unique for the life of its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInput {
    /// Names the question within its job; the client answers under it.
    pub key: String,
    /// The request as the client sees it in `inputRequests` (`{"method": …, "params": …}`).
    pub request_json: String,
    /// The client's answer (`inputResponses[key]`), once given.
    pub response_json: Option<String>,
    /// When the job asked.
    pub asked_ms: i64,
    /// When the answer arrived; None while unanswered.
    pub answered_ms: Option<i64>,
}

/// Durable job storage. Object safe: use it as `Arc<dyn JobStore>`.
///
/// # Owners and restarts
/// A worker's owner id is `"{instance_name}/{run_id}"` (see [`owner_id`]): the instance name
/// is stable across restarts (`--instance-name`, e.g. the host name) and the run id is fresh
/// random per process start. At boot, before its first claim, an instance calls
/// [`JobStore::release_owner`] with [`owner_prefix`]`(name)` to end the leases its previous
/// incarnation held, instead of waiting for them to expire. A fresh run id means a zombie of
/// the old process can never renew a lease the new one owns. Instance names must be unique
/// among live instances, or one would release the other's running jobs (those workers then get
/// `Lost`; side-effecting jobs end `failed(lease_lost)`, they are never run twice).
#[async_trait]
pub trait JobStore: Send + Sync + 'static {
    /// Records a new job (state `queued`) or returns the one an idempotency key or in-flight
    /// dedupe points at. The key claim is atomic: concurrent creates with one key make one job.
    async fn create(&self, job: NewJob) -> Result<CreateOutcome, StoreError>;

    /// The job with this id; None if there is none (or it was purged).
    async fn get(&self, id: &str) -> Result<Option<JobRecord>, StoreError>;

    /// A principal's jobs ordered by (created_ms, id), `limit` at a time (capped at 1000).
    /// The returned cursor, if any, fetches the next page.
    async fn list(
        &self,
        principal: &str,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<JobRecord>, Option<String>), StoreError>;

    /// Claims this queued job (to run it right away in this process). None if it is not
    /// queued any more, or a cancel was requested.
    async fn claim(
        &self,
        id: &str,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Option<Lease>, StoreError>;

    /// Claims a queued job whose tool is in `tools` (an empty slice claims nothing), fair
    /// between owners (the `principal` column): the oldest job of the owner with the fewest
    /// jobs running, then of the owner served longest ago. One owner's backlog cannot hold
    /// back another owner's job for more than one job per worker slot. An owner with
    /// `max_running_per_owner` jobs running (on any instance) gets no more until one ends, so
    /// one owner's long jobs cannot take every worker while another owner's job waits.
    async fn claim_next(
        &self,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
        tools: &[String],
        max_running_per_owner: u64,
    ) -> Result<Option<Lease>, StoreError>;

    /// Extends the lease to `now_ms + lease_ms` and stores progress/checkpoint when given
    /// (None keeps the stored value). Reports the cancel flag. A late heartbeat, after the
    /// lease ran out but before a reaper moved the job, still holds: only the reaper takes a
    /// running job away, so nobody else can have started it.
    #[allow(clippy::too_many_arguments)] // the fenced identity (3) + lease + time + 2 payloads
    async fn heartbeat(
        &self,
        id: &str,
        owner: &str,
        token: u64,
        lease_ms: i64,
        now_ms: i64,
        progress: Option<String>,
        checkpoint: Option<String>,
    ) -> Result<Heartbeat, StoreError>;

    /// Writes the terminal state. A success that races a cancel request is recorded as a
    /// success: the side effects happened.
    async fn finish(
        &self,
        id: &str,
        owner: &str,
        token: u64,
        outcome: JobOutcome,
        now_ms: i64,
    ) -> Result<FinishOutcome, StoreError>;

    /// Cancels a queued job at once, flags a running one, leaves a terminal one alone.
    /// The caller checks the principal first (via [`JobStore::get`]).
    async fn request_cancel(
        &self,
        id: &str,
        by: &str,
        now_ms: i64,
    ) -> Result<CancelOutcome, StoreError>;

    /// Ends up to `batch` running jobs whose lease expired before `now_ms` (see the state
    /// diagram in the module docs). Safe to run on every instance at once: each job is moved
    /// by exactly one of them.
    async fn reap_expired(&self, now_ms: i64, batch: usize) -> Result<Vec<ReapedJob>, StoreError>;

    /// Treats every running job whose `lease_owner` starts with `owner_prefix` as if its lease
    /// had expired (same transitions as the reaper). Pass a full owner id to release exactly
    /// one owner. See the trait docs for the naming scheme.
    async fn release_owner(
        &self,
        owner_prefix: &str,
        now_ms: i64,
    ) -> Result<Vec<ReapedJob>, StoreError>;

    /// Deletes terminal jobs past `purge_after_ms` and clears expired idempotency keys.
    /// Returns how many jobs were deleted.
    async fn purge(&self, now_ms: i64) -> Result<u64, StoreError>;

    /// Records questions the running job asks its client, fenced by the lease like a
    /// heartbeat: `(key, request_json)` pairs; keys already recorded keep their first request
    /// (and answer). Returns false, writing nothing, when the lease is not held.
    async fn ask_inputs(
        &self,
        id: &str,
        owner: &str,
        token: u64,
        questions: Vec<(String, String)>,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Answers questions of job `id` from any instance: each `(key, response_json)` whose
    /// question exists and is still unanswered is stored; the others are ignored (an answer is
    /// never replaced). Returns the keys that were answered by this call.
    async fn answer_inputs(
        &self,
        id: &str,
        answers: Vec<(String, String)>,
        now_ms: i64,
    ) -> Result<Vec<String>, StoreError>;

    /// Every question of job `id`, in the order asked.
    async fn inputs(&self, id: &str) -> Result<Vec<JobInput>, StoreError>;

    /// Sends [`Signal::Cancel`] to every subscriber (on PostgreSQL: on every instance).
    /// [`JobStore::request_cancel`] already does this for running jobs.
    async fn notify_cancel(&self, id: &str) -> Result<(), StoreError>;

    /// Tells every instance that job `id` changed in the process whose owner id is `by`
    /// (a [`Signal::Changed`]), so listeners elsewhere re-read it. Only PostgreSQL crosses
    /// processes; the default sends nothing.
    async fn notify_changed(&self, id: &str, by: &str) -> Result<(), StoreError> {
        let _ = (id, by);
        Ok(())
    }

    /// Subscribes to [`Signal`]s. A [`Signal::Wake`] arrives once the subscription is live.
    /// PostgreSQL: LISTEN/NOTIFY across instances. SQLite: in this process only.
    fn subscribe_signals(&self) -> broadcast::Receiver<Signal>;

    /// The operator's view (`staunch jobs list`, the live page): jobs of every principal that
    /// match `filter`, newest first, at most `filter.limit` (capped at 1000).
    async fn list_all(&self, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError>;

    /// How many jobs are in each state right now (states with none are left out).
    async fn count_by_state(&self) -> Result<Vec<(JobState, u64)>, StoreError>;

    /// The ids of jobs that start with `prefix`, at most `limit`, in id order: how an operator
    /// names a job by the first characters of its id.
    async fn ids_starting_with(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// Deletes terminal jobs that finished before `finished_before_ms`, whatever their
    /// retention, with their questions; queued and running jobs are never touched. Returns
    /// how many jobs were deleted.
    async fn purge_finished_before(&self, finished_before_ms: i64) -> Result<u64, StoreError>;
}

/// What [`JobStore::list_all`] selects. Empty `states` means every state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFilter {
    /// States to include; empty means every state.
    pub states: Vec<JobState>,
    /// Only jobs of this tool.
    pub tool: Option<String>,
    /// Only jobs created at or after this time (epoch ms).
    pub created_from_ms: Option<i64>,
    /// Only jobs created before this time (epoch ms).
    pub created_before_ms: Option<i64>,
    /// Most jobs returned (capped at 1000; default 100).
    pub limit: usize,
}

impl Default for JobFilter {
    fn default() -> Self {
        JobFilter {
            states: Vec::new(),
            tool: None,
            created_from_ms: None,
            created_before_ms: None,
            limit: 100,
        }
    }
}

impl JobFilter {
    /// The states as their stored names, for an `IN`/`ANY` parameter; `None` for "any state".
    pub(crate) fn state_names(&self) -> Option<Vec<String>> {
        (!self.states.is_empty())
            .then(|| self.states.iter().map(|s| s.as_str().to_owned()).collect())
    }
}

/// A fresh owner id for this process: `"{instance_name}/{16 random hex digits}"`.
/// `instance_name` must not contain '/'.
pub fn owner_id(instance_name: &str) -> String {
    format!("{}{}", owner_prefix(instance_name), &crate::random_hex(8))
}

/// The prefix every owner id of `instance_name` starts with; pass it to
/// [`JobStore::release_owner`] at boot.
pub fn owner_prefix(instance_name: &str) -> String {
    format!("{instance_name}/")
}
