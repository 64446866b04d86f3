//! What to front ([`UpstreamSpec`]): where the upstream is ([`Target`]), the prefix its tools
//! get, and how each tool is shaped ([`ToolRule`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use staunch_command::config::{UpstreamConfig, UpstreamTarget};
use staunch_server::Shape;

/// Where an upstream server is.
#[derive(Debug, Clone)]
pub enum Target {
    /// A command speaking MCP on its stdin/stdout; started (and restarted) by the proxy.
    Stdio {
        /// The program.
        program: OsString,
        /// Its arguments.
        args: Vec<OsString>,
        /// Environment added to the proxy's own.
        env: Vec<(OsString, OsString)>,
        /// Working directory (the proxy's when `None`).
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint (either era).
    Http {
        /// The endpoint URL.
        url: String,
        /// Headers sent with every request (its credentials).
        headers: Vec<(String, String)>,
    },
}

impl Target {
    /// The command line or the URL, for messages.
    pub fn display(&self) -> String {
        match self {
            Target::Stdio { program, args, .. } => std::iter::once(program)
                .chain(args)
                .map(|s| s.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            Target::Http { url, .. } => url.clone(),
        }
    }
}

/// How one upstream tool is served.
#[derive(Debug, Clone, Default)]
pub struct ToolRule {
    /// Its shape; the upstream's default shape when `None`.
    pub shape: Option<Shape>,
    /// Its deadline (the server's default for the shape when `None`).
    pub deadline: Option<Duration>,
    /// Whether running it again is harmless (default false). A `job` whose instance died is
    /// then run again instead of ending `failed(lease_lost)`; any other shape is served with
    /// `idempotentHint`, so a 2025 client's token-less call is answered as plain JSON (it
    /// calls again if the answer is lost) instead of on a stored, resumable stream.
    pub retry_safe: bool,
    /// `job` tools: whether the tool changes anything (default true).
    pub side_effects: Option<bool>,
    /// The stop policy for an upstream that ignores cancels (the upstream's own when `None`):
    /// see [`UpstreamSpec::kill_after_cancel`].
    pub kill_after_cancel: Option<Duration>,
}

/// One upstream server.
#[derive(Debug, Clone)]
pub struct UpstreamSpec {
    /// Its name (logs, errors, the lifecycle log's `upstream` field).
    pub name: String,
    /// Where it is.
    pub target: Target,
    /// Prepended to each of its tool and prompt names (empty: none).
    pub prefix: String,
    /// The shape of tools without a rule.
    pub default_shape: Shape,
    /// Per-tool rules, by the upstream's own tool name.
    pub tools: BTreeMap<String, ToolRule>,
    /// One upstream connection (process) per downstream session instead of one shared.
    pub isolate: bool,
    /// The protocol spoken to it: `auto` (`None`; `server/discover` first, `initialize` when
    /// the upstream does not speak 2026-07-28), a session-era version, or `2026-07-28`.
    /// Validated with [`staunch_client::EraChoice::parse`] when the spec is made.
    pub protocol: Option<String>,
    /// The stop policy, for a command upstream that ignores cancels (`None`: off). Each call
    /// runs in an upstream process of its own — with `isolate`, its session's — and when the
    /// call is cancelled, the process's stdin is closed and, if it is still running after this
    /// grace, its process group is killed; the next call gets a fresh process. A process that
    /// serves another call in flight is never stopped. A rule's own setting wins.
    pub kill_after_cancel: Option<Duration>,
    /// How long a call waits for a 2026-07-28 client's answer to the upstream's question
    /// (elicitation, sampling, roots) asked in the middle of it, before it is cancelled
    /// upstream. A 2025 upstream asks within the call; the client answers in a round of its
    /// own, a new request, and meanwhile the upstream call is parked.
    pub question_wait: Duration,
}

/// [`UpstreamSpec::question_wait`] unless set: a person answering a question takes minutes.
pub const QUESTION_WAIT: Duration = Duration::from_secs(10 * 60);

impl UpstreamSpec {
    /// An upstream with no prefix, tools `quick` unless a rule says otherwise, shared.
    pub fn new(name: impl Into<String>, target: Target) -> Self {
        Self {
            name: name.into(),
            target,
            prefix: String::new(),
            default_shape: Shape::Quick,
            tools: BTreeMap::new(),
            isolate: false,
            protocol: None,
            kill_after_cancel: None,
            question_wait: QUESTION_WAIT,
        }
    }

    /// The rule of the upstream tool `name` (the default when there is none).
    pub fn rule(&self, name: &str) -> ToolRule {
        self.tools.get(name).cloned().unwrap_or_default()
    }

    /// The stop policy's grace for the upstream tool `name`, when the policy applies to it.
    pub fn kill_after_cancel_of(&self, name: &str) -> Option<Duration> {
        self.tools
            .get(name)
            .and_then(|r| r.kill_after_cancel)
            .or(self.kill_after_cancel)
    }

    /// The shape `name` is served with.
    pub fn shape_of(&self, name: &str) -> Shape {
        self.tools
            .get(name)
            .and_then(|r| r.shape)
            .unwrap_or(self.default_shape)
    }
}

/// An `[[upstream]]` of `staunch.toml` as the proxy runs it.
impl From<&UpstreamConfig> for UpstreamSpec {
    fn from(u: &UpstreamConfig) -> Self {
        let target = match &u.target {
            UpstreamTarget::Command { argv, env, cwd } => Target::Stdio {
                program: argv[0].clone().into(),
                args: argv[1..].iter().map(OsString::from).collect(),
                env: env
                    .iter()
                    .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                    .collect(),
                cwd: cwd.clone(),
            },
            UpstreamTarget::Url { url, headers } => Target::Http {
                url: url.clone(),
                headers: headers.clone(),
            },
        };
        let mut spec = UpstreamSpec::new(u.name.clone(), target);
        spec.prefix = u.prefix.clone();
        spec.default_shape = u.default_shape;
        spec.isolate = u.isolate;
        spec.protocol = u.protocol.clone();
        spec.kill_after_cancel = u.kill_after_cancel;
        spec.question_wait = u.question_wait.unwrap_or(QUESTION_WAIT);
        for (name, r) in &u.tools {
            spec.tools.insert(
                name.clone(),
                ToolRule {
                    shape: r.shape,
                    deadline: r.deadline,
                    retry_safe: r.retry_safe,
                    side_effects: r.side_effects,
                    kill_after_cancel: r.kill_after_cancel,
                },
            );
        }
        spec
    }
}
