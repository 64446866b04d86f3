//! `staunch call <target> <tool> [args…]`: call one tool on any MCP server, the way a client
//! should — progress shown live, a timeout that cancels on the wire, a ceiling progress cannot
//! extend, Ctrl-C that cancels, job tools and tasks followed to the end.

use std::time::Duration;

use clap::Args;
use serde_json::Value;
use staunch_client::input::{InputRequests, InputResponses};
use staunch_client::jobs::{JobEvent, JobOptions, job_tool_names};
use staunch_client::result::{is_tool_error, text_of};
use staunch_client::tasks::{TaskEvent, TaskOptions, TaskOutcome};
use staunch_client::{CallOptions, Client, ClientError, Target};
use tokio_util::sync::CancellationToken;

use staunch_client::cli::view::View;

/// The tool succeeded.
pub const EXIT_OK: i32 = 0;
/// The tool reported an error, or the job/task failed.
pub const EXIT_TOOL_ERROR: i32 = 1;
/// Bad usage, or the server could not be reached or misbehaved.
pub const EXIT_USAGE: i32 = 2;
/// The timeout or the ceiling expired (same code as `timeout(1)`).
pub const EXIT_TIMEOUT: i32 = 124;
/// Interrupted by Ctrl-C (128 + SIGINT).
pub const EXIT_INTERRUPTED: i32 = 130;

const EXAMPLES_AND_EXIT: &str = "\
Examples:
  staunch call http://127.0.0.1:8080/mcp slow_count steps=20 delay_ms=100
  staunch call --timeout 5s slow_count '{\"steps\":20}' -- staunch serve
  staunch call start_import_rows rows=100 -- staunch serve      (a job: polled to the end)
  staunch call --task slow_count_task steps=10 -- node server.mjs stdio
  staunch call --protocol 2026-07-28 -v http://127.0.0.1:8080/mcp echo text=hi
  staunch call --input user_name='{\"action\":\"accept\",\"content\":{\"name\":\"Ada\"}}' \\
      http://127.0.0.1:8080/mcp test_input_required_result_elicitation

Protocol: by default `server/discover` (2026-07-28) is tried first and
`initialize` (2025) is used when the server does not speak 2026; --protocol forces one. In
2026 a timeout or Ctrl-C closes the request's HTTP stream (the 2026 cancel); over stdio and in
2025 it sends notifications/cancelled.

