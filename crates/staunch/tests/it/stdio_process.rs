//! The binary's stdio wiring: the end of stdin ends the session's work and the process (the
//! session's lifecycle itself is tested in staunch-server, in-process).

use crate::common;

use std::time::Duration;

use common::{Proc, events_of, has_event};
use serde_json::json;

#[tokio::test]
async fn eof_cancels_in_flight_work_and_the_process_exits() {
    let mut p = Proc::ready(&[]).await;
    let id = json!("long");
    p.call(
        id.clone(),
        "slow_count",
        json!({"steps": 100000, "delay_ms": 10}),
        None,
    )
    .await;
    p.log_until(|l| has_event(l, &id, "request.start")).await;
    p.close_stdin();
    let status = tokio::time::timeout(Duration::from_secs(15), p.child.wait())
        .await
        .expect("process exits after EOF")
        .unwrap();
    assert!(status.success(), "{status}");
    let lines = p.log_lines();
    let ev = events_of(&lines, &id);
    let cancel = ev
        .iter()
        .find(|l| l["event"] == "request.cancel_received")
        .expect("cancel logged");
    assert_eq!(cancel["reason"], "transport closed");
    assert_eq!(ev.last().unwrap()["outcome"], "cancelled");
}
