//! A request's life, in process, on the test's paused clock: every way a request's token can
//! fire, what goes out afterwards (nothing, unless its own deadline stopped it) and what the
//! lifecycle log says.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use staunch_server::CancelReason;
use support::{Harness, Wire, call_frame, cancel_frame, harness};

const GRACE: Duration = Duration::from_millis(500);
const SETTLE: Duration = Duration::from_secs(10);

/// How a test stops a request.
#[derive(Clone, Copy, Debug)]
enum Stop {
    ClientCancel,
    SessionClosed,
    /// SIGTERM: the HTTP and stdio transports cancel everything, then close the sessions.
    Shutdown,
    /// 2026-07-28 on HTTP: the response stream closed.
    StreamClosed,
}

impl Stop {
    fn reason(self) -> CancelReason {
        match self {
            Stop::ClientCancel => CancelReason::Client(Some("user gave up".into())),
            Stop::SessionClosed => CancelReason::SessionClosed("session deleted"),
            Stop::Shutdown => CancelReason::Shutdown,
            Stop::StreamClosed => CancelReason::StreamClosed,
        }
    }

    fn log_reason(self) -> &'static str {
        match self {
            Stop::ClientCancel => "user gave up",
            Stop::SessionClosed => "session deleted",
            Stop::Shutdown => "server shutdown",
            Stop::StreamClosed => "stream closed",
        }
    }
}

fn field<'a>(lines: &'a [Value], event: &str) -> Option<&'a Value> {
    lines.iter().find(|l| l["event"] == event)
}

/// Starts `tool` as request 7, stops it with `stop`, waits until it is gone. Returns the wire.
async fn run_and_stop(h: &Harness, tool: &str, stop: Stop) -> Arc<Wire> {
    let wire = Arc::new(Wire::default());
    // Let the handler reach its first await before stopping it.
    let pause = Duration::from_millis(50);
    match stop {
        Stop::StreamClosed => {
            let req = h.stateless_call(&wire, 7, tool, json!({}));
            tokio::time::sleep(pause).await;
            req.stream_closed();
        }
        _ => {
            let s = h.session("s1", &wire, "2025-11-25");
            s.handle_frame(&call_frame(7, tool, json!({})));
            tokio::time::sleep(pause).await;
            match stop {
                Stop::ClientCancel => s.handle_frame(&cancel_frame(7, "user gave up")),
                Stop::SessionClosed => s.close(CancelReason::SessionClosed("session deleted")),
                Stop::Shutdown => {
                    assert_eq!(h.server.cancel_all_requests(), 1);
                    // What the transports do next; by now the handler may have returned.
                    tokio::task::yield_now().await;
                    s.close(CancelReason::Shutdown);
                }
                Stop::StreamClosed => unreachable!(),
            }
        }
    }
    h.settle(SETTLE).await;
    wire
}

