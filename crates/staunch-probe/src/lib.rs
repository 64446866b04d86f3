//! `staunch probe`: black-box checks of any MCP server, over stdio or Streamable HTTP.
//!
//! The official conformance suite never cancels anything. These checks do, with a slow tool
//! the server already has (`--tool`, `--args`, `--steps-arg`), and report what a client would
//! live with: does a cancel stop the work (progress stops) and get no answer, does the loop
//! stay responsive while tools run, are progress rules kept, does a dropped HTTP stream lose
//! the result, are sessions and Origin guarded, does `tasks/cancel` stop a task. Every wait is
//! bounded; a run takes seconds.
//!
//! [`run`] takes a connected [`Client`] and the [`Options`] of the slow tool, and returns a
//! [`ProbeReport`]: one [`Check`] per concern, each PASS, WARN, FAIL or SKIP with its
//! evidence. The command line (`staunch probe`) parses flags, connects and prints the report.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
mod cancel;
mod close;
mod http;
mod load;
mod progress;
mod report;
mod status;
mod tasks;
mod watch;

use std::time::Duration;

use serde_json::{Map, Value, json};
use staunch_client::era::Era;
use staunch_client::{Client, ClientError, PendingRequest};
use tokio::time::Instant;

pub use report::{Check, ProbeReport, Status};

/// What the checks share.
struct Probe {
    pub client: Client,
    pub tool: String,
    pub base: Map<String, Value>,
    pub steps_arg: String,
    /// Time per step: estimated from `delay_ms` until `progress.token` measures it.
    pub step: Duration,
    pub tools: Vec<Value>,
    pub task_tool: Option<String>,
    pub concurrent: usize,
    pub close_after: Duration,
    pub status_tool: String,
}

impl Probe {
    /// Arguments for a call of `steps` steps.
    pub(crate) fn arguments(&self, steps: u64) -> Value {
        let mut a = self.base.clone();
        a.insert(self.steps_arg.clone(), json!(steps));
        Value::Object(a)
    }

    /// Starts a call of the slow tool.
    pub(crate) fn start_call(
        &self,
        steps: u64,
        progress: bool,
    ) -> Result<PendingRequest, ClientError> {
        self.client.start_request(
            "tools/call",
            Some(json!({"name": self.tool, "arguments": self.arguments(steps)})),
            progress,
        )
    }

    /// Steps for a call that runs about `d`, within `[min, max]`.
    pub(crate) fn steps_for(&self, d: Duration, min: u64, max: u64) -> u64 {
        let per = self.step.as_secs_f64().max(0.000_5);
        ((d.as_secs_f64() / per).ceil() as u64).clamp(min, max)
    }

    /// Steps for a call that would run about a minute: long enough that a server which
    /// ignores the cancel is visibly still working, short enough not to run for ever.
    pub(crate) fn long_steps(&self) -> u64 {
        self.steps_for(Duration::from_secs(60), 100, 1_000_000)
    }

    /// A tool's `execution.taskSupport`.
    pub(crate) fn task_support(&self, name: &str) -> Option<&str> {
        self.tools
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t.pointer("/execution/taskSupport"))
            .and_then(Value::as_str)
    }

    pub(crate) fn has_tool(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t["name"] == name)
    }

    /// Whether a tool's input schema names `arg`.
    pub(crate) fn takes_arg(&self, tool: &str, arg: &str) -> bool {
        self.tools
            .iter()
            .find(|t| t["name"] == tool)
            .and_then(|t| t.pointer("/inputSchema/properties"))
            .is_some_and(|p| p.get(arg).is_some())
    }

    /// The era the probe speaks to this server.
    pub(crate) fn era(&self) -> Era {
        self.client.era()
    }

    /// The cheapest request that proves the loop answers: `ping`, which the stateless era
    /// removed, or `server/discover` there.
    pub(crate) fn ping_method(&self) -> &'static str {
        match self.era() {
            Era::Session => "ping",
            Era::Stateless => staunch_client::DISCOVER,
        }
    }

    /// Whether a cancel closes the request's HTTP stream (2026-07-28 over HTTP) rather than
    /// sending `notifications/cancelled`.
    pub(crate) fn cancels_by_closing(&self) -> bool {
        self.era() == Era::Stateless && self.client.http_endpoint().is_some()
    }
}

