//! Durable jobs through the real `staunch serve` binary over stdio, across a SIGKILL: a job
//! killed mid-import ends `failed(lease_lost)` after a restart and never runs again, an
//! instance name resolves its leftovers at once, and a retry-safe job reruns from its
//! checkpoint. (The job faces on a live server are tested in staunch-jobs, in-process.)

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::Proc;
use serde_json::json;
use staunch_testkit::jobs::{JobsClient, rows, stored_state, until};

struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Db {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("staunch.db");
        Self { _dir: dir, path }
    }

    fn store(&self) -> String {
        self.path.display().to_string()
    }
}

/// Short leases and quick loops, so crashes resolve in about a second. `extra` holds
/// `(flag, value)` pairs that replace the defaults.
fn flags(db: &Db, extra: &[(&str, &str)]) -> Vec<String> {
    let store = db.store();
    let mut pairs: Vec<(&str, &str)> = vec![
        ("--store", &store),
        ("--job-lease-ms", "900"),
        ("--job-heartbeat-ms", "150"),
        ("--job-reap-ms", "100"),
        ("--job-claim-poll-ms", "50"),
        ("--job-poll-after-ms", "100"),
        ("--job-cancel-grace-ms", "500"),
    ];
    for (k, v) in extra {
        match pairs.iter_mut().find(|(name, _)| name == k) {
            Some(p) => p.1 = v,
            None => pairs.push((k, v)),
        }
    }
    pairs
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v.to_string()])
        .collect()
}

/// Spawns `staunch serve` with `flags` and initializes it.
async fn client(flags: &[String]) -> JobsClient<Proc> {
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    JobsClient::new(Proc::spawn(&args).await).await
}

#[cfg(unix)]
async fn sigkill(p: &mut Proc) {
    use std::os::unix::process::ExitStatusExt;
    p.child.start_kill().unwrap(); // SIGKILL on unix
    let status = p.child.wait().await.unwrap();
    assert_eq!(status.signal(), Some(9), "{status:?}");
}

#[cfg(unix)]
#[tokio::test]
async fn sigkill_mid_import_ends_it_failed_lease_lost_after_a_restart_never_running() {
    let db = Db::new();
    let f = flags(&db, &[]);
    let mut c = client(&f).await;
    let s = c
        .ok("start_import_rows", json!({"rows": 100000, "delay_ms": 20}))
        .await;
    let id = s["job_id"].as_str().unwrap().to_string();
    until("5 rows", || rows(&db.path, &id) >= 5).await;
    sigkill(&mut c.p).await;
    let at_kill = rows(&db.path, &id);
    assert_eq!(stored_state(&db.path, &id), "running", "killed mid-job");

    // A new process on the same database (a fresh random instance name): its reaper ends the
    // job once the dead process's lease has expired.
    let mut c = client(&f).await;
    let v = c
        .get_until("import_rows", &id, &["failed", "succeeded", "cancelled"])
        .await;
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["error"]["code"], "lease_lost");
    assert!(v["next"].as_str().unwrap().contains("not run again"), "{v}");
    // Never re-run: no row after the kill, one attempt.
    c.p.pump(Duration::from_millis(300)).await;
    assert_eq!(rows(&db.path, &id), at_kill);
    let counted = c.ok("imported_rows", json!({"job_id": id})).await;
    assert_eq!(counted["attempts"], 1);
}

#[cfg(unix)]
#[tokio::test]
async fn sigkill_with_an_instance_name_is_resolved_as_soon_as_the_instance_restarts() {
    let db = Db::new();
    // Leases and reaper far longer than the test: only the restart's release can end the job.
    let f = flags(
        &db,
        &[
            ("--instance-name", "e2e-node"),
            ("--job-lease-ms", "600000"),
            ("--job-heartbeat-ms", "1000"),
            ("--job-reap-ms", "600000"),
        ],
    );
    let mut c = client(&f).await;
    let s = c
        .ok("start_import_rows", json!({"rows": 100000, "delay_ms": 20}))
        .await;
    let id = s["job_id"].as_str().unwrap().to_string();
    until("3 rows", || rows(&db.path, &id) >= 3).await;
    sigkill(&mut c.p).await;
    assert_eq!(stored_state(&db.path, &id), "running");
    let mut c = client(&f).await;
    // The first answer after the restart already shows the end.
    let v = c.ok("get_import_rows", json!({"job_id": id})).await;
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["error"]["code"], "lease_lost");
}

#[cfg(unix)]
#[tokio::test]
async fn sigkill_mid_scan_reruns_the_retry_safe_job_to_success_from_its_checkpoint() {
    let db = Db::new();
    let f = flags(&db, &[]);
    let mut c = client(&f).await;
    let s = c
        .ok("start_long_scan", json!({"steps": 40, "delay_ms": 50}))
        .await;
    let id = s["job_id"].as_str().unwrap().to_string();
    // Wait for a checkpoint to be stored.
    until("a checkpoint", || {
        let conn = rusqlite::Connection::open(&db.path).unwrap();
        conn.query_row(
            "SELECT checkpoint_json IS NOT NULL FROM staunch_jobs WHERE id = ?1",
            [&id],
            |r| r.get::<_, bool>(0),
        )
        .unwrap_or(false)
    })
    .await;
    sigkill(&mut c.p).await;
    assert_eq!(stored_state(&db.path, &id), "running");
    let mut c = client(&f).await;
    let v = c
        .get_until("long_scan", &id, &["failed", "succeeded", "cancelled"])
        .await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert_eq!(v["attempt"], 2);
    assert_eq!(v["result"]["attempt"], 2);
    assert_eq!(v["result"]["scanned"], 40);
    assert!(v["result"]["resumed_from"].as_u64().unwrap() > 0, "{v}");
}
