//! The command tools' faces on a server: [`CommandHandler`] answers `tools/call` for the
//! `quick`, `streaming` and `atomic` shapes (the request core applies the shape's cancel and
//! deadline rules; the handler turns them into signals), and [`CommandJob`] is the body of a
//! `job` tool run by staunch-jobs (durable, idempotent, `failed(lease_lost)` after a crash).

use futures_util::future::BoxFuture;
use serde_json::Value;
use staunch_jobs::{JobBody, JobContext, JobError};
use staunch_server::{CallToolResult, Context, ToolError, ToolHandler};
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::runner::Runner;
use crate::verdict::Verdict;

fn removed(name: &str) -> String {
    format!("{name} was removed from the configuration; it can no longer be called")
}

/// `tools/call` of a quick, streaming or atomic command tool.
#[derive(Clone, Debug)]
pub struct CommandHandler {
    pub(crate) name: String,
    pub(crate) catalog: Catalog,
}

impl ToolHandler for CommandHandler {
    fn call(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<CallToolResult, ToolError>> {
        let this = self.clone();
        Box::pin(async move {
            let Some(runner) = this.catalog.get(&this.name) else {
                return Ok(CallToolResult::error(removed(&this.name)));
            };
            let args = match runner.tool.params.validate(&args) {
                Ok(a) => a,
                Err(m) => return Ok(CallToolResult::error(m)),
            };
            let progress_ctx = ctx.clone();
            let sink = Arc::new(move |r: crate::progress_line::Report, _elapsed: bool| {
                progress_ctx.progress(r.progress, r.total, r.message);
            });
            let verdict = runner
                .execute(&args, &[], ctx.cancellation_token(), sink)
                .await;
            match verdict {
                Verdict::Done {
                    text,
                    value,
                    structured,
                } => Ok(if structured {
                    CallToolResult::structured(value)
                } else {
                    CallToolResult::text(text)
                }),
                Verdict::Failed(m) => Ok(CallToolResult::error(m)),
                Verdict::Cancelled => Err(ctx.check().err().unwrap_or(ToolError::Cancelled)),
            }
        })
    }
}

/// The body of a `job` command tool.
#[derive(Clone, Debug)]
pub struct CommandJob {
    pub(crate) name: String,
    pub(crate) catalog: Catalog,
}

impl CommandJob {
    fn runner(&self) -> Result<Arc<Runner>, String> {
        self.catalog
            .get(&self.name)
            .ok_or_else(|| removed(&self.name))
    }
}

impl JobBody for CommandJob {
    fn normalize(&self, args: Value) -> Result<Value, String> {
        let runner = self.runner()?;
        runner.tool.params.validate(&args).map(Value::Object)
    }

    fn run(&self, ctx: JobContext, args: Value) -> BoxFuture<'static, Result<Value, JobError>> {
        let this = self.clone();
        Box::pin(async move {
            let runner = this.runner().map_err(JobError::Failed)?;
            // Stored arguments were validated at start; validating again fills defaults a
            // reload may have added and refuses what a reload made invalid.
            let args = runner
                .tool
                .params
                .validate(&args)
                .map_err(JobError::Failed)?;
            let progress_ctx = ctx.clone();
            let sink = Arc::new(move |r: crate::progress_line::Report, _elapsed: bool| {
                progress_ctx.progress(r.progress, r.total, r.message);
            });
            let extra = [
                ("STAUNCH_JOB_ID", ctx.job_id().to_string()),
                ("STAUNCH_ATTEMPT", ctx.attempt().to_string()),
            ];
            match runner
                .execute(&args, &extra, ctx.cancellation_token(), sink)
                .await
            {
                Verdict::Done { value, .. } => Ok(value),
                Verdict::Failed(m) => Err(JobError::Failed(m)),
                Verdict::Cancelled => Err(JobError::Cancelled),
            }
        })
    }
}
