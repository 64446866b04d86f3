//! The tasks face (MCP 2025-11-25, experimental): `tools/call <tool>` with a `task` param
//! creates a job and answers `CreateTaskResult` once it is durable; `tasks/get`,
//! `tasks/result` (blocks until the task is terminal), `tasks/cancel`, and `tasks/list` only
//! where requests carry an auth context; `notifications/tasks/status` when a task this process
//! watches reaches a terminal status (optional in the spec; requesters must not rely on it).
//!
//! Binding: a task belongs to its job's owner scope (`scope.rs`): the principal, else the
//! session that created it, else (a stateless request, stdio) whoever holds its unguessable id. Any other caller gets -32602 "unknown task", exactly as for an id that
//! never existed, so ids cannot be probed.
//!
//! A stateless (2026-07-28) `tasks/get` or `tasks/cancel` is served by the tasks extension's
//! face instead (`tasks_ext.rs`).

use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use staunch_server::protocol::{ErrorObject, codes};
use staunch_server::{Context, MethodHandler, ToolError};
use staunch_store::{CancelOutcome, JobRecord};

use crate::call_start::create;
use crate::runtime::JobRuntime;
use crate::state::Waited;
use crate::task_errors::{key_of_another_owner, refused_start, rpc, unknown_task};
use crate::view::{task_object, task_status, task_terminal, tool_result};

/// The `_meta` key that ties a message to its task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The shortest task retention granted, whatever `ttl` the requester asks for.
const MIN_TASK_TTL: Duration = Duration::from_secs(60);

/// The `tasks` capability this runtime declares.
pub(crate) fn capability(rt: &JobRuntime) -> Value {
    let mut caps = json!({"cancel": {}, "requests": {"tools": {"call": {}}}});
    // Without an auth context the spec says not to advertise list (task ids would be the only
    // thing standing between callers).
    if rt.config().principal.is_some() {
        caps["list"] = json!({});
    }
    caps
}

fn task_id(params: &Option<Value>) -> Result<String, ToolError> {
    params
        .as_ref()
        .and_then(|p| p.get("taskId"))
        .and_then(Value::as_str)
        .map(String::from)
        .ok_or_else(|| rpc(codes::INVALID_PARAMS, "taskId (a string) is required"))
}

impl JobRuntime {
    /// Whether the caller of `ctx` may see this job as a task (its owner scope).
    pub(crate) fn task_visible(&self, job: &JobRecord, ctx: &Context) -> bool {
        self.visible_to(job, ctx)
    }

    async fn visible_task(&self, ctx: &Context, id: &str) -> Result<JobRecord, ToolError> {
        match self.get(id).await {
            Ok(Some(job)) if self.task_visible(&job, ctx) => Ok(job),
            Ok(_) => Err(unknown_task(id)),
            Err(e) => Err(rpc(
                codes::INTERNAL_ERROR,
                format!("reading the task failed: {e}"),
            )),
        }
    }
}

/// `tools/call <tool>` with `task`: records the job, answers `{"task": Task}`.
pub(crate) fn create_task(
    rt: JobRuntime,
    tool: String,
    ctx: Context,
    args: Value,
    task: Value,
) -> BoxFuture<'static, Result<Value, ToolError>> {
    Box::pin(async move {
        // The ttl actually kept (and reported): at least a minute, so a task cannot vanish
        // between its end and a requester's next poll; at most the configured maximum.
        let max = rt.config().max_task_ttl;
        let ttl = task
            .get("ttl")
            .and_then(Value::as_u64)
            .map(|t| Duration::from_millis(t).max(MIN_TASK_TTL).min(max));
        let sub = create(&rt, &tool, &ctx, args, ttl)
            .await
            .map_err(refused_start)?;
        // A replayed key may point at a job another session created; handing it out would
        // give this session a task it cannot read.
        if !rt.task_visible(&sub.job, &ctx) {
            return Err(key_of_another_owner());
        }
        rt.watch_task(&sub.job.id, ctx.notifier());
        // The request's progress token stays valid until the task is terminal (2025-11-25):
        // forward the job's progress to it.
        if let Some(token) = ctx.meta().and_then(|m| m.get("progressToken")).cloned() {
            tokio::spawn(forward_progress(
                rt.clone(),
                sub.job.id.clone(),
                token,
                ctx.notifier(),
            ));
        }
        Ok(json!({"task": task_object(&sub.job, rt.poll_after_ms())}))
    })
}

/// How often a task's progress is read for forwarding (the job persists it at about this rate).
const PROGRESS_POLL: Duration = Duration::from_millis(250);

/// Sends `notifications/progress` for a task's token while the job runs: strictly increasing
/// values only, none after the task is terminal, and it stops when the session is gone.
async fn forward_progress(
    rt: JobRuntime,
    id: String,
    token: Value,
    notifier: staunch_server::Notifier,
) {
    let mut last: Option<f64> = None;
    loop {
        let job = match rt.get(&id).await {
            Ok(Some(j)) => j,
            _ => return,
        };
        if task_terminal(&job) {
            return;
        }
        if let Some((done, total, message)) = crate::view::progress_of(&job)
            && last.is_none_or(|l| done > l)
        {
            last = Some(done);
            // Whole numbers go out as integers, as everywhere else in staunch.
            let whole = |v: f64| {
                if v.fract() == 0.0 {
                    json!(v as i64)
                } else {
                    json!(v)
                }
            };
            let mut params = json!({
                "progressToken": token,
                "progress": whole(done),
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": id}},
            });
            if let Some(t) = total {
                params["total"] = whole(t);
            }
            if let Some(m) = message {
                params["message"] = json!(m);
            }
            if !notifier.notify("notifications/progress", params) {
                return;
            }
        }
        tokio::time::sleep(PROGRESS_POLL).await;
    }
}

