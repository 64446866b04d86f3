//! PostgreSQL for multi-instance tests: the URL from `STAUNCH_TEST_POSTGRES` and a fresh,
//! unique schema per test (staunch creates it; the test drops it at the end). Without the
//! variable a test says `SKIPPED:` and does not run.

/// `(url, schema)`, or `None` after printing why the test is skipped.
pub fn fresh_schema(test: &str) -> Option<(String, String)> {
    let Ok(url) = std::env::var("STAUNCH_TEST_POSTGRES") else {
        eprintln!("SKIPPED: STAUNCH_TEST_POSTGRES not set; {test} (PostgreSQL) did not run");
        return None;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("staunch_t_{}_{}", std::process::id(), nanos % 1_000_000_000);
    Some((url, schema))
}

/// Drops a test schema (best effort).
pub fn drop_schema(url: &str, schema: &str) {
    let _ = std::process::Command::new("psql")
        .arg(url)
        .arg("-qc")
        .arg(format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .output();
}
