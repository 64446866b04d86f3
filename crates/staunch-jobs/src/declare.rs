//! Declaring a job tool: [`JobTool`] (name, description, typed body, and how it may be re-run)
//! and the [`JobBody`] trait behind it.
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use serde_json::json;
//! use staunch_jobs::{JobContext, JobError, JobTool};
//!
//! #[derive(Serialize, Deserialize, JsonSchema)]
//! struct ImportArgs {
//!     /// Rows to import.
//!     rows: u32,
//! }
//!
//! let tool = JobTool::new(
//!     "import_rows",
//!     "Imports rows into the warehouse.",
//!     |ctx: JobContext, a: ImportArgs| async move {
//!         for i in 0..a.rows {
//!             ctx.check()?; // stop here once cancelled, before the next write
//!             // … write row i …
//!             ctx.progress(f64::from(i + 1), Some(f64::from(a.rows)), None);
//!         }
//!         Ok::<_, JobError>(json!({"imported": a.rows}))
//!     },
//! )
//! .side_effects(true) // the default
//! .retry_safe(false); // the default: never re-run after a crash
//! assert_eq!(tool.name(), "import_rows");
//! ```

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use staunch_server::{decode_args, schema_of};

use crate::context::JobContext;
use crate::error::JobError;

/// What a job tool runs. Implemented for typed closures by [`JobTool::new`]; implement it
/// yourself for untyped bodies.
pub trait JobBody: Send + Sync + 'static {
    /// Validates the arguments and returns them in canonical form (decoded and encoded again),
    /// or a message naming what is wrong. Called before anything is recorded.
    fn normalize(&self, args: Value) -> Result<Value, String>;

    /// Runs the job. `args` are the normalised arguments as stored.
    fn run(&self, ctx: JobContext, args: Value) -> BoxFuture<'static, Result<Value, JobError>>;
}

struct Typed<A, R, F> {
    f: F,
    _types: PhantomData<fn(A) -> R>,
}

impl<A, R, F, Fut> JobBody for Typed<A, R, F>
where
    A: DeserializeOwned + Serialize + Send + 'static,
    R: Serialize + Send + 'static,
    F: Fn(JobContext, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, JobError>> + Send + 'static,
{
    fn normalize(&self, args: Value) -> Result<Value, String> {
        let a = decode_args::<A>(args)?;
        serde_json::to_value(a).map_err(|e| format!("invalid arguments: {e}"))
    }

    fn run(&self, ctx: JobContext, args: Value) -> BoxFuture<'static, Result<Value, JobError>> {
        match decode_args::<A>(args) {
            Ok(a) => {
                let fut = (self.f)(ctx, a);
                Box::pin(async move {
                    let r = fut.await?;
                    serde_json::to_value(r)
                        .map_err(|e| JobError::failed(format!("the result is not JSON: {e}")))
                })
            }
            // Stored arguments were validated at start; this means the tool's argument type
            // changed under a queued job.
            Err(m) => Box::pin(std::future::ready(Err(JobError::Failed(m)))),
        }
    }
}

/// A job tool's declaration. Register it with [`crate::JobRuntime::register`] (or
/// [`crate::JobsExt::job_tool`]), which adds `start_<name>`, `get_<name>`, `cancel_<name>` and
/// `<name>` itself (task-capable) to the server.
#[derive(Clone)]
pub struct JobTool {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: String,
    pub(crate) input_schema: Value,
    pub(crate) body: Arc<dyn JobBody>,
    pub(crate) side_effects: bool,
    pub(crate) retry_safe: bool,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) max_runtime: Option<Duration>,
    pub(crate) dedupe_inflight: Option<bool>,
    pub(crate) task_required: bool,
}

impl std::fmt::Debug for JobTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobTool")
            .field("name", &self.name)
            .field("side_effects", &self.side_effects)
            .field("retry_safe", &self.retry_safe)
            .finish_non_exhaustive()
    }
}

impl JobTool {
    /// A job tool with typed arguments `A` (their JSON Schema is the tool's input schema) and
    /// a result `R` stored as JSON. By default it has side effects and is never re-run.
    pub fn new<A, R, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        body: F,
    ) -> Self
    where
        A: DeserializeOwned + Serialize + JsonSchema + Send + 'static,
        R: Serialize + Send + 'static,
        F: Fn(JobContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, JobError>> + Send + 'static,
    {
        Self::with_body(
            name,
            description,
            schema_of::<A>(),
            Typed::<A, R, F> {
                f: body,
                _types: PhantomData,
            },
        )
    }

    /// A job tool with a hand-written schema and body.
    pub fn with_body(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        body: impl JobBody,
    ) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema,
            body: Arc::new(body),
            side_effects: true,
            retry_safe: false,
            max_attempts: None,
            max_runtime: None,
            dedupe_inflight: None,
            task_required: false,
        }
    }

    /// Display title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Whether the job changes anything outside itself (default true). Shown to clients as
    /// annotations; side-effecting tools also get in-flight dedupe by default.
    pub fn side_effects(mut self, yes: bool) -> Self {
        self.side_effects = yes;
        self
    }

    /// Whether the job may run again after its worker vanished (default false). A retry-safe
    /// job whose lease expires goes back to the queue (up to its attempts); one that is not
    /// ends `failed(lease_lost)` and is never re-run.
    pub fn retry_safe(mut self, yes: bool) -> Self {
        self.retry_safe = yes;
        self
    }

    /// Attempts of a retry-safe job (default: the runtime's `retry_attempts`).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n.max(1));
        self
    }

    /// This tool's maximum runtime per attempt (default: the runtime's).
    pub fn max_runtime(mut self, d: Duration) -> Self {
        self.max_runtime = Some(d);
        self
    }

    /// Overrides the runtime's in-flight dedupe setting for this tool.
    pub fn dedupe_inflight(mut self, yes: bool) -> Self {
        self.dedupe_inflight = Some(yes);
        self
    }

    /// Whether `tools/call <name>` may only run as a task (`execution.taskSupport:
    /// "required"`): a stateless client without the tasks extension gets -32021, a session
    /// without a `task` param -32601. By default it also runs (and waits) as a plain call.
    pub fn task_required(mut self, yes: bool) -> Self {
        self.task_required = yes;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Attempts allowed for one job of this tool.
    pub(crate) fn attempts(&self, default_retry: u32) -> u32 {
        if self.retry_safe {
            self.max_attempts.unwrap_or(default_retry)
        } else {
            1
        }
    }
}
