//! The client library over real Streamable HTTP: a stream cut mid-call is resumed with
//! `Last-Event-ID` and the result arrives without the tool being called again — against a
//! staunch server (durable event store, in this process) and the TypeScript SDK peer
//! (in-memory event store); against the Python peer (no event store) the client reports the
//! loss instead of re-calling. Tasks over HTTP with the TS peer.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use staunch_client::result::text_of;
use staunch_client::tasks::{TaskOptions, TaskOutcome};
use staunch_client::{CallOptions, Client, ClientError, ConnectOptions, HttpOptions};
use staunch_testkit::TestServer;
use staunch_testkit::peers::{DropProxy, Peers};

fn connect_opts() -> ConnectOptions {
    ConnectOptions {
        // Resumption after a dropped stream is the session era's (2026 has none).
        era: staunch_client::EraChoice::Session,
        http: HttpOptions {
            default_retry: Duration::from_millis(200),
            ..HttpOptions::default()
        },
        ..ConnectOptions::default()
    }
}

fn call_opts() -> CallOptions {
    CallOptions::default()
        .timeout(Duration::from_secs(15))
        .max_total(Duration::from_secs(60))
}

/// Calls slow_count through a proxy that cuts the call's stream at its first progress event.
async fn call_through_drop(
    upstream: u16,
) -> (
    Result<serde_json::Value, ClientError>,
    Vec<f64>,
    Client,
    DropProxy,
) {
    let proxy = DropProxy::start(upstream).await;
    let client = Client::connect_http(&proxy.url(), &connect_opts())
        .await
        .expect("connect");
    let mut seen = Vec::new();
    let r = client
        .call_tool(
            "slow_count",
            json!({"steps": 20, "delay_ms": 50}),
            &call_opts(),
            |p| seen.push(p.progress),
        )
        .await;
    (r, seen, client, proxy)
}

#[tokio::test]
async fn staunch_resume_after_a_dropped_stream_without_a_second_execution() {
    let server = TestServer::start().await;
    let (r, seen, client, proxy) = call_through_drop(server.port).await;
    let r = r.expect("the result arrives through the resumed stream");
    assert_eq!(text_of(&r), "counted 20");
    assert!(proxy.dropped.load(Ordering::SeqCst), "the stream was cut");
    assert!(client.resumes() >= 1, "resumed with Last-Event-ID");
    assert_eq!(
        proxy.tool_calls.load(Ordering::SeqCst),
        1,
        "tools/call was sent once"
    );
    // Replay continues after the last event seen: nothing twice, nothing missing at the end.
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&20.0));
    client.close().await;
    // The server ran it once.
    let mut starts = 0;
    for _ in 0..100 {
        let lines = server.log_lines();
        starts = lines
            .iter()
            .filter(|l| l["event"] == "request.start" && l["tool"] == "slow_count")
            .count();
        if lines
            .iter()
            .any(|l| l["event"] == "request.end" && l["tool"] == "slow_count")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(starts, 1);
}

#[tokio::test]
async fn typescript_peer_resume_after_a_dropped_stream() {
    let Some(peers) = Peers::find("typescript_peer_resume_after_a_dropped_stream") else {
        return;
    };
    let server = peers.ts_http().await;
    let (r, seen, client, proxy) = call_through_drop(server.port).await;
    let r = r.expect("the TS peer's event store replays the result");
    assert_eq!(text_of(&r), "counted 20");
    assert!(proxy.dropped.load(Ordering::SeqCst));
    assert!(client.resumes() >= 1);
    assert_eq!(proxy.tool_calls.load(Ordering::SeqCst), 1);
    assert_eq!(seen.last(), Some(&20.0));
    client.close().await;
}

#[tokio::test]
async fn python_peer_loses_the_result_and_the_client_does_not_call_again() {
    let Some(peers) = Peers::find("python_peer_loses_the_result") else {
        return;
    };
    let server = peers.py_http().await;
    let (r, _, client, proxy) = call_through_drop(server.port).await;
    assert!(matches!(r, Err(ClientError::StreamLost(_))), "{r:?}");
    assert_eq!(
        proxy.tool_calls.load(Ordering::SeqCst),
        1,
        "never re-called"
    );
    client.close().await;
}

#[tokio::test]
async fn typescript_peer_task_over_http() {
    let Some(peers) = Peers::find("typescript_peer_task_over_http") else {
        return;
    };
    let server = peers.ts_http().await;
    let client = Client::connect_http(&server.url(), &connect_opts())
        .await
        .unwrap();
    assert!(client.server().supports_tool_tasks());
    let mut polls = 0;
    let out = client
        .call_tool_task(
            "slow_count_task",
            json!({"steps": 5, "delay_ms": 20}),
            &call_opts(),
            &TaskOptions::default(),
            staunch_client::input::no_answers,
            |e| {
                if let staunch_client::tasks::TaskEvent::Status(_) = e {
                    polls += 1;
                }
            },
        )
        .await
        .unwrap();
    match out {
        TaskOutcome::Finished { result, .. } => assert_eq!(text_of(&result.unwrap()), "counted 5"),
        other => panic!("{other:?}"),
    }
    assert!(polls >= 1);
    client.close().await;
}
