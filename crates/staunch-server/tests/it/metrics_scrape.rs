//! Metrics (`staunch serve --metrics`) of a scripted run — a cancel, an abort, a job (and its
//! idempotent re-start), a dropped stream resumed, a 2026 stateless call — then a scrape of
//! `/metrics` that must show each of them; resumes past retention, reaper purges and long
//! client strings, bounded. The server and its metrics listener run in the test's process; the
//! binary's test of the `--metrics` flag is `crates/staunch/tests/it/metrics.rs`.

use std::time::Duration;

use serde_json::json;
use staunch_testkit::TestServer;
use staunch_testkit::http::{Endpoint, call, ended, lines_of, rpc, stateless, tool_structured};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(20);

/// `GET /metrics` over a plain TCP connection: (status line, content type, body).
async fn scrape(port: u16) -> (String, String, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head.lines().next().unwrap().to_string();
    let ctype = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(String::from)
        })
        .unwrap_or_default();
    (status, ctype, body.to_string())
}

/// The value of the sample `series` (name with labels, exactly as exposed), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn must(text: &str, series: &str) -> f64 {
    sample(text, series).unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
}

async fn cancel(s: &Endpoint, sid: &str, id: &str) {
    let r = s
        .post(
            Some(sid),
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "test"}}),
        )
        .await;
    assert_eq!(r.status, 202);
}

