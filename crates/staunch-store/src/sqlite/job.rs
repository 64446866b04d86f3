//! [`JobStore`] on SQLite. Every write runs under `BEGIN IMMEDIATE`, so each operation is
//! serialised against every other writer of the file, in this process or another.
//!
//! Signals are an in-process broadcast: another process sharing the file does not hear them
//! and relies on polling.
//!
//! `job_create.rs` holds the create (idempotency, dedupe, per-principal limit), `job_row.rs`
//! the row reader.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use tokio::sync::broadcast;

use super::job_create::create_in;
use super::job_row::{conv_err, get_job, job_from_row};
use super::{Db, to_i64, write_tx};
use crate::job_rows::{clamp_limit, decode_cursor, encode_cursor, outcome_columns};
use crate::schema::{FAIR_TRIES, JOB_COLS, expire_set_clause, fair_owners_sql};
use crate::{
    CancelOutcome, CreateOutcome, FinishOutcome, Heartbeat, JobFilter, JobInput, JobOutcome,
    JobRecord, JobState, JobStore, Lease, NewJob, REASON_CANCELLED, ReapedJob, Signal, StoreError,
};

/// Enough for bursts; a receiver that lags past it gets `Lagged` and should poll.
const SIGNAL_CAPACITY: usize = 1024;

pub(crate) struct SqliteJobStore {
    db: Db,
    signals: broadcast::Sender<Signal>,
}

impl SqliteJobStore {
    pub(crate) fn new(db: Db) -> SqliteJobStore {
        SqliteJobStore {
            db,
            signals: broadcast::channel(SIGNAL_CAPACITY).0,
        }
    }

    fn signal(&self, s: Signal) {
        // No receivers is fine: nobody is waiting.
        let _ = self.signals.send(s);
    }

    fn wake_if_requeued(&self, reaped: &[ReapedJob]) {
        if reaped.iter().any(|r| r.new_state == JobState::Queued) {
            self.signal(Signal::Wake);
        }
    }
}

/// The SET list of a claim: `?1` owner, `?2` now, `?3` lease expiry.
const CLAIM_SET: &str = "state = 'running', lease_owner = ?1, lease_token = lease_token + 1, \
    attempt = attempt + 1, lease_expires_ms = ?3, heartbeat_ms = ?2, \
    started_ms = COALESCE(started_ms, ?2), updated_ms = ?2";

fn lease_of(job: JobRecord) -> Lease {
    Lease {
        token: job.lease_token,
        job,
    }
}

