//! The tasks extension of 2026-07-28 (`io.modelcontextprotocol/tasks`, SEP-2663) on the job
//! model.
//!
//! - `tools/call` of a job tool from a client that declared the extension answers a flat
//!   `CreateTaskResult` (`resultType: "task"`, `taskId`, `status`, `ttlMs`, `pollIntervalMs`)
//!   once the job row is committed, so a `tasks/get` on any instance already resolves it.
//! - `tasks/get` answers the `DetailedTask`: `working`, `input_required` with every open
//!   question in `inputRequests`, `completed` with the tool result inlined (a result with
//!   `isError` is `completed` too — the tool ran), `failed` with a JSON-RPC `error` only when
//!   the job ended without a tool result (a panic, or its instance died while it ran), or
//!   `cancelled`. It reports the row's real outcome: unlike 2025-11-25, a cancel is only a
//!   request, and work that finished first stays `completed`.
//! - `tasks/update` stores `inputResponses` (unknown or already answered keys are ignored) and
//!   wakes the body if it runs here; `tasks/cancel` asks the job to stop. Both answer an empty
//!   ack, on any instance, for any task the caller may see, terminal or not.
//! - A client that did not declare the extension gets -32021 on all three.
//! - Re-issue: 2026-07-28 makes a client re-send a `tools/call` whose stream broke, with a new
//!   request id. The task it gets back is the same one when the call carries the same
//!   `idempotency_key` argument (or `_meta["io.staunch/idempotency-key"]`), or — without a key —
//!   when an identical call of a side-effecting tool is still queued or running (in-flight
//!   dedupe). The body runs once either way.
//!
//! Binding: a task belongs to its job's owner scope (`scope.rs`): with an auth context its
//! principal; without one, whoever holds its id (128 random bits). A task created in a 2025
//! session without auth stays bound to that session and is unknown here. Unknown and foreign
//! ids get the same -32602.

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use staunch_server::protocol::codes;
use staunch_server::{Context, MethodHandler, ToolError, declares_tasks, missing_tasks_extension};
use staunch_store::{JobInput, JobRecord, JobState, REASON_LEASE_LOST};

use crate::error::JobsError;
use crate::runtime::JobRuntime;
use crate::task_errors::{internal, key_of_another_owner, refused_start, rpc, unknown_task};
use crate::tool_face::create;
use crate::view::{REASON_PANIC, error_of, iso, progress_of, tool_result};

