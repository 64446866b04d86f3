//! Reading job rows on SQLite: a row selected with `JOB_COLS` as a [`JobRecord`].

use rusqlite::{OptionalExtension, Row, Transaction};

use super::to_u64;
use crate::schema::JOB_COLS;
use crate::{JobRecord, JobState, StoreError};

pub(super) fn conv_err(e: StoreError) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
}

pub(super) fn to_u32(v: i64, what: &str) -> rusqlite::Result<u32> {
    u32::try_from(v).map_err(|_| conv_err(StoreError::Corrupt(format!("{what} out of range: {v}"))))
}

/// Reads a row selected with [`JOB_COLS`].
pub(super) fn job_from_row(r: &Row<'_>) -> rusqlite::Result<JobRecord> {
    Ok(JobRecord {
        id: r.get(0)?,
        principal: r.get(1)?,
        session_id: r.get(2)?,
        tool: r.get(3)?,
        args_json: r.get(4)?,
        args_fingerprint: r.get(5)?,
        idem_key: r.get(6)?,
        idem_expires_ms: r.get(7)?,
        state: JobState::parse(&r.get::<_, String>(8)?).map_err(conv_err)?,
        cancel_requested_ms: r.get(9)?,
        cancel_requested_by: r.get(10)?,
        attempt: to_u32(r.get(11)?, "attempt")?,
        max_attempts: to_u32(r.get(12)?, "max_attempts")?,
        retry_safe: r.get(13)?,
        lease_owner: r.get(14)?,
        lease_token: to_u64(r.get(15)?, "lease_token")?,
        lease_expires_ms: r.get(16)?,
        heartbeat_ms: r.get(17)?,
        progress_json: r.get(18)?,
        checkpoint_json: r.get(19)?,
        result_json: r.get(20)?,
        error_json: r.get(21)?,
        error_reason: r.get(22)?,
        created_ms: r.get(23)?,
        started_ms: r.get(24)?,
        finished_ms: r.get(25)?,
        updated_ms: r.get(26)?,
        ttl_ms: r.get(27)?,
        purge_after_ms: r.get(28)?,
        trace_parent: r.get(29)?,
    })
}

pub(super) fn get_job(tx: &Transaction<'_>, id: &str) -> Result<Option<JobRecord>, StoreError> {
    Ok(tx
        .prepare_cached(&format!(
            "SELECT {JOB_COLS} FROM staunch_jobs WHERE id = ?1"
        ))?
        .query_row([id], job_from_row)
        .optional()?)
}
