//! The tool face, which works with every client: `start_<tool>` returns
//! `{job_id, status, poll_after_ms}` once the job is durable, `get_<tool>` reports it with a
//! sentence on what to do next, `cancel_<tool>` asks it to stop. Also `<tool>` itself when
//! called without a task: it runs the job and waits for its result (see [`RunFace`]).
//!
//! Refusals that the model can fix (bad arguments, a reused key, an unknown job id) are tool
//! results with `isError: true` that say what to do, never protocol errors.

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use staunch_server::{CallToolResult, Context, ToolError, ToolHandler, decode_args};
use staunch_store::{CancelOutcome, JobRecord};

use crate::call_start::create;
use crate::error::JobRuntimeError;
use crate::runtime::JobRuntime;
use crate::state::Waited;
use crate::view::{job_view, next_step, progress_of, start_view, tool_result};

// The arguments of `get_<tool>` and `cancel_<tool>` (a plain comment: doc comments would
// become the schema's description, which the model reads).
#[derive(Deserialize, JsonSchema)]
pub(crate) struct JobIdArgs {
    /// The job_id that the start_ tool returned.
    pub(crate) job_id: String,
}

/// A refused start, as a tool error the model can act on.
pub(crate) fn start_refusal(tool: &str, e: &JobRuntimeError) -> CallToolResult {
    let text = match e {
        JobRuntimeError::InvalidArguments(m) => {
            format!("{m}. Nothing was started; fix the arguments.")
        }
        JobRuntimeError::InvalidKey(m) => format!(
            "Invalid idempotency key: {m}. Nothing was started; send one key of at most 255 \
             characters."
        ),
        JobRuntimeError::KeyReused {
            existing_job_id, ..
        } if existing_job_id.is_empty() => format!(
            "{e}. Nothing was started. Use a new idempotency_key for new work; to follow the job \
             that key started, call get_{tool} with the job_id its first start returned."
        ),
        JobRuntimeError::KeyReused {
            existing_job_id, ..
        } => format!(
            "{e}. Nothing was started. Use a new idempotency_key for new work, or call get_{tool} \
             with job_id \"{existing_job_id}\" to follow the job that key started."
        ),
        JobRuntimeError::TooManyActive { limit } => format!(
            "You already have {limit} jobs queued or running, the most this server keeps per \
             caller. Nothing was started; wait for some to finish (get_{tool}) or cancel one \
             (cancel_{tool}), then retry."
        ),
        JobRuntimeError::ShuttingDown => {
            "The server is shutting down and takes no new jobs. Retry in \
             a moment with the same idempotency_key."
                .to_string()
        }
        JobRuntimeError::Store(err) => format!(
            "Could not record the job ({err}). Retry with the same idempotency_key: if the first \
             attempt was recorded after all, you get that job back."
        ),
        JobRuntimeError::UnknownTool(_) | JobRuntimeError::Config(_) => format!("{e}"),
    };
    CallToolResult::error(text)
}

fn unknown_job(rt: &JobRuntime, tool: &str, id: &str) -> CallToolResult {
    let hours = rt.config().job_ttl.as_secs_f64() / 3600.0;
    CallToolResult::error(format!(
        "No {tool} job with job_id \"{id}\" is known here: it never existed, belongs to another \
         caller, or ended more than {hours:.0} h ago and was deleted. Start a new one with \
         start_{tool} if the work is still needed."
    ))
}

/// The job, if it exists, belongs to this tool and to this caller's owner scope.
async fn visible_job(
    rt: &JobRuntime,
    tool: &str,
    ctx: &Context,
    id: &str,
) -> Result<Option<JobRecord>, ToolError> {
    match rt.get(id).await {
        Ok(Some(j)) if j.tool == tool && rt.visible_to(&j, ctx) => Ok(Some(j)),
        Ok(_) => Ok(None),
        Err(e) => Err(ToolError::Internal(format!("reading the job failed: {e}"))),
    }
}

/// `start_<tool>`.
pub(crate) struct StartFace {
    pub(crate) rt: JobRuntime,
    pub(crate) tool: String,
}

