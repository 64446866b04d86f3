//! The request lifecycle of a stdio session (the demo tools, in-process, on an in-memory
//! duplex): cancel, abort, deadline, panics, limits, progress rules and the lifecycle log.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_server::ProgressRate;
use staunch_testkit::stdio::is_response_to;
use staunch_testkit::{Setup, StdioServer, TestServer};

/// A stdio session of the demo server, initialized at 2025-11-25.
async fn ready(setup: Setup) -> StdioServer {
    let mut p = setup.stdio().await;
    p.initialize("2025-11-25").await;
    p
}

/// Lifecycle lines of one request.
fn events_of<'a>(lines: &'a [Value], id: &Value) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["request_id"] == *id).collect()
}

fn has_event(lines: &[Value], id: &Value, event: &str) -> bool {
    lines
        .iter()
        .any(|l| l["request_id"] == *id && l["event"] == event)
}

fn text_of(resp: &Value) -> String {
    resp["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn cancel_stops_slow_count_with_no_response_and_logs_it() {
    let mut p = ready(TestServer::setup()).await;
    let id = json!(7);
    let token = json!("tok-7");
    p.call(
        id.clone(),
        "slow_count",
        json!({"steps": 1000, "delay_ms": 20}),
        Some(token.clone()),
    )
    .await;
    // Wait until it is clearly running.
    p.wait_for(Duration::from_secs(5), |m| {
        m["params"]["progress"] == json!(3)
    })
    .await
    .expect("progress before cancel");
    p.cancel(id.clone()).await;
    let before = p.progress(&token).len();
    p.pump(Duration::from_millis(600)).await;
    let after = p.progress(&token).len() - before;
    // At most one notification can already be in the pipe when the cancel is sent; a server
    // that kept working would send ~30 more in this window.
    assert!(
        after <= 1,
        "{after} progress notifications after the cancel"
    );
    assert_eq!(
        p.responses_to(&id),
        0,
        "a cancelled request must not be answered"
    );

    // The server is still fine.
    p.request(json!("p"), "ping", json!({})).await;
    assert_eq!(p.response(&json!("p")).await["result"], json!({}));

    let lines = p.log_until(|l| has_event(l, &id, "request.end")).await;
    let events: Vec<&str> = events_of(&lines, &id)
        .iter()
        .map(|l| l["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        ["request.start", "request.cancel_received", "request.end"],
        "{lines:#?}"
    );
    let end = events_of(&lines, &id).into_iter().last().unwrap();
    assert_eq!(end["outcome"], "cancelled");
    assert_eq!(end["tool"], "slow_count");
    assert_eq!(end["session"], "stdio");
    assert!(end["after_cancel_ms"].as_u64().is_some());
}

#[tokio::test]
async fn stubborn_handler_is_aborted_after_the_grace_period() {
    let mut p =
        ready(TestServer::setup().config(|c| c.cancel_grace = Duration::from_millis(300))).await;
    let id = json!("stubborn");
    let token = json!(1);
    p.call(
        id.clone(),
        "stubborn_count",
        json!({"steps": 1000, "delay_ms": 20}),
        Some(token.clone()),
    )
    .await;
    p.wait_for(Duration::from_secs(5), |m| {
        m["params"]["progress"] == json!(2)
    })
    .await
    .expect("progress");
    p.cancel(id.clone()).await;
    let before = p.progress(&token).len();
    let lines = p.log_until(|l| has_event(l, &id, "request.end")).await;
    p.pump(Duration::from_millis(200)).await;
    // Progress stops at the cancel even though the handler does not listen.
    assert!(p.progress(&token).len() - before <= 1);
    assert_eq!(p.responses_to(&id), 0);
    assert!(has_event(&lines, &id, "request.aborted"), "{lines:#?}");
    let end = events_of(&lines, &id).into_iter().last().unwrap();
    assert_eq!(end["outcome"], "aborted");
    // It ran at least the grace period past the cancel, and was then stopped.
    assert!(end["after_cancel_ms"].as_u64().unwrap() >= 300);
}

#[tokio::test]
async fn blocking_work_stops_at_its_next_unit() {
    let mut p =
        ready(TestServer::setup().config(|c| c.cancel_grace = Duration::from_secs(5))).await;
    let id = json!("cpu");
    let token = json!("cpu");
    p.call(
        id.clone(),
        "cpu_count",
        json!({"steps": 500, "delay_ms": 10}),
        Some(token.clone()),
    )
    .await;
    p.wait_for(Duration::from_secs(5), |m| {
        m["params"]["progress"] == json!(2)
    })
    .await
    .expect("progress");
    p.cancel(id.clone()).await;
    let lines = p.log_until(|l| has_event(l, &id, "request.end")).await;
    let end = events_of(&lines, &id).into_iter().last().unwrap().clone();
    // Cooperative: it stopped by itself, well within the 5 s grace, and was not aborted.
    assert_eq!(end["outcome"], "cancelled", "{end}");
    assert!(!has_event(&lines, &id, "request.aborted"));
    assert_eq!(p.responses_to(&id), 0);
}

#[tokio::test]
async fn ping_answers_while_eight_slow_tools_run() {
    let mut p = ready(TestServer::setup()).await;
    for i in 0..8 {
        p.call(
            json!(i),
            "slow_count",
            json!({"steps": 20, "delay_ms": 50}),
            None,
        )
        .await;
    }
    p.request(json!("ping"), "ping", json!({})).await;
    p.request(json!("list"), "tools/list", json!({})).await;
    p.response(&json!("ping")).await;
    p.response(&json!("list")).await;
    let answered_slow = (0..8).filter(|i| p.responses_to(&json!(i)) > 0).count();
    assert_eq!(answered_slow, 0, "ping waited for the slow tools");
    for i in 0..8 {
        assert_eq!(text_of(&p.response(&json!(i)).await), "counted 20");
    }
}

#[tokio::test]
async fn a_panic_is_answered_and_the_server_lives_on() {
    let mut p = ready(TestServer::setup()).await;
    p.call(json!(1), "fail", json!({"how": "panic"}), None)
        .await;
    let r = p.response(&json!(1)).await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("panic"));
    p.call(json!(2), "echo", json!({"text": "alive"}), None)
        .await;
    assert_eq!(text_of(&p.response(&json!(2)).await), "alive");
    let lines = p
        .log_until(|l| has_event(l, &json!(1), "request.end"))
        .await;
    assert_eq!(
        events_of(&lines, &json!(1)).last().unwrap()["outcome"],
        "panic"
    );
}

#[tokio::test]
async fn failures_reach_the_client_in_their_own_form() {
    let mut p = ready(TestServer::setup()).await;
    p.call(json!(1), "fail", json!({"how": "tool_error"}), None)
        .await;
    let r = p.response(&json!(1)).await;
    assert_eq!(r["result"]["isError"], true);
    p.call(json!(2), "fail", json!({"how": "rpc_error"}), None)
        .await;
    assert_eq!(p.response(&json!(2)).await["error"]["code"], -32050);
}

#[tokio::test]
async fn the_concurrency_limit_answers_a_clear_error() {
    let mut p = ready(TestServer::setup().config(|c| c.max_in_flight = 2)).await;
    p.call(
        json!(1),
        "slow_count",
        json!({"steps": 1000, "delay_ms": 10}),
        None,
    )
    .await;
    p.call(
        json!(2),
        "slow_count",
        json!({"steps": 1000, "delay_ms": 10}),
        None,
    )
    .await;
    p.call(json!(3), "echo", json!({"text": "x"}), None).await;
    let r = p.response(&json!(3)).await;
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("busy"));
    // Inline methods still answer at the limit.
    p.request(json!("ping"), "ping", json!({})).await;
    p.response(&json!("ping")).await;
    p.cancel(json!(1)).await;
    p.cancel(json!(2)).await;
    p.log_until(|l| {
        has_event(l, &json!(2), "request.end") && has_event(l, &json!(1), "request.end")
    })
    .await;
    p.call(json!(4), "echo", json!({"text": "again"}), None)
        .await;
    assert_eq!(text_of(&p.response(&json!(4)).await), "again");
}

