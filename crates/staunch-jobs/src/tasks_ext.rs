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
use serde_json::{Value, json};
use staunch_server::protocol::codes;
use staunch_server::{Context, MethodHandler, ToolError, declares_tasks, missing_tasks_extension};
use staunch_store::JobRecord;

use crate::call_start::create;
use crate::error::JobRuntimeError;
use crate::runtime::JobRuntime;
use crate::task_errors::{internal, key_of_another_owner, refused_start, rpc, unknown_task};
use crate::task_view::{detailed_task, ext_status, task_base};

/// -32021 unless the request declared the extension.
pub(crate) fn require_extension(ctx: &Context) -> Result<(), ToolError> {
    if declares_tasks(&ctx.client_capabilities()) {
        Ok(())
    } else {
        Err(ToolError::Rpc(missing_tasks_extension()))
    }
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
    pub async fn detailed_task(&self, job: &JobRecord) -> Result<Value, JobRuntimeError> {
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
            if ctx.has_session() {
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