impl ToolHandler for StartFace {
    fn call(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<CallToolResult, ToolError>> {
        let (rt, tool) = (self.rt.clone(), self.tool.clone());
        Box::pin(async move {
            Ok(match create(&rt, &tool, &ctx, args, None).await {
                Ok(s) => {
                    CallToolResult::structured(start_view(&s.job, !s.created, rt.poll_after_ms()))
                }
                Err(e) => start_refusal(&tool, &e),
            })
        })
    }
}

/// `get_<tool>`.
pub(crate) struct GetFace {
    pub(crate) rt: JobRuntime,
    pub(crate) tool: String,
}

impl ToolHandler for GetFace {
    fn call(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<CallToolResult, ToolError>> {
        let (rt, tool) = (self.rt.clone(), self.tool.clone());
        Box::pin(async move {
            let a: JobIdArgs = match decode_args(args) {
                Ok(a) => a,
                Err(m) => return Ok(CallToolResult::error(m)),
            };
            Ok(match visible_job(&rt, &tool, &ctx, &a.job_id).await? {
                Some(job) => CallToolResult::structured(job_view(&job, rt.poll_after_ms())),
                None => unknown_job(&rt, &tool, &a.job_id),
            })
        })
    }
}

/// `cancel_<tool>`.
pub(crate) struct CancelFace {
    pub(crate) rt: JobRuntime,
    pub(crate) tool: String,
}

impl ToolHandler for CancelFace {
    fn call(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<CallToolResult, ToolError>> {
        let (rt, tool) = (self.rt.clone(), self.tool.clone());
        Box::pin(async move {
            let a: JobIdArgs = match decode_args(args) {
                Ok(a) => a,
                Err(m) => return Ok(CallToolResult::error(m)),
            };
            if visible_job(&rt, &tool, &ctx, &a.job_id).await?.is_none() {
                return Ok(unknown_job(&rt, &tool, &a.job_id));
            }
            let by = format!(
                "cancel_{tool} (session {})",
                crate::scope::session_label(&ctx)
            );
            let poll = rt.poll_after_ms();
            let out = rt
                .cancel(&a.job_id, &by)
                .await
                .map_err(|e| ToolError::Internal(format!("cancelling the job failed: {e}")))?;
            Ok(match out {
                CancelOutcome::CancelledQueued(job) => CallToolResult::structured(json!({
                    "job_id": job.id,
                    "status": "cancelled",
                    "next": "The job was cancelled before it started; nothing was done.",
                })),
                CancelOutcome::Requested(job) => CallToolResult::structured(json!({
                    "job_id": job.id,
                    "status": "cancelling",
                    "poll_after_ms": poll,
                    "next": format!(
                        "The job was asked to stop and stops at its next unit of work. Call \
                         get_{tool} with job_id \"{}\" in about {} ms to see it end.",
                        job.id, poll
                    ),
                })),
                CancelOutcome::AlreadyTerminal(job) => CallToolResult::structured(json!({
                    "job_id": job.id,
                    "status": job.state.as_str(),
                    "next": format!(
                        "The job had already ended ({}); there was nothing to cancel. {}",
                        job.state,
                        next_step(&job, poll)
                    ),
                })),
                CancelOutcome::NotFound => unknown_job(&rt, &tool, &a.job_id),
            })
        })
    }
}

/// `<tool>` itself. With a `task` (2025-11-25 tasks) it returns a `CreateTaskResult` at once
/// (see `tasks.rs`). Without one, it runs the job and waits for its result, relaying the
/// job's progress to the request's progress token: the simplest behaviour that is right for
/// every client. The work is still a durable job (a crash ends it `failed(lease_lost)`, never
/// stuck), and a cancel of this request cancels the job it created (a job it merely joined
/// through an idempotency key or dedupe belongs to the call that created it, and is left
/// alone).
pub(crate) struct RunFace {
    pub(crate) rt: JobRuntime,
    pub(crate) tool: String,
}

impl ToolHandler for RunFace {
    fn call(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<CallToolResult, ToolError>> {
        let (rt, tool) = (self.rt.clone(), self.tool.clone());
        Box::pin(async move {
            let sub = match create(&rt, &tool, &ctx, args, None).await {
                Ok(s) => s,
                Err(e) => return Ok(start_refusal(&tool, &e)),
            };
            let id = sub.job.id.clone();
            let stop = ctx.cancellation_token();
            let mut last = None;
            let waited = rt
                .inner
                .wait_for(
                    &id,
                    |j| j.state.is_terminal(),
                    &stop,
                    |j| {
                        if let Some((done, total, message)) = progress_of(j)
                            && last != Some(done)
                        {
                            last = Some(done);
                            ctx.progress(done, total, message);
                        }
                    },
                )
                .await
                .map_err(|e| ToolError::Internal(format!("following the job failed: {e}")))?;
            match waited {
                Waited::Done(job) => Ok(tool_result(&job).unwrap_or_else(|| {
                    CallToolResult::error(format!(
                        "The job {id} was cancelled before it finished, so it has no result. {}",
                        next_step(&job, rt.poll_after_ms())
                    ))
                })),
                Waited::Gone => Ok(unknown_job(&rt, &tool, &id)),
                Waited::Stopped => {
                    // The job outlives this call: stop it only when the client asked (a
                    // cancel, its stream or session closed on purpose). At shutdown or when a
                    // session merely expires it runs on, and `get_<tool>` finds it.
                    let asked = ctx.cancel_reason().is_some_and(|r| r.client_asked());
                    if sub.created && asked {
                        let by = format!(
                            "{tool}: request cancelled (session {})",
                            crate::scope::session_label(&ctx)
                        );
                        if let Err(e) = rt.cancel(&id, &by).await {
                            tracing::warn!(job_id = %id, error = %e, "could not cancel the job of a cancelled request");
                        }
                    }
                    Err(ToolError::Cancelled)
                }
            }
        })
    }

    fn call_as_task(
        &self,
        ctx: Context,
        args: Value,
        task: Value,
    ) -> Option<BoxFuture<'static, Result<Value, ToolError>>> {
        Some(crate::tasks::create_task(
            self.rt.clone(),
            self.tool.clone(),
            ctx,
            args,
            task,
        ))
    }

    fn call_with_tasks(
        &self,
        ctx: Context,
        args: Value,
    ) -> Option<BoxFuture<'static, Result<Value, ToolError>>> {
        // A job tool always answers the extension with a task: the work outlives the stream.
        let (rt, tool) = (self.rt.clone(), self.tool.clone());
        Some(Box::pin(
            async move { rt.start_task(&ctx, &tool, args).await },
        ))
    }
}
