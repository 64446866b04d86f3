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

/// [`drop_schema`] for a test whose servers run in its own process, as the kit's do: psql runs
/// on the blocking pool, so the runtime goes on serving them, and a transaction of theirs that
/// holds one of the schema's locks can end instead of waiting behind the drop forever.
pub async fn drop_schema_async(url: &str, schema: &str) {
    let (url, schema) = (url.to_string(), schema.to_string());
    let _ = tokio::task::spawn_blocking(move || drop_schema(&url, &schema)).await;
}

/// The name of the instance holding job `job`'s lease in `schema` (lease owners are
/// `"{instance}/{random}"`); empty when none holds it.
pub fn lease_owner(url: &str, schema: &str, job: &str) -> String {
    let out = std::process::Command::new("psql")
        .arg(url)
        .arg("-tAc")
        .arg(format!(
            "SELECT lease_owner FROM {schema}.staunch_jobs WHERE id = '{job}'"
        ))
        .output()
        .expect("psql");
    let owner = String::from_utf8_lossy(&out.stdout).trim().to_string();
    owner.split('/').next().unwrap_or_default().to_string()
}
