//! Putting command tools on a server: [`register`] adds each `[[tool]]` with its shape's face
//! (job tools through staunch-jobs: `x`, `start_x`, `get_x`, `cancel_x` and tasks) and returns
//! [`CommandTools`], the handle that reloads their definitions.

use serde_json::json;
use staunch_jobs::{JobRuntime, JobTool, JobsExt};
use staunch_server::{ServerBuilder, Shape, ToolSpec};

use crate::catalog::{Catalog, ReloadReport};
use crate::config::CommandConfig;
use crate::handler::{CommandHandler, CommandJob};

/// Why command tools could not be put on a server.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// A job tool needs the job runtime (and its store).
    #[error("the job tool {0:?} needs a job runtime (a store); none was given")]
    NoJobRuntime(String),
}

/// The command tools of one server.
#[derive(Clone, Debug)]
pub struct CommandTools {
    catalog: Catalog,
    served: Vec<String>,
}

impl CommandTools {
    /// The definitions in use.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Swaps in a new configuration's definitions (calls in flight keep theirs). What
    /// `tools/list` shows does not change — staunch-server builds its tool table once — so no
    /// `tools/list_changed` is announced; the report lists what needs a restart.
    pub fn reload(&self, config: &CommandConfig) -> ReloadReport {
        self.catalog.reload(config, &self.served)
    }
}

/// Adds `config`'s tools to `builder`. Job tools need `jobs`.
pub fn register(
    mut builder: ServerBuilder,
    config: &CommandConfig,
    jobs: Option<&JobRuntime>,
) -> Result<(ServerBuilder, CommandTools), RegisterError> {
    let catalog = Catalog::new(config);
    let mut served = Vec::new();
    for t in &config.tools {
        served.push(t.name.clone());
        let schema = t.params.schema();
        if t.shape == Shape::Job {
            let rt = jobs.ok_or_else(|| RegisterError::NoJobRuntime(t.name.clone()))?;
            let body = CommandJob {
                name: t.name.clone(),
                catalog: catalog.clone(),
            };
            let mut job = JobTool::with_body(t.name.clone(), t.description.clone(), schema, body)
                .side_effects(t.side_effects)
                .retry_safe(t.retry_safe);
            if let Some(title) = &t.title {
                job = job.title(title.clone());
            }
            if let Some(n) = t.max_attempts {
                job = job.max_attempts(n);
            }
            if let Some(d) = t.deadline {
                job = job.max_runtime(d);
            }
            if let Some(d) = t.dedupe_inflight {
                job = job.dedupe_inflight(d);
            }
            builder = builder.job_tool(rt, job);
            continue;
        }
        let mut spec = ToolSpec::new(t.name.clone(), t.shape, t.description.clone())
            .input_schema(schema)
            .annotations(json!({
                "readOnlyHint": !t.side_effects,
                "idempotentHint": t.retry_safe,
            }));
        if let Some(title) = &t.title {
            spec = spec.title(title.clone());
        }
        if let Some(d) = t.deadline {
            spec = spec.deadline(d);
        }
        builder = builder.tool_handler(
            spec,
            CommandHandler {
                name: t.name.clone(),
                catalog: catalog.clone(),
            },
        );
    }
    Ok((builder, CommandTools { catalog, served }))
}
