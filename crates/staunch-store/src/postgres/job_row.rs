//! Reading job rows on PostgreSQL: a row selected with `JOB_COLS` as a [`JobRecord`], and
//! a claimed row as a [`Lease`].

use tokio_postgres::Row;

use super::to_u64;
use crate::{JobRecord, JobState, Lease, StoreError};

fn to_u32(v: i64, what: &str) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} out of range: {v}")))
}

/// Reads a row selected with `JOB_COLS`.
pub(super) fn job_from_row(r: &Row) -> Result<JobRecord, StoreError> {
    Ok(JobRecord {
        id: r.try_get(0)?,
        principal: r.try_get(1)?,
        session_id: r.try_get(2)?,
        tool: r.try_get(3)?,
        args_json: r.try_get(4)?,
        args_fingerprint: r.try_get(5)?,
        idem_key: r.try_get(6)?,
        idem_expires_ms: r.try_get(7)?,
        state: JobState::parse(r.try_get(8)?)?,
        cancel_requested_ms: r.try_get(9)?,
        cancel_requested_by: r.try_get(10)?,
        attempt: to_u32(r.try_get(11)?, "attempt")?,
        max_attempts: to_u32(r.try_get(12)?, "max_attempts")?,
        retry_safe: r.try_get(13)?,
        lease_owner: r.try_get(14)?,
        lease_token: to_u64(r.try_get(15)?, "lease_token")?,
        lease_expires_ms: r.try_get(16)?,
        heartbeat_ms: r.try_get(17)?,
        progress_json: r.try_get(18)?,
        checkpoint_json: r.try_get(19)?,
        result_json: r.try_get(20)?,
        error_json: r.try_get(21)?,
        error_reason: r.try_get(22)?,
        created_ms: r.try_get(23)?,
        started_ms: r.try_get(24)?,
        finished_ms: r.try_get(25)?,
        updated_ms: r.try_get(26)?,
        ttl_ms: r.try_get(27)?,
        purge_after_ms: r.try_get(28)?,
        trace_parent: r.try_get(29)?,
    })
}

pub(super) fn opt_job(row: Option<Row>) -> Result<Option<JobRecord>, StoreError> {
    row.as_ref().map(job_from_row).transpose()
}

pub(super) fn lease_of(row: Option<Row>) -> Result<Option<Lease>, StoreError> {
    Ok(opt_job(row)?.map(|job| Lease {
        token: job.lease_token,
        job,
    }))
}
