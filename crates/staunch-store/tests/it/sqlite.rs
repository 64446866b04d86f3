//! The shared driver suite against real SQLite files, plus what only the SQLite driver does.

use crate::testsuite::{CaseFuture, Harness};
use staunch_store::{CreateOutcome, NewJob, StoreError};

/// A fresh file per case, opened twice: two connections on two threads, as two processes
/// sharing the file would have.
async fn fixture(_name: &'static str, case: impl FnOnce(Harness) -> CaseFuture) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staunch.db");
    let a = staunch_store::open(path.to_str().unwrap()).await.unwrap();
    let b = staunch_store::open_sqlite(&path).await.unwrap();
    case(Harness { a, b }).await;
}

crate::event_store_suite!(fixture);
crate::session_store_suite!(fixture);
crate::job_store_suite!(fixture);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_opens_migrate_once_and_data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staunch.db");
    let spec = format!("sqlite:{}", path.display());
    let opens: Vec<_> = (0..8)
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
    drop(stores);
    let again = staunch_store::open(path.to_str().unwrap()).await.unwrap();
    assert_eq!(again.jobs.get(&job.id).await.unwrap(), Some(job));
}

#[tokio::test]
async fn bad_specs_are_clear_errors() {
    assert!(matches!(
        staunch_store::open("").await,
        Err(StoreError::InvalidSpec { .. })
    ));
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/staunch.db");
    assert!(
        staunch_store::open(missing.to_str().unwrap())
            .await
            .is_err()
    );
}

/// A store file staunch creates is its owner's only (0600), and so are SQLite's `-wal` and
/// `-shm` beside it; an existing file keeps the permissions its owner gave it.
#[cfg(unix)]
#[tokio::test]
async fn a_new_store_file_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staunch.db");
    let stores = staunch_store::open_sqlite(&path).await.unwrap();
    stores
        .sessions
        .shared_secret("k", "v", staunch_store::now_ms())
        .await
        .unwrap();
    assert_eq!(mode(&path), 0o600);
    for side in ["staunch.db-wal", "staunch.db-shm"] {
        let p = dir.path().join(side);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{side}");
        }
    }
    drop(stores);

    let existing = dir.path().join("shared.db");
    std::fs::write(&existing, b"").unwrap();
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o640)).unwrap();
    let _s = staunch_store::open_sqlite(&existing).await.unwrap();
    assert_eq!(
        mode(&existing),
        0o640,
        "an existing file's permissions are left alone"
    );
}
