//! The 2026-07-28 tasks extension against `staunch serve` processes: a task survives a SIGKILL
//! of a single SQLite-backed instance, and (with `STAUNCH_TEST_POSTGRES`) one made on one
//! instance is read, answered and cancelled on another, which goes on after the first is
//! killed. The extension's behaviour on one instance and the listeners of two live instances
//! are tested in staunch-jobs (`tasks_ext_http.rs`, `tasks_ext_pg.rs`).

use crate::common;

use common::http::HttpServer;
use serde_json::json;
use staunch_testkit::tasks::{create, get_until, send, terminal, with_ext};

use common::job_flags as flags;

#[tokio::test]
async fn a_single_sqlite_instance_restarted_mid_task_answers_for_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.db").display().to_string();
    let f = flags(&["--instance-name", "solo"]);
    let mut s = HttpServer::start_on(Some(&store), &f).await;
    let side = create(&s, "import_rows", json!({"rows": 1000, "delay_ms": 20})).await;
    let safe = create(&s, "long_scan", json!({"steps": 40, "delay_ms": 25})).await;
    get_until(&s, &safe, |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("of"))
    })
    .await;
    // SIGKILL: no shutdown, no release of leases.
    s.child.start_kill().unwrap();
    s.child.wait().await.unwrap();

    let s = HttpServer::start_on(Some(&store), &f).await;
    // The side-effecting job is never re-run: it failed with its lease (a protocol-level
    // failure, no tool result).
    let t = get_until(&s, &side, terminal).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"]["code"], -32603);
    assert_eq!(t["error"]["data"]["reason"], "lease_lost");
    assert!(t.get("result").is_none());
    // The retry-safe one runs again and completes.
    let t = get_until(&s, &safe, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["structuredContent"]["scanned"], 40, "{t}");
    assert_eq!(t["result"]["structuredContent"]["attempt"], 2, "{t}");
}

/// Two instances on one fresh PostgreSQL schema, with the conformance profile (whose task
/// fixtures are durable jobs, some of which ask questions).
async fn pg_pair(test: &str) -> Option<(HttpServer, HttpServer, String, String)> {
    let (url, schema) = common::pg::fresh_schema(test)?;
    let args = |name: &'static str| -> Vec<&str> {
        let mut f = flags(&["--profile", "conformance", "--instance-name", name]);
        f.extend(["--store-schema", schema.as_str()]);
        f
    };
    let a = HttpServer::start_on(Some(&url), &args("a")).await;
    let b = HttpServer::start_on(Some(&url), &args("b")).await;
    Some((a, b, url, schema))
}

#[tokio::test]
async fn postgres_a_task_made_on_one_instance_is_read_answered_and_cancelled_on_another() {
    let Some((mut a, mut b, url, schema)) = pg_pair("tasks 2026 on two instances").await else {
        return;
    };
    // Questions asked by a body running on A, answered on B.
    let q = create(&a, "confirm_delete", json!({"filename": "x.txt"})).await;
    let parked = get_until(&b, &q, |t| t["status"] == "input_required").await;
    let key = parked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    send(
        &b,
        "tasks/update",
        json!({"taskId": q, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
        with_ext(),
        None,
    )
    .await;
    let done = get_until(&a, &q, terminal).await;
    assert_eq!(
        done["result"]["structuredContent"]["deleted"], true,
        "{done}"
    );

    // Cancelled on B while it runs on A.
    let c = create(&a, "slow_compute", json!({"seconds": 60})).await;
    get_until(&b, &c, |t| t["statusMessage"] == "Running.").await;
    send(&b, "tasks/cancel", json!({"taskId": c}), with_ext(), None).await;
    assert_eq!(get_until(&a, &c, terminal).await["status"], "cancelled");

    // Created on A; the instance whose worker claimed it is SIGKILLed; the other one reads it:
    // its reaper ends it within the lease, never re-running this side-effect-free but not
    // retry-safe job.
    let k = create(&a, "slow_compute", json!({"seconds": 60})).await;
    get_until(&b, &k, |t| t["statusMessage"] == "Running.").await;
    let owner = staunch_testkit::pg::lease_owner(&url, &schema, &k);
    let (victim, survivor) = if owner == "a" {
        (&mut a, &b)
    } else {
        (&mut b, &a)
    };
    victim.child.start_kill().unwrap();
    victim.child.wait().await.unwrap();
    let t = get_until(survivor, &k, terminal).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"]["data"]["reason"], "lease_lost", "{t}");
    drop((a, b));
    common::pg::drop_schema(&url, &schema);
}
