//! Forwarding one tool call upstream: [`ForwardTool`] for the request shapes (`quick`,
//! `streaming`, `atomic`) and [`UpstreamJob`] for `job`-shaped upstream tools.
//!
//! The call goes out under the proxy's own id (the client numbers its requests), asks for
//! progress only when the downstream request carried a token, and waits until the upstream
//! answers or the downstream request's token fires. A fired token drops the upstream request,
//! which sends `notifications/cancelled` for exactly its upstream id (or, to a 2026 upstream,
//! closes its stream); the request core then sends nothing downstream. For `atomic` tools the
//! request core never fires the token, so the upstream write finishes.
//!
//! A 2026-07-28 client's call on a session-era upstream that asks a question in the middle is
//! parked while the client answers in a round of its own (`park`).
//!
//! A call that makes an upstream task — task-augmented, under the tasks extension, or of a tool
//! the upstream runs only as a task — is `task`'s.

mod job;
mod task;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;
use serde_json::value::RawValue;
use staunch_client::{
    CallOptions, ClientError, PendingRequest, Progress, ProgressStream, ToolCall,
};
use staunch_protocol::RequestId;
use staunch_protocol::mcp::methods;
use staunch_protocol::raw::{RawObject, to_value};
use staunch_server::{CallToolResult, Context, JsonToolResult, ToolError, ToolHandler};
use tokio_util::sync::CancellationToken;

use crate::ask::ask_downstream;
use crate::park::{self, AskingCall, Lot};
use crate::pool::Pool;
use crate::stop::{Stopper, end_own_process};
use crate::tool_result::{error_result, forwarded_result, unreadable};
use crate::upstream::{Upstream, request_options};

pub use job::UpstreamJob;
use task::forward_as_task;

/// `tools/call` params for the upstream, as a value (for a request that adds fields of its
/// own): its own tool name, the arguments, and the downstream `_meta` (trace context and the
/// like) without the downstream progress token.
fn call_params(tool: &str, args: Value, meta: Option<&Value>) -> Value {
    ToolCall::new(tool, &args)
        .meta(meta.and_then(Value::as_object))
        .to_params()
}

/// What a forwarded `tools/call` sends upstream.
enum UpstreamParams<'a> {
    /// The call's own params, written as they are sent (no value tree built).
    Call(ToolCall<'a>),
    /// Params with fields of their own (a task request).
    Value(Value),
}

impl UpstreamParams<'_> {
    fn start(
        self,
        client: &staunch_client::Client,
        progress: bool,
    ) -> Result<PendingRequest, ClientError> {
        match self {
            UpstreamParams::Call(call) => client.start_tool_call(&call, progress),
            UpstreamParams::Value(v) => {
                client.start_request(methods::TOOLS_CALL, Some(v), progress)
            }
        }
    }
}

/// How a forwarded call ended, before it is shaped for a tool or a job.
enum Outcome {
    /// The upstream's result, as the text it sent.
    Answered(Box<RawValue>),
    /// Asking the downstream client failed, or (2026 client) its answers are still to come.
    Asked(ToolError),
    Refused(staunch_protocol::ErrorObject),
    Cancelled,
    Failed(String),
    /// The upstream asked a 2026 client a question: the call waits, parked, for its answer.
    Parked(Box<AskingCall>),
}

/// One call to forward.
struct Call<'a> {
    /// The upstream's own tool name.
    tool: &'a str,
    args: Value,
    /// The downstream request (absent for a job attempt, which has no request).
    ctx: Option<&'a Context>,
    /// The downstream request's `_meta`, passed on.
    meta: Option<&'a Value>,
    /// Whether to ask the upstream for progress.
    progress: bool,
    /// Fired when the call must stop (cancel, deadline, job cancel).
    cancel: CancellationToken,
    /// The upstream tool must be called as a task (`taskSupport: "required"`).
    as_task: bool,
}