fn collect_reaped(
    stmt: &mut rusqlite::CachedStatement<'_>,
    params: impl rusqlite::Params,
) -> Result<Vec<ReapedJob>, StoreError> {
    let rows = stmt.query_map(params, |r| {
        Ok(ReapedJob {
            id: r.get(0)?,
            new_state: JobState::parse(&r.get::<_, String>(1)?).map_err(conv_err)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

#[async_trait]
impl JobStore for SqliteJobStore {
    async fn create(&self, job: NewJob) -> Result<CreateOutcome, StoreError> {
        job.validate()?;
        let out = self
            .db
            .call(move |conn| write_tx(conn, |tx| create_in(tx, &job)))
            .await?;
        if matches!(out, CreateOutcome::Created(_)) {
            self.signal(Signal::Wake);
        }
        Ok(out)
    }

    async fn get(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let id = id.to_owned();
        self.db
            .call(move |conn| {
                Ok(conn
                    .prepare_cached(&format!(
                        "SELECT {JOB_COLS} FROM staunch_jobs WHERE id = ?1"
                    ))?
                    .query_row([&id], job_from_row)
                    .optional()?)
            })
            .await
    }

    async fn list(
        &self,
        principal: &str,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<JobRecord>, Option<String>), StoreError> {
        let principal = principal.to_owned();
        let (after_ms, after_id) = match cursor {
            Some(c) => decode_cursor(c)?,
            None => (i64::MIN, String::new()),
        };
        let limit = clamp_limit(limit);
        self.db
            .call(move |conn| {
                let mut jobs = conn
                    .prepare_cached(&format!(
                        "SELECT {JOB_COLS} FROM staunch_jobs WHERE principal = ?1 \
                         AND (created_ms, id) > (?2, ?3) ORDER BY created_ms, id LIMIT ?4"
                    ))?
                    .query_map(
                        params![principal, after_ms, after_id, limit as i64 + 1],
                        job_from_row,
                    )?
                    .collect::<Result<Vec<_>, _>>()?;
                // One row more than asked tells whether another page exists.
                let next = if jobs.len() > limit {
                    jobs.truncate(limit);
                    jobs.last().map(|j| encode_cursor(j.created_ms, &j.id))
                } else {
                    None
                };
                Ok((jobs, next))
            })
            .await
    }

    async fn claim(
        &self,
        id: &str,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Option<Lease>, StoreError> {
        let (id, owner) = (id.to_owned(), owner.to_owned());
        let expires = now_ms.saturating_add(lease_ms);
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    Ok(tx
                        .prepare_cached(&format!(
                            "UPDATE staunch_jobs SET {CLAIM_SET} WHERE id = ?4 \
                             AND state = 'queued' AND cancel_requested_ms IS NULL \
                             RETURNING {JOB_COLS}"
                        ))?
                        .query_row(params![owner, now_ms, expires, id], job_from_row)
                        .optional()?
                        .map(lease_of))
                })
            })
            .await
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
        let owner = owner.to_owned();
        let tools = serde_json::to_string(tools)
            .map_err(|e| StoreError::InvalidInput(format!("tool names: {e}")))?;
        let expires = now_ms.saturating_add(lease_ms);
        let cap = i64::try_from(max_running_per_owner).unwrap_or(i64::MAX);
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    // Fair between owners (see `fair_owners_sql`). Under the write lock the
                    // fairest owner's oldest job is still there, so the first try claims.
                    let owners = tx
                        .prepare_cached(&fair_owners_sql(
                            "tool IN (SELECT value FROM json_each(?1))",
                            "?2",
                            "?3",
                        ))?
                        .query_map(params![tools, FAIR_TRIES, cap], |r| r.get::<_, String>(0))?
                        .collect::<Result<Vec<_>, _>>()?;
                    for principal in owners {
                        let claimed = tx
                            .prepare_cached(&format!(
                                "UPDATE staunch_jobs SET {CLAIM_SET} WHERE id = \
                                 (SELECT id FROM staunch_jobs WHERE principal = ?5 \
                                  AND state = 'queued' AND cancel_requested_ms IS NULL \
                                  AND tool IN (SELECT value FROM json_each(?4)) \
                                  ORDER BY created_ms, id LIMIT 1) \
                                 RETURNING {JOB_COLS}"
                            ))?
                            .query_row(
                                params![owner, now_ms, expires, tools, principal],
                                job_from_row,
                            )
                            .optional()?;
                        if let Some(job) = claimed {
                            return Ok(Some(lease_of(job)));
                        }
                    }
                    Ok(None)
                })
            })
            .await
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
        let (id, owner) = (id.to_owned(), owner.to_owned());
        let expires = now_ms.saturating_add(lease_ms);
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    let flag: Option<Option<i64>> = tx
                        .prepare_cached(
                            "UPDATE staunch_jobs SET lease_expires_ms = ?4, heartbeat_ms = ?5, \
                             progress_json = COALESCE(?6, progress_json), \
                             checkpoint_json = COALESCE(?7, checkpoint_json), updated_ms = ?5 \
                             WHERE id = ?1 AND state = 'running' AND lease_owner = ?2 \
                             AND lease_token = ?3 RETURNING cancel_requested_ms",
                        )?
                        .query_row(
                            params![
                                id,
                                owner,
                                to_i64(token),
                                expires,
                                now_ms,
                                progress,
                                checkpoint
                            ],
                            |r| r.get(0),
                        )
                        .optional()?;
                    Ok(match flag {
                        Some(flag) => Heartbeat::Held {
                            cancel_requested: flag.is_some(),
                        },
                        None => Heartbeat::Lost,
                    })
                })
            })
            .await
    }

    async fn finish(
        &self,
        id: &str,
        owner: &str,
        token: u64,
        outcome: JobOutcome,
        now_ms: i64,
    ) -> Result<FinishOutcome, StoreError> {
        let (id, owner) = (id.to_owned(), owner.to_owned());
        let (state, result, error, reason) = outcome_columns(outcome);
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    let n = tx
                        .prepare_cached(
                            "UPDATE staunch_jobs SET state = ?4, result_json = ?5, \
                             error_json = ?6, error_reason = ?7, finished_ms = ?8, \
                             purge_after_ms = ?8 + ttl_ms, lease_expires_ms = NULL, \
                             updated_ms = ?8 \
                             WHERE id = ?1 AND state = 'running' AND lease_owner = ?2 \
                             AND lease_token = ?3",
                        )?
                        .execute(params![
                            id,
                            owner,
                            to_i64(token),
                            state.as_str(),
                            result,
                            error,
                            reason,
                            now_ms
                        ])?;
                    if n == 1 {
                        return Ok(FinishOutcome::Recorded);
                    }
                    Ok(match get_job(tx, &id)? {
                        Some(j)
                            if j.state.is_terminal()
                                && j.lease_token == token
                                && j.lease_owner.as_deref() == Some(owner.as_str()) =>
                        {
                            FinishOutcome::AlreadyTerminal(j.state)
                        }
                        _ => FinishOutcome::Lost,
                    })
                })
            })
            .await
    }

    async fn request_cancel(
        &self,
        id: &str,
        by: &str,
        now_ms: i64,
    ) -> Result<CancelOutcome, StoreError> {
        let (id, by) = (id.to_owned(), by.to_owned());
        let out = self
            .db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    let Some(job) = get_job(tx, &id)? else {
                        return Ok(CancelOutcome::NotFound);
                    };
                    // The write lock is held, so the state read above cannot change under us.
                    Ok(match job.state {
                        JobState::Queued => CancelOutcome::CancelledQueued(
                            tx.prepare_cached(&format!(
                                "UPDATE staunch_jobs SET state = 'cancelled', \
                                 cancel_requested_ms = ?2, cancel_requested_by = ?3, \
                                 error_reason = '{REASON_CANCELLED}', finished_ms = ?2, \
                                 purge_after_ms = ?2 + ttl_ms, updated_ms = ?2 \
                                 WHERE id = ?1 RETURNING {JOB_COLS}"
                            ))?
                            .query_row(params![id, now_ms, by], job_from_row)?,
                        ),
                        JobState::Running => CancelOutcome::Requested(
                            // The first request wins: later ones do not move the timestamp.
                            tx.prepare_cached(&format!(
                                "UPDATE staunch_jobs SET \
                                 cancel_requested_ms = COALESCE(cancel_requested_ms, ?2), \
                                 cancel_requested_by = COALESCE(cancel_requested_by, ?3), \
                                 updated_ms = ?2 WHERE id = ?1 RETURNING {JOB_COLS}"
                            ))?
                            .query_row(params![id, now_ms, by], job_from_row)?,
                        ),
                        _ => CancelOutcome::AlreadyTerminal(job),
                    })
                })
            })
            .await?;
        if let CancelOutcome::Requested(job) = &out {
            self.signal(Signal::Cancel(job.id.clone()));
        }
        Ok(out)
    }

    async fn reap_expired(&self, now_ms: i64, batch: usize) -> Result<Vec<ReapedJob>, StoreError> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        let reaped = self
            .db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    collect_reaped(
                        &mut tx.prepare_cached(&format!(
                            "UPDATE staunch_jobs SET {} WHERE id IN \
                             (SELECT id FROM staunch_jobs WHERE state = 'running' \
                              AND lease_expires_ms < ?1 ORDER BY lease_expires_ms LIMIT ?2) \
                             RETURNING id, state",
                            expire_set_clause("?1")
                        ))?,
                        params![now_ms, batch],
                    )
                })
            })
            .await?;
        self.wake_if_requeued(&reaped);
        Ok(reaped)
    }

    async fn release_owner(
        &self,
        owner_prefix: &str,
        now_ms: i64,
    ) -> Result<Vec<ReapedJob>, StoreError> {
        if owner_prefix.is_empty() {
            return Err(StoreError::InvalidInput("owner prefix is empty".into()));
        }
        let prefix = owner_prefix.to_owned();
        let released = self
            .db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    collect_reaped(
                        &mut tx.prepare_cached(&format!(
                            "UPDATE staunch_jobs SET {} WHERE state = 'running' \
                             AND substr(lease_owner, 1, length(?2)) = ?2 RETURNING id, state",
                            expire_set_clause("?1")
                        ))?,
                        params![now_ms, prefix],
                    )
                })
            })
            .await?;
        self.wake_if_requeued(&released);
        Ok(released)
    }

    async fn purge(&self, now_ms: i64) -> Result<u64, StoreError> {
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    tx.execute(
                        "UPDATE staunch_jobs SET idem_key = NULL \
                         WHERE idem_key IS NOT NULL AND idem_expires_ms <= ?1",
                        [now_ms],
                    )?;
                    // A purged job's questions go with it.
                    tx.execute(
                        "DELETE FROM staunch_job_inputs WHERE job_id IN (SELECT id FROM \
                         staunch_jobs WHERE purge_after_ms <= ?1 \
                         AND state IN ('succeeded', 'failed', 'cancelled'))",
                        [now_ms],
                    )?;
                    let n = tx.execute(
                        "DELETE FROM staunch_jobs WHERE purge_after_ms <= ?1 \
                         AND state IN ('succeeded', 'failed', 'cancelled')",
                        [now_ms],
                    )?;
                    Ok(n as u64)
                })
            })
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
        super::input::ask(&self.db, id, owner, token, questions, now_ms).await
    }

    async fn answer_inputs(
        &self,
        id: &str,
        answers: Vec<(String, String)>,
        now_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        super::input::answer(&self.db, id, answers, now_ms).await
    }

    async fn inputs(&self, id: &str) -> Result<Vec<JobInput>, StoreError> {
        super::input::list(&self.db, id).await
    }

    async fn notify_cancel(&self, id: &str) -> Result<(), StoreError> {
        self.signal(Signal::Cancel(id.to_owned()));
        Ok(())
    }

    fn subscribe_signals(&self) -> broadcast::Receiver<Signal> {
        let rx = self.signals.subscribe();
        self.signal(Signal::Wake);
        rx
    }

    async fn list_all(&self, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError> {
        let states = filter
            .state_names()
            .map(|s| serde_json::to_string(&s))
            .transpose()
            .map_err(|e| StoreError::InvalidInput(format!("job states: {e}")))?;
        let tool = filter.tool.clone();
        let (from, before) = (filter.created_from_ms, filter.created_before_ms);
        let limit = clamp_limit(filter.limit) as i64;
        self.db
            .call(move |conn| {
                // One statement for every filter combination: an absent filter is a NULL
                // parameter that matches every row.
                Ok(conn
                    .prepare_cached(&format!(
                        "SELECT {JOB_COLS} FROM staunch_jobs \
                         WHERE (?1 IS NULL OR state IN (SELECT value FROM json_each(?1))) \
                         AND (?2 IS NULL OR tool = ?2) \
                         AND (?3 IS NULL OR created_ms >= ?3) \
                         AND (?4 IS NULL OR created_ms < ?4) \
                         ORDER BY created_ms DESC, id DESC LIMIT ?5"
                    ))?
                    .query_map(params![states, tool, from, before, limit], job_from_row)?
                    .collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }

    async fn count_by_state(&self) -> Result<Vec<(JobState, u64)>, StoreError> {
        self.db
            .call(|conn| {
                let rows = conn
                    .prepare_cached("SELECT state, COUNT(*) FROM staunch_jobs GROUP BY state")?
                    .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.into_iter()
                    .map(|(s, n)| Ok((JobState::parse(&s)?, u64::try_from(n).unwrap_or(0))))
                    .collect()
            })
            .await
    }

    async fn ids_starting_with(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let prefix = prefix.to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.db
            .call(move |conn| {
                Ok(conn
                    .prepare_cached(
                        "SELECT id FROM staunch_jobs WHERE substr(id, 1, length(?1)) = ?1 \
                         ORDER BY id LIMIT ?2",
                    )?
                    .query_map(params![prefix, limit], |r| r.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }

    async fn purge_finished_before(&self, finished_before_ms: i64) -> Result<u64, StoreError> {
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    tx.execute(
                        "DELETE FROM staunch_job_inputs WHERE job_id IN (SELECT id FROM \
                         staunch_jobs WHERE finished_ms < ?1 \
                         AND state IN ('succeeded', 'failed', 'cancelled'))",
                        [finished_before_ms],
                    )?;
                    let n = tx.execute(
                        "DELETE FROM staunch_jobs WHERE finished_ms < ?1 \
                         AND state IN ('succeeded', 'failed', 'cancelled')",
                        [finished_before_ms],
                    )?;
                    Ok(n as u64)
                })
            })
            .await
    }
}
