//! Timeouts, progress and cancellation against a scripted server on a paused clock: every
//! duration below is virtual, so the tests are exact and take no real time.

use crate::fake;

use std::time::Duration;

use fake::{pair, text};
use serde_json::json;
use staunch_client::{CallOptions, ClientError};
use tokio_util::sync::CancellationToken;

fn opts(timeout_ms: u64) -> CallOptions {
    CallOptions::default()
        .timeout(Duration::from_millis(timeout_ms))
        .max_total(Duration::from_secs(3600))
}

#[tokio::test(start_paused = true)]
async fn timeout_sends_the_cancel_and_discards_the_late_response() {
    let (client, mut server) = pair().await;
    let c = client.clone();
    let call = tokio::spawn(async move {
        c.call_tool(
            "slow",
            json!({}),
            &opts(1000).reset_on_progress(false),
            |_| {},
        )
        .await
    });
    let req = server.recv().await;
    assert_eq!(req["method"], "tools/call");
    // Say nothing: the client must give up after 1 s and say so.
    let cancel = server.recv().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], req["id"]);
    assert!(
        cancel["params"]["reason"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(err, ClientError::Timeout { ceiling: false, elapsed } if elapsed == Duration::from_secs(1)),
        "{err:?}"
    );

    // The server answers anyway (as Python SDK 1.x servers do): discarded, kept as evidence.
    server.respond(&req["id"], text("too late")).await;
    let ping_opts = opts(1000).progress(false);
    let ping = client.request("ping", None, &ping_opts);
    let (pong, ()) = tokio::join!(ping, async {
        let p = server.recv().await;
        assert_eq!(p["method"], "ping");
        server.respond(&p["id"], json!({})).await;
    });
    assert_eq!(pong.unwrap(), json!({}));
    let late = client.late_responses();
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].id.to_value(), req["id"]);
    assert_eq!(late[0].outcome.as_ref().unwrap(), &text("too late"));
}

#[tokio::test(start_paused = true)]
async fn progress_resets_the_timer() {
    let (client, mut server) = pair().await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let c = client.clone();
    let s = seen.clone();
    let call = tokio::spawn(async move {
        c.call_tool("slow", json!({}), &opts(1000), |p| {
            s.lock().unwrap().push(p.progress)
        })
        .await
    });
    let req = server.recv().await;
    let token = req["params"]["_meta"]["progressToken"].clone();
    assert!(!token.is_null(), "a progress token was requested");
    // Five steps of 600 ms: 3 s in all, three times the timeout, but never 1 s of silence.
    for step in 1..=5 {
        assert!(
            server
                .recv_within(Duration::from_millis(600))
                .await
                .is_none(),
            "no cancel"
        );
        server.progress(&token, f64::from(step)).await;
    }
    server.respond(&req["id"], text("counted 5")).await;
    let result = call.await.unwrap().expect("progress kept the call alive");
    assert_eq!(result, text("counted 5"));
    assert_eq!(*seen.lock().unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0]);
    assert!(client.late_responses().is_empty());
}

#[tokio::test(start_paused = true)]
async fn without_reset_the_same_progress_does_not_help() {
    let (client, mut server) = pair().await;
    let c = client.clone();
    let call = tokio::spawn(async move {
        c.call_tool(
            "slow",
            json!({}),
            &opts(1000).reset_on_progress(false),
            |_| {},
        )
        .await
    });
    let req = server.recv().await;
    let token = req["params"]["_meta"]["progressToken"].clone();
    assert!(
        server
            .recv_within(Duration::from_millis(600))
            .await
            .is_none()
    );
    server.progress(&token, 1.0).await;
    let cancel = server.recv().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert!(matches!(
        call.await.unwrap(),
        Err(ClientError::Timeout { ceiling: false, .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn the_ceiling_wins_over_progress() {
    let (client, mut server) = pair().await;
    let c = client.clone();
    let call = tokio::spawn(async move {
        let o = CallOptions::default()
            .timeout(Duration::from_millis(1000))
            .max_total(Duration::from_millis(2000));
        c.call_tool("slow", json!({}), &o, |_| {}).await
    });
    let req = server.recv().await;
    let token = req["params"]["_meta"]["progressToken"].clone();
    // Progress every 500 ms would keep the idle timer alive for ever.
    let mut step = 0.0;
    let cancel = loop {
        if let Some(m) = server.recv_within(Duration::from_millis(500)).await {
            break m;
        }
        step += 1.0;
        assert!(step < 20.0, "the ceiling never fired");
        server.progress(&token, step).await;
    };
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], req["id"]);
    assert!(
        cancel["params"]["reason"]
            .as_str()
            .unwrap()
            .contains("maximum total")
    );
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(err, ClientError::Timeout { ceiling: true, elapsed } if elapsed == Duration::from_secs(2)),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_callers_cancel_is_sent_on_the_wire() {
    let (client, mut server) = pair().await;
    let stop = CancellationToken::new();
    let c = client.clone();
    let o = opts(60_000).cancel_on(stop.clone());
    let call = tokio::spawn(async move { c.call_tool("slow", json!({}), &o, |_| {}).await });
    let req = server.recv().await;
    stop.cancel();
    let cancel = server.recv().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], req["id"]);
    assert!(matches!(call.await.unwrap(), Err(ClientError::Cancelled)));
}

#[tokio::test(start_paused = true)]
async fn dropping_a_pending_request_cancels_it() {
    let (client, mut server) = pair().await;
    let p = client
        .start_request("tools/call", Some(json!({"name":"slow"})), false)
        .unwrap();
    let req = server.recv().await;
    drop(p);
    let cancel = server.recv().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], req["id"]);
}

#[tokio::test(start_paused = true)]
async fn answers_the_servers_ping_and_refuses_other_requests() {
    let (_client, mut server) = pair().await;
    server
        .send(json!({"jsonrpc":"2.0","id":"s1","method":"ping"}))
        .await;
    let r = server.recv().await;
    assert_eq!(r, json!({"jsonrpc":"2.0","id":"s1","result":{}}));
    server
        .send(json!({"jsonrpc":"2.0","id":"s2","method":"sampling/createMessage","params":{}}))
        .await;
    let r = server.recv().await;
    assert_eq!(r["error"]["code"], -32601);
}

#[tokio::test(start_paused = true)]
async fn a_closed_connection_fails_the_pending_call() {
    let (client, server) = pair().await;
    let c = client.clone();
    let call =
        tokio::spawn(async move { c.call_tool("slow", json!({}), &opts(60_000), |_| {}).await });
    tokio::task::yield_now().await;
    drop(server);
    assert!(matches!(call.await.unwrap(), Err(ClientError::Closed(_))));
}
