//! `staunch tools TARGET`: list any MCP server's tools — a URL in either protocol era, or a
//! server command after `--` — with their hints and the first line of each description, or
//! the raw `tools/list` entries with `--json`.

use std::time::Duration;

use clap::Args;
use serde_json::Value;
use staunch_client::CallOptions;

use crate::call::{EXIT_OK, EXIT_USAGE};
use staunch_client::Target;

const EXAMPLES_AND_EXIT: &str = "\
Examples:
  staunch tools -- staunch serve
  staunch tools http://127.0.0.1:8080/mcp
  staunch tools --json -- python my_server.py

Exit status:
  0  the tools were listed
  2  usage error, or the server could not be reached or broke the protocol";

/// Options of `staunch tools`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES_AND_EXIT)]
pub struct ToolsArgs {
    /// The server's URL; or give the server command after `--`.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    /// The server to spawn over stdio, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Print the server's `tools/list` entries as one JSON array (every field kept).
    #[arg(long)]
    pub json: bool,
    /// Give up after this long without an answer.
    #[arg(long, default_value = "30s", value_parser = crate::args::parse_duration)]
    pub timeout: Duration,
    /// The connection: protocol, headers, the started server's stderr.
    #[command(flatten)]
    pub connect: staunch_client::cli::ConnectArgs,
    /// Say how the connection went (protocol era, version).
    #[arg(long, short)]
    pub verbose: bool,
}

pub async fn run(args: ToolsArgs) -> anyhow::Result<i32> {
    let words: Vec<String> = args.url.iter().cloned().collect();
    let (target, rest) = match Target::from_words(&words, &args.command) {
        Ok(t) => t,
        Err(e) => return Ok(usage(&e)),
    };
    if !rest.is_empty() {
        return Ok(usage(&format!(
            "give either a URL or a command after `--`, not both (got {:?} besides the command)",
            rest.join(" ")
        )));
    }
    let connect = args.connect.options();
    let client = match Target::connect(&target, &connect).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "staunch tools: cannot connect to {}: {e}",
                target.describe()
            );
            return Ok(EXIT_USAGE);
        }
    };
    if args.verbose {
        eprintln!("{}", client.server().connection_line());
    }
    let opts = CallOptions {
        timeout: Some(args.timeout),
        max_total: Some(args.timeout),
        ..CallOptions::default()
    };
    let listed = client.list_tools(&opts).await;
    client.close().await;
    let tools = match listed {
        Ok(t) => t,
        Err(e) => {
            eprintln!("staunch tools: tools/list failed: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&Value::Array(tools))?);
    } else {
        print!("{}", table(&tools));
    }
    Ok(EXIT_OK)
}

fn usage(msg: &str) -> i32 {
    eprintln!("staunch tools: {msg}\n(see staunch tools --help)");
    EXIT_USAGE
}

/// One line per tool: its name, its hints, and the first line of its description.
fn table(tools: &[Value]) -> String {
    let rows: Vec<(String, String, String)> = tools
        .iter()
        .map(|t| {
            let name = t["name"].as_str().unwrap_or("?").to_string();
            let summary = t["description"]
                .as_str()
                .map(first_sentence)
                .unwrap_or_default();
            (name, hints(t).join(","), summary)
        })
        .collect();
    let name_w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let hint_w = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, hints, summary) in &rows {
        let line = format!("{name:<name_w$}  {hints:<hint_w$}  {summary}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str(&format!(
        "{} tool{}\n",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    ));
    out
}

/// The first sentence of a description (its first line at most), cut at a readable width.
fn first_sentence(description: &str) -> String {
    const MAX: usize = 100;
    let line = description
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let sentence = match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    };
    if sentence.chars().count() <= MAX {
        return sentence.to_string();
    }
    let cut: String = sentence.chars().take(MAX - 1).collect();
    format!("{}…", cut.trim_end())
}

/// What a caller should know before calling: the annotations a client acts on, and whether
/// the tool runs as a task.
fn hints(tool: &Value) -> Vec<&'static str> {
    let a = &tool["annotations"];
    let mut out = Vec::new();
    if a["readOnlyHint"] == Value::Bool(true) {
        out.push("read-only");
    } else if a["destructiveHint"] == Value::Bool(false) {
        out.push("additive");
    } else if a["destructiveHint"] == Value::Bool(true) {
        out.push("destructive");
    }
    if a["idempotentHint"] == Value::Bool(true) {
        out.push("idempotent");
    }
    match tool["execution"]["taskSupport"].as_str() {
        Some("required") => out.push("task"),
        Some("optional") => out.push("task-optional"),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_shows_names_hints_and_first_description_lines_aligned() {
        let tools = vec![
            json!({"name": "echo", "description": "Echoes. Twice.\nMore.",
                   "annotations": {"readOnlyHint": true, "idempotentHint": true}}),
            json!({"name": "start_export", "description": "\n  Starts an export.",
                   "annotations": {"destructiveHint": true},
                   "execution": {"taskSupport": "optional"}}),
            json!({"name": "x"}),
            json!({"name": "long", "description": "a".repeat(150)}),
        ];
        assert_eq!(
            table(&tools),
            format!(
                "echo          read-only,idempotent       Echoes.\n\
             start_export  destructive,task-optional  Starts an export.\n\
             x\n\
             long                                     {}…\n\
             4 tools\n",
                "a".repeat(99)
            )
        );
    }
}
