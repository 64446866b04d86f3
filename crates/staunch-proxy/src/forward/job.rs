//! `job`-shaped upstream tools: the forwarded call as a durable job's body.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use staunch_client::Progress;
use staunch_jobs::{JobBody, JobContext, JobError};

use super::{Call, Outcome, forward};
use crate::pool::Pool;
use crate::tool_result::{content_text, forwarded_result};

/// A `job`-shaped upstream tool: the upstream call is the job's body, so it is durable,
/// idempotent under its key, cancelled by `cancel_x` (which cancels the upstream request) and
/// `failed(lease_lost)` if the proxy dies mid-call.
#[derive(Clone, Debug)]
pub struct UpstreamJob {
    pool: Arc<Pool>,
    tool: Arc<str>,
    as_task: bool,
}

impl UpstreamJob {
    /// Runs `tool` on `pool`'s upstream as a job body.
    pub fn new(pool: Arc<Pool>, tool: &str) -> Self {
        Self {
            pool,
            tool: tool.into(),
            as_task: false,
        }
    }

    /// Calls it as an upstream task, followed to its end (see [`super::ForwardTool::as_task`]).
    pub fn as_task(mut self, yes: bool) -> Self {
        self.as_task = yes;
        self
    }
}

impl JobBody for UpstreamJob {
    fn normalize(&self, args: Value) -> Result<Value, String> {
        // The upstream validates its own arguments; the proxy only insists on an object, so
        // the idempotency fingerprint is over what the upstream will see.
        match args {
            Value::Object(_) => Ok(args),
            Value::Null => Ok(json!({})),
            _ => Err("arguments must be a JSON object".into()),
        }
    }

    fn run(&self, ctx: JobContext, args: Value) -> BoxFuture<'static, Result<Value, JobError>> {
        let this = self.clone();
        Box::pin(async move {
            let progress_ctx = ctx.clone();
            let call = Call {
                tool: &this.tool,
                args,
                ctx: None,
                meta: None,
                progress: true,
                cancel: ctx.cancellation_token(),
                as_task: this.as_task,
            };
            let outcome = forward(&this.pool, call, move |p: &Progress| {
                progress_ctx.progress(p.progress, p.total, p.message.clone())
            })
            .await;
            match outcome {
                Outcome::Answered(v) => {
                    let result =
                        forwarded_result(v).map_err(|e| JobError::Failed(e.to_string()))?;
                    let mut result_value = result.to_value();
                    if result.is_error() {
                        return Err(JobError::Failed(content_text(&result_value)));
                    }
                    let result = &mut result_value;
                    Ok(match result.get_mut("structuredContent") {
                        Some(structured) => structured.take(),
                        None => json!({"content": result["content"].take()}),
                    })
                }
                Outcome::Refused(e) => Err(JobError::Failed(format!(
                    "the upstream refused the call: {} ({})",
                    e.message, e.code
                ))),
                Outcome::Cancelled => Err(JobError::Cancelled),
                Outcome::Asked(e) => Err(JobError::Failed(e.to_string())),
                Outcome::Failed(m) => Err(JobError::Failed(m)),
                // A job has no client to ask (no request): never parked.
                Outcome::Parked(_) => Err(JobError::Failed("a job cannot ask a client".into())),
            }
        })
    }
}