/// Paths most calls never take (a task, a question, the stop policy's own process) are boxed
/// here: a future is as large as its largest path, and the whole of it is copied into the
/// request's task and out again as the task ends.
async fn forward(
    pool: &Pool,
    call: Call<'_>,
    on_progress: impl FnMut(&Progress) + Send,
) -> Outcome {
    let (tool, ctx) = (call.tool, call.ctx);
    // A later round of a call parked for its 2026 client's answer goes on where it stopped.
    let resumed = match ctx.filter(|c| c.asks_in_rounds()) {
        Some(ctx) => match pool.lot().take(ctx, tool, &call.args) {
            Ok(resumed) => resumed,
            Err(why) => return Outcome::Failed(why),
        },
        None => None,
    };
    // The stop policy: a process of its own for this call, ended when the call is — or, with
    // `isolate`, the session's own process, retired when one of its calls is cancelled.
    let own_process = pool.spec().kill_after_cancel_of(tool);
    let session = ctx
        .filter(|_| pool.spec().isolate)
        .and_then(Context::owning_session)
        .map(str::to_string);
    let up = match (&resumed, own_process, ctx) {
        (Some(asking), _, _) => Ok(asking.up.clone()),
        (None, Some(_), Some(ctx)) if session.is_some() => pool.for_request(ctx).await,
        (None, Some(_), _) => Box::pin(pool.for_one_call()).await,
        (None, None, Some(ctx)) => pool.for_request(ctx).await,
        (None, None, None) => Ok(pool.shared().clone()),
    };
    let up = match up {
        Ok(up) => up,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let started = tokio::time::Instant::now();
    let outcome = match (resumed, ctx) {
        (Some(asking), Some(ctx)) => {
            let opts = request_options(call.progress, call.cancel);
            Box::pin(go_on_asking(asking, ctx, pool.lot(), &opts, on_progress)).await
        }
        _ => forward_on(&up, pool.lot(), call, on_progress).await,
    };
    if let Outcome::Parked(asking) = outcome {
        // A process of the call's own is ended if the client never answers.
        let stop = own_process.filter(|_| session.is_none()).map(|grace| {
            let (stopper, up, tool) = (Stopper::of(pool), up.clone(), tool.to_string());
            move || end_own_process(stopper, up, &tool, None, grace, true)
        });
        pool.lot().park(asking, pool.spec().question_wait, move || {
            stop.into_iter().for_each(|f| f())
        });
        return Outcome::Asked(ToolError::InputRequired);
    }
    let cancelled = matches!(outcome, Outcome::Cancelled);
    match (own_process, session) {
        (Some(grace), Some(session)) if cancelled => {
            if pool.retire(&session, &up, started) {
                end_own_process(Stopper::of(pool), up, tool, ctx.cloned(), grace, true);
            } else {
                tracing::warn!(upstream = %pool.spec().name, tool = %tool, session = %session,
                    "upstream.not_stopped: the session's upstream process serves another call; it is not stopped");
            }
        }
        // The session's process serves its next call.
        (Some(_), Some(_)) => {}
        (Some(grace), None) => {
            end_own_process(Stopper::of(pool), up, tool, ctx.cloned(), grace, cancelled);
        }
        (None, _) => {}
    }
    outcome
}

/// Forwards `call` on the connection `up` (a call that asks its 2026 client parks in `lot`).
async fn forward_on(
    up: &Arc<Upstream>,
    lot: &Lot,
    call: Call<'_>,
    on_progress: impl FnMut(&Progress) + Send,
) -> Outcome {
    let client = match up.client().await {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    if call.as_task && (client.has_session() || client.offers_tasks_extension()) {
        return Box::pin(forward_as_task(up, &client, call, on_progress)).await;
    }
    let Call {
        tool,
        args,
        ctx,
        meta,
        progress,
        cancel,
        as_task: _,
    } = call;
    // A 2026 client answers a session-era upstream's questions in rounds of its own: the call
    // is tracked with a channel for them and parked while the client answers.
    let meta = meta.and_then(Value::as_object);
    if let Some(ctx) = ctx.filter(|c| c.asks_in_rounds())
        && client.has_session()
    {
        let params = ToolCall::new(tool, &args).meta(meta);
        let pending = match client.start_tool_call(&params, progress) {
            Ok(p) => p,
            Err(e) => return Outcome::Failed(gone(up.name(), &e)),
        };
        let &RequestId::Number(n) = pending.id() else {
            return Outcome::Failed("the upstream client named a call by a string".into());
        };
        let (tracked, questions) = up.calls().track_asking(n, ctx, tool);
        let asking = AskingCall::new(up.clone(), (pending, tracked, questions), tool, args, ctx);
        let opts = request_options(progress, cancel);
        return Box::pin(go_on_asking(asking, ctx, lot, &opts, on_progress)).await;
    }
    // Only a 2026-07-28 upstream answers "input required": the questions go to the downstream
    // client (a server->client request on a 2025 session, an input-required round of its own
    // for a 2026 client, which calls again with the answers), and the call is sent again with
    // the answers and the state the upstream asked to get back.
    let stateless = !client.has_session();
    let mut answered: Option<(Value, Option<Value>)> = None;
    let mut on_progress = on_progress;
    for _ in 0..MAX_INPUT_ROUNDS {
        let opts = request_options(progress, cancel.clone());
        let mut params = ToolCall::new(tool, &args).meta(meta);
        if let Some((answers, state)) = &answered {
            params = params.answers(answers, state.as_ref());
        }
        let params = UpstreamParams::Call(params);
        let r = send_tracked(up, &client, ctx, tool, params, &opts, &mut on_progress).await;
        let v = match r {
            Ok(v) => v,
            Err(ClientError::Rpc(e)) => return Outcome::Refused(e),
            Err(ClientError::Cancelled) => return Outcome::Cancelled,
            Err(e) => return Outcome::Failed(gone(up.name(), &e)),
        };
        let Some(ctx) = ctx.filter(|_| stateless && asks_for_input(&v)) else {
            return Outcome::Answered(v);
        };
        let v = to_value(&v);
        let answers = match Box::pin(ask_downstream(ctx, &v)).await {
            Ok(a) => a,
            Err(e) => return Outcome::Asked(e),
        };
        answered = Some((answers, v.get("requestState").cloned()));
    }
    Outcome::Failed(format!(
        "the upstream server {:?} still asked for input after {MAX_INPUT_ROUNDS} rounds",
        up.name()
    ))
}

/// Goes on with an upstream call that asks its 2026 client, as part of `ctx`, waiting under
/// `opts` (the request's progress and cancel).
async fn go_on_asking(
    asking: Box<AskingCall>,
    ctx: &Context,
    lot: &Lot,
    opts: &CallOptions,
    on_progress: impl FnMut(&Progress) + Send,
) -> Outcome {
    let up = asking.up.clone();
    match park::go_on(asking, ctx, lot, opts, on_progress).await {
        park::Step::Parked(asking) => Outcome::Parked(asking),
        park::Step::Ended(Ok(v)) => Outcome::Answered(v),
        park::Step::Ended(Err(ClientError::Rpc(e))) => Outcome::Refused(e),
        park::Step::Ended(Err(ClientError::Cancelled)) => Outcome::Cancelled,
        park::Step::Ended(Err(e)) => Outcome::Failed(gone(up.name(), &e)),
    }
}

/// Whether a (2026-07-28) result asks for input: its `resultType`, read where it lies.
fn asks_for_input(result: &RawValue) -> bool {
    RawObject::parse(result)
        .and_then(|r| {
            r.get("resultType")
                .map(|t| t.get() == r#""input_required""#)
        })
        .unwrap_or(false)
}

/// Input rounds bridged per call, as the client library allows.
const MAX_INPUT_ROUNDS: usize = staunch_client::input::MAX_ROUNDS;

fn gone(upstream: &str, e: &ClientError) -> String {
    match e {
        ClientError::Closed(why) => format!(
            "the upstream server {upstream:?} went away during the call ({why}); it is restarted \
             for the next call. Whether this call took effect is unknown: check before retrying \
             anything that writes"
        ),
        other => format!("the upstream server {upstream:?} failed: {other}"),
    }
}

/// Sends `params` as a `tools/call` on `up` and waits under `opts`; as part of `ctx`'s request
/// it is tracked (what the upstream sends for it after the request's cancel is logged
/// `upstream.late` and counted, questions it asks reach the client).
async fn send_tracked(
    up: &Arc<Upstream>,
    client: &staunch_client::Client,
    ctx: Option<&Context>,
    tool: &str,
    params: UpstreamParams<'_>,
    opts: &CallOptions,
    on_progress: impl FnMut(&Progress) + Send,
) -> Result<Box<RawValue>, ClientError> {
    send_tracked_keeping(up, client, ctx, tool, params, opts, on_progress)
        .await
        .0
}

/// [`send_tracked`], keeping the request's progress after its answer when it asked for
/// progress (a 2025-11-25 task's progress goes on after the call that made it).
async fn send_tracked_keeping(
    up: &Arc<Upstream>,
    client: &staunch_client::Client,
    ctx: Option<&Context>,
    tool: &str,
    params: UpstreamParams<'_>,
    opts: &CallOptions,
    mut on_progress: impl FnMut(&Progress) + Send,
) -> (Result<Box<RawValue>, ClientError>, Option<ProgressStream>) {
    let pending = match params.start(client, opts.progress) {
        Ok(p) => p,
        Err(e) => return (Err(e), None),
    };
    let tracked = match (ctx, pending.id()) {
        (Some(ctx), RequestId::Number(n)) => Some(up.calls().track(*n, ctx, tool)),
        _ => None,
    };
    let (r, progress) = pending
        .wait_raw_keeping_progress(opts, &mut on_progress)
        .await;
    // Only a cancel leaves the upstream request abandoned (its late answer is logged).
    if !matches!(r, Err(ClientError::Cancelled))
        && let Some(t) = tracked
    {
        t.answered();
    }
    (r, progress)
}

/// The call's `base` params sent again with the client's `answers` to the questions the
/// upstream `asked` (and the state it asked to get back).
fn again_with(base: &Value, answers: Value, asked: &Value) -> Value {
    let mut params = base.clone();
    params["inputResponses"] = answers;
    if let Some(state) = asked.get("requestState").filter(|s| !s.is_null()) {
        params["requestState"] = state.clone();
    }
    params
}

/// A request-shaped upstream tool.
#[derive(Clone, Debug)]
pub struct ForwardTool {
    pool: Arc<Pool>,
    /// The tool's name upstream (without the proxy's prefix).
    tool: Arc<str>,
    /// Called as an upstream task (its `taskSupport` is `"required"`).
    as_task: bool,
    /// The upstream runs it as a task when asked (its `taskSupport` is `"optional"` or
    /// `"required"`).
    runs_as_task: bool,
}

impl ForwardTool {
    /// Forwards calls to `tool` on `pool`'s upstream.
    pub fn new(pool: Arc<Pool>, tool: &str) -> Self {
        Self {
            pool,
            tool: tool.into(),
            as_task: false,
            runs_as_task: false,
        }
    }

    /// Whether the upstream runs it as a task when asked (`taskSupport` `"optional"` or
    /// `"required"`): a client of the tasks extension may then get the upstream's 2025-11-25
    /// task, bridged (`crate::tasks::Kind::TasksToExtension`).
    pub fn runs_as_task(mut self, yes: bool) -> Self {
        self.runs_as_task = yes;
        self
    }

    /// Calls it as an upstream task, followed to its end (for a tool whose `taskSupport` is
    /// `"required"`).
    pub fn as_task(mut self, yes: bool) -> Self {
        self.as_task = yes;
        self
    }
}

impl ToolHandler for ForwardTool {
    /// The upstream's result, read into staunch's type (what `call_json` sends is the
    /// server's way; this one is for a caller that wants the type).
    fn call(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<CallToolResult, ToolError>> {
        let call = self.call_json(ctx, args);
        Box::pin(async move {
            serde_json::from_str(call.await?.as_raw().get()).map_err(|e| unreadable(&e.to_string()))
        })
    }

    fn answers_json(&self) -> bool {
        true
    }

    /// A 2025 session's task-augmented call: made the upstream's own task (`crate::tasks`)
    /// when the upstream runs 2025-11-25 tasks, or its task of the extension, bridged, when it
    /// runs only those; refused otherwise (the tool is declared with `taskSupport` only where
    /// it runs tasks).
    fn call_as_task(
        &self,
        ctx: Context,
        args: Value,
        task: Value,
    ) -> Option<BoxFuture<'static, Result<Value, ToolError>>> {
        Some(self.task_augmented(ctx, args, task))
    }

    /// A 2026-07-28 call under the tasks extension. To an upstream that offers it, the
    /// upstream decides; a task it makes is the client's under an id of the proxy's
    /// (`crate::tasks`), an answer at once is passed on as any result is. A tool the upstream
    /// runs as a 2025-11-25 task is called as one, and its task is the client's, bridged. Any
    /// other call is made as usual.
    fn call_with_tasks(
        &self,
        ctx: Context,
        args: Value,
    ) -> Option<BoxFuture<'static, Result<Value, ToolError>>> {
        self.under_extension(ctx, args)
    }

    fn call_json(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<JsonToolResult, ToolError>> {
        let this = self.clone();
        Box::pin(async move {
            let progress_ctx = ctx.clone();
            let call = Call {
                tool: &this.tool,
                args,
                ctx: Some(&ctx),
                meta: ctx.meta(),
                progress: ctx.wants_progress(),
                cancel: ctx.cancellation_token(),
                as_task: this.as_task,
            };
            let outcome = forward(&this.pool, call, move |p: &Progress| {
                progress_ctx.progress_with(p.progress, p.total, p.message.clone(), p.extra.clone())
            })
            .await;
            match outcome {
                Outcome::Answered(v) => forwarded_result(v),
                Outcome::Refused(e) => Err(ToolError::Rpc(e)),
                Outcome::Asked(e) => Err(e),
                // The deadline fires the same token: say which it was.
                Outcome::Cancelled => Err(ctx.check().err().unwrap_or(ToolError::Cancelled)),
                Outcome::Failed(m) => Ok(error_result(m)),
                // `forward` parks the call and says so; never seen here.
                Outcome::Parked(_) => Err(ToolError::InputRequired),
            }
        })
    }
}
