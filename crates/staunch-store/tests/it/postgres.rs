//! The shared driver suite against a real PostgreSQL server, plus what only this driver does
//! (concurrent migrations, the LISTEN connection's recovery).
//!
//! Runs only when `STAUNCH_TEST_POSTGRES` holds a URL, e.g.
//! `STAUNCH_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test cargo test -p staunch-store`.
//! Every case gets a fresh random schema, dropped at the end, so runs never collide.

use std::io::Write;
use std::sync::Once;
use std::time::Duration;

use crate::testsuite::{CaseFuture, Harness, SIGNAL_WAIT};
use staunch_store::{CreateOutcome, NewJob, Signal};
use tokio_postgres::NoTls;

const ENV: &str = "STAUNCH_TEST_POSTGRES";

fn url() -> Option<String> {
    let url = std::env::var(ENV).ok().filter(|u| !u.is_empty());
    if url.is_none() {
        static NOTICE: Once = Once::new();
        NOTICE.call_once(|| {
            // Straight to the process's stderr, past the test harness's output capture, so the
            // skip is visible in a normal `cargo test` run.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {ENV} not set; PostgreSQL driver tests did not run"
            );
        });
    }
    url
}

fn fresh_schema(name: &str) -> String {
    let mut rand = [0u8; 6];
    getrandom::fill(&mut rand).unwrap();
    let hex: String = rand.iter().map(|b| format!("{b:02x}")).collect();
    let mut schema = format!("staunch_t{hex}_{name}");
    schema.truncate(63);
    schema
}

async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

async fn drop_schema(url: &str, schema: &str) {
    admin(url)
        .await
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
}

/// Runs `case` against a fresh schema opened through two pools (two "instances"), opened
/// concurrently so their migrations race, and drops the schema even if the case panics.
async fn fixture(name: &'static str, case: impl FnOnce(Harness) -> CaseFuture) {
    let Some(url) = url() else { return };
    let schema = fresh_schema(name);
    let (a, b) = tokio::join!(
        staunch_store::open_postgres_in_schema(&url, &schema),
        staunch_store::open_postgres_in_schema(&url, &schema),
    );
    let harness = Harness {
        a: a.unwrap(),
        b: b.unwrap(),
    };
    // Run on its own task so a failed assertion comes back as a JoinError and cleanup still
    // runs; the harness (pools, LISTEN connection) is dropped when the task ends.
    let outcome = tokio::spawn(case(harness)).await;
    drop_schema(&url, &schema).await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

crate::event_store_suite!(fixture);
crate::session_store_suite!(fixture);
crate::job_store_suite!(fixture);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn open_with_search_path_in_url_and_concurrent_migrations() {
    let Some(url) = url() else { return };
    let schema = fresh_schema("url_options");
    admin(&url)
        .await
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    let sep = if url.contains('?') { '&' } else { '?' };
    let spec = format!("{url}{sep}options=-csearch_path%3D{schema}");
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let spec = spec.clone();
            tokio::spawn(async move { staunch_store::open(&spec).await })
        })
        .collect();
    let mut stores = Vec::new();
    for o in opens {
        stores.push(o.await.unwrap().unwrap());
    }
    let out = stores[0]
        .jobs
        .create(NewJob::new("", "t", "{}", "fp", 1))
        .await
        .unwrap();
    let CreateOutcome::Created(job) = out else {
        panic!("expected a new job")
    };
    assert_eq!(stores[3].jobs.get(&job.id).await.unwrap(), Some(job));
    let applied: i64 = admin(&url)
        .await
        .query_one(
            &format!("SELECT count(*) FROM {schema}.staunch_migrations"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        applied,
        staunch_store::SCHEMA_VERSION as i64,
        "each migration applied exactly once"
    );
    drop(stores);
    drop_schema(&url, &schema).await;
}

