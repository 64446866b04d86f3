//! The validated configuration: what the supervisor and the tool adapter run from. Built only
//! by [`super::load`] / [`super::parse`], so every value here has been checked.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use staunch_server::Shape;

use crate::params::Params;
use crate::template::ArgTemplate;

/// A loaded `staunch.toml`.
#[derive(Debug, Clone)]
pub struct CommandConfig {
    /// The file it came from.
    pub path: PathBuf,
    /// `[serve]`.
    pub serve: super::ServeSettings,
    /// The `[[tool]]`s, in file order.
    pub tools: Vec<Arc<CommandTool>>,
    /// The `[[upstream]]`s (servers `staunch proxy` fronts), in file order.
    pub upstreams: Vec<super::UpstreamConfig>,
}

impl CommandConfig {
    /// Whether a tool is shaped `job` (then the server needs the job runtime and its store).
    pub fn has_job_tools(&self) -> bool {
        self.tools
            .iter()
            .any(|t| t.shape == staunch_server::Shape::Job)
    }
}

/// What becomes the tool's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultMode {
    /// Standard output as text.
    Text,
    /// Standard output parsed as one JSON object (structured content).
    Json,
    /// The content of a file the command wrote (its path a template).
    File(ArgTemplate),
}

/// What happens when standard output passes `max_stdout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Keep the first `max_stdout` bytes, discard the rest (the command runs on), say so in the
    /// result.
    Truncate,
    /// Stop the command (its whole process group) and fail the call.
    Fail,
}

/// The command's environment: it starts empty, then gets these.
#[derive(Debug, Clone, Default)]
pub struct EnvPolicy {
    /// Passed through from staunch's environment when set there.
    pub allow: Vec<String>,
    /// Fixed values.
    pub set: Vec<(String, String)>,
    /// (name in the command, name in staunch's environment). Read at each spawn; never logged.
    pub secrets: Vec<(String, String)>,
}

/// Variables every command gets from staunch's environment when they are set there.
pub const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER"];

/// Output limits.
#[derive(Debug, Clone, Copy)]
pub struct OutputLimits {
    /// Bytes of standard output kept (`max_stdout`).
    pub max_stdout: u64,
    /// What happens past `max_stdout` (`stdout_overflow`).
    pub overflow: Overflow,
    /// Bytes of the end of standard error kept for failure messages.
    pub stderr_tail: u64,
    /// Largest result file read, in bytes (`result = "file"`).
    pub max_result: u64,
}

/// One command tool.
#[derive(Debug, Clone)]
pub struct CommandTool {
    /// The tool's name in `tools/list`; a job tool also gets `start_`, `get_` and `cancel_` tools.
    pub name: String,
    /// A human-readable title shown to clients.
    pub title: Option<String>,
    /// What the tool does, for the model choosing it.
    pub description: String,
    /// How calls are served: quick (the default), streaming, job or atomic.
    pub shape: Shape,
    /// Absolute path of the program (found at load time).
    pub program: PathBuf,
    /// The argument vector after the program, one template per element.
    pub args: Vec<ArgTemplate>,
    /// Working directory (absolute).
    pub cwd: PathBuf,
    /// The command's environment.
    pub env: EnvPolicy,
    /// The input the tool takes; every call is validated against it before anything runs.
    pub params: Params,
    /// Deadline (quick, streaming, atomic) or maximum runtime per attempt (job).
    pub deadline: Option<Duration>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Bounds on what is kept of the command's output.
    pub limits: OutputLimits,
    /// Calls of this tool running at once (more wait).
    pub concurrency: usize,
    /// Running it again is harmless: shown as `idempotentHint`, and a job may run again after its
    /// worker vanished.
    pub retry_safe: bool,
    /// Changes something outside itself (default true for job and atomic tools); shown to
    /// clients as `readOnlyHint: false`.
    pub side_effects: bool,
    /// Job tools: attempts in all, 1 to 100, retry-safe tools only (the runtime's default when
    /// None).
    pub max_attempts: Option<u32>,
    /// Job tools: overrides the runtime's in-flight dedupe.
    pub dedupe_inflight: Option<bool>,
    /// What becomes the call's result.
    pub result: ResultMode,
    /// How often elapsed-time progress goes out while the command reports none.
    pub elapsed_progress: Option<Duration>,
    /// Exit codes that mean success (default `[0]`).
    pub ok_exit_codes: Vec<i32>,
}

impl CommandTool {
    /// The flag a boolean parameter stands for, if it has one.
    pub fn flag_of(&self, name: &str) -> Option<String> {
        match &self.params {
            Params::Typed(ps) => ps.iter().find(|p| p.name == name)?.flag.clone(),
            Params::Schema(_) => None,
        }
    }
}
