//! The 2026-07-28 era over real HTTP: the HTTP transport answers stateless requests beside
//! session-era sessions on one endpoint — the headers and `_meta` it checks, the errors and HTTP
//! statuses it answers, closing the response stream as the cancel, input-required rounds and
//! `subscriptions/listen`.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_testkit::http::{call, stateless};
use staunch_testkit::{Profile, TestServer};

const LIMIT: Duration = Duration::from_secs(10);

async fn demo() -> TestServer {
    TestServer::start().await
}

async fn conformance() -> TestServer {
    TestServer::setup()
        .profile(Profile::Conformance)
        .start()
        .await
}

#[tokio::test]
async fn discover_and_a_call_answer_with_the_eras_decorations() {
    let s = demo().await;
    let r = s
        .post_stateless(&stateless(json!(1), "server/discover", json!({})))
        .await;
    assert_eq!(r.status, 200);
    assert!(r.header("mcp-session-id").is_none(), "no session in 2026");
    let d = r.json().await;
    assert!(
        d["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28")),
        "{d}"
    );
    assert_eq!(d["result"]["resultType"], "complete", "{d}");
    assert!(d["result"]["capabilities"]["tools"].is_object(), "{d}");

    let call = stateless(
        json!(2),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    let (notes, resp) = s.post_stateless(&call).await.answer(LIMIT).await;
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(resp["result"]["content"][0]["text"], "hi", "{resp}");
    assert_eq!(resp["result"]["resultType"], "complete");
    assert_eq!(
        resp["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "staunch",
        "{resp}"
    );

    let list = stateless(json!(3), "tools/list", json!({}));
    let l = s.post_stateless(&list).await.json().await;
    assert!(l["result"]["ttlMs"].as_u64().is_some(), "{l}");
    assert!(l["result"]["cacheScope"].is_string(), "{l}");
}

#[tokio::test]
async fn bad_requests_get_the_spec_errors_and_statuses() {
    let s = demo().await;
    let echo = stateless(
        json!(1),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    );

    // Missing MCP-Protocol-Version header.
    let r = s
        .post_stateless_with(&echo, &[("mcp-protocol-version", "")])
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json().await["error"]["code"], -32020);

    // Mcp-Method disagrees with the body.
    let r = s
        .post_stateless_with(&echo, &[("mcp-method", "tools/list")])
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json().await["error"]["code"], -32020);

    // Mcp-Name disagrees with the body.
    let r = s.post_stateless_with(&echo, &[("mcp-name", "other")]).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json().await["error"]["code"], -32020);

    // A malformed base64 header value.
    let r = s
        .post_stateless_with(&echo, &[("mcp-name", "=?base64?###?=")])
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json().await["error"]["code"], -32020);

    // An unsupported version: -32022 with the versions served.
    let mut old = echo.clone();
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = s
        .post_stateless_with(&old, &[("mcp-protocol-version", "2099-01-01")])
        .await;
    assert_eq!(r.status, 400);
    let e = r.json().await;
    assert_eq!(e["error"]["code"], -32022, "{e}");
    assert!(
        e["error"]["data"]["supported"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("2026-07-28"))),
        "{e}"
    );

    // A required _meta field missing: -32602 (clientInfo is only a SHOULD).
    let mut no_info = echo.clone();
    no_info["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let r = s.post_stateless(&no_info).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json().await["error"]["code"], -32602);

    // Unknown method, and a method the era removed: 404 + -32601.
    for method in ["no/such/method", "initialize"] {
        let r = s
            .post_stateless(&stateless(json!(9), method, json!({})))
            .await;
        assert_eq!(r.status, 404, "{method}");
        assert_eq!(r.json().await["error"]["code"], -32601, "{method}");
    }

    // Malformed JSON is still a JSON-RPC parse error.
    let r = s
        .send(
            "POST",
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
            ],
            "{not json",
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json().await["error"]["code"], -32700);

    // The server is still fine.
    let (_, ok) = s.post_stateless(&echo).await.answer(LIMIT).await;
    assert_eq!(ok["result"]["content"][0]["text"], "x");
}

#[tokio::test]
async fn get_and_delete_are_405_for_stateless_clients_and_sessions_still_work() {
    let s = demo().await;
    for method in ["GET", "DELETE"] {
        let r = s
            .send(
                method,
                &[
                    ("accept", "text/event-stream"),
                    ("mcp-protocol-version", "2026-07-28"),
                ],
                "",
            )
            .await;
        assert_eq!(r.status, 405, "{method}");
    }
    // A stateless request that carries a stale session id is served statelessly anyway.
    let echo = stateless(
        json!(1),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "y"}}),
    );
    let (_, r) = s
        .post_stateless_with(&echo, &[("mcp-session-id", "no-such-session")])
        .await
        .answer(LIMIT)
        .await;
    assert_eq!(r["result"]["content"][0]["text"], "y", "{r}");
    // And a session-era session on the same endpoint.
    let sid = s.initialize().await;
    let r = s
        .post(
            Some(&sid),
            &call(json!(2), "echo", json!({"text": "z"}), None),
        )
        .await;
    assert_eq!(r.status, 200);
    let (_, v) = r.answer(LIMIT).await;
    assert_eq!(v["result"]["content"][0]["text"], "z");
}

