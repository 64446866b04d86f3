//! The faults that need more than a signal: a clock-sensitive lease fault (an instance paused
//! past its job lease while it runs a side-effecting job) and a PostgreSQL restart; and a
//! job's row read straight from the store, to see who holds it and what it ended as.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use staunch_client::{CallOptions, Client, ConnectOptions, EraChoice};

use crate::instance::{Instance, LEASE_MS, REAP_MS, StoreKind};

/// A job's row as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    pub state: String,
    pub lease_owner: Option<String>,
    pub error_reason: Option<String>,
    pub finished_ms: Option<i64>,
    pub started_ms: Option<i64>,
}

impl JobRow {
    pub fn terminal(&self) -> bool {
        matches!(self.state.as_str(), "succeeded" | "failed" | "cancelled")
    }
}

const JOB_ROW: &str = "SELECT state, lease_owner, error_reason, finished_ms, started_ms FROM staunch_jobs WHERE id = ";

/// Reads job `id` from the store (read-only; SQLite waits for a writer).
pub async fn job_row(store: &StoreKind, id: &str) -> anyhow::Result<Option<JobRow>> {
    match store {
        StoreKind::Sqlite(path) => {
            let (path, id) = (path.clone(), id.to_string());
            tokio::task::spawn_blocking(move || sqlite_row(&path, &id)).await?
        }
        StoreKind::Postgres { url, schema } => {
            let client = pg_client(url, schema).await?;
            let row = client
                .query_opt(&format!("{JOB_ROW}$1"), &[&id])
                .await?
                .map(|r| JobRow {
                    state: r.get(0),
                    lease_owner: r.get(1),
                    error_reason: r.get(2),
                    finished_ms: r.get(3),
                    started_ms: r.get(4),
                });
            Ok(row)
        }
    }
}

