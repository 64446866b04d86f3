//! `staunch call` through the real binary: results, exit codes, the cancel on the wire after a
//! timeout or Ctrl-C (seen in the server's lifecycle log), job tools and tasks followed.

use crate::client_support;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use client_support::BIN;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

async fn call(args: &[&str]) -> Output {
    tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(BIN).arg("call").args(args).output(),
    )
    .await
    .expect("staunch call finishes")
    .expect("run staunch call")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn events(lines: &[Value], event: &str, tool: &str) -> usize {
    lines
        .iter()
        .filter(|l| l["event"] == event && (l["tool"] == tool || tool.is_empty()))
        .count()
}

#[tokio::test]
async fn prints_the_result_and_plain_progress_lines() {
    let o = call(&[
        "slow_count",
        "steps=3",
        "delay_ms=10",
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        ":memory:",
    ])
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "counted 3");
    // Not a terminal: one plain line per progress report, on stderr.
    assert!(stderr(&o).contains("progress 3/3 (100%)"), "{}", stderr(&o));

    let o = call(&[
        "--json",
        "echo",
        r#"{"text":"hi"}"#,
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        ":memory:",
    ])
    .await;
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["content"][0]["text"], "hi");
}

#[tokio::test]
async fn exit_codes_for_errors_and_usage() {
    let o = call(&[
        "fail",
        "how=tool_error",
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        ":memory:",
    ])
    .await;
    assert_eq!(o.status.code(), Some(1), "tool error: {}", stderr(&o));
    let o = call(&[
        "no_such_tool",
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        ":memory:",
    ])
    .await;
    // Nothing ran: a usage error (2) that names the tool and lists the server's.
    assert_eq!(o.status.code(), Some(2), "unknown tool: {}", stderr(&o));
    assert!(
        stderr(&o).contains("no tool \"no_such_tool\""),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("its tools: echo"), "{}", stderr(&o));
    let o = call(&[
        "ecoh", "text=hi", "--", BIN, "serve", "--no-log", "--store", ":memory:",
    ])
    .await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did you mean \"echo\"?"),
        "{}",
        stderr(&o)
    );
    let o = call(&["slow_count", "not-a-pair", "--", BIN, "serve", "--no-log"]).await;
    assert_eq!(o.status.code(), Some(2));
    let o = call(&["slow_count"]).await;
    assert_eq!(o.status.code(), Some(2));
    let o = call(&["http://127.0.0.1:1/mcp", "echo"]).await;
    assert_eq!(o.status.code(), Some(2));
    let o = call(&["echo", "--", "/nonexistent/server"]).await;
    assert_eq!(o.status.code(), Some(2));
    let help = call(&["--help"]).await;
    for code in ["124", "130"] {
        assert!(stdout(&help).contains(code), "--help documents exit {code}");
    }
}

#[tokio::test]
async fn a_timeout_exits_124_and_the_server_sees_the_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lifecycle.jsonl");
    let log_s = log.display().to_string();
    let o = call(&[
        "--timeout",
        "300ms",
        "--no-reset-on-progress",
        "slow_count",
        "steps=1000",
        "delay_ms=20",
        "--",
        BIN,
        "serve",
        "--store",
        ":memory:",
        "--log-file",
        &log_s,
    ])
    .await;
    assert_eq!(o.status.code(), Some(124), "{}", stderr(&o));
    assert!(stderr(&o).contains("timeout expired"), "{}", stderr(&o));
    let lines = log_lines(&log);
    assert_eq!(
        events(&lines, "request.cancel_received", ""),
        1,
        "{lines:#?}"
    );
    let end = lines
        .iter()
        .find(|l| l["event"] == "request.end" && l["tool"] == "slow_count")
        .unwrap();
    assert_eq!(end["outcome"], "cancelled");

    // With progress resetting the timer, the same timeout is enough, until the ceiling.
    let o = call(&[
        "--timeout",
        "300ms",
        "slow_count",
        "steps=10",
        "delay_ms=100",
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        ":memory:",
    ])
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = call(&[
        "--timeout",
        "300ms",
        "--max-total",
        "500ms",
        "slow_count",
        "steps=100",
        "delay_ms=50",
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        ":memory:",
    ])
    .await;
    assert_eq!(o.status.code(), Some(124));
    assert!(stderr(&o).contains("maximum total"), "{}", stderr(&o));
}