async fn steps(s: &TestServer, tag: &str) -> u64 {
    let q = stateless(
        json!(100),
        "tools/call",
        json!({"name": "slow_count_status", "arguments": {"tag": tag}}),
    );
    let (_, v) = s.post_stateless(&q).await.answer(LIMIT).await;
    v["result"]["structuredContent"]["steps"]
        .as_u64()
        .unwrap_or_else(|| panic!("no steps in {v}"))
}

/// Closing a 2026 request's response stream is its cancel: the log says `stream closed`, the
/// handler stops (its side effects stop growing) and nothing more is sent.
#[tokio::test]
async fn closing_the_stream_cancels_the_work() {
    let s = demo().await;
    let mut call = stateless(
        json!(7),
        "tools/call",
        json!({"name": "slow_count", "arguments": {"steps": 200, "delay_ms": 50, "tag": "close"}}),
    );
    call["params"]["_meta"]["progressToken"] = json!("t7");
    let mut r = s.post_stateless(&call).await;
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream")),
        "progress makes it a stream"
    );
    let first = r.next_event(LIMIT).await.expect("a progress event");
    assert_eq!(first.json()["method"], "notifications/progress");
    drop(r);

    let lines = s
        .log_until(|l| {
            l.iter()
                .any(|x| x["event"] == "request.end" && x["tool"] == "slow_count")
        })
        .await;
    let of_call: Vec<&Value> = lines
        .iter()
        .filter(|l| l["tool"] == "slow_count" || l["event"] == "request.cancel_received")
        .collect();
    let cancel = of_call
        .iter()
        .find(|l| l["event"] == "request.cancel_received")
        .unwrap_or_else(|| panic!("no cancel in {of_call:?}"));
    assert_eq!(cancel["reason"], "stream closed");
    let key = cancel["session"].as_str().unwrap();
    assert!(key.starts_with("req-"), "stateless key {key}");
    let end = of_call
        .iter()
        .find(|l| l["event"] == "request.end")
        .unwrap();
    assert_eq!(end["outcome"], "cancelled", "{end}");
    assert_eq!(end["session"], key);

    // The work stopped: the step count no longer grows.
    let a = steps(&s, "close").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b = steps(&s, "close").await;
    assert_eq!(a, b, "steps went on after the cancel");
    assert!(a < 200, "the count ran to the end: {a}");
}

/// A 2025 session's stream dropping is not a cancel: the call keeps running (resumable).
#[tokio::test]
async fn a_session_stream_that_drops_keeps_running() {
    let s = demo().await;
    let sid = s.initialize().await;
    let call = call(
        json!(8),
        "slow_count",
        json!({"steps": 6, "delay_ms": 50, "tag": "session"}),
        Some(json!("t8")),
    );
    let mut r = s.post(Some(&sid), &call).await;
    r.next_event(LIMIT).await.expect("a first event");
    drop(r);
    let lines = s
        .log_until(|l| {
            l.iter()
                .any(|x| x["event"] == "request.end" && x["tool"] == "slow_count")
        })
        .await;
    let end = lines
        .iter()
        .find(|x| x["event"] == "request.end" && x["tool"] == "slow_count")
        .expect("the call ended");
    assert_eq!(end["outcome"], "ok", "{end}");
    assert!(
        !lines.iter().any(|x| x["event"] == "request.cancel_received"
            && x["session"] == staunch_server::session_hash(&sid).as_str())
    );
    assert_eq!(steps(&s, "session").await, 6);
}

/// Elicitation in the stateless era: an input-required round, then the retry with the answer.
#[tokio::test]
async fn an_input_required_round_trip() {
    let s = demo().await;
    let mut first = stateless(
        json!(1),
        "tools/call",
        json!({"name": "greet", "arguments": {}}),
    );
    first["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {"form": {}}});
    let (_, r) = s.post_stateless(&first).await.answer(LIMIT).await;
    let result = &r["result"];
    assert_eq!(result["resultType"], "input_required", "{r}");
    let ask = &result["inputRequests"]["name"];
    assert_eq!(ask["method"], "elicitation/create", "{r}");
    let state = result["requestState"].as_str().expect("sealed state");

    // A tampered state is refused.
    let mut bad = first.clone();
    bad["id"] = json!(2);
    bad["params"]["requestState"] = json!(format!("{state}x"));
    bad["params"]["inputResponses"] =
        json!({"name": {"action": "accept", "content": {"name": "Mallory"}}});
    let (_, e) = s.post_stateless(&bad).await.answer(LIMIT).await;
    assert!(e["error"].is_object(), "tampered state accepted: {e}");

    let mut retry = first.clone();
    retry["id"] = json!(3);
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] =
        json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    let (_, done) = s.post_stateless(&retry).await.answer(LIMIT).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");

    // The log is written by its own thread: wait for the line rather than read once.
    let lines = s
        .log_until(|l| {
            l.iter()
                .any(|x| x["event"] == "request.end" && x["outcome"] == "input_required")
        })
        .await;
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "request.end" && l["outcome"] == "input_required"),
        "the round is logged as input_required"
    );
}

