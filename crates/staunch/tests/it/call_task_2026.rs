//! `staunch call --task` speaks the 2026-07-28 tasks extension against a real `staunch serve
//! --http` on loopback: the call declares the extension, the server answers with a task
//! (durable job), the CLI follows it with `tasks/get` to its inlined result, answers
//! `input_required` through `tasks/update` from `--input`, and gives up with `tasks/cancel` on
//! Ctrl-C (the job ends cancelled). The same flag against the same server in forced 2025 mode
//! still uses 2025-11-25 tasks (`tasks/result`). Every claim is checked in the server's
//! lifecycle log, not only in what the CLI prints.

use crate::client_support;

use std::process::{Output, Stdio};
use std::time::Duration;

use client_support::{BIN, Server};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Fast job loops.
const JOB_FLAGS: &[&str] = &[
    "--job-claim-poll-ms",
    "50",
    "--job-poll-after-ms",
    "100",
    "--job-cancel-grace-ms",
    "500",
];

async fn call(args: &[&str]) -> Output {
    tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(BIN).arg("call").args(args).output(),
    )
    .await
    .expect("staunch call finishes")
    .expect("run staunch call")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// The methods the server's log saw, with the protocol version each request carried, once
/// `method` has been seen (the log's writer can land a line just after the answer).
async fn methods(server: &Server, method: &str) -> Vec<(String, String)> {
    let started = |l: &Value| l["event"] == "request.start";
    server
        .log_until(|ls| ls.iter().any(|l| started(l) && l["method"] == method))
        .await
        .into_iter()
        .filter(started)
        .map(|l| {
            (
                l["method"].as_str().unwrap_or("").to_string(),
                l["protocol_version"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn count(methods: &[(String, String)], method: &str) -> usize {
    methods.iter().filter(|(m, _)| m == method).count()
}

#[tokio::test]
async fn call_task_follows_a_2026_task_with_tasks_get_to_its_inlined_result() {
    let server = client_support::staunch(JOB_FLAGS).await;
    let url = server.url();
    let o = call(&[
        "--task",
        "--json",
        "--protocol",
        "2026-07-28",
        &url,
        "import_rows",
        "rows=3",
        "delay_ms=100",
    ])
    .await;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "stdout {out}\nstderr {err}");
    // The CLI saw a task being created (and announced it), not an immediate answer.
    assert!(err.contains("task ") && err.contains("working"), "{err}");
    let result: Value = serde_json::from_str(&out).expect("the inlined result as JSON");
    assert_ne!(result["isError"], true, "{result}");
    assert!(
        result.to_string().contains('3'),
        "the import's result: {result}"
    );
    // On the wire: one tools/call, at least one tasks/get, no tasks/result (removed in the
    // extension), every request stateless 2026-07-28.
    let seen = methods(&server, "tasks/get").await;
    assert_eq!(count(&seen, "tools/call"), 1, "{seen:?}");
    assert!(count(&seen, "tasks/get") >= 1, "{seen:?}");
    assert_eq!(count(&seen, "tasks/result"), 0, "{seen:?}");
    for (m, v) in seen {
        if m.starts_with("tasks/") || m == "tools/call" {
            assert_eq!(v, "2026-07-28", "{m} was not a 2026 request");
        }
    }
}

#[tokio::test]
async fn call_task_answers_input_required_through_tasks_update() {
    let mut flags = JOB_FLAGS.to_vec();
    flags.extend(["--profile", "conformance"]);
    let server = client_support::staunch(&flags).await;
    let url = server.url();
    let o = call(&[
        "--task",
        "--json",
        "--protocol",
        "2026-07-28",
        "--input",
        r#"elicitation-1={"action":"accept","content":{"confirm":true}}"#,
        &url,
        "confirm_delete",
        "filename=report.txt",
    ])
    .await;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "stdout {out}\nstderr {err}");
    assert!(err.contains("input_required"), "{err}");
    assert!(err.contains("elicitation-1"), "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON result");
    assert_eq!(v["structuredContent"]["deleted"], true, "{v}");
    assert_eq!(v["structuredContent"]["filename"], "report.txt", "{v}");
    let seen = methods(&server, "tasks/update").await;
    assert_eq!(count(&seen, "tasks/update"), 1, "{seen:?}");
}

#[tokio::test]
async fn call_task_without_the_answer_ends_saying_what_was_asked() {
    let mut flags = JOB_FLAGS.to_vec();
    flags.extend(["--profile", "conformance"]);
    let server = client_support::staunch(&flags).await;
    let o = call(&[
        "--task",
        "--protocol",
        "2026-07-28",
        &server.url(),
        "confirm_delete",
        "filename=x",
    ])
    .await;
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("elicitation-1"), "names the question: {err}");
    assert!(err.contains("--input"), "says how to answer: {err}");
}

#[tokio::test]
async fn ctrl_c_sends_tasks_cancel_and_the_job_ends_cancelled() {
    let server = client_support::staunch(JOB_FLAGS).await;
    let url = server.url();
    let mut child = Command::new(BIN)
        .args([
            "call",
            "--task",
            "--protocol",
            "2026-07-28",
            &url,
            "import_rows",
            "rows=400",
            "delay_ms=50",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Wait for the CLI to say the task exists, then interrupt it as a user would.
    let mut err_lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(l)) = err_lines.next_line().await {
            said.push_str(&l);
            said.push('\n');
            if l.contains("task ") && l.contains("working") {
                return;
            }
        }
    })
    .await
    .expect("the task is announced");
    let task_id = said
        .split_whitespace()
        .skip_while(|w| *w != "task")
        .nth(1)
        .expect("task id")
        .to_string();
    let sent = Command::new("kill")
        .args(["-INT", &child.id().unwrap().to_string()])
        .status()
        .await
        .unwrap();
    assert!(sent.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("staunch call exits after Ctrl-C")
        .unwrap();
    let mut rest = String::new();
    while let Ok(Some(l)) = err_lines.next_line().await {
        rest.push_str(&l);
        rest.push('\n');
    }
    assert_eq!(status.code(), Some(130), "{said}{rest}");
    assert!(rest.contains("tasks/cancel"), "{rest}");
    let seen = methods(&server, "tasks/cancel").await;
    assert_eq!(count(&seen, "tasks/cancel"), 1, "{seen:?}");
    // The server agrees: the task (a job; its id is the job's) ends cancelled, read through
    // the job's own face.
    let mut last = Value::Null;
    for _ in 0..100 {
        let o = call(&[
            "--json",
            &url,
            "get_import_rows",
            &format!("job_id={task_id}"),
        ])
        .await;
        last = serde_json::from_str(&text(&o.stdout)).unwrap_or(Value::Null);
        if last.to_string().contains("\"cancelled\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(last.to_string().contains("\"cancelled\""), "{last}");
}

#[tokio::test]
async fn call_task_in_the_2025_era_still_uses_2025_11_25_tasks() {
    let server = client_support::staunch(JOB_FLAGS).await;
    let o = call(&[
        "--task",
        "--json",
        "--protocol",
        "2025-11-25",
        &server.url(),
        "import_rows",
        "rows=2",
        "delay_ms=20",
    ])
    .await;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "stdout {out}\nstderr {err}");
    assert!(err.contains("task "), "{err}");
    let seen = methods(&server, "tasks/result").await;
    assert_eq!(count(&seen, "tasks/result"), 1, "{seen:?}");
    assert!(
        seen.iter()
            .all(|(m, v)| !m.starts_with("tasks/") || v != "2026-07-28"),
        "{seen:?}"
    );
}
