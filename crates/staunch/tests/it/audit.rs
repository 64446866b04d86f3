//! `staunch audit` on a log written by a scripted run of `staunch serve` (stdio): a cancelled
//! call, an orphaned (stubborn, aborted) call, a retry cluster and a slow tool are each
//! reported; a clean run reports nothing and exits 0.

use crate::client_support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use client_support::BIN;
use serde_json::{Value, json};
use staunch_client::{CallOptions, Client, ConnectOptions, StdioCommand};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

fn serve(log: &Path, extra: &[&str]) -> StdioCommand {
    StdioCommand::new(BIN)
        .args(["serve", "--store", ":memory:", "--log-file"])
        .arg(log)
        .args(extra.iter().copied())
}

async fn audit(args: &[&str]) -> (i32, String) {
    let o = Command::new(BIN)
        .arg("audit")
        .args(args)
        .output()
        .await
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

fn log_has(log: &Path, pred: impl Fn(&Value) -> bool) -> bool {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|l| pred(&l))
}

async fn wait_log(log: &Path, pred: impl Fn(&Value) -> bool) {
    for _ in 0..200 {
        if log_has(log, &pred) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the log never showed what we waited for");
}

fn opts() -> CallOptions {
    CallOptions::default().timeout(Duration::from_secs(20))
}

/// Starts `tool` and cancels it once it has reported `after` progress.
async fn start_then_cancel(c: &Client, tool: &str, after: usize) {
    let p = c
        .start_request(
            "tools/call",
            Some(json!({"name": tool, "arguments": {"steps": 1000, "delay_ms": 20}})),
            true,
        )
        .unwrap();
    let mut n = 0;
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        let mut tap = c.tap();
        while let Some(o) = tap.recv().await {
            if matches!(&o.msg, staunch_client::protocol::Message::Notification(m) if m.method == "notifications/progress") {
                n += 1;
                if n >= after {
                    return;
                }
            }
        }
    })
    .await;
    p.cancel("audit test: cancel");
}

#[tokio::test]
async fn a_scripted_run_with_every_finding() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lifecycle.jsonl");
    let c = Client::connect_stdio(
        &serve(&log, &["--cancel-grace-ms", "300"]),
        &ConnectOptions::default(),
    )
    .await
    .unwrap();
    // 1. A cancelled call that stops at once.
    start_then_cancel(&c, "slow_count", 3).await;
    // 2. An orphan: stubborn_count ignores its cancel and is aborted after the 300 ms grace.
    start_then_cancel(&c, "stubborn_count", 3).await;
    wait_log(&log, |l| l["event"] == "request.aborted").await;
    // 3. A retry cluster: the same tool and arguments again while the first still runs.
    let args = json!({"steps": 8, "delay_ms": 50});
    let o = opts();
    let first = c.call_tool("slow_count", args.clone(), &o, |_| {});
    let second = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        c.call_tool("slow_count", args.clone(), &opts(), |_| {})
            .await
    };
    let (a, b) = tokio::join!(first, second);
    a.unwrap();
    b.unwrap();
    // 4. A slow tool: slow_count's calls above take 400 ms and more.
    c.close().await;
    wait_log(&log, |l| {
        l["event"] == "request.end" && l["tool"] == "stubborn_count"
    })
    .await;

    let log_s = log.display().to_string();
    let (code, out) = audit(&["--json", &log_s]).await;
    assert_eq!(code, 1, "findings exit 1: {out}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["summary"]["clean"], false);
    // The orphan, with how long it ran past its cancel.
    assert_eq!(r["orphaned"]["count"], 1, "{r:#}");
    let orphan = &r["orphaned"]["by_tool"][0];
    assert_eq!(orphan["tool"], "stubborn_count");
    assert_eq!(orphan["worst"][0]["outcome"], "aborted");
    assert!(orphan["worst"][0]["after_cancel_ms"].as_u64().unwrap() >= 300);
    // The retry cluster: two starts of slow_count with the same arguments, overlapping.
    let clusters = r["retry_clusters"].as_array().unwrap();
    let overlapping: Vec<_> = clusters
        .iter()
        .filter(|c| c["kind"] == "overlapping")
        .collect();
    assert_eq!(overlapping.len(), 1, "{clusters:#?}");
    assert_eq!(overlapping[0]["tool"], "slow_count");
    assert_eq!(overlapping[0]["members"].as_array().unwrap().len(), 2);
    // Per-tool figures: the cancelled call counted, the slow tool's durations reported.
    let tools = r["tools"].as_array().unwrap();
    let slow = tools.iter().find(|t| t["tool"] == "slow_count").unwrap();
    assert_eq!(slow["calls"], 3);
    assert_eq!(slow["cancelled"], 1);
    assert!(slow["max_ms"].as_u64().unwrap() >= 400, "{slow:#}");
    assert!(slow["p50_ms"].as_u64().is_some());
    assert_eq!(r["never_ended"].as_array().unwrap().len(), 0);

    // The table says the same for a person.
    let (code, table) = audit(&[&log_s]).await;
    assert_eq!(code, 1);
    for word in ["stubborn_count", "slow_count", "aborted"] {
        assert!(table.contains(word), "table mentions {word}:\n{table}");
    }
    // A retry window shorter than the gap between the two starts splits the cluster.
    let (_, out) = audit(&["--json", "--retry-window", "10ms", &log_s]).await;
    let r: Value = serde_json::from_str(&out).unwrap();
    assert!(
        r["retry_clusters"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["kind"] != "overlapping")
    );
}

