//! `staunch probe`: its flags, the connection, and the report printed; the checks themselves
//! are the `staunch-probe` crate's.

use std::time::Duration;

use clap::Args;
use serde_json::Value;
use staunch_client::{StderrMode, Target};

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
                       (2025, and 2026 over stdio); WARN when the status tool shows steps
                       after it, or a proxy says its upstream went on
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
    /// The connection: protocol, headers, the started server's stderr.
    #[command(flatten)]
    pub connect: staunch_client::cli::ConnectArgs,
    /// `cancel.stream_close`: how long the slow call runs before its stream is closed.
    #[arg(long, default_value = "500ms", value_parser = crate::args::parse_duration)]
    pub close_after: Duration,
    /// `cancel.stream_close`: the tool that reports a tagged count's side effects
    /// (`{tag}` → `{steps, last_step_unix_ms}`); the slow tool gets the `tag` when its schema
    /// has one.
    #[arg(long, default_value = "slow_count_status")]
    pub status_tool: String,
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
    let base = match serde_json::from_str::<Value>(&args.args) {
        Ok(Value::Object(base)) => base,
        Ok(_) => return usage("--args must be a JSON object"),
        Err(e) => return usage(&format!("--args is not JSON: {e}")),
    };
    let mut opts = args.connect.options();
    opts.client_name = "staunch-probe".into();
    if !args.connect.server_stderr {
        opts.stderr = StderrMode::Null;
    }
    opts.init_timeout = Duration::from_secs(20);
    // Long enough to see a late answer to a cancelled request.
    opts.http.linger_after_cancel = Duration::from_secs(5);
    // What a proxy says about its upstream's work after a cancel comes on the session's
    // standalone stream (it belongs to no request any more).
    opts.http.listen = true;
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
    let options = staunch_probe::Options {
        tool: args.tool,
        args: base,
        steps_arg: args.steps_arg,
        task_tool: args.task_tool,
        concurrent: args.concurrent,
        close_after: args.close_after,
        status_tool: args.status_tool,
    };
    let report = match staunch_probe::run(client, target.describe(), options).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("staunch probe: {e}");
            return Ok(2);
        }
    };
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