#[tokio::test]
async fn a_scripted_run_shows_up_in_the_scrape() {
    let s = TestServer::setup()
        .metrics()
        .config(|c| c.cancel_grace = Duration::from_millis(200))
        .start()
        .await;
    let port = s.metrics_port();
    let sid = s.initialize().await;

    // Before anything: a valid exposition with the job gauges at 0.
    let (status, ctype, text) = scrape(port).await;
    assert!(status.contains("200"), "{status}");
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    // The listener checks Host as the MCP endpoint does (DNS rebinding).
    let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut refused = String::new();
    c.read_to_string(&mut refused).await.unwrap();
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert_eq!(must(&text, r#"staunch_jobs{state="running"}"#), 0.0);

    // A cancel: a cooperative count stops.
    let mut counting = s
        .post(
            Some(&sid),
            &call(
                json!("c1"),
                "slow_count",
                json!({"steps": 200, "delay_ms": 20}),
                Some(json!("p1")),
            ),
        )
        .await;
    counting.next_event(T).await.expect("priming");
    counting.next_event(T).await.expect("first progress");
    // In flight while it runs.
    let (_, _, text) = scrape(port).await;
    assert_eq!(
        must(
            &text,
            r#"staunch_requests_in_flight{tool="slow_count",era="2025"}"#
        ),
        1.0
    );
    assert!(must(&text, "staunch_sse_streams_open") >= 1.0);
    cancel(&s, &sid, "c1").await;

    // An abort: a count that ignores its cancel is dropped after the grace period.
    let mut stubborn = s
        .post(
            Some(&sid),
            &call(
                json!("c2"),
                "stubborn_count",
                json!({"steps": 100, "delay_ms": 50}),
                Some(json!("p2")),
            ),
        )
        .await;
    stubborn.next_event(T).await.expect("priming");
    tokio::time::sleep(Duration::from_millis(100)).await;
    cancel(&s, &sid, "c2").await;
    let ids = [json!("c1"), json!("c2")];
    s.log_until(|l| ids.iter().all(|id| ended(l, &sid, id)))
        .await;
    assert_eq!(
        lines_of(&s.log_lines(), &sid, &json!("c2")).last().unwrap()["outcome"],
        "aborted"
    );

    // A job, then the same start again with its idempotency key: one job, one hit.
    let args = json!({"rows": 3, "delay_ms": 5, "idempotency_key": "k-1"});
    let job = tool_structured(&s, &sid, "start_import_rows", args.clone()).await["job_id"].clone();
    let again = tool_structured(&s, &sid, "start_import_rows", args).await;
    assert_eq!(again["job_id"], job);
    let end = Instant::now() + T;
    while tool_structured(&s, &sid, "get_import_rows", json!({"job_id": job})).await["status"]
        != "succeeded"
    {
        assert!(Instant::now() < end, "the job never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A resume: the stream drops after its first event; the call finishes meanwhile.
    let mut r = s
        .post(
            Some(&sid),
            &call(
                json!("r1"),
                "slow_count",
                json!({"steps": 3, "delay_ms": 20}),
                Some(json!("p2")),
            ),
        )
        .await;
    let priming = r.next_event(T).await.unwrap();
    drop(r);
    s.log_until(|l| ended(l, &sid, &json!("r1"))).await;
    let mut g = s.get(&sid, priming.id.as_deref()).await;
    assert_eq!(g.status, 200);
    assert!(!g.events_until_end(T).await.is_empty());

    // A 2026-07-28 stateless call.
    let (_, answer) = s
        .post_stateless(&stateless(
            json!(9),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        ))
        .await
        .answer(T)
        .await;
    assert!(answer.get("result").is_some(), "{answer}");

    let (_, _, text) = scrape(port).await;
    for (series, want) in [
        (
            r#"staunch_requests_total{tool="slow_count",era="2025",outcome="cancelled"}"#,
            1.0,
        ),
        (
            r#"staunch_requests_total{tool="stubborn_count",era="2025",outcome="aborted"}"#,
            1.0,
        ),
        (
            r#"staunch_requests_total{tool="slow_count",era="2025",outcome="ok"}"#,
            1.0,
        ),
        (
            r#"staunch_requests_total{tool="echo",era="2026",outcome="ok"}"#,
            1.0,
        ),
        (
            r#"staunch_requests_total{tool="initialize",era="2025",outcome="ok"}"#,
            1.0,
        ),
        (
            r#"staunch_requests_in_flight{tool="slow_count",era="2025"}"#,
            0.0,
        ),
        (
            r#"staunch_requests_in_flight{tool="stubborn_count",era="2025"}"#,
            0.0,
        ),
        (r#"staunch_sse_resumes_total{result="replayed"}"#, 1.0),
        ("staunch_idempotency_hits_total", 1.0),
        (r#"staunch_jobs{state="succeeded"}"#, 1.0),
        (r#"staunch_jobs{state="running"}"#, 0.0),
        ("staunch_cancel_to_stop_seconds_count", 2.0),
    ] {
        assert_eq!(must(&text, series), want, "{series}\n{text}");
    }
    // Token-less reads (the job polls) were answered plainly; calls with a token streamed.
    assert!(must(&text, r#"staunch_http_answers_total{kind="plain"}"#) >= 1.0);
    assert!(must(&text, r#"staunch_http_answers_total{kind="stream"}"#) >= 2.0);
    // The abort took the grace period (200 ms); the cooperative stop far less — both are in the
    // histogram, so at least one observation lies above 0.2 s.
    assert!(
        must(&text, "staunch_cancel_to_stop_seconds_sum") >= 0.2,
        "{text}"
    );
    assert!(must(&text, "staunch_progress_sent_total") >= 4.0, "{text}");
    assert!(sample(&text, "staunch_progress_coalesced_total").is_some());
    assert!(
        must(&text, "staunch_store_write_seconds_count") >= 1.0,
        "{text}"
    );
    assert!(sample(&text, "staunch_write_behind_queue_depth").is_some());
    assert_eq!(must(&text, "staunch_job_lease_losses_total"), 0.0);
    // The start of each job tool call is a request too.
    assert_eq!(
        must(
            &text,
            r#"staunch_requests_total{tool="start_import_rows",era="2025",outcome="ok"}"#
        ),
        2.0
    );

    // Anything but GET /metrics is not served there.
    let mut other = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    other
        .write_all(b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut raw = String::new();
    other.read_to_string(&mut raw).await.unwrap();
    assert!(raw.starts_with("HTTP/1.1 404"), "{raw}");
}

#[tokio::test]
async fn a_resume_past_retention_is_counted_as_gone() {
    let s = TestServer::setup()
        .metrics()
        .http(|h| {
            h.event_max_per_stream = 2;
            h.session_idle = Duration::from_secs(2);
        })
        .start()
        .await;
    let port = s.metrics_port();
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
    // Retention runs in the background (every half second with this idle setting); until it
    // has, the resume is replayed.
    let mut status = 0;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        status = s.get(&sid, Some(&first)).await.status.as_u16();
        if status == 410 {
            break;
        }
    }
    assert_eq!(status, 410);
    let (_, _, text) = scrape(port).await;
    assert_eq!(
        must(&text, r#"staunch_sse_resumes_total{result="gone"}"#),
        1.0,
        "{text}"
    );
}

#[tokio::test]
async fn reaper_purges_are_counted() {
    // Finished jobs are kept for 0 s and the reaper runs every 100 ms.
    let s = TestServer::setup()
        .metrics()
        .jobs(|j| {
            j.job_ttl = Duration::ZERO;
            j.reap_interval = Duration::from_millis(100);
        })
        .start()
        .await;
    let port = s.metrics_port();
    let sid = s.initialize().await;
    let started = tool_structured(
        &s,
        &sid,
        "start_import_rows",
        json!({"rows": 1, "delay_ms": 1}),
    )
    .await;
    assert!(started["job_id"].is_string(), "{started}");
    let end = Instant::now() + T;
    let text = loop {
        let (_, _, text) = scrape(port).await;
        if sample(
            &text,
            r#"staunch_job_reaper_actions_total{action="purged"}"#,
        )
        .unwrap_or(0.0)
            >= 1.0
        {
            break text;
        }
        assert!(
            Instant::now() < end,
            "the finished job was never purged:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Gone from the store, so from the gauge too.
    assert_eq!(
        must(&text, r#"staunch_jobs{state="succeeded"}"#),
        0.0,
        "{text}"
    );
    assert_eq!(
        must(&text, r#"staunch_jobs{state="queued"}"#),
        0.0,
        "{text}"
    );
}

/// Regression (security review, second pass, finding 9): a client's method name was kept at
/// full length — 60 requests of a 4 MB unknown method took `/metrics` to 240 MB and grew the
/// log and the store. Now an unknown method is `_OTHER` in metrics, the log and traces, and
/// an answer repeats at most its first 100 characters; so is an unknown tool's name.
#[tokio::test]
async fn long_client_strings_are_bounded_in_metrics_logs_and_answers() {
    let s = TestServer::setup().metrics().start().await;
    let port = s.metrics_port();
    let sid = s.initialize().await;
    let long = "m".repeat(1 << 20);
    for id in 0..4 {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": format!("{long}{id}")});
        let r = rpc(&s, &sid, msg).await;
        let m = r["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(r["error"]["code"], -32601, "{r}");
        assert!(
            m.len() < 300 && m.contains("bytes)"),
            "{}",
            &m[..m.len().min(300)]
        );
    }
    let r = rpc(&s, &sid, call(json!(9), &long, json!({}), None)).await;
    let text = r.to_string();
    assert!(
        text.len() < 1000 && text.contains("unknown tool"),
        "{}",
        &text[..text.len().min(300)]
    );
    let (_, _, body) = scrape(port).await;
    assert!(body.len() < 64 * 1024, "/metrics has {} bytes", body.len());
    assert!(body.contains("_OTHER"), "no _OTHER label");
    let lines = s
        .log_until(|l| l.iter().filter(|x| x["method"] == "_OTHER").count() >= 8)
        .await;
    let longest = lines.iter().map(|l| l.to_string().len()).max().unwrap_or(0);
    assert!(longest < 2048, "a log line of {longest} bytes");
}