/// `tasks/get`.
pub(crate) struct TaskGet(pub(crate) JobRuntime);

impl MethodHandler for TaskGet {
    fn call(
        &self,
        ctx: Context,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        let rt = self.0.clone();
        Box::pin(async move {
            if !ctx.has_session() {
                return crate::tasks_ext::get(&rt, &ctx, &params).await;
            }
            let id = task_id(&params)?;
            let job = rt.visible_task(&ctx, &id).await?;
            Ok(task_object(&job, rt.poll_after_ms()))
        })
    }
}

/// `tasks/result`: blocks until the task is terminal, then answers the tool result exactly as
/// a plain call would have (a failed job is a result with `isError`), with the related-task
/// `_meta`. A cancelled task has no result: it gets a -32603 error saying so, as the
/// TypeScript SDK's own task store answers.
pub(crate) struct TaskResult(pub(crate) JobRuntime);

impl MethodHandler for TaskResult {
    fn call(
        &self,
        ctx: Context,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        let rt = self.0.clone();
        Box::pin(async move {
            let id = task_id(&params)?;
            rt.visible_task(&ctx, &id).await?;
            let stop = ctx.cancellation_token();
            let waited = rt
                .inner
                .wait_for(&id, task_terminal, &stop, |_| {})
                .await
                .map_err(|e| {
                    rpc(
                        codes::INTERNAL_ERROR,
                        format!("reading the task failed: {e}"),
                    )
                })?;
            let job = match waited {
                Waited::Done(job) => job,
                Waited::Gone => return Err(unknown_task(&id)),
                Waited::Stopped => return Err(ToolError::Cancelled),
            };
            if task_status(&job) == "cancelled" {
                return Err(ToolError::Rpc(
                    ErrorObject::new(
                        codes::INTERNAL_ERROR,
                        format!("task {id} was cancelled; a cancelled task has no result"),
                    )
                    .with_data(json!({"taskId": id, "status": "cancelled", "jobState": job.state.as_str()})),
                ));
            }
            let result = tool_result(&job)
                .ok_or_else(|| rpc(codes::INTERNAL_ERROR, "the task ended without a result"))?;
            let mut v = serde_json::to_value(result)
                .map_err(|e| rpc(codes::INTERNAL_ERROR, e.to_string()))?;
            v["_meta"] = json!({ RELATED_TASK: {"taskId": id} });
            Ok(v)
        })
    }

    fn deadline(&self, _default: Duration) -> Option<Duration> {
        // The spec requires blocking until the task is terminal, however long that takes; the
        // client's cancel still ends the wait.
        None
    }
}

/// `tasks/cancel`: the task is `cancelled` before the reply and stays so, even if the body
/// finishes its current unit afterwards; a terminal task is refused with -32602.
pub(crate) struct TaskCancel(pub(crate) JobRuntime);

impl MethodHandler for TaskCancel {
    fn call(
        &self,
        ctx: Context,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        let rt = self.0.clone();
        Box::pin(async move {
            if !ctx.has_session() {
                return crate::tasks_ext::cancel(&rt, &ctx, &params).await;
            }
            let id = task_id(&params)?;
            let job = rt.visible_task(&ctx, &id).await?;
            let terminal = |j: &JobRecord| {
                rpc(
                    codes::INVALID_PARAMS,
                    format!(
                        "task {id} is already {}; it cannot be cancelled",
                        task_status(j)
                    ),
                )
            };
            if task_terminal(&job) {
                return Err(terminal(&job));
            }
            let by = format!(
                "tasks/cancel (session {})",
                crate::scope::session_label(&ctx)
            );
            let out = rt
                .cancel(&id, &by)
                .await
                .map_err(|e| rpc(codes::INTERNAL_ERROR, format!("cancelling failed: {e}")))?;
            match out {
                CancelOutcome::CancelledQueued(j) | CancelOutcome::Requested(j) => {
                    Ok(task_object(&j, rt.poll_after_ms()))
                }
                CancelOutcome::AlreadyTerminal(j) => Err(terminal(&j)),
                CancelOutcome::NotFound => Err(unknown_task(&id)),
            }
        })
    }
}

/// `tasks/list`, registered only where requests carry an auth context.
pub(crate) struct TaskList(pub(crate) JobRuntime);

/// Tasks per `tasks/list` page.
const LIST_PAGE: usize = 100;

impl MethodHandler for TaskList {
    fn call(
        &self,
        ctx: Context,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        let rt = self.0.clone();
        Box::pin(async move {
            let Some(principal) = rt.principal_of(&ctx) else {
                // No identity on this request: nothing is bound to it.
                return Ok(json!({"tasks": []}));
            };
            let cursor = params
                .as_ref()
                .and_then(|p| p.get("cursor"))
                .and_then(Value::as_str)
                .map(String::from);
            let (jobs, next) = rt
                .store()
                .list(&principal, cursor.as_deref(), LIST_PAGE)
                .await
                .map_err(|e| match e {
                    staunch_store::StoreError::InvalidInput(m) => rpc(codes::INVALID_PARAMS, m),
                    other => rpc(codes::INTERNAL_ERROR, other.to_string()),
                })?;
            let poll = rt.poll_after_ms();
            let tasks: Vec<Value> = jobs
                .iter()
                .filter(|j| rt.task_visible(j, &ctx))
                .map(|j| task_object(j, poll))
                .collect();
            let mut out = json!({"tasks": tasks});
            if let Some(n) = next {
                out["nextCursor"] = n.into();
            }
            Ok(out)
        })
    }
}
