//! [`JobStore`] on PostgreSQL.
//!
//! Concurrency, instance against instance:
//! - the idempotency claim is `INSERT … ON CONFLICT DO NOTHING` on the partial unique index;
//!   a loser waits for the winner's commit and then reads its row;
//! - in-flight dedupe has no unique index to lean on, so those creates serialise on a
//!   transaction advisory lock keyed by (principal, tool, fingerprint);
//! - claims and the reaper pick rows with `FOR UPDATE SKIP LOCKED`, so instances never wait on
//!   each other and never move one job twice;
//! - every UPDATE repeats its guard (`state`, owner, token) so a row that changed under a
//!   waiting statement is re-checked by PostgreSQL before it is written.
//!
//! `job_create.rs` holds the create (idempotency, dedupe, per-principal limit),
//! `job_operator.rs` the operator's queries, `job_row.rs` the row reader.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use super::job_row::{job_from_row, lease_of, opt_job};
use super::listen::{self, WAKE_PAYLOAD, cancel_payload, changed_payload, channel_for_schema};
use super::{Pg, execute, query, query_opt, to_i64};
use crate::job_rows::{clamp_limit, decode_cursor, encode_cursor, outcome_columns};
use crate::schema::{FAIR_TRIES, JOB_COLS, expire_set_clause, fair_owners_sql};
use crate::{
    CancelOutcome, CreateOutcome, FinishOutcome, Heartbeat, JobFilter, JobInput, JobOutcome,
    JobRecord, JobState, JobStore, Lease, NewJob, REASON_CANCELLED, ReapedJob, Signal, StoreError,
};

const SIGNAL_CAPACITY: usize = 1024;

/// Aborts the listener task (and so closes its connection) when the store goes away.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) struct PgJobStore {
    pg: Arc<Pg>,
    /// Connection settings for the LISTEN connection (same database, user and search_path).
    config: tokio_postgres::Config,
    channel: String,
    signals: broadcast::Sender<Signal>,
    /// Started on the first subscription: an instance that never listens holds no extra
    /// connection.
    listener: Mutex<Option<AbortOnDrop>>,
    /// True while the listener's LISTEN is in place.
    listening: Arc<AtomicBool>,
    runtime: tokio::runtime::Handle,
}

impl PgJobStore {
    pub(crate) fn new(pg: Arc<Pg>, config: tokio_postgres::Config) -> PgJobStore {
        let channel = channel_for_schema(&pg.schema);
        PgJobStore {
            pg,
            config,
            channel,
            signals: broadcast::channel(SIGNAL_CAPACITY).0,
            listener: Mutex::new(None),
            listening: Arc::new(AtomicBool::new(false)),
            // open() is async, so a runtime is current; subscribe_signals() is sync and may be
            // called outside one.
            runtime: tokio::runtime::Handle::current(),
        }
    }

    async fn notify(&self, c: &impl GenericClient, payload: &str) -> Result<(), StoreError> {
        query_opt(c, "SELECT pg_notify($1, $2)", &[&self.channel, &payload]).await?;
        Ok(())
    }