Exit status:
  0    the tool succeeded (the job succeeded, the task completed)
  1    the tool reported an error (isError), or the job/task failed or was cancelled
  2    usage error (an unknown tool too: the server's tools are listed), or the server
       could not be reached or broke the protocol
  124  --timeout (without progress) or --max-total expired; the call was cancelled on the wire
  130  interrupted (Ctrl-C); the call, job or task was cancelled on the wire";

/// Options of `staunch call`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES_AND_EXIT)]
pub struct CallArgs {
    /// `URL TOOL [ARGS…]`, or `TOOL [ARGS…]` when the server command follows `--`. ARGS is one
    /// JSON object or `key=value` pairs (values read as JSON when they parse, else strings).
    #[arg(required = true, value_name = "TARGET TOOL ARGS")]
    pub words: Vec<String>,
    /// The server to spawn over stdio, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Give up (and cancel) after this long without an answer or progress.
    #[arg(long, default_value = "60s", value_parser = crate::args::parse_duration)]
    pub timeout: Duration,
    /// Give up (and cancel) after this long in all, whatever the progress.
    #[arg(long, default_value = "10m", value_parser = crate::args::parse_duration)]
    pub max_total: Duration,
    /// Do not let progress restart the --timeout clock.
    #[arg(long)]
    pub no_reset_on_progress: bool,
    /// Call the tool as a task and follow it: the 2026-07-28 tasks extension when the server
    /// speaks it (the server decides whether the call becomes a task; `tasks/get` until it
    /// ends, `tasks/update` for --input, `tasks/cancel` on Ctrl-C), else 2025-11-25 tasks
    /// (create with a ttl, poll, `tasks/result`).
    #[arg(long)]
    pub task: bool,
    /// The task's time to live.
    #[arg(long, default_value = "10m", value_parser = crate::args::parse_duration)]
    pub task_ttl: Duration,
    /// Call a `start_x` tool as a plain tool instead of following the job it starts.
    #[arg(long)]
    pub no_follow: bool,
    /// The idempotency key for a job tool (default: a fresh one, reused on retries).
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// Print the raw JSON result instead of its text.
    #[arg(long)]
    pub json: bool,
    /// No progress output.
    #[arg(long, short)]
    pub quiet: bool,
    /// The connection: protocol, headers, the started server's stderr.
    #[command(flatten)]
    pub connect: staunch_client::cli::ConnectArgs,
    /// The answer to a 2026-07-28 input request, by its key (`KEY=JSON`, e.g.
    /// `name='{"action":"accept","content":{"name":"Ada"}}'`); repeatable. With it the call
    /// declares the elicitation, sampling and roots capabilities.
    #[arg(long = "input", value_parser = crate::args::parse_input)]
    pub inputs: Vec<(String, Value)>,
    /// Say how the connection went (protocol era, version, why discover was not used).
    #[arg(long, short)]
    pub verbose: bool,
}

pub async fn run(args: CallArgs) -> anyhow::Result<i32> {
    let (target, rest) = match Target::from_words(&args.words, &args.command) {
        Ok(t) => t,
        Err(e) => return usage(&e),
    };
    let Some((tool, tool_args)) = rest.split_first() else {
        return usage("which tool? (staunch call TARGET TOOL [ARGS…])");
    };
    let arguments = match crate::args::parse_tool_args(tool_args) {
        Ok(a) => a,
        Err(e) => return usage(&format!("{e:#}")),
    };
    // Only a caller with answers declares that it can be asked: a server then asks (2026
    // input-required rounds) instead of refusing with -32021.
    let capabilities = if args.inputs.is_empty() {
        serde_json::json!({})
    } else {
        serde_json::json!({"elicitation": {}, "sampling": {}, "roots": {}})
    };
    let mut connect = args.connect.options();
    connect.capabilities = capabilities;
    let client = match target.connect(&connect).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("staunch call: cannot connect to {}: {e}", target.describe());
            return Ok(EXIT_USAGE);
        }
    };
    if args.verbose {
        eprintln!("{}", client.server().connection_line());
    }
    let interrupt = CancellationToken::new();
    let on_ctrl_c = interrupt.clone();
    let watcher = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    let opts = CallOptions {
        timeout: Some(args.timeout),
        reset_on_progress: !args.no_reset_on_progress,
        max_total: Some(args.max_total),
        progress: true,
        cancel: Some(interrupt.clone()),
    };
    let view = View::new(args.quiet);
    let code = if args.task {
        run_task(&client, tool, arguments, &opts, &args, &view).await
    } else if job_tool_names(tool).is_some() && !args.no_follow {
        run_job(&client, tool, arguments, &opts, &args, &view).await
    } else {
        let r = client
            .call_tool_with_input(
                tool,
                arguments,
                &opts,
                |p| view.progress(p.progress, p.total, p.message.as_deref()),
                |reqs| answer_from(&args.inputs, reqs, &view),
            )
            .await;
        view.finish();
        match &r {
            Err(ClientError::Rpc(e)) if is_unknown_tool(e, tool) => {
                unknown_tool(&client, tool, &opts).await
            }
            _ => finish_call(r, args.json),
        }
    };
    watcher.abort();
    client.close().await;
    Ok(code)
}