#[tokio::test]
async fn ctrl_c_cancels_on_the_wire_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lifecycle.jsonl");
    let mut child = Command::new(BIN)
        .args([
            "call",
            "slow_count",
            "steps=1000",
            "delay_ms=20",
            "--",
            BIN,
            "serve",
            "--store",
            ":memory:",
            "--log-file",
        ])
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    // Wait until the call is clearly running.
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(l) = err.next_line().await.unwrap() {
            if l.starts_with("progress 3/") {
                return;
            }
        }
        panic!("no progress");
    })
    .await
    .expect("progress");
    let pid = child.id().unwrap().to_string();
    let st = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(st.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(130));
    let lines = log_lines(&log);
    assert_eq!(
        events(&lines, "request.cancel_received", ""),
        1,
        "{lines:#?}"
    );
    assert_eq!(events(&lines, "request.start", "slow_count"), 1);
}

#[tokio::test]
async fn over_http() {
    let server = client_support::staunch(&[]).await;
    let url = server.url();
    let o = call(&[&url, "slow_count", "steps=3", "delay_ms=10"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "counted 3");
}

#[tokio::test]
async fn a_job_tool_is_followed_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db").display().to_string();
    let o = call(&[
        "start_long_scan",
        "steps=3",
        "delay_ms=20",
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        &db,
    ])
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let result: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(result["scanned"], 3);
    assert!(stderr(&o).contains("progress 3/3"), "{}", stderr(&o));

    // The key is sent (and would be reused by retries); a second start with the same key is
    // the same job, not a second execution.
    let o1 = call(&[
        "--json",
        "--idempotency-key",
        "k-1",
        "start_import_rows",
        "rows=2",
        "delay_ms=10",
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        &db,
    ])
    .await;
    let o2 = call(&[
        "--json",
        "--idempotency-key",
        "k-1",
        "start_import_rows",
        "rows=2",
        "delay_ms=10",
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        &db,
    ])
    .await;
    assert_eq!(o1.status.code(), Some(0), "{}", stderr(&o1));
    assert_eq!(o2.status.code(), Some(0), "{}", stderr(&o2));
    let (j1, j2): (Value, Value) = (
        serde_json::from_str(&stdout(&o1)).unwrap(),
        serde_json::from_str(&stdout(&o2)).unwrap(),
    );
    assert_eq!(j1["job_id"], j2["job_id"]);
    assert_eq!(j1["status"], "succeeded");
}

#[tokio::test]
async fn a_task_is_followed_to_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db").display().to_string();
    let o = call(&[
        "--task",
        "long_scan",
        "steps=3",
        "delay_ms=20",
        "--",
        BIN,
        "serve",
        "--no-log",
        "--store",
        &db,
    ])
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["scanned"], 3);
    assert!(stderr(&o).contains("task "), "{}", stderr(&o));
}

/// Issue 14: `staunch call` shuts a stdio server down the specification's way — stdin closed,
/// a wait, SIGTERM, a wait, SIGKILL — instead of killing it after 2 s. The server here needs
/// longer than that to end its cancelled request (`stubborn_count` ignores the cancel and is
/// aborted after a 3.5 s grace), so with the old shutdown its lifecycle log lacked the
/// request's end; now the log has it.
#[tokio::test]
async fn stdio_shutdown_lets_the_server_log_the_end_of_the_cancelled_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lifecycle.jsonl");
    let log_s = log.display().to_string();
    let o = call(&[
        "--timeout",
        "300ms",
        "--no-reset-on-progress",
        "stubborn_count",
        "steps=1000",
        "delay_ms=20",
        "--",
        BIN,
        "serve",
        "--store",
        ":memory:",
        "--cancel-grace-ms",
        "3500",
        "--drain-timeout-ms",
        "10000",
        "--log-file",
        &log_s,
    ])
    .await;
    assert_eq!(o.status.code(), Some(124), "{}", stderr(&o));
    let lines = log_lines(&log);
    assert_eq!(
        events(&lines, "request.cancel_received", ""),
        1,
        "{lines:#?}"
    );
    let end = lines
        .iter()
        .find(|l| l["event"] == "request.end" && l["tool"] == "stubborn_count")
        .unwrap_or_else(|| panic!("the server logged no end for the cancelled call: {lines:#?}"));
    assert_eq!(end["outcome"], "aborted", "{end}");
}
