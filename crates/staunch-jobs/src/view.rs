//! What clients see of a job row: the `get_<tool>` reply (with a sentence saying what to do
//! next), the MCP `Task` object, and the tool result a finished job stands for.
//!
//! The tool face reports the row as it is. The tasks face follows 2025-11-25: queued and
//! running are `working`; a job whose cancel was requested is `cancelled` from that moment on,
//! even if its body then finishes (the row keeps the real outcome); a failed job, or a result
//! with `isError`, is `failed`.

use serde_json::{Value, json};
use staunch_server::{CallToolResult, Content};
use staunch_store::{JobRecord, JobState, REASON_LEASE_LOST};
use time::OffsetDateTime;

/// `error_reason` of a job stopped at its maximum runtime.
pub const REASON_MAX_RUNTIME: &str = "max_runtime";
/// `error_reason` of a job whose body panicked.
pub const REASON_PANIC: &str = "panic";
/// `error_reason` of a job whose body returned an error.
pub const REASON_ERROR: &str = "error";

/// Epoch milliseconds as RFC 3339 (UTC, always three fraction digits, so every timestamp a
/// client sees has the same shape and they sort as text).
pub fn iso(ms: i64) -> String {
    const FMT: &[time::format_description::BorrowedFormatItem<'static>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    let nanos = i128::from(ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(FMT).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_string())
}

/// The latest progress of a job: `(done, total, message)`.
pub fn progress_of(job: &JobRecord) -> Option<(f64, Option<f64>, Option<String>)> {
    let p: Value = serde_json::from_str(job.progress_json.as_deref()?).ok()?;
    Some((
        p["progress"].as_f64()?,
        p["total"].as_f64(),
        p["message"].as_str().map(String::from),
    ))
}

/// `(code, message)` of a failed job.
pub(crate) fn error_of(job: &JobRecord) -> (String, String) {
    let stored: Option<Value> = job
        .error_json
        .as_deref()
        .and_then(|e| serde_json::from_str(e).ok());
    let code = stored
        .as_ref()
        .and_then(|e| e["code"].as_str().map(String::from))
        .or_else(|| job.error_reason.clone())
        .unwrap_or_else(|| REASON_ERROR.to_string());
    let message = stored
        .as_ref()
        .and_then(|e| e["message"].as_str().map(String::from))
        .unwrap_or_else(|| "the job failed".to_string());
    (code, message)
}

fn result_value(job: &JobRecord) -> Option<Value> {
    job.result_json
        .as_deref()
        .and_then(|r| serde_json::from_str(r).ok())
}

fn seconds(ms: u64) -> String {
    let s = ms as f64 / 1000.0;
    if s < 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

fn progress_phrase(job: &JobRecord) -> Option<String> {
    let (done, total, message) = progress_of(job)?;
    Some(match (message, total) {
        (Some(m), _) => m,
        (None, Some(t)) => format!("{done} of {t} done"),
        (None, None) => format!("{done} done"),
    })
}

/// A whole number as a JSON integer (progress counts read better as `19` than `19.0`).
pub(crate) fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// A sentence the model can act on, for the tool face.
pub fn next_step(job: &JobRecord, poll_ms: u64) -> String {
    let t = &job.tool;
    let id = &job.id;
    let again = format!(
        "Call get_{t} with job_id \"{id}\" again in about {}",
        seconds(poll_ms)
    );
    match job.state {
        JobState::Queued => format!(
            "The job is queued and starts when a worker is free. {again}; to stop it, call \
             cancel_{t}."
        ),
        JobState::Running if job.cancel_requested_ms.is_some() => format!(
            "Cancellation was requested; the job stops at its next unit of work. {again} to see \
             it end."
        ),
        JobState::Running => {
            let p = progress_phrase(job)
                .map(|p| format!(" ({p})"))
                .unwrap_or_default();
            format!("The job is running{p}. {again}; to stop it, call cancel_{t}.")
        }
        JobState::Succeeded => "The job finished; its result is in `result`. Do not start it \
             again unless you want the work done a second time."
            .to_string(),
        JobState::Cancelled => {
            let p = progress_phrase(job)
                .map(|p| format!(" It had got this far: {p}."))
                .unwrap_or_default();
            format!(
                "The job was cancelled and stopped.{p} Work done before the cancel stays done. \
                 If the work is still needed, start a new job with start_{t}."
            )
        }
        JobState::Failed => {
            let (code, message) = error_of(job);
            if code == REASON_LEASE_LOST {
                format!(
                    "The job was interrupted when the server running it stopped, and it was not \
                     run again because it is not safe to repeat; part of the work may have been \
                     done. Check what was done before starting a new job with start_{t} (with a \
                     new idempotency_key)."
                )
            } else if code == REASON_MAX_RUNTIME {
                format!(
                    "The job was stopped after its maximum runtime ({message}). Start a smaller \
                     job with start_{t} if the work is still needed."
                )
            } else {
                format!(
                    "The job failed: {message}. Fix the cause, then start a new job with \
                     start_{t} (with a new idempotency_key) if the work is still needed."
                )
            }
        }
    }
}

/// The `get_<tool>` reply: status, progress, result or error, and the next step.
pub fn job_view(job: &JobRecord, poll_ms: u64) -> Value {
    let mut v = json!({
        "job_id": job.id,
        "tool": job.tool,
        "status": job.state.as_str(),
        "attempt": job.attempt,
        "created_at": iso(job.created_ms),
    });
    if let Some((done, total, message)) = progress_of(job) {
        v["progress"] =
            json!({"done": number(done), "total": total.map(number), "message": message});
    }
    if let Some(ms) = job.started_ms {
        v["started_at"] = iso(ms).into();
    }
    if let Some(ms) = job.finished_ms {
        v["finished_at"] = iso(ms).into();
    }
    if let Some(ms) = job.cancel_requested_ms {
        v["cancel_requested_at"] = iso(ms).into();
    }
    match job.state {
        JobState::Succeeded => v["result"] = result_value(job).unwrap_or(Value::Null),
        JobState::Failed => {
            let (code, message) = error_of(job);
            v["error"] = json!({"code": code, "message": message});
        }
        JobState::Queued | JobState::Running => v["poll_after_ms"] = poll_ms.into(),
        JobState::Cancelled => {}
    }
    v["next"] = next_step(job, poll_ms).into();
    v
}

/// The reply of `start_<tool>`.
pub(crate) fn start_view(job: &JobRecord, existing: bool, poll_ms: u64) -> Value {
    let mut v = json!({
        "job_id": job.id,
        "status": job.state.as_str(),
        "poll_after_ms": poll_ms,
    });
    if existing {
        v["existing"] = true.into();
        v["next"] = format!(
            "This call matched job {} that was already started (same idempotency_key, or the \
             same arguments while it runs), so nothing new was started. {}",
            job.id,
            next_step(job, poll_ms)
        )
        .into();
    } else {
        v["next"] = next_step(job, poll_ms).into();
    }
    v
}

/// The MCP task status of a job (2025-11-25 rules, see the module docs).
pub fn task_status(job: &JobRecord) -> &'static str {
    if job.cancel_requested_ms.is_some() || job.state == JobState::Cancelled {
        return "cancelled";
    }
    match job.state {
        JobState::Queued | JobState::Running => "working",
        JobState::Succeeded if result_is_error(job) => "failed",
        JobState::Succeeded => "completed",
        JobState::Failed => "failed",
        JobState::Cancelled => "cancelled",
    }
}

/// Whether the task is in a terminal status (so `tasks/result` can answer).
pub(crate) fn task_terminal(job: &JobRecord) -> bool {
    task_status(job) != "working"
}

fn result_is_error(job: &JobRecord) -> bool {
    result_value(job).is_some_and(|v| v.get("isError") == Some(&Value::Bool(true)))
}

fn task_status_message(job: &JobRecord) -> String {
    match task_status(job) {
        "cancelled" => "The task was cancelled.".to_string(),
        "completed" => "The task completed; fetch its result with tasks/result.".to_string(),
        "failed" => {
            let (code, message) = error_of(job);
            format!("The task failed ({code}): {message}")
        }
        _ if job.state == JobState::Queued => "Queued: waiting for a worker.".to_string(),
        _ => match progress_phrase(job) {
            Some(p) => format!("Running: {p}."),
            None => "Running.".to_string(),
        },
    }
}

/// The `Task` object of 2025-11-25 for a job.
pub fn task_object(job: &JobRecord, poll_ms: u64) -> Value {
    json!({
        "taskId": job.id,
        "status": task_status(job),
        "statusMessage": task_status_message(job),
        "createdAt": iso(job.created_ms),
        "lastUpdatedAt": iso(job.updated_ms),
        "ttl": job.ttl_ms,
        "pollInterval": poll_ms,
    })
}

/// The tool result a finished job stands for (for `tasks/result` and a plain `tools/call`).
/// `None` while it has not finished, and for a cancelled job, which has no result.
pub(crate) fn tool_result(job: &JobRecord) -> Option<CallToolResult> {
    match job.state {
        JobState::Succeeded => {
            let v = result_value(job).unwrap_or(Value::Null);
            Some(match v {
                Value::Object(_) => CallToolResult::structured(v),
                other => CallToolResult {
                    content: vec![Content::text(other.to_string())],
                    ..CallToolResult::default()
                },
            })
        }
        JobState::Failed => {
            let (code, message) = error_of(job);
            Some(CallToolResult {
                content: vec![Content::text(format!("{message} ({code})"))],
                structured_content: Some(json!({"error": {"code": code, "message": message}})),
                is_error: Some(true),
                ..CallToolResult::default()
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: JobState) -> JobRecord {
        JobRecord {
            id: "j1".into(),
            principal: String::new(),
            session_id: None,
            tool: "import_rows".into(),
            args_json: "{}".into(),
            args_fingerprint: "f".into(),
            idem_key: None,
            idem_expires_ms: None,
            state,
            cancel_requested_ms: None,
            cancel_requested_by: None,
            attempt: 1,
            max_attempts: 1,
            retry_safe: false,
            lease_owner: None,
            lease_token: 1,
            lease_expires_ms: None,
            heartbeat_ms: None,
            progress_json: Some(r#"{"progress":3.0,"total":10.0,"message":null}"#.into()),
            checkpoint_json: None,
            result_json: None,
            error_json: None,
            error_reason: None,
            created_ms: 1_764_000_000_000,
            started_ms: None,
            finished_ms: None,
            updated_ms: 1_764_000_000_500,
            ttl_ms: 60_000,
            purge_after_ms: None,
            trace_parent: None,
        }
    }

    #[test]
    fn iso_times_are_rfc3339() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_500), "1970-01-01T00:00:01.500Z");
        assert_eq!(iso(1_764_629_462_210), "2025-12-01T22:51:02.210Z");
        for ms in [0, 1_500, 1_764_629_462_210] {
            let parsed =
                OffsetDateTime::parse(&iso(ms), &time::format_description::well_known::Rfc3339)
                    .unwrap();
            assert_eq!(parsed.unix_timestamp_nanos() / 1_000_000, i128::from(ms));
        }
    }

    #[test]
    fn task_status_follows_the_2025_11_25_rules() {
        assert_eq!(task_status(&job(JobState::Queued)), "working");
        assert_eq!(task_status(&job(JobState::Running)), "working");
        let mut j = job(JobState::Running);
        j.cancel_requested_ms = Some(1);
        assert_eq!(task_status(&j), "cancelled");
        // The work finished after the cancel: the task stays cancelled.
        j.state = JobState::Succeeded;
        assert_eq!(task_status(&j), "cancelled");
        let mut j = job(JobState::Succeeded);
        j.result_json = Some(r#"{"isError":true}"#.into());
        assert_eq!(task_status(&j), "failed");
        assert_eq!(task_status(&job(JobState::Failed)), "failed");
    }

    #[test]
    fn the_get_view_says_what_to_do_next() {
        let v = job_view(&job(JobState::Running), 1000);
        assert_eq!(v["status"], "running");
        assert_eq!(v["progress"]["done"], 3);
        assert!(v["next"].as_str().unwrap().contains("get_import_rows"));
        let mut j = job(JobState::Failed);
        j.error_json = Some(r#"{"code":"lease_lost","message":"m"}"#.into());
        let v = job_view(&j, 1000);
        assert_eq!(v["error"]["code"], "lease_lost");
        assert!(v["next"].as_str().unwrap().contains("not run again"));
    }
}
