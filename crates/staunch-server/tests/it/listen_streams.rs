//! Long-lived streams over loopback HTTP: a `subscriptions/listen` whose `Accept` cannot carry a
//! stream is refused at once, a listener that vanished is noticed by the stream's
//! keep-alives, so its in-flight slot comes back, and a long call's stream beats while it waits
//! and closes when polling says so.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_server::{CallToolResult, Context, ToolError, ToolSpec};
use staunch_testkit::TestServer;
use staunch_testkit::http::{call, stateless};
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

/// A 2025 call's stream with SEP-1699 polling (`poll_after`) and a short keep-alive: while the
/// call runs, a comment goes out every `keep_alive` of silence; at `poll_after` the connection
/// closes without the answer; the client that resumes with `Last-Event-ID` gets the answer.
#[tokio::test]
async fn a_long_calls_stream_beats_closes_at_poll_after_and_resumes_to_its_answer() {
    let poll_after = Duration::from_millis(600);
    let s = TestServer::setup()
        .http(move |h| {
            h.poll_after = Some(poll_after);
            h.keep_alive = Duration::from_millis(100);
        })
        .tools(|b| {
            b.tool(
                ToolSpec::streaming("wait_a_while", "Answers after 1.5 s."),
                |_ctx: Context, _args: Value| async {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    Ok::<_, ToolError>(CallToolResult::text("done"))
                },
            )
        })
        .start()
        .await;
    let sid = s.initialize().await;
    let started = Instant::now();
    let r = s
        .post(Some(&sid), &call(json!(1), "wait_a_while", json!({}), None))
        .await;
    assert_eq!(r.status, 200);
    let body = timeout(Duration::from_secs(10), r.text())
        .await
        .expect("the stream closes at poll_after");
    let held = started.elapsed();
    assert!(held >= poll_after, "closed after {held:?}: {body:?}");
    assert!(
        !body.contains("\"result\""),
        "no answer before the close: {body:?}"
    );
    let beats = body.matches(": keep-alive").count();
    assert!(beats >= 2, "{beats} keep-alives in {held:?}: {body:?}");
    // The resumed stream is polled too: resume again from the last id until the answer.
    let mut last_id = last_event_id(&body).unwrap_or_else(|| panic!("an id: {body:?}"));
    let mut answer = None;
    for _ in 0..10 {
        let resumed = s.get(&sid, Some(&last_id)).await;
        assert_eq!(resumed.status, 200);
        let text = timeout(Duration::from_secs(10), resumed.text())
            .await
            .expect("the resumed stream closes");
        if let Some(data) = text.lines().find_map(|l| l.strip_prefix("data: {")) {
            answer = Some(serde_json::from_str::<Value>(&format!("{{{data}")).unwrap());
            break;
        }
        last_id = last_event_id(&text).unwrap_or(last_id);
    }
    let answer = answer.expect("the answer on a resumed stream");
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");
}

/// The last `id:` of an SSE text.
fn last_event_id(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .next_back()
        .map(str::to_string)
}