#[tokio::test]
async fn progress_without_a_token_sends_nothing() {
    let mut p = ready(TestServer::setup()).await;
    p.call(
        json!(1),
        "slow_count",
        json!({"steps": 5, "delay_ms": 5}),
        None,
    )
    .await;
    p.response(&json!(1)).await;
    let progress = p
        .history
        .iter()
        .filter(|s| s.msg["method"] == "notifications/progress")
        .count();
    assert_eq!(progress, 0);
}

#[tokio::test]
async fn progress_strictly_increases_is_rate_limited_and_ends_exact() {
    let mut p = ready(TestServer::setup().config(|c| {
        c.progress_rate = ProgressRate {
            burst: 10,
            per_second: 50.0,
        }
    }))
    .await;
    let token = json!("flood");
    p.call(
        json!(1),
        "progress_flood",
        json!({"reports": 200000}),
        Some(token.clone()),
    )
    .await;
    let resp = p.response(&json!(1)).await;
    assert_eq!(text_of(&resp), "reported 200000");
    let values: Vec<f64> = p.progress(&token).into_iter().map(|(_, v)| v).collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "not strictly increasing"
    );
    assert_eq!(
        *values.last().unwrap(),
        200000.0,
        "last value flushed before the response"
    );
    assert!(values.len() >= 10, "the burst passes: {}", values.len());
    assert!(
        values.len() < 2000,
        "a flood of 200000 reports was not coalesced: {}",
        values.len()
    );
    // The response comes after the last progress, never before.
    let resp_pos = p
        .history
        .iter()
        .position(|s| is_response_to(&s.msg, &json!(1)))
        .unwrap();
    let last_progress = p
        .history
        .iter()
        .rposition(|s| s.msg["method"] == "notifications/progress")
        .unwrap();
    assert!(last_progress < resp_pos);
}

