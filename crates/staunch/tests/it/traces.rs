//! `staunch serve --otlp-endpoint`: the real binary exports its spans over OTLP/HTTP to an
//! in-process collector (a loopback axum server decoding `ExportTraceServiceRequest`), after a
//! scripted run: calls carrying a client's `traceparent` (2025 session and 2026-07-28
//! stateless), an invalid one, a cancelled call, and a job whose attempt links back to the
//! request that started it.

// Without the exporter (`--no-default-features`) there is nothing to test here.
#![cfg(feature = "otel")]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use common::http::{HttpServer, call, ended, stateless};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::{Value, json};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(20);

/// The client's trace context: W3C's own example ids.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// Spans received, and the service names they came with.
#[derive(Default, Clone)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
    services: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    /// A collector on a free loopback port; returns its base URL.
    async fn start(&self) -> String {
        let me = self.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            post(move |body: Bytes| {
                let me = me.clone();
                async move {
                    let req = ExportTraceServiceRequest::decode(body).expect("protobuf");
                    for rs in req.resource_spans {
                        if let Some(r) = &rs.resource {
                            for kv in &r.attributes {
                                if kv.key == "service.name" {
                                    me.services.lock().unwrap().push(any_str(kv.value.as_ref()));
                                }
                            }
                        }
                        for ss in rs.scope_spans {
                            me.spans.lock().unwrap().extend(ss.spans);
                        }
                    }
                    (
                        [("content-type", "application/x-protobuf")],
                        Vec::<u8>::new(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    /// Waits (bounded) for a span that `pred` accepts.
    async fn span(&self, what: &str, pred: impl Fn(&Span) -> bool) -> Span {
        let end = Instant::now() + T;
        loop {
            if let Some(s) = self.spans.lock().unwrap().iter().find(|s| pred(s)) {
                return s.clone();
            }
            assert!(
                Instant::now() < end,
                "no span {what}; got {:#?}",
                self.names()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn names(&self) -> Vec<String> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }
}

fn any_str(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        other => format!("{other:?}"),
    }
}

/// A span attribute as text ("" when absent).
fn attr(s: &Span, key: &str) -> String {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| any_str(kv.value.as_ref()))
        .unwrap_or_default()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn is_request(s: &Span, id: &str) -> bool {
    attr(s, "jsonrpc.request.id") == id && s.kind == SpanKind::Server as i32
}

fn traced(mut msg: Value, traceparent: &str) -> Value {
    let meta = msg["params"]
        .as_object_mut()
        .unwrap()
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta["traceparent"] = json!(traceparent);
    meta["tracestate"] = json!("vendor=opaque");
    msg
}

/// Calls a tool in the session and returns its result.
async fn tool(s: &HttpServer, sid: &str, id: &str, name: &str, args: Value, tp: &str) -> Value {
    let r = s
        .post(Some(sid), &traced(call(json!(id), name, args, None), tp))
        .await;
    let (_, resp) = r.answer(T).await;
    assert_eq!(resp["id"], id, "no answer to {name}: {resp}");
    resp["result"].clone()
}

#[tokio::test]
async fn spans_continue_the_clients_trace_and_jobs_link_back() {
    let collector = Collector::default();
    let endpoint = collector.start().await;
    let s = HttpServer::start_with_env(
        None,
        &["--otlp-endpoint", &endpoint, "--cancel-grace-ms", "200"],
        // Batches every 100 ms (the SDK's variable) and a service name of our own.
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("OTEL_SERVICE_NAME", "staunch-under-test"),
        ],
    )
    .await;
    let sid = s.initialize().await;
    let tp = format!("00-{TRACE}-{PARENT}-01");

    // A call carrying the client's traceparent: the span continues that trace.
    let echoed = tool(&s, &sid, "e1", "echo", json!({"text": "hi"}), &tp).await;
    assert!(echoed.get("content").is_some(), "{echoed}");
    let span = collector.span("e1", |s| is_request(s, "e1")).await;
    assert_eq!(span.name, "tools/call echo");
    assert_eq!(hex(&span.trace_id), TRACE);
    assert_eq!(hex(&span.parent_span_id), PARENT);
    assert_eq!(span.trace_state, "vendor=opaque");
    assert_eq!(attr(&span, "mcp.method.name"), "tools/call");
    assert_eq!(attr(&span, "gen_ai.tool.name"), "echo");
    assert_eq!(attr(&span, "staunch.outcome"), "ok");
    assert_eq!(attr(&span, "staunch.era"), "2025");
    assert!(!attr(&span, "mcp.protocol.version").is_empty());
    // The session is named by its hash, never by its id (a credential).
    assert_eq!(
        attr(&span, "staunch.session.hash"),
        staunch_server::session_hash(&sid)
    );
    assert!(
        span.attributes
            .iter()
            .all(|kv| !any_str(kv.value.as_ref()).contains(&sid)),
        "the session id leaked into {span:?}"
    );

    // An invalid traceparent is ignored: a new trace, no parent, the call still answered.
    let bad = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
    tool(&s, &sid, "e2", "echo", json!({"text": "x"}), bad).await;
    let span = collector.span("e2", |s| is_request(s, "e2")).await;
    assert!(span.parent_span_id.is_empty(), "{span:?}");
    assert_ne!(hex(&span.trace_id), "0".repeat(32));

    // A cancelled call: the cancel is an event with the client's reason.
    let mut counting = s
        .post(
            Some(&sid),
            &traced(
                call(
                    json!("c1"),
                    "slow_count",
                    json!({"steps": 200, "delay_ms": 20}),
                    None,
                ),
                &tp,
            ),
        )
        .await;
    counting.next_event(T).await.expect("priming");
    let r = s
        .post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": "c1", "reason": "user pressed stop"}}),
        )
        .await;
    assert_eq!(r.status, 202);
    s.log_until(|l| ended(l, &sid, &json!("c1"))).await;
    let span = collector.span("c1", |s| is_request(s, "c1")).await;
    assert_eq!(hex(&span.trace_id), TRACE);
    assert_eq!(attr(&span, "staunch.outcome"), "cancelled");
    let event = span
        .events
        .iter()
        .find(|e| e.name == "cancelled")
        .unwrap_or_else(|| panic!("no cancelled event in {span:?}"));
    let reason = event.attributes.iter().find(|kv| kv.key == "reason");
    assert_eq!(
        any_str(reason.and_then(|kv| kv.value.as_ref())),
        "user pressed stop"
    );
    assert!(event.time_unix_nano >= span.start_time_unix_nano);
    assert!(event.time_unix_nano <= span.end_time_unix_nano);

    // A job: its attempt span starts a trace of its own, linked to the starting request span.
    let started = tool(
        &s,
        &sid,
        "j1",
        "start_import_rows",
        json!({"rows": 3, "delay_ms": 5}),
        &tp,
    )
    .await;
    let job_id = started["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a job id in {started}"))
        .to_string();
    let start_span = collector.span("j1", |s| is_request(s, "j1")).await;
    assert_eq!(hex(&start_span.trace_id), TRACE);
    let attempt = collector
        .span("the job attempt", |s| {
            attr(s, "staunch.job.id") == job_id && s.end_time_unix_nano > 0
        })
        .await;
    assert_eq!(attempt.name, "job import_rows");
    assert_eq!(attempt.kind, SpanKind::Consumer as i32);
    assert_eq!(attr(&attempt, "staunch.job.tool"), "import_rows");
    assert_eq!(attr(&attempt, "staunch.job.attempt"), "1");
    assert_eq!(attr(&attempt, "staunch.job.state"), "succeeded");
    assert_eq!(attempt.links.len(), 1, "{attempt:?}");
    assert_eq!(attempt.links[0].trace_id, start_span.trace_id);
    assert_eq!(attempt.links[0].span_id, start_span.span_id);
    assert_ne!(attempt.trace_id, start_span.trace_id);

    // A 2026-07-28 stateless request with the traceparent in its _meta.
    let tp2 = format!("00-{TRACE}-{}-01", "b7ad6b7169203331");
    let (_, answer) = s
        .post_stateless(&traced(
            stateless(
                json!(9),
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "hi"}}),
            ),
            &tp2,
        ))
        .await
        .answer(T)
        .await;
    assert!(answer.get("result").is_some(), "{answer}");
    let span = collector
        .span("the stateless call", |s| {
            is_request(s, "9") && attr(s, "staunch.era") == "2026"
        })
        .await;
    assert_eq!(hex(&span.trace_id), TRACE);
    assert_eq!(hex(&span.parent_span_id), "b7ad6b7169203331");
    assert_eq!(attr(&span, "mcp.protocol.version"), "2026-07-28");
    assert_eq!(attr(&span, "staunch.session.hash"), "");

    assert!(
        collector
            .services
            .lock()
            .unwrap()
            .iter()
            .all(|s| s == "staunch-under-test")
    );
}

