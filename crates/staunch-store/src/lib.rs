//! Durable state for staunch, behind three narrow, object-safe traits:
//!
//! - [`EventStore`]: SSE events for `Last-Event-ID` replay, scoped by session, per-stream
//!   sequence numbers ([`StoredEvent`], [`Replay`]).
//! - [`SessionStore`]: HTTP session records shared by every instance ([`SessionRecord`]).
//! - [`JobStore`]: durable jobs with idempotency keys, leases with fencing tokens, a reaper and
//!   cancellation ([`JobRecord`], [`NewJob`], [`Lease`], [`JobOutcome`], [`Signal`]).
//!
//! [`open`] picks the driver from a `--store` value and returns all three as [`Stores`]:
//!
//! | spec | driver |
//! |---|---|
//! | `postgres://…` / `postgresql://…` | PostgreSQL: a deadpool pool, `FOR UPDATE SKIP LOCKED` claims, `LISTEN/NOTIFY` signals |
//! | `:memory:` | [`MemoryEventStore`], [`MemorySessionStore`], jobs on an in-memory SQLite database |
//! | anything else (`sqlite:` prefix optional) | one SQLite file for all three, WAL, one connection on its own thread |
//!
//! With no `--store` given, the file lives in the user's state directory ([`location`]).
//!
//! Migrations are applied when a store is opened. All times are epoch milliseconds (`i64`)
//! passed in by the caller ([`now_ms`] gives the clock), so tests control time and never sleep.
//! Errors are [`StoreError`]. The driver test suite, written once over the traits and run
//! against every backend, is in the crate's integration tests (`tests/it/testsuite`).

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

use std::sync::Arc;

mod error;
mod event;
mod job;
mod job_rows;
pub mod location;
mod memory;
mod postgres;
mod schema;
mod session;
mod signal;
mod sqlite;

pub use error::StoreError;
pub use event::{BatchOutcome, EventStore, EventWrite, Replay, StoredEvent};
pub use job::{
    CancelOutcome, CreateOutcome, DEFAULT_IDEM_TTL_MS, DEFAULT_JOB_TTL_MS, FinishOutcome,
    Heartbeat, JobFilter, JobInput, JobOutcome, JobRecord, JobState, JobStore, Lease,
    MAX_IDEM_KEY_CHARS, NewJob, REASON_CANCELLED, REASON_LEASE_LOST, ReapedJob, owner_id,
    owner_prefix,
};
pub use memory::{MemoryEventStore, MemorySessionStore};
pub use postgres::{open_postgres, open_postgres_in_schema};
pub use session::{
    ANSWER_TTL_MS, MAX_ANSWERS_PER_SESSION, SessionRecord, SessionStore, WRITER_ROW_TTL_MS,
};
pub use signal::Signal;
pub use sqlite::open_sqlite;

/// The schema version a store is at once opened: the number of migrations applied.
pub const SCHEMA_VERSION: usize = schema::MIGRATIONS.len();

/// The three stores of one backend, cheap to clone.
#[derive(Clone)]
pub struct Stores {
    /// SSE events, for `Last-Event-ID` replay.
    pub events: Arc<dyn EventStore>,
    /// HTTP session records.
    pub sessions: Arc<dyn SessionStore>,
    /// Durable jobs.
    pub jobs: Arc<dyn JobStore>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stores { .. }")
    }
}

/// [`open`], with staunch's tables in `schema` when it is given — which only a PostgreSQL
/// store has (`--store-schema`).
pub async fn open_in(spec: &str, schema: Option<&str>) -> Result<Stores, StoreError> {
    let is_pg = spec.starts_with("postgres://") || spec.starts_with("postgresql://");
    match (schema, is_pg) {
        (Some(schema), true) => open_postgres_in_schema(spec, schema).await,
        (Some(_), false) => Err(StoreError::InvalidSpec {
            spec: spec.into(),
            reason: "--store-schema needs a postgres:// store".into(),
        }),
        (None, _) => open(spec).await,
    }
}

/// Opens the stores named by a `--store` value (see the table in the crate docs) and applies
/// migrations. Several processes may open the same database at once.
pub async fn open(spec: &str) -> Result<Stores, StoreError> {
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        return open_postgres(spec).await;
    }
    if spec == ":memory:" {
        return Ok(Stores {
            events: Arc::new(MemoryEventStore::new()),
            sessions: Arc::new(MemorySessionStore::new()),
            jobs: sqlite::open_memory_jobs().await?,
        });
    }
    let path = spec
        .strip_prefix("sqlite://")
        .or_else(|| spec.strip_prefix("sqlite:"))
        .unwrap_or(spec);
    if let Some((scheme, _)) = path.split_once("://") {
        // `mysql://…` opened as a file name would make a directory called `mysql:`.
        return Err(StoreError::InvalidSpec {
            spec: spec.to_owned(),
            reason: format!(
                "{scheme}:// is not a store staunch supports; use a SQLite file path, :memory:, \
                 or a postgres:// URL"
            ),
        });
    }
    if path.is_empty() {
        return Err(StoreError::InvalidSpec {
            spec: spec.to_owned(),
            reason: "expected a file path, :memory: or a postgres:// URL".into(),
        });
    }
    open_sqlite(std::path::Path::new(path)).await
}

/// The wall clock in epoch milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `bytes` random bytes from the OS CSPRNG, as lowercase hex.
pub(crate) fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // The OS generator failing is not something a store can recover from or work around:
    // handing out a predictable id instead would be a security bug.
    getrandom::fill(&mut buf).expect("the OS random number generator failed");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new job id: 128 random bits.
pub(crate) fn new_job_id() -> String {
    random_hex(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_schema_is_refused_for_a_store_that_is_not_postgres() {
        match open_in(":memory:", Some("tenant_a")).await {
            Err(e) => assert!(e.to_string().contains("needs a postgres:// store"), "{e}"),
            Ok(_) => panic!("a schema for a memory store was accepted"),
        }
        assert!(open_in(":memory:", None).await.is_ok());
    }

    #[tokio::test]
    async fn unsupported_schemes_are_refused_by_name() {
        for (spec, scheme) in [
            ("mysql://root@127.0.0.1/db", "mysql://"),
            ("redis://127.0.0.1", "redis://"),
            ("sqlite:mongodb://x", "mongodb://"),
        ] {
            let err = open(spec).await.expect_err(spec).to_string();
            assert!(err.contains(scheme), "{spec}: {err}");
            assert!(err.contains("postgres://"), "says what works: {err}");
            assert!(!std::path::Path::new("mysql:").exists(), "no file was made");
        }
    }

    #[tokio::test]
    async fn sqlite_urls_name_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.db");
        open(&format!("sqlite://{}", file.display())).await.unwrap();
        assert!(file.exists());
    }
}