#[tokio::test]
async fn a_clean_run_reports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lifecycle.jsonl");
    let c = Client::connect_stdio(&serve(&log, &[]), &ConnectOptions::default())
        .await
        .unwrap();
    for i in 0..3 {
        c.call_tool(
            "echo",
            json!({"text": format!("hello {i}")}),
            &opts(),
            |_| {},
        )
        .await
        .unwrap();
    }
    c.call_tool(
        "slow_count",
        json!({"steps": 2, "delay_ms": 10}),
        &opts(),
        |_| {},
    )
    .await
    .unwrap();
    c.close().await;
    wait_log(&log, |l| {
        l["event"] == "request.end" && l["tool"] == "slow_count"
    })
    .await;
    let log_s = log.display().to_string();
    let (code, out) = audit(&["--json", &log_s]).await;
    assert_eq!(code, 0, "{out}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["summary"]["clean"], true);
    assert_eq!(r["orphaned"]["count"], 0);
    assert!(r["retry_clusters"].as_array().unwrap().is_empty());

    // `-` reads stdin.
    let mut child = Command::new(BIN)
        .args(["audit", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let text = std::fs::read(&log).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&text).await.unwrap();
    drop(stdin);
    assert_eq!(child.wait().await.unwrap().code(), Some(0));

    // A missing file is exit 2.
    let (code, _) = audit(&["/nonexistent/log.jsonl"]).await;
    assert_eq!(code, 2);
}

/// `staunch serve`'s default log is stderr, where its start banner also goes: the banner is
/// plain text, skipped and counted apart, not reported as malformed log lines.
#[tokio::test]
async fn the_start_banner_on_stderr_is_not_a_malformed_line() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--store", ":memory:", "--http", "127.0.0.1:0"])
        .env("XDG_STATE_HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    let banner = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            stderr.push_str(&l);
            stderr.push('\n');
            if l.contains("serving MCP") {
                return;
            }
        }
        panic!("serve exited before its banner: {stderr}");
    })
    .await;
    assert!(banner.is_ok(), "no banner in time: {stderr}");
    child.kill().await.unwrap();
    let log = dir.path().join("stderr.log");
    std::fs::write(&log, &stderr).unwrap();
    let (code, report) = audit(&[log.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{report}");
    assert!(!report.contains("Malformed"), "{report}");
    assert!(report.contains("plain text not JSON, skipped"), "{report}");
}