/// An https:// collector (a TLS terminator with the fixture certificate in front of the
/// in-process collector; the server trusts the test CA through SSL_CERT_FILE) receives the
/// spans; an endpoint that is neither http nor https is refused at start with the reason.
#[tokio::test]
async fn spans_reach_an_https_collector_and_other_schemes_are_refused_at_start() {
    use common::tls::{Cert, test_ca, tls_front};
    let collector = Collector::default();
    let plain = collector.start().await;
    let backend: std::net::SocketAddr = plain.trim_start_matches("http://").parse().unwrap();
    let front = tls_front(backend, Cert::Trusted).await;
    let endpoint = format!("https://localhost:{}", front.addr.port());
    let ca = test_ca();
    let s = HttpServer::start_with_env(
        None,
        &["--otlp-endpoint", &endpoint],
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("SSL_CERT_FILE", ca.to_str().unwrap()),
        ],
    )
    .await;
    let sid = s.initialize().await;
    let tp = format!("00-{TRACE}-{PARENT}-01");
    tool(&s, &sid, "tls-1", "echo", json!({"text": "hi"}), &tp).await;
    let span = collector.span("tls-1", |s| is_request(s, "tls-1")).await;
    assert_eq!(hex(&span.trace_id), TRACE);

    let out = tokio::process::Command::new(common::BIN)
        .args([
            "serve",
            "--no-log",
            "--otlp-endpoint",
            "ftp://collector:4318",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected an http:// or https:// URL"), "{err}");
}
