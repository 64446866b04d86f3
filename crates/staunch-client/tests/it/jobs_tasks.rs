//! Job tools and tasks against a scripted server on a paused clock.

use crate::fake;

use std::time::Duration;

use fake::{pair, pair_with, structured, text};
use serde_json::{Value, json};
use staunch_client::jobs::{JobEvent, JobOptions};
use staunch_client::tasks::{TaskOptions, TaskOutcome};
use staunch_client::{CallOptions, ClientError};
use tokio_util::sync::CancellationToken;

fn call_opts() -> CallOptions {
    CallOptions::default()
        .timeout(Duration::from_millis(1000))
        .max_total(Duration::from_secs(3600))
}

#[tokio::test(start_paused = true)]
async fn a_retried_start_reuses_its_idempotency_key() {
    let (client, mut server) = pair().await;
    let c = client.clone();
    let job = tokio::spawn(async move {
        let mut retries = 0;
        let out = c
            .call_job(
                "start_import",
                json!({"rows": 3}),
                &call_opts(),
                &JobOptions::default(),
                |e| {
                    if let JobEvent::StartRetry { .. } = e {
                        retries += 1;
                    }
                },
            )
            .await;
        (out, retries)
    });
    // First start: the server is slow to answer; the client times out and cancels.
    let first = server.recv().await;
    assert_eq!(first["params"]["name"], "start_import");
    let key = first["params"]["arguments"]["idempotency_key"].clone();
    assert!(key.as_str().is_some_and(|k| k.len() >= 16));
    let cancel = server.recv().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    // Second start: a new request id, the same key — the server returns the same job.
    let second = server.recv().await;
    assert_eq!(second["params"]["name"], "start_import");
    assert_ne!(second["id"], first["id"]);
    assert_eq!(second["params"]["arguments"]["idempotency_key"], key);
    assert_eq!(second["params"]["arguments"]["rows"], 3);
    server
        .respond(
            &second["id"],
            structured(json!({"job_id":"j1","status":"running","poll_after_ms":200})),
        )
        .await;
    let get = server.recv().await;
    assert_eq!(
        get["params"],
        json!({"name":"get_import","arguments":{"job_id":"j1"}})
    );
    server
        .respond(
            &get["id"],
            structured(json!({"status":"running","progress":{"done":1,"total":3}})),
        )
        .await;
    let get = server.recv().await;
    server
        .respond(
            &get["id"],
            structured(json!({"status":"succeeded","result":{"rows":3}})),
        )
        .await;
    let (out, retries) = job.await.unwrap();
    let out = out.expect("job followed to the end");
    assert_eq!(retries, 1);
    assert_eq!(out.start_attempts, 2);
    assert_eq!(out.idempotency_key, key.as_str().unwrap());
    assert!(out.last.succeeded());
    assert_eq!(out.last.result(), Some(&json!({"rows":3})));
    assert!(out.interrupted.is_none());
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_job_calls_cancel_and_waits_for_the_terminal_state() {
    let (client, mut server) = pair().await;
    let stop = CancellationToken::new();
    let c = client.clone();
    let o = call_opts().cancel_on(stop.clone());
    let job = tokio::spawn(async move {
        c.call_job("start_scan", json!({}), &o, &JobOptions::default(), |_| {})
            .await
    });
    let start = server.recv().await;
    server
        .respond(
            &start["id"],
            structured(json!({"job_id":"j9","status":"queued","poll_after_ms":100})),
        )
        .await;
    let get = server.recv().await;
    server
        .respond(&get["id"], structured(json!({"status":"running"})))
        .await;
    stop.cancel();
    let cancel = server.recv().await;
    assert_eq!(
        cancel["params"],
        json!({"name":"cancel_scan","arguments":{"job_id":"j9"}})
    );
    server
        .respond(&cancel["id"], structured(json!({"status":"cancelling"})))
        .await;
    let get = server.recv().await;
    assert_eq!(get["params"]["name"], "get_scan");
    server
        .respond(&get["id"], structured(json!({"status":"cancelled"})))
        .await;
    let out = job.await.unwrap().unwrap();
    assert!(out.last.cancelled());
    assert!(matches!(out.interrupted, Some(ClientError::Cancelled)));
}

#[tokio::test(start_paused = true)]
async fn a_job_tool_error_at_start_is_reported() {
    let (client, mut server) = pair().await;
    let c = client.clone();
    let job = tokio::spawn(async move {
        c.call_job(
            "start_x",
            json!({}),
            &call_opts(),
            &JobOptions::default(),
            |_| {},
        )
        .await
    });
    let start = server.recv().await;
    let mut err = text("idempotency_key_reused");
    err["isError"] = json!(true);
    server.respond(&start["id"], err).await;
    assert!(matches!(job.await.unwrap(), Err(ClientError::Tool(m)) if m.contains("reused")));
}

fn task(status: &str) -> Value {
    json!({"taskId":"t1","status":status,"createdAt":"2025-11-25T10:30:00Z",
           "lastUpdatedAt":"2025-11-25T10:30:00Z","ttl":60000,"pollInterval":250})
}

#[tokio::test(start_paused = true)]
async fn a_task_is_polled_at_its_interval_then_its_result_fetched() {
    let (client, mut server) = pair_with(json!({"tasks":{"requests":{"tools":{"call":{}}}}})).await;
    assert!(client.server().supports_tool_tasks());
    let c = client.clone();
    let run = tokio::spawn(async move {
        let mut progress = Vec::new();
        let out = c
            .call_tool_task(
                "slow",
                json!({"n":1}),
                &call_opts(),
                &TaskOptions::default(),
                staunch_client::input::no_answers,
                |e| {
                    if let staunch_client::tasks::TaskEvent::Progress(p) = e {
                        progress.push(p.progress);
                    }
                },
            )
            .await;
        (out, progress)
    });
    let create = server.recv().await;
    assert_eq!(create["params"]["task"]["ttl"], 600_000);
    let token = create["params"]["_meta"]["progressToken"].clone();
    server
        .respond(&create["id"], json!({"task": task("working")}))
        .await;
    // The token stays valid until the task is terminal.
    server.progress(&token, 1.0).await;
    // No poll before the server's pollInterval.
    assert!(
        server
            .recv_within(Duration::from_millis(200))
            .await
            .is_none()
    );
    let get = server.recv().await;
    assert_eq!(get["method"], "tasks/get");
    assert_eq!(get["params"], json!({"taskId":"t1"}));
    server.respond(&get["id"], task("working")).await;
    let get = server.recv().await;
    server.respond(&get["id"], task("completed")).await;
    let res = server.recv().await;
    assert_eq!(res["method"], "tasks/result");
    server.respond(&res["id"], text("counted 1")).await;
    let (out, progress) = run.await.unwrap();
    match out.unwrap() {
        TaskOutcome::Finished { task, result } => {
            assert_eq!(task.task_id, "t1");
            assert_eq!(result.unwrap(), text("counted 1"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(progress, [1.0]);
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_task_uses_tasks_cancel_not_a_notification() {
    let (client, mut server) = pair_with(json!({"tasks":{"requests":{"tools":{"call":{}}}}})).await;
    let stop = CancellationToken::new();
    let c = client.clone();
    let o = call_opts().cancel_on(stop.clone());
    let run = tokio::spawn(async move {
        let answer = staunch_client::input::no_answers;
        c.call_tool_task(
            "slow",
            json!({}),
            &o,
            &TaskOptions::default(),
            answer,
            |_| {},
        )
        .await
    });
    let create = server.recv().await;
    server
        .respond(&create["id"], json!({"task": task("working")}))
        .await;
    tokio::task::yield_now().await;
    stop.cancel();
    let cancel = server.recv().await;
    assert_eq!(cancel["method"], "tasks/cancel");
    assert_eq!(cancel["params"], json!({"taskId":"t1"}));
    server.respond(&cancel["id"], task("cancelled")).await;
    assert!(matches!(run.await.unwrap(), Err(ClientError::Cancelled)));
}
