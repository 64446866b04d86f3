//! How the 2026-07-28 tasks extension shows a job: its status (`working`, `input_required`,
//! `completed`, `failed`, `cancelled`) and its `DetailedTask` — what `tasks/get` answers and
//! what `notifications/tasks` carries to listeners.

use serde_json::{Map, Value, json};
use staunch_server::protocol::codes;
use staunch_store::{JobInput, JobRecord, JobState, REASON_LEASE_LOST};

use crate::view::{REASON_PANIC, error_of, iso, progress_of, tool_result};

/// Whether a job ended without a tool result: a protocol-level failure (`failed`). A body's
/// own error, or its maximum runtime, is a tool result with `isError` (`completed`).
fn protocol_failure(job: &JobRecord) -> bool {
    job.state == JobState::Failed
        && matches!(
            job.error_reason.as_deref(),
            Some(REASON_PANIC | REASON_LEASE_LOST)
        )
}

/// The extension's status of a job, given whether it has unanswered questions.
pub fn ext_status(job: &JobRecord, waiting_for_input: bool) -> &'static str {
    match job.state {
        JobState::Queued | JobState::Running if waiting_for_input => "input_required",
        JobState::Queued | JobState::Running => "working",
        JobState::Succeeded => "completed",
        JobState::Failed if protocol_failure(job) => "failed",
        JobState::Failed => "completed",
        JobState::Cancelled => "cancelled",
    }
}

fn status_message(job: &JobRecord, status: &str) -> String {
    match status {
        "input_required" => {
            "Waiting for input: answer inputRequests with tasks/update.".to_string()
        }
        "completed" => "The task completed; its result is in `result`.".to_string(),
        "cancelled" => "The task was cancelled.".to_string(),
        "failed" => {
            let (code, message) = error_of(job);
            format!("The task failed ({code}): {message}")
        }
        _ if job.state == JobState::Queued => "Queued: waiting for a worker.".to_string(),
        _ if job.cancel_requested_ms.is_some() => {
            "Cancellation requested; the task stops at its next unit of work.".to_string()
        }
        _ => match progress_of(job) {
            Some((done, Some(total), _)) => format!("Running: {done} of {total}."),
            Some((_, None, Some(m))) => format!("Running: {m}."),
            _ => "Running.".to_string(),
        },
    }
}

/// The fields every task object carries (`Task`, without `resultType`).
pub(crate) fn task_base(job: &JobRecord, status: &str, poll_ms: u64) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("taskId".into(), job.id.clone().into());
    o.insert("status".into(), status.into());
    o.insert("statusMessage".into(), status_message(job, status).into());
    o.insert("createdAt".into(), iso(job.created_ms).into());
    o.insert("lastUpdatedAt".into(), iso(job.updated_ms).into());
    o.insert("ttlMs".into(), job.ttl_ms.into());
    o.insert("pollIntervalMs".into(), poll_ms.into());
    o
}

/// The open questions, as `inputRequests`.
fn open_requests(inputs: &[JobInput]) -> Map<String, Value> {
    inputs
        .iter()
        .filter(|i| i.response_json.is_none())
        .map(|i| {
            let req = serde_json::from_str(&i.request_json).unwrap_or(Value::Null);
            (i.key.clone(), req)
        })
        .collect()
}

/// The `DetailedTask` of a job, given its questions.
pub fn detailed_task(job: &JobRecord, inputs: &[JobInput], poll_ms: u64) -> Value {
    let open = if job.state.is_terminal() {
        Map::new()
    } else {
        open_requests(inputs)
    };
    let status = ext_status(job, !open.is_empty());
    let mut o = task_base(job, status, poll_ms);
    match status {
        "input_required" => {
            o.insert("inputRequests".into(), Value::Object(open));
        }
        "completed" => {
            if let Some(r) = tool_result(job) {
                o.insert(
                    "result".into(),
                    serde_json::to_value(r).unwrap_or(Value::Null),
                );
            }
        }
        "failed" => {
            let (code, message) = error_of(job);
            o.insert(
                "error".into(),
                json!({"code": codes::INTERNAL_ERROR, "message": message, "data": {"reason": code}}),
            );
        }
        _ => {}
    }
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: JobState) -> JobRecord {
        JobRecord {
            id: "t1".into(),
            principal: String::new(),
            session_id: None,
            tool: "x".into(),
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
            progress_json: None,
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

    fn question(key: &str, answered: bool) -> JobInput {
        JobInput {
            key: key.into(),
            request_json: r#"{"method":"elicitation/create","params":{}}"#.into(),
            response_json: answered.then(|| r#"{"action":"accept"}"#.into()),
            asked_ms: 1,
            answered_ms: None,
        }
    }

    #[test]
    fn statuses_report_the_real_outcome() {
        let running = job(JobState::Running);
        let v = detailed_task(&running, &[], 500);
        assert_eq!(v["status"], "working");
        assert_eq!(v["ttlMs"], 60_000);
        assert_eq!(v["pollIntervalMs"], 500);
        assert!(v.get("result").is_none() && v.get("ttl").is_none());

        // Only the open questions are listed.
        let v = detailed_task(&running, &[question("a", true), question("b", false)], 500);
        assert_eq!(v["status"], "input_required");
        assert_eq!(
            v["inputRequests"],
            json!({"b": {"method": "elicitation/create", "params": {}}})
        );

        // A cancel is a request: work that finished first is completed.
        let mut done = job(JobState::Succeeded);
        done.cancel_requested_ms = Some(5);
        done.result_json = Some(r#"{"n":1}"#.into());
        let v = detailed_task(&done, &[question("b", false)], 500);
        assert_eq!(v["status"], "completed");
        assert_eq!(v["result"]["structuredContent"], json!({"n": 1}));
        assert!(v.get("inputRequests").is_none());

        // A body's error is a tool result with isError: completed.
        let mut err = job(JobState::Failed);
        err.error_reason = Some("error".into());
        err.error_json = Some(r#"{"code":"error","message":"bad input"}"#.into());
        let v = detailed_task(&err, &[], 500);
        assert_eq!(v["status"], "completed");
        assert_eq!(v["result"]["isError"], true);

        // No tool result at all: failed, with a JSON-RPC error and no result.
        for reason in [REASON_PANIC, REASON_LEASE_LOST] {
            let mut f = job(JobState::Failed);
            f.error_reason = Some(reason.into());
            let v = detailed_task(&f, &[], 500);
            assert_eq!(v["status"], "failed", "{reason}");
            assert_eq!(v["error"]["code"], -32603);
            assert!(v.get("result").is_none());
            assert!(v["statusMessage"].as_str().unwrap().contains("failed"));
        }
        assert_eq!(
            detailed_task(&job(JobState::Cancelled), &[], 1)["status"],
            "cancelled"
        );
    }
}
