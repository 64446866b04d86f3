//! [`crate::JobStore::create`] on PostgreSQL: the idempotency claim (`INSERT … ON CONFLICT DO
//! NOTHING` on the partial unique index; a loser waits for the winner's commit and reads its
//! row), in-flight dedupe and the per-principal limit (each serialised on a transaction
//! advisory lock), then the insert and a wake-up for the claim loops.

use deadpool_postgres::GenericClient;

use super::job_row::opt_job;
use super::listen::WAKE_PAYLOAD;
use super::{Pg, execute, query_opt};
use crate::schema::JOB_COLS;
use crate::{CreateOutcome, JobRecord, NewJob, StoreError};

pub(super) async fn create(
    pg: &Pg,
    channel: &str,
    job: NewJob,
) -> Result<CreateOutcome, StoreError> {
    job.validate()?;
    let now = job.now_ms;
    let mut c = pg.client().await?;
    let tx = c.transaction().await?;
    if job.dedupe_inflight {
        // Length-prefixed so ("a:b", "c") and ("a", "b:c") cannot share a key. A hash
        // collision only makes two unrelated creates wait for each other.
        let key = format!(
            "staunch.dedupe:{}:{}:{}:{}:{}",
            job.principal.len(),
            job.tool.len(),
            job.principal,
            job.tool,
            job.args_fingerprint
        );
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&key],
        )
        .await?;
    }
    if let Some(key) = &job.idem_key {
        // An expired key no longer binds: release it in this transaction.
        execute(
            &tx,
            "UPDATE staunch_jobs SET idem_key = NULL WHERE principal = $1 AND tool = $2 \
             AND idem_key = $3 AND idem_expires_ms <= $4",
            &[&job.principal, &job.tool, key, &now],
        )
        .await?;
        if let Some(existing) = key_holder(&tx, &job, key).await? {
            tx.commit().await?;
            return Ok(replay_or_refuse(&job, existing));
        }
    }
    if job.dedupe_inflight {
        let inflight = query_opt(
            &tx,
            &format!(
                "SELECT {JOB_COLS} FROM staunch_jobs WHERE principal = $1 AND tool = $2 \
                 AND args_fingerprint = $3 AND state IN ('queued', 'running') \
                 ORDER BY created_ms, id LIMIT 1"
            ),
            &[&job.principal, &job.tool, &job.args_fingerprint],
        )
        .await?;
        if let Some(existing) = opt_job(inflight)? {
            tx.commit().await?;
            return Ok(CreateOutcome::Existing(existing));
        }
    }
    if let Some(limit) = job.max_active {
        // Serialise creates of one principal while counting, so that concurrent creates
        // cannot all slip under the limit.
        let key = format!("staunch.active:{}", job.principal);
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&key],
        )
        .await?;
        let limit_i = i64::try_from(limit).unwrap_or(i64::MAX);
        let row = query_opt(
            &tx,
            "SELECT COUNT(*) FROM (SELECT 1 FROM staunch_jobs WHERE principal = $1 \
             AND state IN ('queued', 'running') LIMIT $2) AS active",
            &[&job.principal, &limit_i],
        )
        .await?;
        let active: i64 = row.map_or(Ok(0), |r| r.try_get(0))?;
        if u64::try_from(active).unwrap_or(0) >= limit {
            tx.commit().await?;
            return Ok(CreateOutcome::TooManyActive { limit });
        }
    }
    let idem_expires = job
        .idem_key
        .as_ref()
        .map(|_| now.saturating_add(job.idem_ttl_ms));
    let inserted = query_opt(
        &tx,
        &format!(
            "INSERT INTO staunch_jobs (id, principal, session_id, tool, args_json, \
             args_fingerprint, idem_key, idem_expires_ms, state, max_attempts, retry_safe, \
             created_ms, updated_ms, ttl_ms, trace_parent) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', $9, $10, $11, $11, $12, $13) \
             ON CONFLICT DO NOTHING RETURNING {JOB_COLS}"
        ),
        &[
            &crate::new_job_id(),
            &job.principal,
            &job.session_id,
            &job.tool,
            &job.args_json,
            &job.args_fingerprint,
            &job.idem_key,
            &idem_expires,
            &i64::from(job.max_attempts),
            &job.retry_safe,
            &now,
            &job.ttl_ms,
            &job.trace_parent,
        ],
    )
    .await?;
    let out = match (opt_job(inserted)?, &job.idem_key) {
        (Some(created), _) => {
            query_opt(&tx, "SELECT pg_notify($1, $2)", &[&channel, &WAKE_PAYLOAD]).await?;
            CreateOutcome::Created(created)
        }
        // Another transaction took the key after our check and committed (the insert
        // waited for it); this statement's fresh snapshot sees its row.
        (None, Some(key)) => match key_holder(&tx, &job, key).await? {
            Some(existing) => replay_or_refuse(&job, existing),
            None => {
                return Err(StoreError::Corrupt(
                    "job insert conflicted with no key holder".into(),
                ));
            }
        },
        (None, None) => return Err(StoreError::Corrupt("random job id collided".into())),
    };
    tx.commit().await?;
    Ok(out)
}

async fn key_holder(
    c: &impl GenericClient,
    job: &NewJob,
    key: &str,
) -> Result<Option<JobRecord>, StoreError> {
    opt_job(
        query_opt(
            c,
            &format!(
                "SELECT {JOB_COLS} FROM staunch_jobs \
                 WHERE principal = $1 AND tool = $2 AND idem_key = $3"
            ),
            &[&job.principal, &job.tool, &key],
        )
        .await?,
    )
}

fn replay_or_refuse(job: &NewJob, existing: JobRecord) -> CreateOutcome {
    if existing.args_fingerprint == job.args_fingerprint {
        CreateOutcome::Existing(existing)
    } else {
        CreateOutcome::KeyReused {
            existing_job_id: existing.id,
        }
    }
}
