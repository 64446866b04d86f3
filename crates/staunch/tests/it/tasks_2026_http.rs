//! The 2026-07-28 tasks extension against `staunch serve` processes: a task survives a SIGKILL
//! of a single SQLite-backed instance, and (with `STAUNCH_TEST_POSTGRES`) one made on one
//! instance is read, answered and cancelled on another, and heard by a listener on either. The
//! extension's behaviour on one instance is tested in staunch-jobs (`tasks_ext_http.rs`).

use crate::common;

use common::http::HttpServer;
use serde_json::json;
use staunch_testkit::tasks::{
    create, get_until, listen_tasks, send, task_notes_until_terminal, terminal, with_ext,
};

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
    let owner = lease_owner(&url, &schema, &k);
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

/// The instance name holding a job's lease.
fn lease_owner(url: &str, schema: &str, job: &str) -> String {
    let out = std::process::Command::new("psql")
        .arg(url)
        .arg("-tAc")
        .arg(format!(
            "SELECT lease_owner FROM {schema}.staunch_jobs WHERE id = '{job}'"
        ))
        .output()
        .expect("psql");
    let owner = String::from_utf8_lossy(&out.stdout).trim().to_string();
    owner.split('/').next().unwrap_or_default().to_string()
}

/// A 2026 client's listen stream on one instance hears a task that runs on the other, each
/// status change in order (a round-robin balancer sends the listen and the work to different
/// instances); and the instance that runs it tells its own listeners while it works, not only
/// when it ends.
#[tokio::test]
async fn postgres_a_listener_on_either_instance_hears_every_status_of_a_task_in_order() {
    let Some((a, b, url, schema)) = pg_pair("task pushes across instances").await else {
        return;
    };
    let q = create(&a, "confirm_delete", json!({"filename": "x.txt"})).await;
    let parked = get_until(&b, &q, |t| t["status"] == "input_required").await;
    let owner = lease_owner(&url, &schema, &q);
    let (runs, other) = if owner == "a" { (&a, &b) } else { (&b, &a) };
    let mut there = listen_tasks(other, &[&q]).await;
    let mut here = listen_tasks(runs, &[&q]).await;
    let key = parked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    send(
        other,
        "tasks/update",
        json!({"taskId": q, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
        with_ext(),
        None,
    )
    .await;
    for (name, stream) in [
        ("the other instance", &mut there),
        ("its own instance", &mut here),
    ] {
        let notes = task_notes_until_terminal(stream).await;
        let statuses: Vec<&str> = notes
            .iter()
            .map(|n| n["status"].as_str().unwrap())
            .collect();
        // Once answered the task works again, then completes. A listener hears what the row
        // says when it reads it, so a step that passed quickly may be folded into the next;
        // but nothing older comes after something newer, and the end is said once, last,
        // with the result.
        let rank = |s: &str| match s {
            "input_required" => 0,
            "working" => 1,
            "completed" => 2,
            other => panic!("{name}: unexpected status {other}: {notes:?}"),
        };
        assert!(
            statuses.windows(2).all(|w| rank(w[0]) <= rank(w[1])),
            "{name}: out of order: {notes:?}"
        );
        assert_eq!(
            statuses.iter().filter(|s| **s == "completed").count(),
            1,
            "{name}: {notes:?}"
        );
        assert!(
            notes.iter().all(|n| n["taskId"] == q.as_str()),
            "{name}: {notes:?}"
        );
        let last = notes.last().unwrap();
        assert_eq!(
            last["result"]["structuredContent"]["deleted"], true,
            "{name}: {last}"
        );
    }

    // While a long task works, a listener on the instance that does not run it hears it
    // start and hears it end when it is cancelled there.
    let c = create(&a, "slow_compute", json!({"seconds": 60})).await;
    get_until(&b, &c, |t| t["statusMessage"] == "Running.").await;
    let owner = lease_owner(&url, &schema, &c);
    let other = if owner == "a" { &b } else { &a };
    let mut there = listen_tasks(other, &[&c]).await;
    send(
        other,
        "tasks/cancel",
        json!({"taskId": c}),
        with_ext(),
        None,
    )
    .await;
    let notes = task_notes_until_terminal(&mut there).await;
    assert_eq!(notes.last().unwrap()["status"], "cancelled", "{notes:?}");
    drop((a, b));
    common::pg::drop_schema(&url, &schema);
}
