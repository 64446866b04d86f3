//! Two instances on one PostgreSQL database, in the test's process: a session created on one is
//! served by the other, a stream that dropped on one is resumed on the other with every event
//! exactly once, a `DELETE`, a client's answer and a cancel posted to one reach the request on
//! the other. (Killing the writer mid-call is the binary's test.)

use std::time::Duration;

use serde_json::{Value, json};
use staunch_testkit::http::{Endpoint, Resp, call, ended};
use staunch_testkit::pg::{drop_schema_async, fresh_schema};
use staunch_testkit::{Profile, TestServer};

/// Two instances with `profile`'s tools on a fresh schema of the test database; `None` (the
/// test is skipped, and says so) without `STAUNCH_TEST_POSTGRES`.
async fn pair(test: &str, profile: Profile) -> Option<(TestServer, TestServer, String, String)> {
    let (url, schema) = fresh_schema(test)?;
    let instance = || {
        TestServer::setup()
            .profile(profile)
            .store(&url)
            .schema(&schema)
            .start()
    };
    let a = instance().await;
    let b = instance().await;
    Some((a, b, url, schema))
}

/// A `slow_count` of 30 s (600 steps, with progress) started on `s` as request `id`, once its
/// first event arrived.
async fn long_call(s: &Endpoint, sid: &str, id: &Value) -> Resp {
    let mut r = s
        .post(
            Some(sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 600, "delay_ms": 50}),
                Some(json!(1)),
            ),
        )
        .await;
    r.next_event(Duration::from_secs(10))
        .await
        .expect("the call runs");
    r
}

#[tokio::test]
async fn a_stream_dropped_on_a_resumes_on_b_exactly_once() {
    let Some((a, b, url, schema)) = pair("multi-instance HTTP resume", Profile::Demo).await else {
        return;
    };
    let sid = a.initialize().await;
    let id = json!("x");
    let mut r = a
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 12, "delay_ms": 40}),
                Some(json!(1)),
            ),
        )
        .await;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(r.next_event(Duration::from_secs(10)).await.expect("event"));
    }
    let last = seen.last().unwrap().id.clone().unwrap();
    drop(r);
    // B has never seen this session: it adopts it from the shared store and follows the
    // stream while A's handler keeps running.
    let mut g = b.get(&sid, Some(&last)).await;
    assert_eq!(g.status, 200);
    let rest = g.events_until_end(Duration::from_secs(15)).await;
    let progress: Vec<i64> = seen
        .iter()
        .chain(rest.iter())
        .map(|e| e.json())
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_i64().unwrap())
        .collect();
    assert_eq!(
        progress,
        (1..=12).collect::<Vec<_>>(),
        "every event exactly once"
    );
    let responses: Vec<_> = rest
        .iter()
        .map(|e| e.json())
        .filter(|m| m["id"] == id)
        .collect();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0]["result"]["content"][0]["text"], "counted 12");
    // The session works on B for new requests too.
    let (_, echo) = b
        .post(
            Some(&sid),
            &call(json!(2), "echo", json!({"text": "from b"}), None),
        )
        .await
        .answer(Duration::from_secs(10))
        .await;
    assert_eq!(echo["result"]["content"][0]["text"], "from b", "{echo}");
    assert!(ended(&a.log_lines(), &sid, &id));
    drop((a, b));
    drop_schema_async(&url, &schema).await;
}

