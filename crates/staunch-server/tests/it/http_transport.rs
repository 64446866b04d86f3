//! Streamable HTTP over loopback sockets: a dropped stream loses nothing, replay stays
//! within its stream and session, and every bad request gets a clear status.

use std::time::Duration;

use serde_json::json;
use staunch_testkit::TestServer;
use staunch_testkit::http::{call, ended, lines_of, progress_values, responses};

const T: Duration = Duration::from_secs(10);

#[tokio::test]
async fn priming_event_then_progress_then_the_response() {
    let s = TestServer::start().await;
    let sid = s.initialize().await;
    let mut r = s
        .post(
            Some(&sid),
            &call(
                json!(1),
                "slow_count",
                json!({"steps": 3, "delay_ms": 10}),
                Some(json!("t")),
            ),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("text/event-stream")
    );
    let events = r.events_until_end(T).await;
    let priming = &events[0];
    assert!(priming.id.as_deref().unwrap().ends_with(":0"));
    assert_eq!(priming.data, "");
    assert_eq!(priming.retry, Some(1000));
    assert_eq!(progress_values(&events), vec![1, 2, 3]);
    let resp = responses(&events, &json!(1));
    assert_eq!(resp.len(), 1);
    assert_eq!(resp[0]["result"]["content"][0]["text"], "counted 3");
    // Every event id is unique and names the same stream.
    let stream = priming.id.as_deref().unwrap().split(':').next().unwrap();
    let ids: Vec<&str> = events.iter().filter_map(|e| e.id.as_deref()).collect();
    assert!(ids.iter().all(|i| i.starts_with(stream)));
    let mut dedup = ids.clone();
    dedup.dedup();
    assert_eq!(dedup.len(), ids.len());
}

#[tokio::test]
async fn resume_after_a_dropped_stream_while_the_call_runs() {
    let s = TestServer::start().await;
    let sid = s.initialize().await;
    let id = json!("long");
    let mut r = s
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 20, "delay_ms": 30}),
                Some(json!(1)),
            ),
        )
        .await;
    let mut seen = Vec::new();
    while progress_values(&seen).len() < 3 {
        seen.push(r.next_event(T).await.expect("event"));
    }
    let last_id = seen.last().unwrap().id.clone().unwrap();
    drop(r); // the connection drops mid-call
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut g = s.get(&sid, Some(&last_id)).await;
    assert_eq!(g.status, 200);
    let rest = g.events_until_end(T).await;
    let mut all = progress_values(&seen);
    all.extend(progress_values(&rest));
    // No gap and no duplicate across the drop, from one GET.
    assert_eq!(all, (1..=20).collect::<Vec<_>>());
    assert_eq!(responses(&rest, &id).len(), 1);
    let lines = s.log_until(|l| ended(l, &sid, &id)).await;
    let starts = lines_of(&lines, &sid, &id)
        .iter()
        .filter(|l| l["event"] == "request.start")
        .count();
    assert_eq!(starts, 1, "the tool ran once");
    assert!(
        !lines_of(&lines, &sid, &id)
            .iter()
            .any(|l| l["event"] == "request.cancel_received"),
        "a disconnect is not a cancel"
    );
}

#[tokio::test]
async fn result_finished_while_away_is_delivered_exactly_once() {
    let s = TestServer::start().await;
    let sid = s.initialize().await;
    let id = json!(5);
    let mut r = s
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 5, "delay_ms": 20}),
                Some(json!("p")),
            ),
        )
        .await;
    let priming = r.next_event(T).await.unwrap();
    drop(r);
    // The call finishes while the client is away.
    let lines = s.log_until(|l| ended(l, &sid, &id)).await;
    assert_eq!(lines_of(&lines, &sid, &id).last().unwrap()["outcome"], "ok");
    let mut g = s.get(&sid, priming.id.as_deref()).await;
    let events = g.events_until_end(T).await;
    assert_eq!(progress_values(&events), vec![1, 2, 3, 4, 5]);
    let resp = responses(&events, &id);
    assert_eq!(resp.len(), 1);
    assert_eq!(resp[0]["result"]["content"][0]["text"], "counted 5");
    // Resuming from the response's id yields nothing more: delivered exactly once.
    let mut again = s.get(&sid, events.last().unwrap().id.as_deref()).await;
    assert_eq!(again.status, 200);
    assert!(
        again
            .events_until_end(Duration::from_secs(2))
            .await
            .is_empty()
    );
    let starts = lines_of(&s.log_lines(), &sid, &id)
        .iter()
        .filter(|l| l["event"] == "request.start")
        .count();
    assert_eq!(starts, 1);
}

