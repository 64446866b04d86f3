//! MCP tasks (2025-11-25) over Streamable HTTP with the TypeScript SDK's experimental tasks
//! client — a client nobody here wrote — creating, polling, fetching and cancelling tasks
//! backed by durable jobs, and a retry across a restart. Which session a task belongs to is
//! tested in-process (`crates/staunch-jobs/tests/it/tasks_http.rs`).

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::external;
use common::http::{HttpServer, call, rpc};
use serde_json::{Value, json};
use staunch_testkit::jobs::rows;

const T: Duration = Duration::from_secs(15);

fn run_node(node: std::path::PathBuf, args: &[&str]) -> Value {
    let out = Command::new(node)
        .arg(external::root().join("tests-external/ts_tasks_client.mjs"))
        .args(args)
        .output()
        .expect("run the TS tasks client");
    assert!(
        out.status.success(),
        "ts_tasks_client failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[tokio::test]
async fn typescript_sdk_tasks_client_creates_polls_and_fetches_a_job_result() {
    let Some(node) = external::node() else { return };
    let s = HttpServer::start(&common::job_flags(&[])).await;
    let url = s.url();
    let v = tokio::task::spawn_blocking(move || {
        run_node(
            node,
            &[
                &url,
                "long_scan",
                r#"{"steps":8,"delay_ms":50}"#,
                "--ttl",
                "60000",
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(
        v["serverTasksCapability"],
        json!({"cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{v}"
    );
    assert_eq!(v["taskSupport"], "optional");
    assert_eq!(v["created"]["status"], "working");
    assert_eq!(v["created"]["ttl"], 60000);
    assert_eq!(v["created"]["pollInterval"], 100);
    assert_eq!(v["final"]["status"], "completed");
    assert_eq!(v["statuses"], json!(["working", "completed"]));
    assert_eq!(v["result"]["isError"], false);
    let text: Value = serde_json::from_str(v["result"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["scanned"], 8, "{v}");
    assert_eq!(v["result"]["relatedTask"]["taskId"], v["created"]["taskId"]);
    assert_eq!(v["errors"], json!([]), "{v}");
}

#[tokio::test]
async fn typescript_sdk_tasks_client_cancels_an_import_and_no_row_follows_the_cancel() {
    let Some(node) = external::node() else { return };
    let s = HttpServer::start(&common::job_flags(&[])).await;
    let url = s.url();
    let db = s.dir.path().join("staunch.db");
    let v = tokio::task::spawn_blocking(move || {
        run_node(
            node,
            &[
                &url,
                "import_rows",
                r#"{"rows":100000,"delay_ms":20}"#,
                "--cancel",
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(v["cancel"]["status"], "cancelled", "{v}");
    assert_eq!(v["final"]["status"], "cancelled");
    assert_eq!(v["recancel_error_code"], -32602);
    let id = v["created"]["taskId"].as_str().unwrap().to_string();
    // The body stops at its next row; once the job row is terminal nothing more is written.
    // (The job belongs to the SDK client's session, which has ended: read the row itself.)
    let end = tokio::time::Instant::now() + T;
    let job = loop {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        let (state, progress): (String, Option<String>) = c
            .query_row(
                "SELECT state, progress_json FROM staunch_jobs WHERE id = ?1",
                [&id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        if state == "cancelled" {
            let p: Value = progress
                .and_then(|p| serde_json::from_str(&p).ok())
                .unwrap_or_default();
            break json!({"status": state, "progress": {"done": p["progress"]}});
        }
        assert!(tokio::time::Instant::now() < end, "{state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let written = rows(&db, &id);
    assert!(written < 100000);
    let done = job["progress"]["done"].as_f64().unwrap_or(0.0);
    assert_eq!(done, written as f64, "{job}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        rows(&db, &id),
        written,
        "a row was written after the cancel"
    );
}

/// Regression: without auth, a key was scoped by the 2025 session, so a client that lost its
/// session (here: the server restarted) and retried with the same key in a new session got a
/// second job, and the import ran twice. An unauthenticated server cannot tell its clients
/// apart, so its keys are shared: the retry gets the first job, and the rows are written once.
#[tokio::test]
async fn a_retry_with_the_same_key_after_a_restart_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("jobs.db");
    let store_arg = store.display().to_string();
    let flags = common::job_flags(&[]);
    let args = json!({"rows": 3, "delay_ms": 10, "idempotency_key": "import-after-restart"});

    let mut first = HttpServer::start_on(Some(&store_arg), &flags).await;
    let one = first.initialize().await;
    let started = rpc(
        &first,
        &one,
        call(json!(1), "start_import_rows", args.clone(), None),
    )
    .await;
    let job = started["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    // It finishes before the restart (a side-effecting job cut off by a kill is never re-run
    // anyway; this shows the retry finds a finished job, not a running one).
    let end = tokio::time::Instant::now() + T;
    loop {
        let got = rpc(
            &first,
            &one,
            call(json!(2), "get_import_rows", json!({"job_id": job}), None),
        )
        .await;
        if got["result"]["structuredContent"]["status"] == "succeeded" {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "not done: {got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.child.kill().await.unwrap();
    let _ = first.child.wait().await;

    let second = HttpServer::start_on(Some(&store_arg), &flags).await;
    let two = second.initialize().await;
    assert_ne!(one, two, "a new session");
    let retried = rpc(
        &second,
        &two,
        call(json!(3), "start_import_rows", args.clone(), None),
    )
    .await;
    assert_eq!(
        retried["result"]["structuredContent"]["job_id"], job,
        "the retry gets the first job: {retried}"
    );
    // The new session follows it by its id, and the work ran once.
    let got = rpc(
        &second,
        &two,
        call(json!(4), "get_import_rows", json!({"job_id": job}), None),
    )
    .await;
    assert_eq!(
        got["result"]["structuredContent"]["status"], "succeeded",
        "{got}"
    );
    let counted = rpc(
        &second,
        &two,
        call(json!(5), "imported_rows", json!({"job_id": job}), None),
    )
    .await;
    assert_eq!(
        counted["result"]["structuredContent"]["attempts"], 1,
        "{counted}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = rusqlite::Connection::open(&store).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    let all: i64 = c
        .query_row("SELECT COUNT(*) FROM demo_import_rows", [], |r| r.get(0))
        .unwrap();
    assert_eq!(all, 3, "the rows of one import, written once");
    assert_eq!(rows(&store, &job), 3);
}
