//! Regression tests for what the fuzz targets (fuzz/, issue 14) ran into, in process on the
//! test's paused clock.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::{Wire, call_frame, cancel_frame, harness};

/// fuzz `session_dispatch`, seed-2: a request is cancelled, its handler finishes anyway (a
/// late finish: no response), and the client reuses the id for a new request. The new request
/// is answered exactly once; the cancelled one never is. (The fuzz harness first counted the
/// new request's answer as an answer after the cancel: a harness bug, kept here as the
/// behaviour it pins down.)
#[tokio::test(start_paused = true)]
async fn an_id_reused_after_its_cancelled_request_ended_is_answered_once() {
    let h = harness(Duration::from_millis(500));
    let wire = Arc::new(Wire::default());
    let s = h.session("reuse", &wire, "2025-11-25");
    s.handle_frame(&call_frame(3, "returns_ok_on_cancel", json!({})));
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.handle_frame(&cancel_frame(3, "gave up"));
    h.settle(Duration::from_secs(10)).await;
    assert!(
        wire.responses(3).is_empty(),
        "no answer to the cancelled request"
    );

    s.handle_frame(&call_frame(3, "counts", json!({"steps": 1})));
    h.settle(Duration::from_secs(10)).await;
    let answers = wire.responses(3);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["result"]["content"][0]["text"], "counted 1");
}

/// The same id sent again while the first request still runs is refused (-32600) and the
/// first one, once cancelled, is still not answered: two requests, one answer.
#[tokio::test(start_paused = true)]
async fn a_duplicate_id_in_flight_is_refused_and_the_cancel_still_holds() {
    let h = harness(Duration::from_millis(500));
    let wire = Arc::new(Wire::default());
    let s = h.session("dup", &wire, "2025-11-25");
    s.handle_frame(&call_frame(4, "returns_ok_on_cancel", json!({})));
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.handle_frame(&call_frame(4, "counts", json!({"steps": 1})));
    s.handle_frame(&cancel_frame(4, "gave up"));
    h.settle(Duration::from_secs(10)).await;
    let answers = wire.responses(4);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["error"]["code"], -32600, "{answers:?}");
}
