//! [`crate::JobStore::create`] on SQLite, inside the caller's `BEGIN IMMEDIATE` transaction:
//! an expired idempotency key is released, a live one replays its job (or refuses other
//! arguments), in-flight dedupe and the per-principal limit are checked, then the row is
//! inserted.

use rusqlite::{OptionalExtension, Transaction, params};

use super::job_row::job_from_row;
use crate::schema::JOB_COLS;
use crate::{CreateOutcome, JobRecord, NewJob, StoreError};

fn key_holder(
    tx: &Transaction<'_>,
    job: &NewJob,
    key: &str,
) -> Result<Option<JobRecord>, StoreError> {
    Ok(tx
        .prepare_cached(&format!(
            "SELECT {JOB_COLS} FROM staunch_jobs WHERE principal = ?1 AND tool = ?2 AND idem_key = ?3"
        ))?
        .query_row(params![job.principal, job.tool, key], job_from_row)
        .optional()?)
}

/// Same key: same arguments get the job back, other arguments are refused.
fn replay_or_refuse(job: &NewJob, existing: JobRecord) -> CreateOutcome {
    if existing.args_fingerprint == job.args_fingerprint {
        CreateOutcome::Existing(existing)
    } else {
        CreateOutcome::KeyReused {
            existing_job_id: existing.id,
        }
    }
}

pub(super) fn create_in(tx: &Transaction<'_>, job: &NewJob) -> Result<CreateOutcome, StoreError> {
    let now = job.now_ms;
    if let Some(key) = &job.idem_key {
        // An expired key no longer binds: release it in this transaction, so the insert below
        // can take it.
        tx.prepare_cached(
            "UPDATE staunch_jobs SET idem_key = NULL WHERE principal = ?1 AND tool = ?2 \
             AND idem_key = ?3 AND idem_expires_ms <= ?4",
        )?
        .execute(params![job.principal, job.tool, key, now])?;
        if let Some(existing) = key_holder(tx, job, key)? {
            return Ok(replay_or_refuse(job, existing));
        }
    }
    if job.dedupe_inflight {
        let inflight = tx
            .prepare_cached(&format!(
                "SELECT {JOB_COLS} FROM staunch_jobs WHERE principal = ?1 AND tool = ?2 \
                 AND args_fingerprint = ?3 AND state IN ('queued', 'running') \
                 ORDER BY created_ms, id LIMIT 1"
            ))?
            .query_row(
                params![job.principal, job.tool, job.args_fingerprint],
                job_from_row,
            )
            .optional()?;
        if let Some(existing) = inflight {
            return Ok(CreateOutcome::Existing(existing));
        }
    }
    if let Some(limit) = job.max_active {
        // Counted inside the write transaction: concurrent creates cannot all slip under it.
        let active: i64 = tx
            .prepare_cached(
                "SELECT COUNT(*) FROM (SELECT 1 FROM staunch_jobs WHERE principal = ?1 \
                 AND state IN ('queued', 'running') LIMIT ?2)",
            )?
            .query_row(
                params![job.principal, i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| r.get(0),
            )?;
        if u64::try_from(active).unwrap_or(0) >= limit {
            return Ok(CreateOutcome::TooManyActive { limit });
        }
    }
    let inserted = tx
        .prepare_cached(&format!(
            "INSERT INTO staunch_jobs (id, principal, session_id, tool, args_json, \
             args_fingerprint, idem_key, idem_expires_ms, state, max_attempts, retry_safe, \
             created_ms, updated_ms, ttl_ms, trace_parent) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'queued', ?9, ?10, ?11, ?11, ?12, ?13) \
             ON CONFLICT DO NOTHING RETURNING {JOB_COLS}"
        ))?
        .query_row(
            params![
                crate::new_job_id(),
                job.principal,
                job.session_id,
                job.tool,
                job.args_json,
                job.args_fingerprint,
                job.idem_key,
                job.idem_key
                    .as_ref()
                    .map(|_| now.saturating_add(job.idem_ttl_ms)),
                i64::from(job.max_attempts),
                job.retry_safe,
                now,
                job.ttl_ms,
                job.trace_parent
            ],
            job_from_row,
        )
        .optional()?;
    match (inserted, &job.idem_key) {
        (Some(created), _) => Ok(CreateOutcome::Created(created)),
        // Under the write lock the key was free a moment ago, so this is only reachable if
        // the random id collided; fail loudly rather than guess.
        (None, Some(key)) => match key_holder(tx, job, key)? {
            Some(existing) => Ok(replay_or_refuse(job, existing)),
            None => Err(StoreError::Corrupt(
                "job insert conflicted with no key holder".into(),
            )),
        },
        (None, None) => Err(StoreError::Corrupt("random job id collided".into())),
    }
}
