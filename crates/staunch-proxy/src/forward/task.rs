//! A call that makes an upstream task: a 2025 session's task-augmented call and a 2026-07-28
//! call under the tasks extension, the task adopted under an id of the proxy's
//! (`crate::tasks`), across eras where the upstream runs the other era's tasks; and a tool the
//! upstream runs only as a task, followed to its end for a client that called it plainly.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use staunch_client::tasks::TaskOutcome;
use staunch_client::{ClientError, Progress, ProgressStream};
use staunch_protocol::raw::to_value;
use staunch_server::{Context, ToolError};

use super::{
    Call, ForwardTool, MAX_INPUT_ROUNDS, Outcome, UpstreamParams, again_with, call_params, gone,
    send_tracked_keeping,
};
use crate::ask::ask_downstream;
use crate::tasks::Kind;
use crate::tool_result::forwarded_value;
use crate::upstream::{Upstream, request_options};

/// A tool the upstream only runs as a task (`taskSupport: "required"`): the call creates the
/// task — a 2025-11-25 task, or one of the 2026-07-28 tasks extension — which is followed to
/// its end (`tasks/get` at the upstream's poll interval, its progress passed on, the result),
/// and a cancel of the downstream request becomes `tasks/cancel` for exactly that task. The
/// questions a 2026 task asks while it is `input_required` go to the downstream client as any
/// upstream question does, and its answers back with `tasks/update`. The client sees an
/// ordinary call (a `job`-shaped rule gives it staunch's own tasks instead).
pub(super) async fn forward_as_task(
    up: &Upstream,
    client: &staunch_client::Client,
    call: Call<'_>,
    mut on_progress: impl FnMut(&Progress) + Send,
) -> Outcome {
    let opts = request_options(call.progress, call.cancel);
    let topts = staunch_client::tasks::TaskOptions::default();
    let on_event = |e: staunch_client::tasks::TaskEvent<'_>| {
        if let staunch_client::tasks::TaskEvent::Progress(p) = e {
            on_progress(p);
        }
    };
    // Only a task without a session asks in rounds (a session's asks on the connection).
    let ctx = call.ctx;
    let answer = move |requests: staunch_client::input::InputRequests| async move {
        let Some(ctx) = ctx else {
            return staunch_client::input::no_answers(requests).await;
        };
        ask_downstream(ctx, &json!({"inputRequests": requests}))
            .await
            .map(|v| v.as_object().cloned().unwrap_or_default())
            .map_err(|e| {
                ClientError::Protocol(format!(
                    "the client could not answer the upstream task's questions: {e}"
                ))
            })
    };
    let ended = client
        .call_tool_task(call.tool, call.args, &opts, &topts, answer, on_event)
        .await;
    match ended {
        Ok(TaskOutcome::Immediate(v)) => answered(&v),
        Ok(TaskOutcome::Finished { result: Ok(v), .. }) => answered(&v),
        Ok(TaskOutcome::Finished { result: Err(e), .. }) => Outcome::Refused(e),
        Ok(TaskOutcome::Cancelled(task)) => Outcome::Failed(format!(
            "the upstream server {:?} cancelled its task {} itself",
            up.name(),
            task.task_id
        )),
        Err(ClientError::Cancelled) => Outcome::Cancelled,
        Err(ClientError::Rpc(e)) => Outcome::Refused(e),
        Err(e) => Outcome::Failed(gone(up.name(), &e)),
    }
}

/// A task's result, read into a value by the task client, as the text the call's answer is.
fn answered(v: &Value) -> Outcome {
    match serde_json::value::to_raw_value(v) {
        Ok(raw) => Outcome::Answered(raw),
        Err(e) => Outcome::Failed(format!(
            "the upstream task's result cannot be passed on: {e}"
        )),
    }
}

/// The `tools/call` that makes an upstream task, tracked as part of `ctx`'s request.
pub(super) async fn create_task(
    up: &Arc<Upstream>,
    client: &staunch_client::Client,
    ctx: &Context,
    tool: &str,
    params: Value,
) -> Result<Value, ToolError> {
    create_task_following(up, client, ctx, tool, params, false)
        .await
        .map(|(created, _)| created)
}

/// [`create_task`]; with `progress`, the call asks for progress and the task's progress after
/// the answer comes back with it.
async fn create_task_following(
    up: &Arc<Upstream>,
    client: &staunch_client::Client,
    ctx: &Context,
    tool: &str,
    params: Value,
    progress: bool,
) -> Result<(Value, Option<ProgressStream>), ToolError> {
    let opts = request_options(progress, ctx.cancellation_token());
    let (created, progress) = send_tracked_keeping(
        up,
        client,
        Some(ctx),
        tool,
        UpstreamParams::Value(params),
        &opts,
        |_: &Progress| {},
    )
    .await;
    let created = created.map_err(crate::error::rpc)?;
    Ok((to_value(&created), progress))
}

impl ForwardTool {
    /// The client's answer to a call that made the upstream task `upstream_id` on `up`: the
    /// upstream's `answer` under the id the proxy gives the task (`crate::tasks`).
    fn adopt(
        &self,
        up: Arc<Upstream>,
        upstream_id: Option<String>,
        kind: Kind,
        ctx: &Context,
        answer: Value,
    ) -> Result<Value, ToolError> {
        let Some(upstream_id) = upstream_id else {
            return Err(ToolError::Internal(format!(
                "the upstream server {:?} answered as a task without a taskId: {answer}",
                up.name()
            )));
        };
        let id = self.pool.tasks().adopt(up, &upstream_id, kind, ctx);
        Ok(crate::tasks::with_id(answer, &upstream_id, &id))
    }