#[tokio::test]
async fn a_short_burst_of_progress_passes_unchanged() {
    let mut p = ready(TestServer::setup()).await;
    let token = json!(99);
    p.call(
        json!(1),
        "slow_count",
        json!({"steps": 10, "delay_ms": 1}),
        Some(token.clone()),
    )
    .await;
    p.response(&json!(1)).await;
    let values: Vec<f64> = p.progress(&token).into_iter().map(|(_, v)| v).collect();
    assert_eq!(values, (1..=10).map(f64::from).collect::<Vec<_>>());
}

#[tokio::test]
async fn cancels_racing_completion_are_harmless() {
    let mut p = ready(TestServer::setup()).await;
    for i in 0..200 {
        p.call(
            json!(i),
            "slow_count",
            json!({"steps": 1, "delay_ms": i % 4}),
            None,
        )
        .await;
        p.cancel(json!(i)).await;
    }
    // Cancels of ids never seen, and repeated ones.
    p.cancel(json!("never")).await;
    p.cancel(json!(0)).await;
    p.request(json!("ping"), "ping", json!({})).await;
    p.response(&json!("ping")).await;
    // Wait for every line the assertions read: the log is written behind the wire, so the
    // ping's answer does not mean the cancel of "never" has been logged yet.
    let lines = p
        .log_until(|l| {
            (0..200).all(|i| has_event(l, &json!(i), "request.end"))
                && has_event(l, &json!("never"), "request.cancel_ignored")
        })
        .await;
    for i in 0..200 {
        let id = json!(i);
        let answered = p.responses_to(&id);
        assert!(answered <= 1, "request {i} answered {answered} times");
        let end = events_of(&lines, &id)
            .into_iter()
            .rfind(|l| l["event"] == "request.end")
            .unwrap()
            .clone();
        // Answered exactly when it finished before its cancel arrived.
        let cancelled = has_event(&lines, &id, "request.cancel_received");
        assert_eq!(answered == 0, cancelled, "request {i}: {end}");
    }
    assert!(lines.iter().any(|l| l["request_id"] == "never"
        && l["event"] == "request.cancel_ignored"
        && l["why"] == "unknown_id"));
}

