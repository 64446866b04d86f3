//! What the SQL drivers share about job rows: the `list` cursor and page size, and the
//! columns a job's end writes.

use crate::{JobOutcome, JobState, REASON_CANCELLED, StoreError};

/// Encodes a `list` cursor. Opaque to callers.
pub(crate) fn encode_cursor(created_ms: i64, id: &str) -> String {
    format!("{created_ms}:{id}")
}

pub(crate) fn decode_cursor(cursor: &str) -> Result<(i64, String), StoreError> {
    let bad = || StoreError::InvalidInput(format!("bad job list cursor {cursor:?}"));
    let (ms, id) = cursor.split_once(':').ok_or_else(bad)?;
    Ok((ms.parse().map_err(|_| bad())?, id.to_owned()))
}

/// `list` pages are capped so one call cannot pull a whole table.
pub(crate) fn clamp_limit(limit: usize) -> usize {
    limit.clamp(1, 1000)
}

/// (state, result_json, error_json, error_reason) written by `finish`.
pub(crate) fn outcome_columns(
    outcome: JobOutcome,
) -> (JobState, Option<String>, Option<String>, Option<String>) {
    match outcome {
        JobOutcome::Succeeded { result_json } => {
            (JobState::Succeeded, Some(result_json), None, None)
        }
        JobOutcome::Failed { error_json, reason } => {
            (JobState::Failed, None, Some(error_json), Some(reason))
        }
        JobOutcome::Cancelled => (
            JobState::Cancelled,
            None,
            None,
            Some(REASON_CANCELLED.into()),
        ),
    }
}
