//! The validated configuration: what the supervisor and the tool adapter run from. Built only
//! by [`super::load`] / [`super::parse`], so every value here has been checked.

use std::net::SocketAddr;
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
    pub serve: ServeSettings,
    /// The `[[tool]]`s, in file order.
    pub tools: Vec<Arc<CommandTool>>,
    /// The `[[upstream]]`s (servers `staunch proxy` fronts), in file order.
    pub upstreams: Vec<super::UpstreamConfig>,
}

/// `[serve]`: defaults for `staunch serve`'s flags (a flag given explicitly wins).
#[derive(Debug, Clone, Default)]
pub struct ServeSettings {
    pub http: Option<SocketAddr>,
    pub store: Option<String>,
    pub store_schema: Option<String>,
    pub instance_name: Option<String>,
    pub log_file: Option<PathBuf>,
    pub no_log: Option<bool>,
    /// Serve the demo tools next to the command tools (default false with a config file).
    pub demo_tools: Option<bool>,
    pub max_in_flight: Option<usize>,
    pub endpoint: Option<String>,
    pub allow_hosts: Option<Vec<String>>,
    pub job_workers: Option<usize>,
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
    pub max_stdout: u64,
    pub overflow: Overflow,
    pub stderr_tail: u64,
    pub max_result: u64,
}

/// One command tool.
#[derive(Debug, Clone)]
pub struct CommandTool {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub shape: Shape,
    /// Absolute path of the program (found at load time).
    pub program: PathBuf,
    pub args: Vec<ArgTemplate>,
    /// Working directory (absolute).
    pub cwd: PathBuf,
    pub env: EnvPolicy,
    pub params: Params,
    /// Deadline (quick, streaming, atomic) or maximum runtime per attempt (job).
    pub deadline: Option<Duration>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    pub limits: OutputLimits,
    /// Calls of this tool running at once (more wait).
    pub concurrency: usize,
    pub retry_safe: bool,
    pub side_effects: bool,
    pub max_attempts: Option<u32>,
    pub dedupe_inflight: Option<bool>,
    pub result: ResultMode,
    /// How often elapsed-time progress goes out while the command reports none.
    pub elapsed_progress: Option<Duration>,
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