#[tokio::test]
async fn duplicate_in_flight_ids_are_rejected() {
    let mut p = ready(TestServer::setup()).await;
    p.call(
        json!(5),
        "slow_count",
        json!({"steps": 5, "delay_ms": 40}),
        None,
    )
    .await;
    p.call(json!(5), "echo", json!({"text": "dup"}), None).await;
    let first = p.response(&json!(5)).await;
    assert_eq!(first["error"]["code"], -32600, "{first}");
    assert!(
        first["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in flight")
    );
    p.pump(Duration::from_millis(400)).await;
    let answers: Vec<&Value> = p
        .history
        .iter()
        .filter(|s| is_response_to(&s.msg, &json!(5)))
        .map(|s| &s.msg)
        .collect();
    assert_eq!(answers.len(), 2);
    assert_eq!(text_of(answers[1]), "counted 5");
}

#[tokio::test]
async fn a_deadline_answers_a_clear_error() {
    let mut p =
        ready(TestServer::setup().config(|c| c.streaming_deadline = Duration::from_millis(200)))
            .await;
    p.call(
        json!(1),
        "slow_count",
        json!({"steps": 1000, "delay_ms": 20}),
        None,
    )
    .await;
    let r = p.response(&json!(1)).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text_of(&r).contains("deadline"), "{r}");
    let lines = p
        .log_until(|l| has_event(l, &json!(1), "request.end"))
        .await;
    assert_eq!(
        events_of(&lines, &json!(1)).last().unwrap()["outcome"],
        "deadline"
    );
}

#[tokio::test]
async fn atomic_writes_finish_despite_a_cancel_and_are_not_answered() {
    let mut p = ready(TestServer::setup()).await;
    p.call(
        json!(1),
        "set_value",
        json!({"key": "k", "value": "v1", "write_ms": 300}),
        None,
    )
    .await;
    p.log_until(|l| has_event(l, &json!(1), "request.start"))
        .await;
    p.cancel(json!(1)).await;
    let lines = p
        .log_until(|l| has_event(l, &json!(1), "request.end"))
        .await;
    assert_eq!(p.responses_to(&json!(1)), 0);
    let ignored = events_of(&lines, &json!(1))
        .into_iter()
        .find(|l| l["event"] == "request.cancel_ignored")
        .expect("cancel_ignored logged");
    assert_eq!(ignored["why"], "atomic");
    p.call(json!(2), "get_value", json!({"key": "k"}), None)
        .await;
    assert_eq!(text_of(&p.response(&json!(2)).await), "v1");
}