/// The regression behind the request core: a handler that returns the moment its token fires
/// (with `Cancelled`, or even with a result) must never be answered, whichever path fired the
/// token. On SIGTERM such a handler used to be answered -32603, because only the client-cancel
/// path recorded that the request had been cancelled.
#[tokio::test(start_paused = true)]
async fn no_response_to_a_request_whose_token_fired_for_any_reason() {
    for stop in [
        Stop::ClientCancel,
        Stop::SessionClosed,
        Stop::Shutdown,
        Stop::StreamClosed,
    ] {
        for (tool, outcome) in [
            ("returns_cancelled", "cancelled"),
            ("returns_ok_on_cancel", "late_finish"),
        ] {
            let h = harness(GRACE);
            let wire = run_and_stop(&h, tool, stop).await;
            assert_eq!(
                wire.responses(7),
                Vec::<Value>::new(),
                "{tool} stopped by {stop:?} was answered"
            );
            assert!(
                wire.stream_ended(7),
                "{stop:?}: the transport was not told the stream can end"
            );
            let log = h.log_json(7);
            let cancel = field(&log, "request.cancel_received")
                .unwrap_or_else(|| panic!("{stop:?}: no cancel_received in {log:?}"));
            assert_eq!(cancel["reason"], stop.log_reason(), "{stop:?}");
            let end = field(&log, "request.end").expect("an end line");
            assert_eq!(end["outcome"], outcome, "{tool} stopped by {stop:?}");
            assert!(end["after_cancel_ms"].is_u64(), "{stop:?}: {end}");
            if tool == "returns_cancelled" {
                // The handler could read why it was stopped, as soon as it woke.
                assert_eq!(*h.reasons.lock().unwrap(), vec![Some(stop.reason())]);
            }
            // The audit reads every line.
            assert!(!h.log().is_empty());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_ignores_its_cancel_is_aborted_after_the_grace_period() {
    let h = harness(GRACE);
    let wire = run_and_stop(&h, "ignores_cancel", Stop::ClientCancel).await;
    assert!(wire.responses(7).is_empty());
    let log = h.log_json(7);
    let aborted = field(&log, "request.aborted").expect("an aborted line");
    let since = aborted["since_cancel_ms"]
        .as_u64()
        .expect("since_cancel_ms");
    assert!(
        since >= GRACE.as_millis() as u64,
        "aborted {since} ms after the cancel, before the {GRACE:?} grace"
    );
    assert_eq!(
        field(&log, "request.end").unwrap()["outcome"],
        "aborted",
        "{log:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_aborts_a_stubborn_handler_too_and_still_says_nothing() {
    let h = harness(GRACE);
    let wire = run_and_stop(&h, "ignores_cancel", Stop::Shutdown).await;
    assert!(wire.responses(7).is_empty());
    let log = h.log_json(7);
    assert_eq!(field(&log, "request.end").unwrap()["outcome"], "aborted");
}

/// The deadline is the one cancel that answers: the client is still waiting and is told why.
#[tokio::test(start_paused = true)]
async fn the_tools_own_deadline_answers_with_a_tool_error() {
    let h = harness(GRACE);
    let wire = Arc::new(Wire::default());
    let s = h.session("s1", &wire, "2025-11-25");
    s.handle_frame(&call_frame(7, "too_slow", json!({})));
    h.settle(SETTLE).await;
    let responses = wire.responses(7);
    assert_eq!(responses.len(), 1, "{responses:?}");
    assert_eq!(responses[0]["result"]["isError"], true, "{}", responses[0]);
    let log = h.log_json(7);
    // Not a cancel from anyone: the end line says it all.
    assert!(field(&log, "request.cancel_received").is_none(), "{log:?}");
    let end = field(&log, "request.end").unwrap();
    assert_eq!(end["outcome"], "deadline");
    assert_eq!(end["duration_ms"], 1000, "{end}");
}

#[tokio::test(start_paused = true)]
async fn a_panic_is_answered_with_an_internal_error_and_logged() {
    let h = harness(GRACE);
    let wire = Arc::new(Wire::default());
    let s = h.session("s1", &wire, "2025-11-25");
    s.handle_frame(&call_frame(7, "panics", json!({})));
    h.settle(SETTLE).await;
    let responses = wire.responses(7);
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0]["error"]["code"], -32603, "{}", responses[0]);
    let end = h.log_json(7);
    let end = field(&end, "request.end").unwrap();
    assert_eq!(end["outcome"], "panic");
    assert!(
        end["panic"].as_str().unwrap_or("").contains("boom"),
        "{end}"
    );
}

/// Progress stops at the cancel: nothing for the request leaves after it, even though the
/// handler is mid-step when it fires.
#[tokio::test(start_paused = true)]
async fn progress_stops_at_the_cancel() {
    for stateless in [false, true] {
        let h = harness(GRACE);
        let wire = Arc::new(Wire::default());
        let stop = if stateless {
            let req = h.stateless_call(&wire, 7, "counts", json!({"steps": 50}));
            tokio::time::sleep(Duration::from_millis(350)).await;
            let before = wire.count();
            req.stream_closed();
            before
        } else {
            let s = h.session("s1", &wire, "2025-11-25");
            s.handle_frame(&call_frame(7, "counts", json!({"steps": 50})));
            tokio::time::sleep(Duration::from_millis(350)).await;
            let before = wire.count();
            s.handle_frame(&cancel_frame(7, "enough"));
            before
        };
        let seen = wire.progress("p7");
        assert_eq!(seen, vec![1.0, 2.0, 3.0], "stateless={stateless}");
        h.settle(SETTLE).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            wire.count(),
            stop,
            "stateless={stateless}: sent after the cancel"
        );
        assert_eq!(
            field(&h.log_json(7), "request.end").unwrap()["outcome"],
            "cancelled"
        );
    }
}

/// A stateless request has no session; the log keys it by a per-request label
/// (`req-<instance tag>-<n>`) and says which revision it came in.
#[tokio::test(start_paused = true)]
async fn stateless_requests_are_keyed_and_carry_their_protocol_version() {
    let h = harness(GRACE);
    let wire = Arc::new(Wire::default());
    let a = h.stateless_call(&wire, 7, "counts", json!({"steps": 1}));
    let b = h.stateless_call(&wire, 7, "counts", json!({"steps": 1}));
    assert_ne!(a.log_key(), b.log_key(), "two requests share a key");
    h.settle(SETTLE).await;
    let lines = h.log_json(7);
    for key in [a.log_key(), b.log_key()] {
        assert!(key.starts_with("req-"), "{key}");
        let start = lines
            .iter()
            .find(|l| l["session"] == key && l["event"] == "request.start")
            .expect("a start line per request");
        assert_eq!(start["protocol_version"], "2026-07-28");
        let end = lines
            .iter()
            .find(|l| l["session"] == key && l["event"] == "request.end")
            .expect("an end line per request");
        assert_eq!(end["outcome"], "ok");
    }
    // Both answered, each once.
    assert_eq!(wire.responses(7).len(), 2);
    // Closing a stream after its response changes nothing and logs nothing.
    let before = h.log_json(7).len();
    a.stream_closed();
    assert_eq!(h.log_json(7).len(), before);
}

/// A cancel for a request that already ended (or never existed) is logged as ignored.
#[tokio::test(start_paused = true)]
async fn a_cancel_after_the_response_is_ignored_and_logged() {
    let h = harness(GRACE);
    let wire = Arc::new(Wire::default());
    let s = h.session("s1", &wire, "2025-11-25");
    s.handle_frame(&call_frame(7, "counts", json!({"steps": 1})));
    h.settle(SETTLE).await;
    s.handle_frame(&cancel_frame(7, "too late"));
    let log = h.log_json(7);
    let ignored = field(&log, "request.cancel_ignored").expect("cancel_ignored");
    assert_eq!(ignored["why"], "unknown_id");
    assert_eq!(wire.responses(7).len(), 1);
}
