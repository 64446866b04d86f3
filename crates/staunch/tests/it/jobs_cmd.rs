//! `staunch jobs` against the store of a running `staunch serve --http`: a job started through
//! MCP is listed and shown by the command, cancelled by it, and the running worker stops (its
//! rows stop growing); then purged. On SQLite, and on PostgreSQL when `STAUNCH_TEST_POSTGRES`
//! is set (SKIPPED otherwise).

use crate::common;

use std::time::Duration;

use common::http::{HttpServer, tool_structured};
use serde_json::{Value, json};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(20);

/// `staunch jobs <args>` on `store`: (exit code, stdout, stderr).
async fn jobs(store: &[&str], args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(common::BIN)
        .arg("jobs")
        .args(store)
        .args(args)
        .output()
        .await
        .expect("run staunch jobs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn jobs_json(store: &[&str], args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, out, err) = jobs(store, &all).await;
    assert_eq!(code, 0, "staunch jobs {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

async fn rows(s: &HttpServer, sid: &str, job: &str) -> i64 {
    tool_structured(s, sid, "imported_rows", json!({"job_id": job})).await["rows"]
        .as_i64()
        .unwrap()
}

/// The whole operator flow on one store: list, show, cancel (the worker stops), purge.
async fn operator_flow(server: &HttpServer, store: &[&str]) {
    let sid = server.initialize().await;
    let started = tool_structured(
        server,
        &sid,
        "start_import_rows",
        json!({"rows": 400, "delay_ms": 25}),
    )
    .await;
    let id = started["job_id"].as_str().unwrap().to_string();

    // Listed while it runs, with its progress and the instance holding it.
    let end = Instant::now() + T;
    let listed = loop {
        let list = jobs_json(store, &["list", "--state", "running"]).await;
        if let Some(j) = list
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job_id"] == id.as_str())
            && j["progress"]["done"].as_f64().unwrap_or(0.0) >= 2.0
        {
            break j.clone();
        }
        assert!(
            Instant::now() < end,
            "the job never showed as running: {list}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(listed["tool"], "import_rows");
    assert_eq!(listed["instance"], "ops-a");
    assert_eq!(listed["progress"]["total"], 400);
    // Filters: not among succeeded jobs, nor among another tool's.
    let other = jobs_json(store, &["list", "--state", "succeeded,failed"]).await;
    assert!(!other.to_string().contains(&id), "{other}");
    let other = jobs_json(store, &["list", "--tool", "long_scan"]).await;
    assert!(!other.to_string().contains(&id), "{other}");
    let old = jobs_json(store, &["list", "--older-than", "1h"]).await;
    assert!(!old.to_string().contains(&id), "{old}");
    let recent = jobs_json(store, &["list", "--newer-than", "1h", "--limit", "5"]).await;
    assert!(recent.to_string().contains(&id), "{recent}");

    // The table names it too.
    let (code, table, _) = jobs(store, &["list"]).await;
    assert_eq!(code, 0);
    let header = table.lines().next().unwrap();
    assert!(
        header.starts_with("ID") && header.contains("PROGRESS") && header.contains("INSTANCE"),
        "{table}"
    );
    let line = table
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        line.contains("running") && line.contains("import_rows") && line.contains("ops-a"),
        "{line}"
    );

    // show: the record and the same `next` sentence get_import_rows gives.
    let shown = jobs_json(store, &["show", &id]).await;
    assert_eq!(shown["status"], "running");
    assert_eq!(shown["arguments"]["rows"], 400);
    assert_eq!(shown["max_attempts"], 1);
    assert!(
        shown["next"].as_str().unwrap().contains("get_import_rows"),
        "{shown}"
    );
    // The first characters of an id name the job, as in the table.
    let by_prefix = jobs_json(store, &["show", &id[..8]]).await;
    assert_eq!(by_prefix["job_id"], id.as_str(), "{by_prefix}");
    let (code, _, err) = jobs(store, &["show", "zzzz"]).await;
    assert_eq!(code, 1, "{err}");
    let (code, text, _) = jobs(store, &["show", &id]).await;
    assert_eq!(code, 0);
    assert!(
        text.contains("next") && text.contains("import_rows"),
        "{text}"
    );

    // cancel from the command line: the worker in `serve` stops.
    let cancelled = jobs_json(store, &["cancel", &id]).await;
    assert_eq!(cancelled["status"], "cancelling", "{cancelled}");
    let end = Instant::now() + T;
    let ended = loop {
        let v = jobs_json(store, &["show", &id]).await;
        if v["status"] == "cancelled" {
            break v;
        }
        assert!(Instant::now() < end, "the worker never stopped: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Finished, it still names the instance that ran it.
    assert_eq!(ended["instance"], listed["instance"], "{ended}");
    assert!(
        ended["cancel_requested_by"]
            .as_str()
            .unwrap()
            .starts_with("staunch jobs cancel")
    );
    let done_then = rows(server, &sid, &id).await;
    assert!(
        done_then < 400,
        "the import ran to the end: {done_then} rows"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        rows(server, &sid, &id).await,
        done_then,
        "rows were written after the cancel"
    );
    // The MCP face agrees.
    let via_tool = tool_structured(server, &sid, "get_import_rows", json!({"job_id": id})).await;
    assert_eq!(via_tool["status"], "cancelled");
    // A second cancel says it had already ended.
    assert_eq!(
        jobs_json(store, &["cancel", &id]).await["status"],
        "already_ended"
    );

    // purge: a cutoff in the future of its finish keeps nothing finished older than it.
    assert_eq!(
        jobs_json(store, &["purge", "--older-than", "1h"]).await["purged"],
        0
    );
    let purged = jobs_json(store, &["purge", "--older-than", "0s"]).await;
    assert!(purged["purged"].as_u64().unwrap() >= 1, "{purged}");
    let (code, _, err) = jobs(store, &["show", &id]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no job"), "{err}");
}

#[tokio::test]
async fn jobs_command_on_sqlite_lists_shows_cancels_and_purges() {
    let server =
        HttpServer::start(&["--instance-name", "ops-a", "--job-heartbeat-ms", "100"]).await;
    let db = server.dir.path().join("staunch.db").display().to_string();
    operator_flow(&server, &["--store", &db]).await;
    // Bad input: unknown ids, unknown states, missing stores.
    let (code, _, _) = jobs(&["--store", &db], &["cancel", "0123"]).await;
    assert_eq!(code, 1);
    let (code, _, err) = jobs(&["--store", &db], &["list", "--state", "done"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a job state"), "{err}");
    let missing = server.dir.path().join("nope.db").display().to_string();
    let (code, _, err) = jobs(&["--store", &missing], &["list"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("no store at"), "{err}");
    assert!(
        !std::path::Path::new(&missing).exists(),
        "a mistyped path must not create a store"
    );
}

#[tokio::test]
async fn jobs_command_on_postgres_lists_shows_cancels_and_purges() {
    let Some((url, schema)) = common::pg::fresh_schema("jobs_command_on_postgres") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let import = dir.path().join("import.db").display().to_string();
    let server = HttpServer::start_on(
        Some(&url),
        &[
            "--store-schema",
            &schema,
            "--instance-name",
            "ops-a",
            "--import-db",
            &import,
            "--job-heartbeat-ms",
            "100",
        ],
    )
    .await;
    operator_flow(&server, &["--store", &url, "--store-schema", &schema]).await;
    drop(server);
    common::pg::drop_schema(&url, &schema);
}

/// Security review, second pass: `staunch jobs --json` printed the raw `Mcp-Session-Id` of the
/// session that started a job — a credential (without auth, holding it is being that client).
/// Every face of `staunch jobs` names the session as the lifecycle log does, by its hash.
#[tokio::test]
async fn jobs_json_does_not_print_the_session_id() {
    let server = HttpServer::start(&[]).await;
    let db = server.dir.path().join("staunch.db").display().to_string();
    let store = ["--store", db.as_str()];
    let sid = server.initialize().await;
    let started = tool_structured(
        &server,
        &sid,
        "start_import_rows",
        json!({"rows": 2, "delay_ms": 1}),
    )
    .await;
    let id = started["job_id"].as_str().unwrap().to_string();
    // How the lifecycle log names this session.
    let is_start = |l: &Value| l["event"] == "request.start" && l["tool"] == "start_import_rows";
    let lines = server.log_until(|ls| ls.iter().any(is_start)).await;
    let hash = lines.iter().find(|l| is_start(l)).expect("logged")["session"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(hash, sid);

    let list = jobs_json(&store, &["list"]).await;
    let shown = jobs_json(&store, &["show", &id]).await;
    let (_, table, _) = jobs(&store, &["list"]).await;
    let (_, details, _) = jobs(&store, &["show", &id]).await;
    for (face, out) in [
        ("list --json", list.to_string()),
        ("show --json", shown.to_string()),
        ("list", table),
        ("show", details.clone()),
    ] {
        assert!(!out.contains(&sid), "{face} prints the session id: {out}");
    }
    let job = list
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == id.as_str())
        .expect("listed");
    assert_eq!(job["session"], hash.as_str(), "{job:#}");
    assert_eq!(shown["session"], hash.as_str(), "{shown:#}");
    assert!(details.contains(&hash), "{details}");
}
