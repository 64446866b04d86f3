//! `staunch probe`: black-box checks of any MCP server, over stdio or Streamable HTTP.
//!
//! The official conformance suite never cancels anything. These checks do, with a slow tool
//! the server already has (`--tool`, `--args`, `--steps-arg`), and report what a client would
//! live with: does a cancel stop the work (progress stops) and get no answer, does the loop
//! stay responsive while tools run, are progress rules kept, does a dropped HTTP stream lose
//! the result, are sessions and Origin guarded, does `tasks/cancel` stop a task. Every wait is
//! bounded; a run takes seconds.

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

use anyhow::Context as _;
use clap::Args;
use serde_json::{Map, Value, json};
use staunch_client::{
    Client, ClientError, ConnectOptions, Era, EraChoice, HttpOptions, PendingRequest, StderrMode,
};
use tokio::time::Instant;

pub use report::{Check, ProbeReport, Status};

use crate::call::Target;

const HELP: &str = "\
Examples:
  staunch probe -- staunch serve
  staunch probe http://127.0.0.1:8080/mcp
  staunch probe --tool my_slow_tool --steps-arg n -- python my_server.py
  staunch probe --json --protocol 2025-11-25 http://127.0.0.1:8080/mcp

Protocol: by default server/discover (2026-07-28) is tried first and initialize (2025) when
the server does not speak 2026; --protocol forces one. Run it once per era to compare.

Checks (each PASS, WARN, FAIL or SKIP, with the evidence):
  initialize | discover the handshake; server name, version, protocol (and why discover was
                       not used, when the probe fell back to initialize)
  progress.token       with a progressToken: progress strictly increasing, none after the
                       result; rate in notifications/s
  progress.no_token    without a progressToken: no progress at all
  cancel.routed        after notifications/cancelled, does progress stop, and how fast
                       (2025, and 2026 over stdio)
  cancel.no_response   a cancelled request gets no response (same)
  cancel.stream_close  (HTTP, 2026-07-28) close a slow call's stream after --close-after: does
                       the work stop? Progress after the close, and side effects read with
                       --status-tool {tag} (slow_count_status): steps after the close, time
                       from the close to the last step; unknown without that tool
  responsiveness       ping (2026: server/discover) and tools/list latency while several slow
                       calls run
  http.resume          (HTTP, 2025-11-25) drop the stream mid-call: does the work go on, and
                       does GET with Last-Event-ID deliver the result
  http.unknown_session (HTTP, 2025) 404;  http.missing_session 400;  http.bad_origin 403
  tasks.cancel         (if tasks are advertised) does tasks/cancel stop the work

The slow tool must take a step count (--steps-arg) and report progress per step when asked;
staunch's slow_count {steps, delay_ms} and the SDK peers' slow_count do.

Exit status:
  0  no check failed
  1  at least one check failed
  2  usage error, or the server cannot be reached";

/// Options of `staunch probe`.
#[derive(Debug, Args)]
#[command(after_help = HELP)]
pub struct ProbeArgs {
    /// The server's Streamable HTTP URL (or give the server command after `--`).
    pub url: Option<String>,
    /// The server to spawn over stdio, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// The slow tool to call.
    #[arg(long, default_value = "slow_count")]
    pub tool: String,
    /// Its arguments, a JSON object; the steps argument is set by each check.
    #[arg(long, default_value = r#"{"steps":20,"delay_ms":50}"#)]
    pub args: String,
    /// The integer argument that sets how long a call runs (in steps).
    #[arg(long, default_value = "steps")]
    pub steps_arg: String,
    /// A tool to run as a task for `tasks.cancel` (default: the slow tool, or `<tool>_task`,
    /// when its taskSupport allows tasks).
    #[arg(long)]
    pub task_tool: Option<String>,
    /// Slow calls in flight during the responsiveness check.
    #[arg(long, default_value_t = 4)]
    pub concurrent: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Show a spawned server's stderr.
    #[arg(long)]
    pub server_stderr: bool,
    /// An HTTP header for every request (`Name: value`), e.g. Authorization.
    #[arg(long = "header", value_parser = crate::args::parse_header)]
    pub headers: Vec<(String, String)>,
    /// The protocol: `auto` (server/discover, then initialize), `2026-07-28`, or a 2025
    /// version (`2025-11-25`, `2025-06-18`, `2025-03-26`).
    #[arg(long, default_value = "auto", value_parser = crate::args::parse_protocol)]
    pub protocol: (EraChoice, Option<String>),
    /// `cancel.stream_close`: how long the slow call runs before its stream is closed.
    #[arg(long, default_value = "500ms", value_parser = crate::args::parse_duration)]
    pub close_after: Duration,
    /// `cancel.stream_close`: the tool that reports a tagged count's side effects
    /// (`{tag}` → `{steps, last_step_unix_ms}`); the slow tool gets the `tag` when its schema
    /// has one.
    #[arg(long, default_value = "slow_count_status")]
    pub status_tool: String,
}

/// What the checks share.
pub struct Probe {
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
    pub fn arguments(&self, steps: u64) -> Value {
        let mut a = self.base.clone();
        a.insert(self.steps_arg.clone(), json!(steps));
        Value::Object(a)
    }

