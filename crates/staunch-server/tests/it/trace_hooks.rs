//! The span hooks (`staunch_server::trace`) agree with the lifecycle log: every request gets
//! one start and one end, with the outcome the log's end line names, the cancel's reason as the
//! log's cancel line has it (none for the request's own deadline), the request's `_meta` at
//! the start, and the span's `traceparent` readable by the handler.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use staunch_server::Traces;
use staunch_server::trace::{
    AttemptSpan, JobAttempt, RequestEnd, RequestSpan, RequestStart, Tracer,
};
use support::{Wire, call_frame, cancel_frame, harness_traced};

const GRACE: Duration = Duration::from_millis(500);
const SETTLE: Duration = Duration::from_secs(10);

/// One request span as the recorder saw it.
#[derive(Clone, Debug, Default)]
struct Seen {
    method: String,
    tool: Option<String>,
    id: String,
    era: Option<&'static str>,
    session_hash: Option<String>,
    meta: Option<Value>,
    /// Set at the end.
    outcome: Option<String>,
    cancel_reason: Option<Option<String>>,
    panic: Option<String>,
    ends: u32,
}

#[derive(Default, Clone)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

struct RecSpan {
    rec: Recorder,
    index: usize,
}

impl Tracer for Recorder {
    fn request(&self, s: &RequestStart<'_>) -> Box<dyn RequestSpan> {
        let mut v = self.0.lock().unwrap();
        v.push(Seen {
            method: s.method.into(),
            tool: s.tool.map(Into::into),
            id: s.request_id.to_string(),
            era: Some(s.era),
            session_hash: s.session_hash.map(Into::into),
            meta: s.meta.cloned(),
            ..Seen::default()
        });
        Box::new(RecSpan {
            rec: self.clone(),
            index: v.len() - 1,
        })
    }

    fn job_attempt(&self, _: &JobAttempt<'_>) -> Box<dyn AttemptSpan> {
        unreachable!("no jobs in this server")
    }
}

impl RequestSpan for RecSpan {
    fn traceparent(&self) -> Option<String> {
        Some(format!("span-{}", self.index))
    }

    fn end(&self, e: &RequestEnd<'_>) {
        let mut v = self.rec.0.lock().unwrap();
        let s = &mut v[self.index];
        s.outcome = Some(e.outcome.into());
        s.cancel_reason = e.cancel.map(|c| c.reason.map(Into::into));
        s.panic = e.panic.map(Into::into);
        s.ends += 1;
    }
}

impl Recorder {
    fn of(&self, id: &str) -> Seen {
        let v = self.0.lock().unwrap();
        let found: Vec<_> = v.iter().filter(|s| s.id == id).cloned().collect();
        assert_eq!(found.len(), 1, "one span for request {id}: {v:#?}");
        found.into_iter().next().unwrap()
    }
}

fn end_outcome(h: &support::Harness, id: i64) -> Value {
    h.log_json(id)
        .into_iter()
        .find(|l| l["event"] == "request.end")
        .expect("an end line")["outcome"]
        .clone()
}

#[tokio::test(start_paused = true)]
async fn each_way_a_request_ends_is_one_span_end_matching_the_log() {
    let rec = Recorder::default();
    let h = harness_traced(GRACE, Traces::new(Arc::new(rec.clone())));
    let wire = Arc::new(Wire::default());
    let s = h.session("s1", &wire, "2025-11-25");
    // Cancelled by the client, with a reason.
    s.handle_frame(&call_frame(1, "returns_cancelled", json!({})));
    // Ignores its cancel: aborted after the grace.
    s.handle_frame(&call_frame(2, "ignores_cancel", json!({})));
    // Its own deadline: not a cancel event.
    s.handle_frame(&call_frame(3, "too_slow", json!({})));
    // A panic, with its message.
    s.handle_frame(&call_frame(4, "panics", json!({})));
    // A finished count, with the client's trace context in _meta.
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    s.handle_frame(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "counts", "arguments": {"steps": 1}, "_meta": {"traceparent": tp}}})
        .to_string()
        .as_bytes(),
    );
    // A cheap method answered inline.
    s.handle_frame(br#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#);
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.handle_frame(&cancel_frame(1, "user gave up"));
    s.handle_frame(&cancel_frame(2, "not listening"));
    h.settle(SETTLE).await;

    for (id, outcome, reason) in [
        (1, "cancelled", Some(Some("user gave up"))),
        (2, "aborted", Some(Some("not listening"))),
        (3, "deadline", None),
        (4, "panic", None),
        (5, "ok", None),
        (6, "ok", None),
    ] {
        let seen = rec.of(&id.to_string());
        assert_eq!(seen.ends, 1, "{seen:?}");
        assert_eq!(seen.outcome.as_deref(), Some(outcome), "{seen:?}");
        assert_eq!(end_outcome(&h, id), outcome, "the log agrees for {id}");
        assert_eq!(
            seen.cancel_reason,
            reason.map(|r| r.map(String::from)),
            "{seen:?}"
        );
        assert_eq!(seen.era, Some("2025"));
        // stdio-like session (not an HTTP session): no session hash.
        assert_eq!(seen.session_hash, None);
    }
    assert!(rec.of("4").panic.unwrap().contains("boom"));
    let counted = rec.of("5");
    assert_eq!(counted.method, "tools/call");
    assert_eq!(counted.tool.as_deref(), Some("counts"));
    assert_eq!(counted.meta.unwrap()["traceparent"], tp);
    assert_eq!(rec.of("6").method, "tools/list");
}

#[tokio::test(start_paused = true)]
async fn a_stateless_request_is_traced_in_its_era_and_its_cancel_is_the_closed_stream() {
    let rec = Recorder::default();
    let h = harness_traced(GRACE, Traces::new(Arc::new(rec.clone())));
    let wire = Arc::new(Wire::default());
    let req = h.stateless_call(&wire, 7, "returns_cancelled", json!({}));
    tokio::time::sleep(Duration::from_millis(50)).await;
    req.stream_closed();
    h.settle(SETTLE).await;
    let seen = rec.of("7");
    assert_eq!(seen.era, Some("2026"));
    assert_eq!(seen.outcome.as_deref(), Some("cancelled"));
    assert_eq!(seen.cancel_reason, Some(Some("stream closed".into())));
    assert!(seen.meta.is_some());
}