/// Answers an input-required round from `--input`; a question without an answer ends the call
/// with what the server asked (so the user can re-run with the right `--input`).
async fn answer_from(
    given: &[(String, Value)],
    requests: InputRequests,
    view: &View,
) -> Result<InputResponses, ClientError> {
    let mut out = InputResponses::new();
    for (key, req) in &requests {
        match given.iter().find(|(k, _)| k == key) {
            Some((_, v)) => {
                view.note(&format!(
                    "input {key} ({}): answered from --input",
                    req["method"].as_str().unwrap_or("?")
                ));
                out.insert(key.clone(), v.clone());
            }
            None => {
                return Err(ClientError::InputRequired(serde_json::json!({
                    "resultType": "input_required",
                    "inputRequests": requests,
                })));
            }
        }
    }
    Ok(out)
}

/// Whether the server refused the call because it has no tool of that name (servers say it
/// in the message of an invalid-params error; the code alone also covers bad arguments).
fn is_unknown_tool(e: &staunch_protocol::ErrorObject, tool: &str) -> bool {
    let m = e.message.to_ascii_lowercase();
    e.code == staunch_protocol::codes::INVALID_PARAMS
        && (m.contains("unknown tool") || m.contains("tool not found") || m.contains("no tool"))
        && e.message.contains(tool)
}

/// Says which tools the server has, with the closest name first when one is near: a usage
/// error (exit 2), not a tool error — nothing ran.
async fn unknown_tool(client: &Client, tool: &str, opts: &CallOptions) -> i32 {
    let names: Vec<String> = match client.list_tools(opts).await {
        Ok(tools) => tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect(),
        Err(_) => Vec::new(),
    };
    eprintln!("staunch call: the server has no tool {tool:?}");
    if let Some(near) = closest(tool, &names) {
        eprintln!("  did you mean {near:?}?");
    }
    if !names.is_empty() {
        eprintln!("  its tools: {}", names.join(", "));
    }
    EXIT_USAGE
}

/// The name nearest to `given`, if it is near enough to be a slip (Jaro–Winkler, as clap
/// suggests subcommands).
fn closest<'a>(given: &str, names: &'a [String]) -> Option<&'a str> {
    names
        .iter()
        .map(|n| (strsim::jaro_winkler(given, n), n.as_str()))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

fn usage(msg: &str) -> anyhow::Result<i32> {
    eprintln!("staunch call: {msg}\n(see staunch call --help)");
    Ok(EXIT_USAGE)
}

/// Prints a `tools/call` result and picks the exit code.
fn finish_call(r: Result<Value, ClientError>, json: bool) -> i32 {
    match r {
        Ok(result) => {
            print_result(&result, json);
            if is_tool_error(&result) {
                EXIT_TOOL_ERROR
            } else {
                EXIT_OK
            }
        }
        Err(e) => exit_for_error(&e),
    }
}

fn print_result(result: &Value, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(result).unwrap_or_default()
        );
    } else {
        let text = text_of(result);
        if is_tool_error(result) {
            eprintln!("tool error: {text}");
        } else {
            println!("{text}");
        }
    }
}

fn exit_for_error(e: &ClientError) -> i32 {
    eprintln!("staunch call: {e}");
    if let ClientError::InputRequired(r) = e {
        eprintln!("{}", staunch_client::cli::view::input_help(r));
    }
    match e {
        ClientError::Timeout { .. } => EXIT_TIMEOUT,
        ClientError::Cancelled => EXIT_INTERRUPTED,
        ClientError::Rpc(_) | ClientError::Tool(_) => EXIT_TOOL_ERROR,
        _ => EXIT_USAGE,
    }
}