    /// Applies the lease-expiry transition to the rows `sql_where` selects (`$1` is now).
    async fn expire(
        &self,
        sql_with: &str,
        sql_where: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<ReapedJob>, StoreError> {
        let c = self.pg.client().await?;
        // `$1::bigint`: inside CASE … ELSE $1 the parameter would otherwise be typed text.
        let rows = query(
            &c,
            &format!(
                "{sql_with} UPDATE staunch_jobs j SET {} {sql_where} RETURNING j.id, j.state",
                expire_set_clause("$1::bigint")
            ),
            params,
        )
        .await?;
        let reaped = rows
            .iter()
            .map(|r| {
                Ok(ReapedJob {
                    id: r.get(0),
                    new_state: JobState::parse(r.get(1))?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        if reaped.iter().any(|r| r.new_state == JobState::Queued) {
            self.notify(&c, WAKE_PAYLOAD).await?;
        }
        Ok(reaped)
    }
}

/// The SET list of a claim: `$1` owner, `$2` now, `$3` lease expiry.
const CLAIM_SET: &str = "state = 'running', lease_owner = $1, lease_token = lease_token + 1, \
    attempt = attempt + 1, lease_expires_ms = $3, heartbeat_ms = $2, \
    started_ms = COALESCE(started_ms, $2), updated_ms = $2";

#[async_trait]
impl JobStore for PgJobStore {
    async fn create(&self, job: NewJob) -> Result<CreateOutcome, StoreError> {
        super::job_create::create(&self.pg, &self.channel, job).await
    }

    async fn get(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        opt_job(
            self.pg
                .read_opt(
                    &format!("SELECT {JOB_COLS} FROM staunch_jobs WHERE id = $1"),
                    &[&id],
                )
                .await?,
        )
    }

    async fn list(
        &self,
        principal: &str,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<JobRecord>, Option<String>), StoreError> {
        let (after_ms, after_id) = match cursor {
            Some(c) => decode_cursor(c)?,
            None => (i64::MIN, String::new()),
        };
        let limit = clamp_limit(limit);
        let rows = self
            .pg
            .read(
                &format!(
                    "SELECT {JOB_COLS} FROM staunch_jobs WHERE principal = $1 \
                     AND (created_ms, id) > ($2::bigint, $3::text) ORDER BY created_ms, id LIMIT $4"
                ),
                &[&principal, &after_ms, &after_id, &(limit as i64 + 1)],
            )
            .await?;
        let mut jobs = rows
            .iter()
            .map(job_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if jobs.len() > limit {
            jobs.truncate(limit);
            jobs.last().map(|j| encode_cursor(j.created_ms, &j.id))
        } else {
            None
        };
        Ok((jobs, next))
    }

    async fn claim(
        &self,
        id: &str,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Option<Lease>, StoreError> {
        let expires = now_ms.saturating_add(lease_ms);
        let c = self.pg.client().await?;
        lease_of(
            query_opt(
                &c,
                &format!(
                    "UPDATE staunch_jobs SET {CLAIM_SET} WHERE id = $4 AND state = 'queued' \
                     AND cancel_requested_ms IS NULL RETURNING {JOB_COLS}"
                ),
                &[&owner, &now_ms, &expires, &id],
            )
            .await?,
        )
    }

    async fn claim_next(
        &self,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
        tools: &[String],
        max_running_per_owner: u64,
    ) -> Result<Option<Lease>, StoreError> {
        if tools.is_empty() {
            return Ok(None);
        }
        let expires = now_ms.saturating_add(lease_ms);
        let cap = i64::try_from(max_running_per_owner).unwrap_or(i64::MAX);
        let c = self.pg.client().await?;
        // Fair between owners (see `fair_owners_sql`). The ranking takes no locks; each try
        // is the same single statement as the plain claim with the owner added, so `SKIP
        // LOCKED` still claims each job once across instances. A ranking another instance
        // overtook costs fairness at most, never a claim: the last try takes anyone's oldest.
        let owners = query(
            &c,
            &fair_owners_sql("tool = ANY($1)", "$2", "$3"),
            &[&tools, &FAIR_TRIES, &cap],
        )
        .await?;
        if owners.is_empty() {
            return Ok(None);
        }
        for row in &owners {
            let principal: String = row.get(0);
            let claimed = query_opt(
                &c,
                &format!(
                    "UPDATE staunch_jobs SET {CLAIM_SET} WHERE id = \
                     (SELECT id FROM staunch_jobs WHERE principal = $5 AND state = 'queued' \
                      AND cancel_requested_ms IS NULL AND tool = ANY($4) \
                      ORDER BY created_ms, id LIMIT 1 FOR UPDATE SKIP LOCKED) \
                     AND state = 'queued' RETURNING {JOB_COLS}"
                ),
                &[&owner, &now_ms, &expires, &tools, &principal],
            )
            .await?;
            if claimed.is_some() {
                return lease_of(claimed);
            }
        }
        lease_of(
            query_opt(
                &c,
                &format!(
                    "UPDATE staunch_jobs SET {CLAIM_SET} WHERE id = \
                     (SELECT id FROM staunch_jobs WHERE state = 'queued' \
                      AND cancel_requested_ms IS NULL AND tool = ANY($4) \
                      AND principal NOT IN (SELECT principal FROM staunch_jobs \
                        WHERE state = 'running' GROUP BY principal HAVING COUNT(*) >= $5) \
                      ORDER BY created_ms, id LIMIT 1 FOR UPDATE SKIP LOCKED) \
                     AND state = 'queued' RETURNING {JOB_COLS}"
                ),
                &[&owner, &now_ms, &expires, &tools, &cap],
            )
            .await?,
        )
    }

    async fn heartbeat(
        &self,
        id: &str,
        owner: &str,
        token: u64,
        lease_ms: i64,
        now_ms: i64,
        progress: Option<String>,
        checkpoint: Option<String>,
    ) -> Result<Heartbeat, StoreError> {
        let expires = now_ms.saturating_add(lease_ms);
        let c = self.pg.client().await?;
        let row = query_opt(
            &c,
            "UPDATE staunch_jobs SET lease_expires_ms = $4, heartbeat_ms = $5, \
             progress_json = COALESCE($6, progress_json), \
             checkpoint_json = COALESCE($7, checkpoint_json), updated_ms = $5 \
             WHERE id = $1 AND state = 'running' AND lease_owner = $2 AND lease_token = $3 \
             RETURNING cancel_requested_ms",
            &[
                &id,
                &owner,
                &to_i64(token),
                &expires,
                &now_ms,
                &progress,
                &checkpoint,
            ],
        )
        .await?;
        Ok(match row {
            Some(r) => Heartbeat::Held {
                cancel_requested: r.get::<_, Option<i64>>(0).is_some(),
            },
            None => Heartbeat::Lost,
        })
    }

    async fn finish(
        &self,
        id: &str,
        owner: &str,
        token: u64,
        outcome: JobOutcome,
        now_ms: i64,
    ) -> Result<FinishOutcome, StoreError> {
        let (state, result, error, reason) = outcome_columns(outcome);
        let c = self.pg.client().await?;
        let n = execute(
            &c,
            "UPDATE staunch_jobs SET state = $4, result_json = $5, error_json = $6, \
             error_reason = $7, finished_ms = $8, purge_after_ms = $8 + ttl_ms, \
             lease_expires_ms = NULL, updated_ms = $8 \
             WHERE id = $1 AND state = 'running' AND lease_owner = $2 AND lease_token = $3",
            &[
                &id,
                &owner,
                &to_i64(token),
                &state.as_str(),
                &result,
                &error,
                &reason,
                &now_ms,
            ],
        )
        .await?;
        if n == 1 {
            return Ok(FinishOutcome::Recorded);
        }
        // Terminal states never change, and a running row with our token would have matched,
        // so this read cannot be invalidated by a concurrent writer in a way that matters.
        let row = query_opt(
            &c,
            "SELECT state, lease_owner, lease_token FROM staunch_jobs WHERE id = $1",
            &[&id],
        )
        .await?;
        Ok(match row {
            Some(r) => {
                let state = JobState::parse(r.get(0))?;
                let same_lease = r.get::<_, Option<&str>>(1) == Some(owner)
                    && r.get::<_, i64>(2) == to_i64(token);
                if state.is_terminal() && same_lease {
                    FinishOutcome::AlreadyTerminal(state)
                } else {
                    FinishOutcome::Lost
                }
            }
            None => FinishOutcome::Lost,
        })
    }

    async fn request_cancel(
        &self,
        id: &str,
        by: &str,
        now_ms: i64,
    ) -> Result<CancelOutcome, StoreError> {
        let mut c = self.pg.client().await?;
        let tx = c.transaction().await?;
        // Lock the row: the state read here is the state the update below changes.
        let Some(job) = opt_job(
            query_opt(
                &tx,
                &format!("SELECT {JOB_COLS} FROM staunch_jobs WHERE id = $1 FOR UPDATE"),
                &[&id],
            )
            .await?,
        )?
        else {
            return Ok(CancelOutcome::NotFound);
        };
        let out = match job.state {
            JobState::Queued => {
                let row = query_opt(
                    &tx,
                    &format!(
                        "UPDATE staunch_jobs SET state = 'cancelled', cancel_requested_ms = $2, \
                         cancel_requested_by = $3, error_reason = '{REASON_CANCELLED}', \
                         finished_ms = $2, purge_after_ms = $2 + ttl_ms, updated_ms = $2 \
                         WHERE id = $1 AND state = 'queued' RETURNING {JOB_COLS}"
                    ),
                    &[&id, &now_ms, &by],
                )
                .await?;
                CancelOutcome::CancelledQueued(
                    opt_job(row)?
                        .ok_or_else(|| StoreError::Corrupt("locked row vanished".into()))?,
                )
            }
            JobState::Running => {
                // The first request wins: later ones do not move the timestamp.
                let row = query_opt(
                    &tx,
                    &format!(
                        "UPDATE staunch_jobs SET \
                         cancel_requested_ms = COALESCE(cancel_requested_ms, $2), \
                         cancel_requested_by = COALESCE(cancel_requested_by, $3), \
                         updated_ms = $2 WHERE id = $1 AND state = 'running' RETURNING {JOB_COLS}"
                    ),
                    &[&id, &now_ms, &by],
                )
                .await?;
                // Delivered at commit, to every instance.
                self.notify(&tx, &cancel_payload(id)).await?;
                CancelOutcome::Requested(
                    opt_job(row)?
                        .ok_or_else(|| StoreError::Corrupt("locked row vanished".into()))?,
                )
            }
            _ => CancelOutcome::AlreadyTerminal(job),
        };
        tx.commit().await?;
        Ok(out)
    }

    async fn reap_expired(&self, now_ms: i64, batch: usize) -> Result<Vec<ReapedJob>, StoreError> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        // MATERIALIZED: the locking subquery runs exactly once. As a plain sub-select in FROM
        // or IN, the planner may rescan it, and each rescan locks *more* rows past the LIMIT.
        self.expire(
            "WITH c AS MATERIALIZED (SELECT id FROM staunch_jobs WHERE state = 'running' \
               AND lease_expires_ms < $1 ORDER BY lease_expires_ms LIMIT $2 \
               FOR UPDATE SKIP LOCKED)",
            "FROM c WHERE j.id = c.id AND j.state = 'running' AND j.lease_expires_ms < $1",
            &[&now_ms, &batch],
        )
        .await
    }

    async fn release_owner(
        &self,
        owner_prefix: &str,
        now_ms: i64,
    ) -> Result<Vec<ReapedJob>, StoreError> {
        if owner_prefix.is_empty() {
            return Err(StoreError::InvalidInput("owner prefix is empty".into()));
        }
        // No SKIP LOCKED: at boot we would rather wait a moment for a row than leave it held.
        self.expire(
            "",
            "WHERE j.state = 'running' AND starts_with(j.lease_owner, $2)",
            &[&now_ms, &owner_prefix],
        )
        .await
    }

    async fn purge(&self, now_ms: i64) -> Result<u64, StoreError> {
        let c = self.pg.client().await?;
        execute(
            &c,
            "UPDATE staunch_jobs SET idem_key = NULL WHERE id IN (SELECT id FROM staunch_jobs \
             WHERE idem_key IS NOT NULL AND idem_expires_ms <= $1 FOR UPDATE SKIP LOCKED)",
            &[&now_ms],
        )
        .await?;
        // A purged job's questions go with it (and those of jobs purged by an earlier,
        // interrupted pass).
        execute(
            &c,
            "DELETE FROM staunch_job_inputs i WHERE NOT EXISTS \
             (SELECT 1 FROM staunch_jobs j WHERE j.id = i.job_id) \
             OR i.job_id IN (SELECT id FROM staunch_jobs WHERE purge_after_ms <= $1 \
             AND state IN ('succeeded', 'failed', 'cancelled'))",
            &[&now_ms],
        )
        .await?;
        execute(
            &c,
            "DELETE FROM staunch_jobs WHERE id IN (SELECT id FROM staunch_jobs \
             WHERE purge_after_ms <= $1 AND state IN ('succeeded', 'failed', 'cancelled') \
             FOR UPDATE SKIP LOCKED)",
            &[&now_ms],
        )
        .await
    }

    async fn ask_inputs(
        &self,
        id: &str,
        owner: &str,
        token: u64,
        questions: Vec<(String, String)>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        super::input::ask(&self.pg, id, owner, token, questions, now_ms).await
    }

    async fn answer_inputs(
        &self,
        id: &str,
        answers: Vec<(String, String)>,
        now_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        super::input::answer(&self.pg, id, answers, now_ms).await
    }

    async fn inputs(&self, id: &str) -> Result<Vec<JobInput>, StoreError> {
        super::input::list(&self.pg, id).await
    }

    async fn notify_cancel(&self, id: &str) -> Result<(), StoreError> {
        let c = self.pg.client().await?;
        self.notify(&c, &cancel_payload(id)).await
    }

    async fn notify_changed(&self, id: &str, by: &str) -> Result<(), StoreError> {
        let c = self.pg.client().await?;
        self.notify(&c, &changed_payload(id, by)).await
    }

    fn subscribe_signals(&self) -> broadcast::Receiver<Signal> {
        let rx = self.signals.subscribe();
        let mut listener = self.listener.lock().unwrap_or_else(|p| p.into_inner());
        match &*listener {
            // Otherwise the listener sends the Wake when its LISTEN is (back) in place.
            Some(_) if self.listening.load(Ordering::SeqCst) => {
                let _ = self.signals.send(Signal::Wake);
            }
            Some(_) => {}
            None => {
                *listener = Some(AbortOnDrop(self.runtime.spawn(listen::run(
                    self.config.clone(),
                    self.channel.clone(),
                    self.signals.clone(),
                    self.listening.clone(),
                ))));
            }
        }
        rx
    }

    async fn list_all(&self, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError> {
        super::job_operator::list_all(&self.pg, filter).await
    }

    async fn count_by_state(&self) -> Result<Vec<(JobState, u64)>, StoreError> {
        super::job_operator::count_by_state(&self.pg).await
    }

    async fn ids_starting_with(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        super::job_operator::ids_starting_with(&self.pg, prefix, limit).await
    }

    async fn purge_finished_before(&self, finished_before_ms: i64) -> Result<u64, StoreError> {
        super::job_operator::purge_finished_before(&self.pg, finished_before_ms).await
    }
}