#[tokio::test]
async fn export_report_compensates_in_cleanup_after_a_cancel() {
    let mut p = ready(TestServer::setup()).await;
    let token = json!("exp");
    p.call(
        json!(1),
        "export_report",
        json!({"pages": 1000, "delay_ms": 20}),
        Some(token.clone()),
    )
    .await;
    p.wait_for(Duration::from_secs(5), |m| {
        m["params"]["progress"] == json!(3)
    })
    .await
    .unwrap();
    p.cancel(json!(1)).await;
    p.log_until(|l| has_event(l, &json!(1), "request.end"))
        .await;
    p.call(json!(2), "export_status", json!({}), None).await;
    let r = p.response(&json!(2)).await;
    let exports = r["result"]["structuredContent"]["exports"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(exports.len(), 1, "{r}");
    assert!(
        exports[0].as_str().unwrap().contains("aborted after"),
        "{r}"
    );
    assert_eq!(p.responses_to(&json!(1)), 0);
}

#[tokio::test]
async fn initialize_is_not_cancellable_and_versions_negotiate() {
    let mut p = TestServer::setup().stdio().await;
    let r = p.initialize("2025-03-26").await;
    assert_eq!(r["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(r["result"]["serverInfo"]["name"], "staunch");
    p.cancel(json!("init")).await;
    let lines = p
        .log_until(|l| has_event(l, &json!("init"), "request.cancel_ignored"))
        .await;
    let ignored = events_of(&lines, &json!("init"))
        .into_iter()
        .find(|l| l["event"] == "request.cancel_ignored")
        .unwrap()
        .clone();
    assert_eq!(ignored["why"], "not_cancellable");

    let mut q = TestServer::setup().stdio().await;
    assert_eq!(
        q.initialize("2024-11-05").await["result"]["protocolVersion"],
        "2025-11-25"
    );
    // server/discover is a stateless-era request: without its _meta it is malformed (-32602),
    // with it the same connection answers in the stateless era.
    q.request(json!(1), "server/discover", json!({})).await;
    assert_eq!(q.response(&json!(1)).await["error"]["code"], -32602);
    let meta = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    }});
    q.request(json!(2), "server/discover", meta).await;
    let d = q.response(&json!(2)).await;
    assert_eq!(d["result"]["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(d["result"]["resultType"], "complete");
    assert_eq!(
        d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "staunch"
    );
}

#[tokio::test]
async fn malformed_input_gets_the_right_error_codes() {
    let mut p = ready(TestServer::setup().config(|c| c.max_message_bytes = 2000)).await;
    let cases: Vec<(String, Value, i64)> = vec![
        ("not json".into(), Value::Null, -32700),
        ("{\"jsonrpc\":\"2.0\",".into(), Value::Null, -32700),
        ("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]".into(), Value::Null, -32600),
        ("{\"jsonrpc\":\"1.0\",\"id\":\"v\",\"method\":\"ping\"}".into(), json!("v"), -32600),
        ("{\"jsonrpc\":\"2.0\",\"id\":\"m\",\"method\":7}".into(), json!("m"), -32600),
        ("{\"jsonrpc\":\"2.0\",\"id\":\"u\",\"method\":\"no/such\"}".into(), json!("u"), -32601),
        ("{\"jsonrpc\":\"2.0\",\"id\":\"n\",\"method\":\"tools/call\",\"params\":{}}".into(), json!("n"), -32602),
        ("{\"jsonrpc\":\"2.0\",\"id\":\"t\",\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}".into(), json!("t"), -32602),
        ("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":[1]}}".into(), json!("a"), -32602),
        ("{\"jsonrpc\":\"2.0\",\"id\":\"l\",\"method\":\"logging/setLevel\",\"params\":{\"level\":\"loud\"}}".into(), json!("l"), -32602),
        (format!("{{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}", "y".repeat(5000)), Value::Null, -32600),
    ];
    for (line, id, code) in &cases {
        p.send_raw(line).await;
        let r = p
            .wait_for(Duration::from_secs(5), |m| {
                m.get("error").is_some() && m["id"] == *id && m["error"]["code"] == *code
            })
            .await;
        assert!(r.is_some(), "no {code} for {line:.80}");
        // Consume it so the next null-id case waits for its own error.
        p.history
            .retain(|s| !(s.msg["id"] == *id && s.msg["error"]["code"] == *code));
    }
    // Arguments of the wrong type: a tool execution error that names the field.
    p.call(json!("ty"), "slow_count", json!({"steps": "many"}), None)
        .await;
    let r = p.response(&json!("ty")).await;
    assert_eq!(r["result"]["isError"], true);
    assert!(text_of(&r).contains("`steps`"), "{r}");
    p.request(json!("ping"), "ping", json!({})).await;
    assert_eq!(p.response(&json!("ping")).await["result"], json!({}));
}

/// A 2025 session whose client declared no `elicitation` calls `greet`: the model gets a tool
/// error it can read, naming what the client lacks — not a protocol error with a code from the
/// stateless era (-32021), which the session era does not have.
#[tokio::test]
async fn a_missing_client_capability_in_the_session_era_is_a_tool_error() {
    let mut p = ready(TestServer::setup()).await;
    p.call(json!(1), "greet", json!({}), None).await;
    let r = p.response(&json!(1)).await;
    assert!(r.get("error").is_none(), "a protocol error: {r}");
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("`elicitation` capability"), "{text}");
}
