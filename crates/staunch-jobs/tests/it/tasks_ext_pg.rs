//! The 2026-07-28 tasks extension on two instances sharing one PostgreSQL database, in the
//! test's process (with `STAUNCH_TEST_POSTGRES`; skipped, and said so, without): a listener on
//! either instance hears every status of a task, wherever it runs.

use serde_json::json;
use staunch_testkit::pg::{drop_schema_async, fresh_schema, lease_owner};
use staunch_testkit::tasks::{
    create, get_until, listen_tasks, send, task_notes_until_terminal, with_ext,
};
use staunch_testkit::{Profile, TestServer};

/// Two instances, `a` and `b`, on a fresh schema, with the conformance profile (whose task
/// fixtures are durable jobs, some of which ask questions).
async fn pg_pair(test: &str) -> Option<(TestServer, TestServer, String, String)> {
    let (url, schema) = fresh_schema(test)?;
    let instance = |name: &'static str| {
        TestServer::setup()
            .profile(Profile::Conformance)
            .store(&url)
            .schema(&schema)
            .fast_jobs()
            .jobs(move |j| j.instance_name = Some(name.into()))
            .start()
    };
    let a = instance("a").await;
    let b = instance("b").await;
    Some((a, b, url, schema))
}

/// The instance name holding a job's lease.
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
    drop_schema_async(&url, &schema).await;
}
