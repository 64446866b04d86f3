//! Two `staunch serve --http` processes on one PostgreSQL database, the one running a call
//! killed: the resume on the other ends with what the store holds and a clear error. (What two
//! instances do for each other while both live is tested in-process, in
//! `crates/staunch-server/tests/it/multi_instance_http.rs`.)

use crate::common;

use std::time::Duration;

use common::http::{HttpServer, call};
use serde_json::json;

/// Two instances on a fresh schema of the test database, with `extra` flags; `None` (the
/// test is skipped, and says so) without `STAUNCH_TEST_POSTGRES`.
async fn pair(test: &str, extra: &[&str]) -> Option<(HttpServer, HttpServer, String, String)> {
    let (url, schema) = common::pg::fresh_schema(test)?;
    let mut flags = vec!["--store-schema", schema.as_str()];
    flags.extend_from_slice(extra);
    let a = HttpServer::start_on(Some(&url), &flags).await;
    let b = HttpServer::start_on(Some(&url), &flags).await;
    Some((a, b, url, schema))
}

/// SIGKILL of the instance running a call: the client's resume on the other instance gets what
/// the store holds and then ends, and a resume after that is told the request's outcome is
/// unknown — within a bound, never a stream that stays open and silent.
#[tokio::test]
async fn a_resume_after_its_writer_was_killed_ends_with_a_clear_error() {
    let Some((mut a, b, url, schema)) = pair("multi-instance dead writer", &[]).await else {
        return;
    };
    let sid = a.initialize().await;
    let id = json!("doomed");
    let mut r = a
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 600, "delay_ms": 50}),
                Some(json!(1)),
            ),
        )
        .await;
    let mut last = String::new();
    for _ in 0..3 {
        last = r
            .next_event(Duration::from_secs(10))
            .await
            .expect("event")
            .id
            .expect("an event id");
    }
    // Let the write-behind queue reach the store, then kill the writer mid-call.
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();
    drop(r);

    let started = std::time::Instant::now();
    let limit = Duration::from_secs(40);
    // Each resume either hands over what the store still holds and ends, or (nothing left)
    // answers 404 with the reason. Bounded: a handful of resumes at most.
    let mut said = None;
    for _ in 0..5 {
        let mut g = b.get(&sid, Some(&last)).await;
        if g.status == 404 {
            said = Some(g.json().await);
            break;
        }
        assert_eq!(g.status, 200);
        let rest = g.events_until_end(limit).await;
        assert!(
            started.elapsed() < limit,
            "the resumed stream stayed open after its writer died"
        );
        assert!(
            rest.iter().all(|e| e.json()["id"] != id),
            "a response from a dead writer?"
        );
        if let Some(l) = rest.iter().rev().find_map(|e| e.id.clone()) {
            last = l;
        }
    }
    let said = said.expect("told why within five resumes");
    let message = said["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("stopped before it answered"), "{said}");
    drop((a, b));
    common::pg::drop_schema(&url, &schema);
}