    /// Starts a call of the slow tool.
    pub fn start_call(&self, steps: u64, progress: bool) -> Result<PendingRequest, ClientError> {
        self.client.start_request(
            "tools/call",
            Some(json!({"name": self.tool, "arguments": self.arguments(steps)})),
            progress,
        )
    }

    /// Steps for a call that runs about `d`, within `[min, max]`.
    pub fn steps_for(&self, d: Duration, min: u64, max: u64) -> u64 {
        let per = self.step.as_secs_f64().max(0.000_5);
        ((d.as_secs_f64() / per).ceil() as u64).clamp(min, max)
    }

    /// Steps for a call that would run about a minute: long enough that a server which
    /// ignores the cancel is visibly still working, short enough not to run for ever.
    pub fn long_steps(&self) -> u64 {
        self.steps_for(Duration::from_secs(60), 100, 1_000_000)
    }

    /// A tool's `execution.taskSupport`.
    pub fn task_support(&self, name: &str) -> Option<&str> {
        self.tools
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t.pointer("/execution/taskSupport"))
            .and_then(Value::as_str)
    }

    pub fn has_tool(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t["name"] == name)
    }

    /// Whether a tool's input schema names `arg`.
    pub fn takes_arg(&self, tool: &str, arg: &str) -> bool {
        self.tools
            .iter()
            .find(|t| t["name"] == tool)
            .and_then(|t| t.pointer("/inputSchema/properties"))
            .is_some_and(|p| p.get(arg).is_some())
    }

    /// The era the probe speaks to this server.
    pub fn era(&self) -> Era {
        self.client.era()
    }

    /// The cheapest request that proves the loop answers: `ping`, which the stateless era
    /// removed, or `server/discover` there.
    pub fn ping_method(&self) -> &'static str {
        match self.era() {
            Era::Session => "ping",
            Era::Stateless => staunch_client::DISCOVER,
        }
    }

    /// Whether a cancel closes the request's HTTP stream (2026-07-28 over HTTP) rather than
    /// sending `notifications/cancelled`.
    pub fn cancels_by_closing(&self) -> bool {
        self.era() == Era::Stateless && self.client.http_endpoint().is_some()
    }
}

pub async fn run(args: ProbeArgs) -> anyhow::Result<i32> {
    let target = match (&args.url, args.command.is_empty()) {
        (Some(u), true) => Target::Http(u.clone()),
        (None, false) => match staunch_client::StdioCommand::from_argv(&args.command) {
            Some(c) => Target::Stdio(c),
            None => return usage("empty command"),
        },
        (Some(_), false) => return usage("give a URL or a command after `--`, not both"),
        (None, true) => return usage("give the server's URL, or its command after `--`"),
    };
    let base: Value = match serde_json::from_str(&args.args).context("--args is not JSON") {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return usage("--args must be a JSON object"),
        Err(e) => return usage(&format!("{e:#}")),
    };
    let Value::Object(base) = base else {
        return usage("--args must be a JSON object");
    };
    let started = Instant::now();
    let transport = match target {
        Target::Http(_) => "Streamable HTTP",
        Target::Stdio(_) => "stdio",
    };
    let mut report = ProbeReport::new(target.describe(), transport);
    let (era, session_version) = args.protocol.clone();
    let mut opts = ConnectOptions {
        era,
        client_name: "staunch-probe".into(),
        stderr: if args.server_stderr {
            StderrMode::Inherit
        } else {
            StderrMode::Null
        },
        init_timeout: Duration::from_secs(20),
        http: HttpOptions {
            // Long enough to see a late answer to a cancelled request.
            linger_after_cancel: Duration::from_secs(5),
            headers: args.headers.clone(),
            ..HttpOptions::default()
        },
        ..ConnectOptions::default()
    };
    if let Some(v) = session_version {
        opts.protocol_version = v;
    }
    let client = match target.connect(&opts).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "staunch probe: cannot connect to {}: {e}",
                target.describe()
            );
            return Ok(2);
        }
    };
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
    let step = base
        .get("delay_ms")
        .and_then(Value::as_u64)
        .map_or(Duration::from_millis(50), Duration::from_millis);
    let mut probe = Probe {
        client,
        tool: args.tool.clone(),
        base,
        steps_arg: args.steps_arg.clone(),
        step,
        tools,
        task_tool: args.task_tool.clone(),
        concurrent: args.concurrent.clamp(1, 64),
        close_after: args.close_after,
        status_tool: args.status_tool.clone(),
    };
    if !probe.tools.is_empty() && !probe.has_tool(&probe.tool) {
        eprintln!(
            "staunch probe: the server has no tool {:?} (use --tool; it has: {})",
            probe.tool,
            probe
                .tools
                .iter()
                .filter_map(|t| t["name"].as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        probe.client.close().await;
        return Ok(2);
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
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_table());
    }
    Ok(if report.failed() { 1 } else { 0 })
}

fn usage(msg: &str) -> anyhow::Result<i32> {
    eprintln!("staunch probe: {msg}\n(see staunch probe --help)");
    Ok(2)
}
