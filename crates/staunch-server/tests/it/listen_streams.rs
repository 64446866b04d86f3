//! Long-lived streams over loopback HTTP: a `subscriptions/listen` whose `Accept` cannot carry a
//! stream is refused at once, and a listener that vanished is noticed by the stream's
//! keep-alives, so its in-flight slot comes back.

use std::time::Duration;

use serde_json::json;
use staunch_testkit::TestServer;
use staunch_testkit::http::stateless;
use tokio::time::{Instant, timeout};

fn listen(id: i64) -> serde_json::Value {
    stateless(
        json!(id),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    )
}

/// Regression: a listen whose `Accept` lacks `text/event-stream` got no status and no byte
/// until the client closed, holding one of the peer's in-flight slots. Its answer can only be
/// a stream, so it is refused with 406 at once.
#[tokio::test]
async fn listen_without_sse_accept_gets_406() {
    let s = TestServer::start().await;
    let msg = listen(1).to_string();
    for accept in [Some("application/json"), Some(""), None, Some("text/html")] {
        let mut h = vec![
            ("content-type", "application/json"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "subscriptions/listen"),
        ];
        if let Some(a) = accept {
            h.push(("accept", a));
        }
        let r = timeout(Duration::from_secs(2), async {
            let r = s.send("POST", &h, &msg).await;
            let status = r.status;
            (status, r.json().await)
        })
        .await
        .unwrap_or_else(|_| panic!("Accept {accept:?}: no answer within 2 s"));
        let (status, body) = r;
        assert_eq!(status, 406, "Accept {accept:?}: {body}");
        assert_eq!(body["id"], 1, "Accept {accept:?}: {body}");
        assert_eq!(body["error"]["code"], -32600, "Accept {accept:?}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("text/event-stream"), "{body}");
    }
}

/// A listener whose connection vanished holds its slot only until a keep-alive write fails:
/// with `--max-in-flight-per-peer 2`, two listens fill the peer's share; once both clients are
/// gone, a new call of the same peer is admitted within two keep-alive intervals (and a second).
#[tokio::test]
async fn a_vanished_listener_frees_its_slot() {
    let keep_alive = Duration::from_millis(200);
    let s = TestServer::setup()
        .config(|c| c.max_in_flight_per_peer = 2)
        .http(|h| h.keep_alive_stateless = keep_alive)
        .start()
        .await;
    let mut held = Vec::new();
    for id in 1..=2 {
        let mut r = s.post_stateless(&listen(id)).await;
        assert_eq!(r.status, 200);
        let ack = r.next_event(Duration::from_secs(5)).await.expect("an ack");
        assert_eq!(
            ack.json()["method"],
            "notifications/subscriptions/acknowledged"
        );
        held.push(r);
    }
    let echo = |id: i64| {
        stateless(
            json!(id),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
        )
    };
    let refused = s.post_stateless(&echo(3)).await;
    assert_eq!(refused.status, 429, "the share is full while both listen");
    drop(refused);
    // Both clients vanish: their connections close without a word.
    drop(held);
    let bound = keep_alive * 2 + Duration::from_secs(1);
    let end = Instant::now() + bound;
    let mut id = 10;
    loop {
        id += 1;
        let r = s.post_stateless(&echo(id)).await;
        if r.status == 200 {
            let body = r.json().await;
            assert_eq!(body["result"]["content"][0]["text"], "x", "{body}");
            break;
        }
        assert_eq!(r.status, 429);
        assert!(
            Instant::now() < end,
            "the vanished listeners' slots were not freed within {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The 2025 era's long-lived stream: a session's GET stream whose client vanished is noticed by
/// its keep-alives (`--keep-alive-ms`), so the session may open a new one (one at a time)
/// within two intervals (and a second), not only when the session ends.
#[tokio::test]
async fn a_vanished_get_stream_is_noticed_by_its_keep_alives() {
    let keep_alive = Duration::from_millis(200);
    let s = TestServer::setup()
        .http(|h| h.keep_alive = Duration::from_millis(200))
        .start()
        .await;
    let sid = s.initialize().await;
    let first = s.get(&sid, None).await;
    assert_eq!(first.status, 200);
    let second = s.get(&sid, None).await;
    assert_eq!(second.status, 409, "one standalone stream per session");
    drop(second);
    // The client vanishes without a word.
    drop(first);
    let bound = keep_alive * 2 + Duration::from_secs(1);
    let end = Instant::now() + bound;
    loop {
        let r = s.get(&sid, None).await;
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 409);
        assert!(
            Instant::now() < end,
            "the vanished GET stream was not noticed within {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