/// `subscriptions/listen`: the acknowledgement first, then list changes as they happen.
#[tokio::test]
async fn listen_acknowledges_then_streams_list_changes() {
    let s = conformance().await;
    let listen = stateless(
        json!(1),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut stream = s.post_stateless(&listen).await;
    assert_eq!(stream.status, 200);
    let ack = stream.next_event(LIMIT).await.expect("an ack").json();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );

    let trigger = stateless(
        json!(2),
        "tools/call",
        json!({"name": "test_trigger_tool_change", "arguments": {}}),
    );
    let (_, t) = s.post_stateless(&trigger).await.answer(LIMIT).await;
    assert!(t["result"].is_object(), "{t}");
    let change = stream.next_event(LIMIT).await.expect("a change").json();
    assert_eq!(
        change["method"], "notifications/tools/list_changed",
        "{change}"
    );

    // A prompt change is not what this stream asked for.
    let other = stateless(
        json!(3),
        "tools/call",
        json!({"name": "test_trigger_prompt_change", "arguments": {}}),
    );
    let _ = s.post_stateless(&other).await.answer(LIMIT).await;
    assert!(
        stream
            .next_event(Duration::from_millis(300))
            .await
            .is_none(),
        "a prompt change reached a tools-only listener"
    );
}

/// `notifications/message` only when the request set a log level.
#[tokio::test]
async fn log_messages_only_when_the_request_asks() {
    let s = conformance().await;
    let quiet = stateless(
        json!(1),
        "tools/call",
        json!({"name": "test_logging_tool", "arguments": {}}),
    );
    let (notes, r) = s.post_stateless(&quiet).await.answer(LIMIT).await;
    assert!(r["result"].is_object(), "{r}");
    assert!(notes.is_empty(), "logs without logLevel: {notes:?}");

    let mut loud = quiet.clone();
    loud["id"] = json!(2);
    loud["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
    let (notes, _) = s.post_stateless(&loud).await.answer(LIMIT).await;
    assert!(
        notes.iter().any(|n| n["method"] == "notifications/message"),
        "no log with logLevel: {notes:?}"
    );
}

/// The key that seals `requestState` lives in the store: a round begun on one instance is
/// continued on another that shares the store (or on this one after a restart).
#[tokio::test]
async fn a_round_begun_on_one_instance_continues_on_another() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db").display().to_string();
    let a = TestServer::setup().store(&db).start().await;
    let b = TestServer::setup().store(&db).start().await;
    let mut first = stateless(
        json!(1),
        "tools/call",
        json!({"name": "greet", "arguments": {}}),
    );
    first["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {"form": {}}});
    let (_, r) = a.post_stateless(&first).await.answer(LIMIT).await;
    let state = r["result"]["requestState"].as_str().expect("sealed state");
    let mut retry = first.clone();
    retry["id"] = json!(2);
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] =
        json!({"name": {"action": "accept", "content": {"name": "Grace"}}});
    let (_, done) = b.post_stateless(&retry).await.answer(LIMIT).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Grace!",
        "{done}"
    );
}

/// The same announcement reaches a 2025 session the old way: on its standalone GET stream.
#[tokio::test]
async fn a_2025_session_hears_list_changes_on_its_standalone_stream() {
    let s = conformance().await;
    let sid = s.initialize().await;
    let mut standalone = s.get(&sid, None).await;
    assert_eq!(standalone.status, 200);
    // Let the stream attach before the change is announced.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = s
        .post(
            Some(&sid),
            &call(json!(5), "test_trigger_tool_change", json!({}), None),
        )
        .await;
    let (_, v) = r.answer(LIMIT).await;
    assert!(v["result"].is_object(), "{v}");
    let mut seen = Vec::new();
    while let Some(e) = standalone.next_event(Duration::from_secs(3)).await {
        let m = e.json();
        if m["method"] == "notifications/tools/list_changed" {
            return;
        }
        seen.push(m);
    }
    panic!("no list_changed on the standalone stream: {seen:?}");
}
