//! Putting command tools on a server: [`register`] adds each `[[tool]]` with its shape's face
//! (job tools through staunch-jobs: `x`, `start_x`, `get_x`, `cancel_x` and tasks) and returns
//! [`CommandTools`], the handle that reloads them: definitions, and (for the quick, streaming
//! and atomic shapes) the server's tool list itself.

use serde_json::json;
use staunch_jobs::{JobRuntime, JobTool, JobsExt};
use std::collections::HashSet;

use staunch_server::{Server, ServerBuilder, Shape, ToolSpec, ToolUpdate};

use crate::catalog::{Catalog, ReloadReport};
use crate::config::{CommandConfig, CommandTool};
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
    /// The job tools registered at start (the job runtime's tools are fixed while it runs).
    jobs: Vec<String>,
}

impl CommandTools {
    /// The definitions in use.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Swaps in a new configuration (calls in flight keep their definitions and run to their
    /// end). Quick, streaming and atomic tools are added to, replaced on and removed from
    /// `server`'s tool list (which announces `tools/list_changed`); job tools get their new
    /// definitions, but a new job tool, or a shape change to or from `job`, needs a restart —
    /// the report says which.
    pub fn reload(&self, config: &CommandConfig, server: &Server) -> ReloadReport {
        let listed: HashSet<String> = server.tool_names().into_iter().collect();
        let (report, served) = self
            .catalog
            .reload(config, &self.jobs, &|n| listed.contains(n));
        let mut update = ToolUpdate::new();
        for t in &served.put {
            update = update.put(
                request_spec(t),
                CommandHandler {
                    name: t.name.clone(),
                    catalog: self.catalog.clone(),
                },
            );
        }
        for name in served.remove {
            update = update.remove(name);
        }
        if !update.is_empty() {
            server.update_tools(update);
        }
        report
    }
}

/// The declaration of a quick, streaming or atomic command tool.
fn request_spec(t: &CommandTool) -> ToolSpec {
    let mut spec = ToolSpec::new(t.name.clone(), t.shape, t.description.clone())
        .input_schema(t.params.schema())
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
    spec
}

/// Adds `config`'s tools to `builder`. Job tools need `jobs`.
pub fn register(
    mut builder: ServerBuilder,
    config: &CommandConfig,
    jobs: Option<&JobRuntime>,
) -> Result<(ServerBuilder, CommandTools), RegisterError> {
    let catalog = Catalog::new(config);
    let mut job_names = Vec::new();
    for t in &config.tools {
        if t.shape == Shape::Job {
            job_names.push(t.name.clone());
            let schema = t.params.schema();
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
        let spec = request_spec(t);
        builder = builder.tool_handler(
            spec,
            CommandHandler {
                name: t.name.clone(),
                catalog: catalog.clone(),
            },
        );
    }
    Ok((
        builder,
        CommandTools {
            catalog,
            jobs: job_names,
        },
    ))
}