    /// Calls the tool under the tasks extension. The upstream may ask before it decides: its
    /// questions go to the client (a round of the client's own, or requests on its session),
    /// and the call is sent again with the answers.
    async fn create_under_extension(
        &self,
        up: &Arc<Upstream>,
        client: &staunch_client::Client,
        ctx: &Context,
        args: Value,
    ) -> Result<Created, ToolError> {
        let base = client
            .with_tasks_extension(call_params(&self.tool, args, ctx.meta()))
            .map_err(crate::error::rpc)?;
        let mut params = base.clone();
        let mut rounds = 0;
        loop {
            let answer = create_task(up, client, ctx, &self.tool, params).await?;
            match answer["resultType"].as_str() {
                Some("task") => return Ok(Created::Task(answer)),
                Some("input_required") if rounds < MAX_INPUT_ROUNDS => {
                    rounds += 1;
                    let answers = ask_downstream(ctx, &answer).await?;
                    params = again_with(&base, answers, &answer);
                }
                _ => return Ok(Created::Answer(answer)),
            }
        }
    }

    /// The body of [`ToolHandler::call_as_task`](staunch_server::ToolHandler::call_as_task).
    pub(super) fn task_augmented(
        &self,
        ctx: Context,
        args: Value,
        task: Value,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        let this = self.clone();
        Box::pin(async move {
            let (up, client) = this.pool.connection(&ctx).await?;
            let stops_with_its_call = this.pool.spec().kill_after_cancel_of(&this.tool).is_some();
            // An upstream that runs the extension's tasks only: its task, written the
            // 2025-11-25 way.
            if !up.runs_tool_tasks()
                && up.offers_tasks_extension()
                && this.runs_as_task
                && !stops_with_its_call
            {
                return match this
                    .create_under_extension(&up, &client, &ctx, args)
                    .await?
                {
                    Created::Task(task) => {
                        let upstream_id = task["taskId"].as_str().map(str::to_string);
                        let answer = json!({"task": crate::tasks::tasks_task(&task)});
                        let answer =
                            this.adopt(up, upstream_id, Kind::ExtensionToTasks, &ctx, answer)?;
                        if let Some(id) = answer["task"]["taskId"].as_str() {
                            this.pool.tasks().listen_upstream(id, &client);
                        }
                        Ok(answer)
                    }
                    // A client that asked for a task takes an answer at once too.
                    Created::Answer(v) => forwarded_value(v),
                };
            }
            if !up.runs_tool_tasks() || stops_with_its_call {
                return Err(ToolError::Rpc(staunch_protocol::ErrorObject::new(
                    staunch_protocol::codes::METHOD_NOT_FOUND,
                    format!(
                        "the upstream server {:?} does not run this tool as a task here; call {} without `task`",
                        up.name(),
                        this.tool
                    ),
                )));
            }
            let mut params = call_params(&this.tool, args, ctx.meta());
            params["task"] = task;
            // The request's progress token stays valid until the task ends (2025-11-25): the
            // upstream task's progress goes on to it.
            let token = ctx.meta().and_then(|m| m.get("progressToken")).cloned();
            let (created, progress) =
                create_task_following(&up, &client, &ctx, &this.tool, params, token.is_some())
                    .await?;
            let upstream_id = created["task"]["taskId"].as_str().map(str::to_string);
            let answer = this.adopt(up, upstream_id, Kind::Tasks, &ctx, created)?;
            if let (Some(token), Some(progress), Some(id)) =
                (token, progress, answer["task"]["taskId"].as_str())
            {
                this.pool.tasks().pass_progress(id, progress, token);
            }
            Ok(answer)
        })
    }

    /// The body of [`ToolHandler::call_with_tasks`](staunch_server::ToolHandler::call_with_tasks).
    pub(super) fn under_extension(
        &self,
        ctx: Context,
        args: Value,
    ) -> Option<BoxFuture<'static, Result<Value, ToolError>>> {
        let shared = self.pool.shared();
        let extension = shared.offers_tasks_extension();
        let bridged = !extension && self.runs_as_task && shared.runs_tool_tasks();
        // Under the stop policy a call's process ends with the call, which a task outlives.
        if !(extension || bridged) || self.pool.spec().kill_after_cancel_of(&self.tool).is_some() {
            return None;
        }
        let this = self.clone();
        if bridged {
            return Some(Box::pin(async move {
                let (up, client) = this.pool.connection(&ctx).await?;
                let mut params = call_params(&this.tool, args, ctx.meta());
                // The extension's client names no ttl: the upstream's own default holds.
                params["task"] = json!({});
                let created = create_task(&up, &client, &ctx, &this.tool, params).await?;
                let Some(task) = created.get("task") else {
                    // The upstream answered the call itself.
                    return forwarded_value(created);
                };
                let upstream_id = task["taskId"].as_str().map(str::to_string);
                let mut answer = crate::tasks::extension_task(task);
                answer["resultType"] = "task".into();
                this.adopt(up, upstream_id, Kind::TasksToExtension, &ctx, answer)
            }));
        }
        Some(Box::pin(async move {
            let (up, client) = this.pool.connection(&ctx).await?;
            match this
                .create_under_extension(&up, &client, &ctx, args)
                .await?
            {
                Created::Task(task) => {
                    let upstream_id = task["taskId"].as_str().map(str::to_string);
                    let answer = this.adopt(up, upstream_id, Kind::Extension, &ctx, task)?;
                    if let Some(id) = answer["taskId"].as_str() {
                        this.pool.tasks().listen_upstream(id, &client);
                    }
                    Ok(answer)
                }
                Created::Answer(v) => forwarded_value(v),
            }
        }))
    }
}

/// What an upstream made of a call under the tasks extension.
enum Created {
    /// A task (`resultType: "task"`).
    Task(Value),
    /// Its answer, at once.
    Answer(Value),
}
