//! What the durable store keeps outlives the process: after a graceful stop (SIGTERM) a new
//! `staunch serve` on the same file replays a dropped stream whole; after a kill, a stored
//! session past its idle time is neither adopted nor kept.

use crate::common;

use std::time::Duration;

use common::http::{HttpServer, call, ended, progress_values, responses, rpc};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);

fn ping(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": {}})
}

#[tokio::test]
async fn a_result_survives_a_server_restart_in_the_durable_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("durable.db").display().to_string();
    let mut s = HttpServer::start_on(Some(&store), &[]).await;
    let sid = s.initialize().await;
    let id = json!(1);
    let mut r = s
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 3, "delay_ms": 20}),
                Some(json!(1)),
            ),
        )
        .await;
    let priming = r.next_event(T).await.unwrap();
    drop(r);
    s.log_until(|l| ended(l, &sid, &id)).await;
    // A graceful stop (SIGTERM) flushes the event queue; then a new process on the same file.
    let pid = s.child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    tokio::time::timeout(T, s.child.wait())
        .await
        .unwrap()
        .unwrap();
    let s2 = HttpServer::start_on(Some(&store), &[]).await;
    let mut g = s2.get(&sid, priming.id.as_deref()).await;
    assert_eq!(g.status, 200);
    let events = g.events_until_end(T).await;
    assert_eq!(progress_values(&events), vec![1, 2, 3]);
    assert_eq!(
        responses(&events, &id)[0]["result"]["content"][0]["text"],
        "counted 3"
    );
}

#[tokio::test]
async fn a_stored_session_past_its_idle_time_is_not_adopted_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("shared.db").display().to_string();
    let mut first = HttpServer::start_on(Some(&store), &[]).await;
    let sid = first.initialize().await;
    rpc(&first, &sid, ping(1)).await;
    first.child.kill().await.unwrap();

    let second = HttpServer::start_on(Some(&store), &["--session-idle-secs", "1"]).await;
    // Longer than the idle timeout since the session was last seen.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = second.post(Some(&sid), &ping(2)).await;
    assert_eq!(r.status, 404);
    // And the stored record is gone.
    let c = rusqlite::Connection::open(&store).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    let n: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM staunch_sessions WHERE id = ?1",
            [&sid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn stored_sessions_expire_without_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("shared.db").display().to_string();
    let mut first = HttpServer::start_on(Some(&store), &[]).await;
    let sid = first.initialize().await;
    rpc(&first, &sid, ping(1)).await;
    first.child.kill().await.unwrap();
    // A restart with a short idle period removes the record itself (`expire_idle`), without
    // anyone asking for the session.
    let _second = HttpServer::start_on(Some(&store), &["--session-idle-secs", "1"]).await;
    let c = rusqlite::Connection::open(&store).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    let mut n = 1;
    for _ in 0..150 {
        n = c
            .query_row(
                "SELECT COUNT(*) FROM staunch_sessions WHERE id = ?1",
                [&sid],
                |r| r.get(0),
            )
            .unwrap();
        if n == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(n, 0, "the stored session never expired");
}