/// A LISTEN connection killed by the server (failover, idle killer, admin) is replaced, and
/// signals flow again; the Wake after reconnecting tells workers to poll for what was missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn listener_recovers_after_its_connection_is_killed() {
    let Some(url) = url() else { return };
    let schema = fresh_schema("listen_recovers");
    let (a, b) = tokio::join!(
        staunch_store::open_postgres_in_schema(&url, &schema),
        staunch_store::open_postgres_in_schema(&url, &schema),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let (url2, schema2) = (url.clone(), schema.clone());
    let outcome = tokio::spawn(async move {
        let (url, schema) = (url2, schema2);
        let mut rx = a.jobs.subscribe_signals();
        recv(&mut rx, &Signal::Wake).await;
        // Cross-instance: a cancel requested through `b` reaches `a`'s subscribers.
        b.jobs.notify_cancel("job-1").await.unwrap();
        recv(&mut rx, &Signal::Cancel("job-1".into())).await;
        // A change made through `b` reaches `a`, saying who made it.
        b.jobs.notify_changed("job-1", "b/run-1").await.unwrap();
        let changed = Signal::Changed {
            id: "job-1".into(),
            by: "b/run-1".into(),
        };
        recv(&mut rx, &changed).await;
        // A session deleted through `b` is ended on `a` at once.
        let session = staunch_store::SessionRecord {
            id: "sess-gone".into(),
            protocol_version: "2025-11-25".into(),
            client_info_json: "{}".into(),
            client_capabilities_json: "{}".into(),
            principal: None,
            log_level: None,
            created_ms: 1,
            last_seen_ms: 1,
        };
        b.sessions.create(session).await.unwrap();
        assert!(b.sessions.delete("sess-gone").await.unwrap());
        recv(&mut rx, &Signal::SessionEnded("sess-gone".into())).await;

        let admin = admin(&url).await;
        let killed = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = left($1, 63)",
                &[&format!("staunch-listen {schema}")],
            )
            .await
            .unwrap();
        assert_eq!(killed.len(), 1, "found the listening connection");
        // Back and listening: a Wake and a Reconnected (followers re-read what they may have
        // missed), then signals again.
        recv(&mut rx, &Signal::Wake).await;
        recv(&mut rx, &Signal::Reconnected).await;
        b.jobs.notify_cancel("job-2").await.unwrap();
        recv(&mut rx, &Signal::Cancel("job-2".into())).await;
    })
    .await;
    drop_schema(&url, &schema).await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn recv(rx: &mut tokio::sync::broadcast::Receiver<Signal>, want: &Signal) {
    let wait = async {
        loop {
            match rx.recv().await {
                Ok(s) if &s == want => return,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("signal channel: {e}"),
            }
        }
    };
    tokio::time::timeout(SIGNAL_WAIT.max(Duration::from_secs(1)), wait)
        .await
        .unwrap_or_else(|_| panic!("no {want:?} in time"));
}

/// Backends killed under the pool (a failover, an idle killer, an operator): a read made at
/// once still answers. The pool hands out a connection without asking the server first, so the
/// read may land on a dead one; it is made again on a fresh one (reading twice is harmless).
#[tokio::test]
async fn a_read_survives_its_pooled_connection_being_killed() {
    let Some(url) = url() else { return };
    let schema = fresh_schema("read_killed");
    let app = format!("staunch-reads-{schema}");
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = staunch_store::open_postgres_in_schema(
        &format!("{url}{sep}application_name={app}"),
        &schema,
    )
    .await
    .unwrap();
    let admin = admin(&url).await;
    let kill = || async {
        admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .unwrap()
            .len()
    };
    // Each kind of read in turn: the pool filled, every connection killed, one read at once.
    let mut failures = Vec::new();
    for round in 0..3 {
        for kind in ["job", "session", "replay"] {
            let read = || async {
                match kind {
                    "job" => store.jobs.get("job-a").await.map(drop),
                    "session" => store.sessions.get("sess-a").await.map(drop),
                    _ => store
                        .events
                        .replay_after("sess-a", "stream-a", 0, 10)
                        .await
                        .map(drop),
                }
            };
            let (a, b, c) = tokio::join!(read(), read(), read());
            assert!(
                a.is_ok() && b.is_ok() && c.is_ok(),
                "{kind}, round {round}: before the kill"
            );
            assert!(
                kill().await > 0,
                "{kind}, round {round}: found the pool's connections"
            );
            if let Err(e) = read().await {
                failures.push(format!("{kind}, round {round}: {e}"));
            }
        }
    }
    drop(store);
    drop_schema(&url, &schema).await;
    assert!(
        failures.is_empty(),
        "reads failed after the kill: {failures:#?}"
    );
}