/// The ids of every job the store holds for idempotency key `key` (whatever its owner):
/// what the store says, not what the client was told.
pub async fn job_ids_by_key(store: &StoreKind, key: &str) -> anyhow::Result<Vec<String>> {
    const BY_KEY: &str = "SELECT id FROM staunch_jobs WHERE idem_key = ";
    match store {
        StoreKind::Sqlite(path) => {
            let (path, key) = (path.clone(), key.to_string());
            tokio::task::spawn_blocking(move || {
                let conn = rusqlite::Connection::open_with_flags(
                    &path,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                conn.busy_timeout(Duration::from_secs(5))?;
                let mut st = conn.prepare(&format!("{BY_KEY}?1 ORDER BY id"))?;
                let ids = st
                    .query_map([&key], |r| r.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(ids)
            })
            .await?
        }
        StoreKind::Postgres { url, schema } => {
            let client = pg_client(url, schema).await?;
            let rows = client
                .query(&format!("{BY_KEY}$1 ORDER BY id"), &[&key])
                .await?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        }
    }
}

/// A connection to the run's PostgreSQL store, its schema on the search path.
async fn pg_client(url: &str, schema: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    client
        .batch_execute(&format!("SET search_path TO \"{schema}\""))
        .await?;
    Ok(client)
}

fn sqlite_row(path: &Path, id: &str) -> anyhow::Result<Option<JobRow>> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let mut st = conn.prepare(&format!("{JOB_ROW}?1"))?;
    let mut rows = st.query([id])?;
    let Some(r) = rows.next()? else {
        return Ok(None);
    };
    Ok(Some(JobRow {
        state: r.get(0)?,
        lease_owner: r.get(1)?,
        error_reason: r.get(2)?,
        finished_ms: r.get(3)?,
        started_ms: r.get(4)?,
    }))
}

/// A lease fault that happened: the job, the instance paused, and the job's terminal row as
/// first seen after the pause (it must never change after).
#[derive(Debug, Clone)]
pub struct Stall {
    pub instance: usize,
    pub from: Instant,
    pub to: Instant,
    pub job: String,
    pub key: String,
    pub rows: u32,
    pub first_terminal: Option<JobRow>,
}

/// Starts a long `import_rows` job (with a key) on instance `at`, finds the instance whose
/// worker claimed it, and SIGSTOPs that one for longer than its lease plus a reaper interval,
/// so that the reaper (this instance's, on waking; or another instance's) takes the job over
/// while the paused worker still believes it holds it. Then SIGCONT, and wait for the job to
/// be terminal.
pub async fn lease_fault(
    instances: &[Instance],
    at: usize,
    store: &StoreKind,
) -> anyhow::Result<Stall> {
    let client = Client::connect_http(
        &instances[at].url(),
        &ConnectOptions {
            era: EraChoice::Session,
            init_timeout: Duration::from_secs(5),
            ..ConnectOptions::default()
        },
    )
    .await
    .context("connecting for the lease fault")?;
    let key = staunch_client::jobs::new_idempotency_key();
    let rows = 40u32;
    let started = client
        .call_tool(
            "start_import_rows",
            json!({"rows": rows, "delay_ms": 50, "idempotency_key": key}),
            &CallOptions::default().timeout(Duration::from_secs(10)),
            |_| {},
        )
        .await;
    client.close().await;
    let r = started.context("start_import_rows for the lease fault")?;
    let Some(job) = r["structuredContent"]["job_id"].as_str().map(str::to_owned) else {
        bail!("start_import_rows answered without a job_id: {r}");
    };
    // Who runs it (the owner id is `<instance name>/<random>`, instance name `chaos-<i>`).
    let until = Instant::now() + Duration::from_secs(5);
    let owner = loop {
        let row = job_row(store, &job).await?;
        if let Some(r) = &row
            && r.state == "running"
            && let Some(o) = &r.lease_owner
        {
            break Some(o.clone());
        }
        if Instant::now() > until || row.as_ref().is_some_and(JobRow::terminal) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let target = owner
        .as_deref()
        .and_then(|o| o.strip_prefix("chaos-"))
        .and_then(|o| o.split('/').next())
        .and_then(|i| i.parse::<usize>().ok())
        .filter(|i| *i < instances.len())
        .unwrap_or(at);
    let from = Instant::now();
    instances[target]
        .pause(Duration::from_millis(LEASE_MS + 2 * REAP_MS + 500))
        .await?;
    let to = Instant::now();
    let until = Instant::now() + Duration::from_secs(20);
    let first_terminal = loop {
        match job_row(store, &job).await {
            Ok(Some(r)) if r.terminal() => break Some(r),
            _ if Instant::now() > until => break None,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    Ok(Stall {
        instance: target,
        from,
        to,
        job,
        key,
        rows,
        first_terminal,
    })
}

/// Whether a PostgreSQL URL points at this machine's server (the only one a restart may touch).
pub fn is_local_postgres(url: &str) -> bool {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .unwrap_or("");
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    host.starts_with("127.0.0.1:") || host.starts_with("127.0.0.1/") || host == "127.0.0.1"
}

/// The version of this machine's `main` cluster (from /etc/postgresql).
fn cluster_version() -> anyhow::Result<String> {
    let mut versions: Vec<String> = std::fs::read_dir("/etc/postgresql")
        .context("reading /etc/postgresql")?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .filter(|v| Path::new("/etc/postgresql").join(v).join("main").exists())
        .collect();
    versions.sort();
    versions
        .pop()
        .context("no PostgreSQL cluster `main` in /etc/postgresql")
}

/// Restarts the machine's PostgreSQL server (`pg_ctlcluster <ver> main restart`, bounded to
/// 60 s); returns when it accepts connections again.
pub async fn pg_restart(url: &str) -> anyhow::Result<(Instant, Instant)> {
    anyhow::ensure!(
        is_local_postgres(url),
        "--pg-restart only restarts a server on 127.0.0.1"
    );
    let ver = cluster_version()?;
    let from = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("pg_ctlcluster")
            .args([ver.as_str(), "main", "restart"])
            .output(),
    )
    .await
    .context("pg_ctlcluster restart took over 60 s")??;
    anyhow::ensure!(
        out.status.success(),
        "pg_ctlcluster {ver} main restart: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Ok((c, conn))) = tokio::time::timeout(
            Duration::from_secs(2),
            tokio_postgres::connect(url, tokio_postgres::NoTls),
        )
        .await
        {
            tokio::spawn(conn);
            if c.simple_query("SELECT 1").await.is_ok() {
                return Ok((from, Instant::now()));
            }
        }
        anyhow::ensure!(
            Instant::now() < until,
            "PostgreSQL did not accept connections within 30 s of its restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::is_local_postgres;

    #[test]
    fn only_loopback_servers_are_restarted() {
        assert!(is_local_postgres("postgres://postgres@127.0.0.1:5432/test"));
        assert!(is_local_postgres("postgresql://u:p@127.0.0.1/db"));
        assert!(!is_local_postgres(
            "postgres://postgres@db.example:5432/test"
        ));
        assert!(!is_local_postgres(
            "postgres://postgres@127.0.0.10:5432/test"
        ));
        assert!(!is_local_postgres("host=127.0.0.1"));
    }
}