#[tokio::test]
async fn replay_never_crosses_streams_or_sessions() {
    let s = TestServer::start().await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    assert_ne!(a, b);
    let mut r1 = s
        .post(
            Some(&a),
            &call(json!(1), "echo", json!({"text": "one"}), Some(json!("t1"))),
        )
        .await;
    let e1 = r1.events_until_end(T).await;
    let mut r2 = s
        .post(
            Some(&a),
            &call(json!(2), "echo", json!({"text": "two"}), Some(json!("t2"))),
        )
        .await;
    let e2 = r2.events_until_end(T).await;
    let s1 = e1[0].id.clone().unwrap();
    let s2 = e2[0].id.clone().unwrap();
    assert_ne!(
        s1.split(':').next(),
        s2.split(':').next(),
        "one stream per request"
    );
    let mut g = s.get(&a, Some(&s1)).await;
    let replay = g.events_until_end(T).await;
    assert_eq!(responses(&replay, &json!(1)).len(), 1);
    assert!(
        responses(&replay, &json!(2)).is_empty(),
        "another stream's event was replayed"
    );
    // Session B cannot read session A's stream.
    let other = s.get(&b, Some(&s1)).await;
    assert_eq!(other.status, 404);
    assert!(other.text().await.contains("unknown Last-Event-ID"));
}

#[tokio::test]
async fn a_last_event_id_older_than_retention_gets_a_clear_answer() {
    let s = TestServer::setup()
        .http(|h| {
            h.event_max_per_stream = 2;
            h.session_idle = Duration::from_secs(2);
        })
        .start()
        .await;
    let sid = s.initialize().await;
    let mut r = s
        .post(
            Some(&sid),
            &call(
                json!(1),
                "slow_count",
                json!({"steps": 6, "delay_ms": 1}),
                Some(json!(1)),
            ),
        )
        .await;
    let events = r.events_until_end(T).await;
    let first = events[1].id.clone().unwrap();
    // Retention runs in the background (every half second with this idle setting).
    let mut status = 0;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let g = s.get(&sid, Some(&first)).await;
        status = g.status.as_u16();
        if status == 410 {
            let body = g.json().await;
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("no longer retained"),
                "{body}"
            );
            break;
        }
    }
    assert_eq!(status, 410);
}

#[tokio::test]
async fn delete_ends_the_session_and_cancels_its_work() {
    let s = TestServer::start().await;
    let sid = s.initialize().await;
    let id = json!(1);
    let mut r = s
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 10000, "delay_ms": 10}),
                Some(json!(1)),
            ),
        )
        .await;
    r.next_event(T).await.unwrap();
    let d = s
        .send("DELETE", &[("mcp-session-id", sid.as_str())], "")
        .await;
    assert_eq!(d.status, 200);
    let lines = s.log_until(|l| ended(l, &sid, &id)).await;
    let ev = lines_of(&lines, &sid, &id);
    let cancel = ev
        .iter()
        .find(|l| l["event"] == "request.cancel_received")
        .expect("cancelled");
    assert_eq!(cancel["reason"], "session deleted");
    assert_eq!(ev.last().unwrap()["outcome"], "cancelled");
    let after = s
        .post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
        )
        .await;
    assert_eq!(after.status, 404);
    let again = s
        .send("DELETE", &[("mcp-session-id", sid.as_str())], "")
        .await;
    assert_eq!(again.status, 404);
}

#[tokio::test]
async fn a_cancel_notification_ends_work_and_no_response_follows() {
    let s = TestServer::start().await;
    let sid = s.initialize().await;
    let id = json!("c");
    let mut r = s
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 10000, "delay_ms": 10}),
                Some(json!(1)),
            ),
        )
        .await;
    let r_first = r.next_event(T).await.unwrap();
    r.next_event(T).await.unwrap();
    let n = s
        .post(Some(&sid), &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c"}}))
        .await;
    assert_eq!(n.status, 202);
    let lines = s.log_until(|l| ended(l, &sid, &id)).await;
    assert_eq!(
        lines_of(&lines, &sid, &id).last().unwrap()["outcome"],
        "cancelled"
    );
    // No response is due, so the request's stream ends instead of hanging open.
    assert!(
        r.ends_within(Duration::from_secs(5)).await,
        "the cancelled request's stream stayed open"
    );
    let rest = r.events_until_end(Duration::from_millis(10)).await;
    assert!(responses(&rest, &id).is_empty());
    // Resuming it later replays what was sent and ends.
    let mut g = s
        .get(&sid, Some(&format!("{}:0", stream_of(&r_first))))
        .await;
    assert_eq!(g.status, 200);
    let replay = g.events_until_end(Duration::from_secs(5)).await;
    assert!(responses(&replay, &id).is_empty());
    assert!(!replay.is_empty());
}