/// A DELETE that lands on B ends the session that A holds at once (PostgreSQL tells every
/// instance): A cancels the session's work and answers its next request 404 — well before its
/// maintenance tick (10 s with these settings) would have noticed.
#[tokio::test]
async fn a_delete_on_b_ends_the_session_on_a() {
    let Some((a, b, url, schema)) = pair("multi-instance HTTP delete", Profile::Demo).await else {
        return;
    };
    let sid = a.initialize().await;
    let id = json!("slow");
    let _call = long_call(&a, &sid, &id).await;
    let deleted = b
        .send("DELETE", &[("mcp-session-id", sid.as_str())], "")
        .await;
    assert_eq!(deleted.status, 200, "B deletes a session it never held");
    let t0 = std::time::Instant::now();
    loop {
        let r = a
            .post(
                Some(&sid),
                &call(json!(2), "echo", json!({"text": "still here?"}), None),
            )
            .await;
        if r.status == 404 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "A still serves the session B deleted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A's running call was cancelled with the session, not left to run its 30 s.
    let cancelled = |lines: &[serde_json::Value]| {
        lines.iter().any(|l| {
            l["event"] == "request.end" && l["request_id"] == id && l["outcome"] == "cancelled"
        })
    };
    let lines = a.log_until(cancelled).await;
    assert!(cancelled(&lines), "{lines:#?}");
    drop((a, b));
    drop_schema_async(&url, &schema).await;
}

/// Behind a balancer without stickiness a client's answer to a server→client request (sampling,
/// elicitation) lands on whichever instance the balancer picks: the call waiting on A gets the
/// answer B received, and an answer to a request nobody sent is ignored.
#[tokio::test]
async fn an_answer_posted_to_b_reaches_the_request_waiting_on_a() {
    let Some((a, b, url, schema)) = pair("multi-instance answers", Profile::Conformance).await
    else {
        return;
    };
    let init = a
        .post(
            None,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"sampling": {}, "elicitation": {}},
                "clientInfo": {"name": "test", "version": "0"}}}),
        )
        .await;
    let sid = init.header("mcp-session-id").expect("session id");
    let n = a
        .post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
    assert_eq!(n.status, 202);

    // Two questions in a row, each answered through B.
    for (n, (tool, args, answer, said)) in [
        (
            "test_sampling",
            json!({"prompt": "ping?"}),
            json!({"role": "assistant", "content": {"type": "text", "text": "pong"}, "model": "m"}),
            "LLM response: pong",
        ),
        (
            "test_elicitation",
            json!({"message": "name?"}),
            json!({"action": "accept", "content": {"response": "Ada"}}),
            "Ada",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = a
            .post(Some(&sid), &call(json!(n + 1), tool, args, None))
            .await;
        let asked = loop {
            let e = r
                .next_event(Duration::from_secs(10))
                .await
                .expect("the question");
            let m = e.json();
            if m.get("method").is_some() && m.get("id").is_some() {
                break m;
            }
        };
        // Not an answer to anything: ignored, nothing breaks.
        let stray = b
            .post(
                Some(&sid),
                &json!({"jsonrpc": "2.0", "id": "staunch-0-0", "result": {}}),
            )
            .await;
        assert_eq!(stray.status, 202);
        let posted = b
            .post(
                Some(&sid),
                &json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer}),
            )
            .await;
        assert_eq!(posted.status, 202, "{tool}");
        let (_, res) = r.answer(Duration::from_secs(10)).await;
        let text = res["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains(said), "{tool}: {res}");
    }
    drop((a, b));
    drop_schema_async(&url, &schema).await;
}

/// Behind a balancer a client's `notifications/cancelled` may land on an instance that does
/// not run the request: it is passed on, and the instance that runs it stops it at once.
#[tokio::test]
async fn a_cancel_posted_to_b_stops_the_request_running_on_a() {
    let Some((a, b, url, schema)) = pair("multi-instance cancel", Profile::Demo).await else {
        return;
    };
    let sid = a.initialize().await;
    let id = json!("long");
    let mut r = long_call(&a, &sid, &id).await;
    let sent = std::time::Instant::now();
    let cancel = b
        .post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "user gave up"}}),
        )
        .await;
    assert_eq!(cancel.status, 202);
    let lines = a
        .log_until(|l| {
            l.iter().any(|l| {
                l["event"] == "request.end" && l["request_id"] == id && l["outcome"] == "cancelled"
            })
        })
        .await;
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "the cancel took {:?} to reach A: {lines:#?}",
        sent.elapsed()
    );
    // No response after the cancel: the stream ends without one.
    let rest = r.events_until_end(Duration::from_secs(5)).await;
    assert!(rest.iter().all(|e| e.json()["id"] != id), "{rest:?}");
    drop((a, b));
    drop_schema_async(&url, &schema).await;
}