/// The slow tool the checks call, and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The slow tool to call.
    pub tool: String,
    /// Its arguments; the steps argument is set by each check.
    pub args: Map<String, Value>,
    /// The integer argument that sets how long a call runs (in steps).
    pub steps_arg: String,
    /// A tool to run as a task for `tasks.cancel` (default: the slow tool, or `<tool>_task`,
    /// when its taskSupport allows tasks).
    pub task_tool: Option<String>,
    /// Slow calls in flight during the responsiveness check (kept within 1..=64).
    pub concurrent: usize,
    /// `cancel.stream_close`: how long the slow call runs before its stream is closed.
    pub close_after: Duration,
    /// `cancel.stream_close`: the tool that reports a tagged count's side effects.
    pub status_tool: String,
}

impl Default for Options {
    fn default() -> Self {
        let Value::Object(args) = json!({"steps": 20, "delay_ms": 50}) else {
            unreachable!("a JSON object literal")
        };
        Self {
            tool: "slow_count".into(),
            args,
            steps_arg: "steps".into(),
            task_tool: None,
            concurrent: 4,
            close_after: Duration::from_millis(500),
            status_tool: "slow_count_status".into(),
        }
    }
}

/// Why the checks could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The server lists tools, and the slow tool is not among them.
    #[error("the server has no tool {tool:?} (use --tool; it has: {})", .available.join(", "))]
    UnknownTool {
        /// The tool asked for.
        tool: String,
        /// The tools the server lists.
        available: Vec<String>,
    },
}

/// Runs every check against a connected server and closes the client. `target` names the
/// server in the report (its URL or command line).
pub async fn run(
    client: Client,
    target: String,
    options: Options,
) -> Result<ProbeReport, ProbeError> {
    let started = Instant::now();
    let transport = if client.http_endpoint().is_some() {
        "Streamable HTTP"
    } else {
        "stdio"
    };
    let mut report = ProbeReport::new(target, transport);
    let info = client.server().clone();
    report.server = json!({
        "name": info.name, "version": info.version,
        "protocol_version": info.protocol_version, "capabilities": info.capabilities,
        "era": info.era.as_str(), "supported_versions": info.supported_versions,
        "discover_fallback": info.fallback,
    });
    let caps: Vec<&str> = info
        .capabilities
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let handshake = match info.era {
        Era::Session => "initialize",
        Era::Stateless => "discover",
    };
    let mut evidence = format!(
        "{} {}, protocol {}, capabilities: {}",
        info.name,
        info.version,
        info.protocol_version,
        if caps.is_empty() {
            "none".to_string()
        } else {
            caps.join(", ")
        }
    );
    if let Some(why) = &info.fallback {
        evidence.push_str(&format!(" (no 2026-07-28: {why})"));
    }
    report.push(Check::new(
        handshake,
        Status::Pass,
        evidence,
        report.server.clone(),
    ));
    let tools = client
        .list_tools(&staunch_client::CallOptions::default().timeout(Duration::from_secs(10)))
        .await
        .unwrap_or_default();
    let step = options
        .args
        .get("delay_ms")
        .and_then(Value::as_u64)
        .map_or(Duration::from_millis(50), Duration::from_millis);
    let mut probe = Probe {
        client,
        tool: options.tool,
        base: options.args,
        steps_arg: options.steps_arg,
        step,
        tools,
        task_tool: options.task_tool,
        concurrent: options.concurrent.clamp(1, 64),
        close_after: options.close_after,
        status_tool: options.status_tool,
    };
    if !probe.tools.is_empty() && !probe.has_tool(&probe.tool) {
        let available = probe
            .tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        probe.client.close().await;
        return Err(ProbeError::UnknownTool {
            tool: probe.tool,
            available,
        });
    }

    report.push(progress::with_token(&mut probe).await);
    report.push(progress::without_token(&probe).await);
    if probe.cancels_by_closing() {
        report.push(close::stream_close(&probe).await);
    } else {
        for c in cancel::checks(&probe).await {
            report.push(c);
        }
    }
    report.push(load::responsiveness(&probe).await);
    if probe.client.http_endpoint().is_some() {
        report.push(http::resume(&probe).await);
        for c in http::guards(&probe).await {
            report.push(c);
        }
    }
    report.push(tasks::cancel(&probe).await);
    probe.client.close().await;
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}
