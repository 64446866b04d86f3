//! What the fair claim (`claim_next`) costs on a big table: 200 000 finished jobs of 100 owners,
//! 10 000 queued jobs of 10 owners (the per-owner cap's default is 1000), 8 running. Prints
//! the mean time of a claim; asserts nothing about speed (it only checks each claim finds a
//! job). Ignored by default:
//!
//! ```text
//! CARGO_BUILD_JOBS=1 cargo test -p staunch-store --test claim_cost -- --ignored --nocapture
//! ```
//!
//! (with `STAUNCH_TEST_POSTGRES` set for the PostgreSQL half).

use std::time::Instant;

use staunch_store::Stores;

const FINISHED: i64 = 200_000;
const QUEUED: i64 = 10_000;
const CLAIMS: u32 = 200;

/// Rows of the fill, as one `INSERT … SELECT` over `n` (0..FINISHED+QUEUED+8): finished rows
/// first, then queued, then 8 running.
fn fill_sql(series: &str) -> String {
    format!(
        "INSERT INTO staunch_jobs (id, principal, tool, args_json, args_fingerprint, state, \
         lease_owner, created_ms, started_ms, finished_ms, updated_ms, ttl_ms) \
         SELECT 'j' || n, \
           CASE WHEN n < {FINISHED} THEN 'owner' || (n % 100) ELSE 'owner' || (n % 10) END, \
           't', '{{}}', 'fp' || n, \
           CASE WHEN n < {FINISHED} THEN 'succeeded' \
                WHEN n < {FINISHED} + {QUEUED} THEN 'queued' ELSE 'running' END, \
           CASE WHEN n >= {FINISHED} + {QUEUED} THEN 'w/x' END, \
           1000 + n, \
           CASE WHEN n < {FINISHED} OR n >= {FINISHED} + {QUEUED} THEN 1000 + n END, \
           CASE WHEN n < {FINISHED} THEN 2000 + n END, \
           1000 + n, 86400000 \
         FROM {series}"
    )
}

async fn measure(label: &str, stores: &Stores) {
    let tools = vec!["t".to_string()];
    let now = 10_000_000;
    let t0 = Instant::now();
    for i in 0..CLAIMS {
        let l = stores
            .jobs
            .claim_next("w/1", 60_000, now + i64::from(i), &tools, u64::MAX)
            .await
            .unwrap();
        assert!(l.is_some(), "claim {i} found nothing");
    }
    let each = t0.elapsed() / CLAIMS;
    eprintln!(
        "{label}: claim_next over {FINISHED} finished + {QUEUED} queued jobs: {each:?} per claim \
         (mean of {CLAIMS})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check: run with --ignored --nocapture"]
async fn sqlite_claim_cost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staunch.db");
    let stores = staunch_store::open_sqlite(&path).await.unwrap();
    let c = rusqlite::Connection::open(&path).unwrap();
    let total = FINISHED + QUEUED + 8;
    c.execute_batch(&fill_sql(&format!(
        "(WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < {total} - 1) \
         SELECT n FROM s)"
    )))
    .unwrap();
    c.execute_batch("ANALYZE").unwrap();
    drop(c);
    measure("SQLite", &stores).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check: run with --ignored --nocapture"]
async fn postgres_claim_cost() {
    let Some(url) = std::env::var("STAUNCH_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("SKIPPED: STAUNCH_TEST_POSTGRES not set");
        return;
    };
    let schema = "staunch_claim_cost";
    let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    let stores = staunch_store::open_postgres_in_schema(&url, schema)
        .await
        .unwrap();
    let total = FINISHED + QUEUED + 8;
    admin
        .batch_execute(&format!(
            "SET search_path TO {schema}; {}; ANALYZE staunch_jobs",
            fill_sql(&format!("generate_series(0, {total} - 1) AS g(n)"))
        ))
        .await
        .unwrap();
    measure("PostgreSQL", &stores).await;
    drop(stores);
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
}
