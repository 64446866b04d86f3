//! The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) over loopback
//! HTTP: stateless requests carrying their version and capabilities in `_meta`, tasks backed by
//! durable jobs — created, polled to their inlined result, cancelled, answered through
//! `tasks/update`, refused with -32021 without the extension, one task for one idempotency key.

use std::time::Duration;

use serde_json::json;
use staunch_testkit::jobs::rows;
use staunch_testkit::tasks::{
    EXT, call_tool, create, get_until, send, task_get, terminal, with_ext,
};
use staunch_testkit::{Profile, TestServer};

#[tokio::test]
async fn a_task_is_durable_at_once_and_its_result_is_inlined_when_it_completes() {
    let s = TestServer::setup().fast_jobs().start().await;
    let d = send(&s, "server/discover", json!({}), json!({}), None).await;
    let caps = &d.result()["capabilities"];
    assert!(caps["extensions"][EXT].is_object(), "{caps}");
    assert!(
        caps.get("tasks").is_none(),
        "never beside the session era's tasks capability: {caps}"
    );

    let id = create(&s, "long_scan", json!({"steps": 5, "delay_ms": 40})).await;
    // Durable before the answer: the very next request resolves it.
    let first = task_get(&s, &id).await;
    assert_eq!(first["taskId"], id.as_str());
    assert_eq!(first["resultType"], "complete");
    let done = get_until(&s, &id, terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["structuredContent"]["scanned"], 5, "{done}");
    assert!(done["result"]["content"][0]["text"].is_string());
    assert!(done.get("error").is_none() && done.get("requestState").is_none());

    // The session era's methods that the extension removed.
    for m in ["tasks/result", "tasks/list"] {
        let a = send(&s, m, json!({"taskId": id}), with_ext(), Some(&id)).await;
        assert_eq!((a.status, a.code()), (404, -32601), "{m}: {}", a.msg);
    }
    // Mcp-Name is the task id.
    let a = send(
        &s,
        "tasks/get",
        json!({"taskId": id}),
        with_ext(),
        Some("another-task"),
    )
    .await;
    assert_eq!((a.status, a.code()), (400, -32020), "{}", a.msg);
    // Unknown ids are -32602.
    let a = send(&s, "tasks/get", json!({"taskId": "0000"}), with_ext(), None).await;
    assert_eq!(a.code(), -32602);
}

#[tokio::test]
async fn without_the_extension_there_are_no_tasks() {
    let s = TestServer::setup()
        .fast_jobs()
        .profile(Profile::Conformance)
        .start()
        .await;
    let plain = json!({"elicitation": {}});
    // A task-capable tool runs as a plain call and waits for its job.
    let a = call_tool(
        &s,
        "slow_compute",
        json!({"seconds": 0, "label": "plain"}),
        plain.clone(),
    )
    .await;
    let r = a.result();
    assert_eq!(r["resultType"], "complete", "{r}");
    assert!(r.get("taskId").is_none());
    assert_eq!(r["structuredContent"]["label"], "plain");
    // A tool that runs only as a task: -32021 naming the extension.
    let a = call_tool(&s, "failing_job", json!({}), plain.clone()).await;
    assert_eq!((a.status, a.code()), (400, -32021), "{}", a.msg);
    assert!(a.msg["error"]["data"]["requiredCapabilities"]["extensions"][EXT].is_object());
    // The tasks methods: -32021, even for an id that exists.
    let id = create(&s, "slow_compute", json!({"seconds": 30})).await;
    for (m, p) in [
        ("tasks/get", json!({"taskId": id})),
        ("tasks/cancel", json!({"taskId": id})),
        ("tasks/update", json!({"taskId": id, "inputResponses": {}})),
    ] {
        let a = send(&s, m, p, plain.clone(), None).await;
        assert_eq!(a.code(), -32021, "{m}: {}", a.msg);
    }
    send(&s, "tasks/cancel", json!({"taskId": id}), with_ext(), None).await;
}

#[tokio::test]
async fn cancel_is_an_empty_ack_and_the_job_stops_at_its_next_unit() {
    let s = TestServer::setup().fast_jobs().start().await;
    let db = s.dir().join("staunch.db");
    let id = create(&s, "import_rows", json!({"rows": 1000, "delay_ms": 20})).await;
    get_until(&s, &id, |_| rows(&db, &id) >= 3).await;
    let ack = send(&s, "tasks/cancel", json!({"taskId": id}), with_ext(), None).await;
    let ack = ack.result();
    assert_eq!(ack["resultType"], "complete");
    for f in ["taskId", "status", "result", "error"] {
        assert!(ack.get(f).is_none(), "{ack}");
    }
    let done = get_until(&s, &id, terminal).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    let n = rows(&db, &id);
    assert!((3..1000).contains(&n), "{n} rows");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(rows(&db, &id), n, "no row after the job ended");
    // Cancelling a terminal task is the same empty ack.
    let again = send(&s, "tasks/cancel", json!({"taskId": id}), with_ext(), None).await;
    assert_eq!(again.result()["resultType"], "complete");
}

#[tokio::test]
async fn input_required_until_every_question_is_answered_through_tasks_update() {
    let s = TestServer::setup()
        .fast_jobs()
        .profile(Profile::Conformance)
        .start()
        .await;
    let id = create(&s, "multi_input", json!({})).await;
    let parked = get_until(&s, &id, |t| {
        t["inputRequests"].as_object().is_some_and(|m| m.len() == 2)
    })
    .await;
    assert_eq!(parked["status"], "input_required");
    let keys: Vec<String> = parked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        parked["inputRequests"][&keys[0]]["method"],
        "elicitation/create"
    );
    let answer = |v: &str| json!({"action": "accept", "content": {"name": v}});

    // One answer (and an unknown key, ignored): still input_required, one question left.
    let ack = send(
        &s,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {keys[0].clone(): answer("first"), "nope": {}}}),
        with_ext(),
        None,
    )
    .await;
    assert_eq!(ack.result()["resultType"], "complete");
    assert!(ack.result().get("status").is_none());
    let half = task_get(&s, &id).await;
    assert_eq!(half["status"], "input_required", "{half}");
    let left: Vec<&String> = half["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(left, vec![&keys[1]]);

    send(
        &s,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {keys[1].clone(): answer("second")}}),
        with_ext(),
        None,
    )
    .await;
    let done = get_until(&s, &id, terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    let answers = &done["result"]["structuredContent"]["answers"];
    assert_eq!(answers[0]["content"]["name"], "first", "{done}");
    assert_eq!(answers[1]["content"]["name"], "second", "{done}");
}

#[tokio::test]
async fn a_reissued_call_with_its_idempotency_key_is_one_task_and_runs_once() {
    let s = TestServer::setup().fast_jobs().start().await;
    let db = s.dir().join("staunch.db");
    let args = json!({"rows": 4, "delay_ms": 20, "idempotency_key": "import-2026-0001"});
    let first = create(&s, "import_rows", args.clone()).await;
    // The stream broke; the client re-issues with a new request id.
    let second = create(&s, "import_rows", args).await;
    assert_eq!(first, second);
    let done = get_until(&s, &first, terminal).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(rows(&db, &first), 4);
}