#[tokio::test]
async fn idle_sessions_expire_and_their_requests_are_cancelled() {
    let s = TestServer::setup()
        .http(|h| h.session_idle = Duration::from_secs(1))
        .start()
        .await;
    let sid = s.initialize().await;
    let id = json!(1);
    let mut r = s
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 10000, "delay_ms": 10}),
                None,
            ),
        )
        .await;
    r.next_event(T).await.unwrap();
    drop(r); // the client goes away for good
    let lines = s.log_until(|l| ended(l, &sid, &id)).await;
    let ev = lines_of(&lines, &sid, &id);
    assert_eq!(
        ev.iter()
            .find(|l| l["event"] == "request.cancel_received")
            .expect("cancelled")["reason"],
        "session expired"
    );
    let after = s
        .post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
        )
        .await;
    assert_eq!(after.status, 404);
}

#[tokio::test]
async fn bad_host_or_origin_is_forbidden() {
    let s = TestServer::start().await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    .to_string();
    let base = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let mut h = base.to_vec();
    h.push(("origin", "http://evil.example.com"));
    assert_eq!(s.send("POST", &h, &init).await.status, 403);
    let mut h = base.to_vec();
    h.push(("host", "evil.example.com"));
    // hyper appends our host header; send a request whose only Host is the evil one.
    let r = raw_post(s.port, "evil.example.com", &init).await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    let mut h = base.to_vec();
    h.push(("origin", "http://localhost:3000"));
    assert_eq!(s.send("POST", &h, &init).await.status, 200);
}

async fn raw_post(port: u16, host: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    c.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    let _ = tokio::time::timeout(T, c.read_to_string(&mut out)).await;
    out
}

#[tokio::test]
async fn missing_and_unknown_sessions_get_400_and_404() {
    let s = TestServer::start().await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let r = s.post(None, &ping).await;
    assert_eq!(r.status, 400);
    assert!(r.text().await.contains("Mcp-Session-Id"));
    let r = s
        .post(Some("0123456789abcdef0123456789abcdef"), &ping)
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(s.get("nope", None).await.status, 404);
    let h = [("accept", "text/event-stream")];
    assert_eq!(s.send("GET", &h, "").await.status, 400);
}

#[tokio::test]
async fn oversized_and_garbage_bodies_get_clear_errors_and_the_server_carries_on() {
    let s = TestServer::setup()
        .config(|c| c.max_message_bytes = 1000)
        .http(|h| h.max_body_bytes = 1000)
        .start()
        .await;
    let sid = s.initialize().await;
    let big =
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "y".repeat(5000)}});
    assert_eq!(s.post(Some(&sid), &big).await.status, 413);
    let h = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", sid.as_str()),
    ];
    for (body, code) in [
        ("not json", -32700),
        ("[]", -32600),
        ("{\"jsonrpc\":\"2.0\",\"id\":{}}", -32600),
        ("", -32700),
    ] {
        let r = s.send("POST", &h, body).await;
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(r.json().await["error"]["code"], code, "{body}");
    }
    let wrong_ct = [
        ("content-type", "text/plain"),
        ("mcp-session-id", sid.as_str()),
    ];
    assert_eq!(s.send("POST", &wrong_ct, "{}").await.status, 415);
    let bad_version = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "1999-01-01"),
    ];
    let r = s
        .send(
            "POST",
            &bad_version,
            &json!({"jsonrpc":"2.0","id":3,"method":"ping"}).to_string(),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(s.send("PUT", &h, "").await.status, 405);
    // Still serving.
    let (_, ok) = s
        .post(
            Some(&sid),
            &call(json!(9), "echo", json!({"text": "fine"}), None),
        )
        .await
        .answer(T)
        .await;
    assert_eq!(ok["result"]["content"][0]["text"], "fine", "{ok}");
}

#[tokio::test]
async fn standalone_stream_is_single_and_duplicate_ids_conflict() {
    let s = TestServer::start().await;
    let sid = s.initialize().await;
    let mut g = s.get(&sid, None).await;
    assert_eq!(g.status, 200);
    let priming = g.next_event(T).await.unwrap();
    assert_eq!(priming.data, "");
    assert_eq!(s.get(&sid, None).await.status, 409);
    let mut first = s
        .post(
            Some(&sid),
            &call(
                json!(1),
                "slow_count",
                json!({"steps": 5, "delay_ms": 20}),
                None,
            ),
        )
        .await;
    first.next_event(T).await.unwrap();
    let dup = s
        .post(
            Some(&sid),
            &call(json!(1), "echo", json!({"text": "x"}), None),
        )
        .await;
    assert_eq!(dup.status, 409);
    let ev = first.events_until_end(T).await;
    assert_eq!(
        responses(&ev, &json!(1))[0]["result"]["content"][0]["text"],
        "counted 5"
    );
}

fn stream_of(e: &staunch_testkit::Event) -> String {
    e.id.as_deref()
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_string()
}