async fn run_job(
    client: &Client,
    tool: &str,
    arguments: Value,
    opts: &CallOptions,
    args: &CallArgs,
    view: &View,
) -> i32 {
    let job_opts = JobOptions {
        idempotency_key: args.idempotency_key.clone(),
        ..JobOptions::default()
    };
    let r = client
        .call_job(tool, arguments, opts, &job_opts, |ev| match ev {
            JobEvent::StartRetry { attempt, error } => view.note(&format!(
                "start attempt {attempt} failed ({error}); retrying with the same idempotency key"
            )),
            JobEvent::Started(h) => view.note(&format!("job {} {}", h.job_id, h.status)),
            JobEvent::Status(s) => match s.progress() {
                Some((done, total, msg)) => view.progress(done, total, msg.as_deref()),
                None => view.progress(0.0, None, Some(&s.status)),
            },
            JobEvent::CancelSent(v) => view.note(&format!("cancel requested: {}", text_of(v))),
        })
        .await;
    view.finish();
    let out = match r {
        Ok(o) => o,
        Err(e) => return exit_for_error(&e),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&out.last.raw).unwrap_or_default()
        );
    } else if let Some(result) = out.last.result() {
        match result {
            Value::String(s) => println!("{s}"),
            v if v.get("content").is_some() => println!("{}", text_of(v)),
            v => println!("{}", serde_json::to_string_pretty(v).unwrap_or_default()),
        }
    }
    if !out.last.succeeded() {
        let mut line = format!("job {} {}", out.handle.job_id, out.last.status);
        if let Some(err) = out.last.error() {
            line.push_str(&format!(
                ": {}",
                err.as_str().map_or(err.to_string(), str::to_string)
            ));
        }
        if let Some(next) = &out.last.next {
            line.push_str(&format!(" — {next}"));
        }
        eprintln!("{line}");
    }
    match (&out.interrupted, out.last.succeeded()) {
        (_, true) => EXIT_OK,
        (Some(ClientError::Cancelled), _) => EXIT_INTERRUPTED,
        (Some(ClientError::Timeout { .. }), _) => EXIT_TIMEOUT,
        _ => EXIT_TOOL_ERROR,
    }
}

async fn run_task(
    client: &Client,
    tool: &str,
    arguments: Value,
    opts: &CallOptions,
    args: &CallArgs,
    view: &View,
) -> i32 {
    if !client.runs_tasks() {
        view.note(
            "the server does not offer tasks for tools/call; it will answer the call directly",
        );
    }
    let topts = TaskOptions {
        ttl: Some(args.task_ttl),
        ..TaskOptions::default()
    };
    // Polls repeat the status; show it when it changes.
    let mut last_status = String::new();
    let on_event = |ev: TaskEvent<'_>| match ev {
        TaskEvent::Created(t) => {
            last_status = t.status.as_str().to_string();
            view.note(&format!("task {} {}", t.task_id, last_status));
        }
        TaskEvent::Status(t) => {
            if t.status.as_str() != last_status {
                last_status = t.status.as_str().to_string();
                let msg = t.status_message.as_deref().unwrap_or("");
                view.note(&format!("task {} {last_status} {msg}", t.task_id));
            }
        }
        TaskEvent::Progress(p) => view.progress(p.progress, p.total, p.message.as_deref()),
        TaskEvent::CancelSent(v) => view.note(&format!(
            "tasks/cancel: {}",
            v["status"].as_str().unwrap_or("sent")
        )),
    };
    let answer = |reqs| answer_from(&args.inputs, reqs, view);
    let r = client
        .call_tool_task(tool, arguments, opts, &topts, answer, on_event)
        .await;
    view.finish();
    match r {
        Ok(TaskOutcome::Immediate(result)) => finish_call(Ok(result), args.json),
        Ok(TaskOutcome::Finished { result, task }) => match result {
            Ok(v) => {
                print_result(&v, args.json);
                if is_tool_error(&v) || task.status.as_str() == "failed" {
                    EXIT_TOOL_ERROR
                } else {
                    EXIT_OK
                }
            }
            Err(e) => exit_for_error(&ClientError::Rpc(e)),
        },
        Ok(TaskOutcome::Cancelled(task)) => {
            eprintln!("task {} was cancelled by the server", task.task_id);
            EXIT_TOOL_ERROR
        }
        Err(e) => exit_for_error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slip_is_matched_to_its_tool() {
        let names = ["echo", "slow_count", "start_import_rows"].map(String::from);
        assert_eq!(closest("ecoh", &names), Some("echo"));
        assert_eq!(closest("slow_cuont", &names), Some("slow_count"));
        assert_eq!(closest("zzzz", &names), None);
    }
}