/// -32021 unless the request declared the extension.
pub(crate) fn require_extension(ctx: &Context) -> Result<(), ToolError> {
    if declares_tasks(&ctx.client_capabilities()) {
        Ok(())
    } else {
        Err(ToolError::Rpc(missing_tasks_extension()))
    }
}

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
fn task_base(job: &JobRecord, status: &str, poll_ms: u64) -> Map<String, Value> {
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

impl JobRuntime {
    /// Whether the caller of `ctx` may see this job through the extension (its owner scope).
    fn ext_visible(&self, job: &JobRecord, ctx: &Context) -> bool {
        self.visible_to(job, ctx)
    }

    async fn ext_task(
        &self,
        ctx: &Context,
        params: &Option<Value>,
    ) -> Result<JobRecord, ToolError> {
        require_extension(ctx)?;
        let id = params
            .as_ref()
            .and_then(|p| p.get("taskId"))
            .and_then(Value::as_str)
            .ok_or_else(|| rpc(codes::INVALID_PARAMS, "taskId (a string) is required"))?;
        match self.get(id).await {
            Ok(Some(job)) if self.ext_visible(&job, ctx) => Ok(job),
            Ok(_) => Err(unknown_task(id)),
            Err(e) => Err(internal("reading the task failed", e)),
        }
    }

    /// The `DetailedTask` of a job as stored now.
    pub async fn detailed_task(&self, job: &JobRecord) -> Result<Value, JobsError> {
        let inputs = if job.state.is_terminal() {
            Vec::new()
        } else {
            self.store().inputs(&job.id).await?
        };
        Ok(detailed_task(job, &inputs, self.poll_after_ms()))
    }

    /// Starts a job of `tool` (registered on this runtime) for a `tools/call` whose client
    /// declared the tasks extension, and answers its `CreateTaskResult` once it is durable.
    /// For handlers that decide at run time to answer with a task (after input-required rounds,
    /// say); job tools' own `tools/call` does this already.
    pub async fn start_task(
        &self,
        ctx: &Context,
        tool: &str,
        args: Value,
    ) -> Result<Value, ToolError> {
        require_extension(ctx)?;
        let sub = create(self, tool, ctx, args, None)
            .await
            .map_err(refused_start)?;
        // A replayed key may point at a job of a 2025 session, which this caller cannot read.
        if !self.ext_visible(&sub.job, ctx) {
            return Err(key_of_another_owner());
        }
        // No result, error or questions here (they live on tasks/get): a replayed key reports
        // the job's status only.
        let open = if sub.created || sub.job.state.is_terminal() {
            false
        } else {
            let inputs = self
                .store()
                .inputs(&sub.job.id)
                .await
                .map_err(|e| internal("reading the task failed", e))?;
            inputs.iter().any(|i| i.response_json.is_none())
        };
        let status = ext_status(&sub.job, open);
        let mut o = task_base(&sub.job, status, self.poll_after_ms());
        o.insert("resultType".into(), "task".into());
        Ok(Value::Object(o))
    }
}

/// `tasks/get` of a stateless request.
pub(crate) async fn get(
    rt: &JobRuntime,
    ctx: &Context,
    params: &Option<Value>,
) -> Result<Value, ToolError> {
    let job = rt.ext_task(ctx, params).await?;
    rt.detailed_task(&job)
        .await
        .map_err(|e| internal("reading the task failed", e))
}

/// `tasks/cancel` of a stateless request: an empty ack, whatever the task's state.
pub(crate) async fn cancel(
    rt: &JobRuntime,
    ctx: &Context,
    params: &Option<Value>,
) -> Result<Value, ToolError> {
    let job = rt.ext_task(ctx, params).await?;
    if !job.state.is_terminal() {
        rt.cancel(&job.id, "tasks/cancel")
            .await
            .map_err(|e| internal("cancelling failed", e))?;
    }
    Ok(json!({}))
}

/// `tasks/update` (stateless only): stores the answers, wakes the body if it runs here.
pub(crate) struct TaskUpdate(pub(crate) JobRuntime);

impl MethodHandler for TaskUpdate {
    fn call(
        &self,
        ctx: Context,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        let rt = self.0.clone();
        Box::pin(async move {
            if !ctx.is_stateless() {
                return Err(rpc(
                    codes::METHOD_NOT_FOUND,
                    "method not found: tasks/update belongs to the 2026-07-28 tasks extension",
                ));
            }
            let job = rt.ext_task(&ctx, &params).await?;
            let responses = match params.as_ref().and_then(|p| p.get("inputResponses")) {
                Some(Value::Object(r)) => r.clone(),
                _ => {
                    return Err(rpc(
                        codes::INVALID_PARAMS,
                        "inputResponses must be an object mapping input request keys to answers",
                    ));
                }
            };
            let answers: Vec<(String, String)> = responses
                .into_iter()
                .map(|(k, v)| (k, v.to_string()))
                .collect();
            if answers.is_empty() || job.state.is_terminal() {
                return Ok(json!({}));
            }
            let now = rt.config().clock.now_ms();
            let done = rt
                .store()
                .answer_inputs(&job.id, answers, now)
                .await
                .map_err(|e| internal("storing the answers failed", e))?;
            if !done.is_empty() {
                rt.inner.deliver_input(&job.id);
                rt.inner.job_changed(&job.id).await;
            }
            Ok(json!({}))
        })
    }
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
