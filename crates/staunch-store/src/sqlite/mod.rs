//! The SQLite driver: one file for all three stores.
//!
//! rusqlite is blocking, so the connection lives on a dedicated thread and async callers send
//! it closures over a channel ([`Db::call`]); the tokio runtime never blocks on SQLite. One
//! connection per process makes this process a single writer (no lock contention with itself);
//! other processes opening the same file are kept correct by WAL, `busy_timeout`, and by taking
//! the write lock up front (`BEGIN IMMEDIATE`) in every transaction that writes, so a
//! transaction never has to upgrade a read lock (which in WAL mode fails with `SQLITE_BUSY`
//! without waiting).

mod event;
mod input;
mod job;
mod job_create;
mod job_row;
mod session;

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::oneshot;

use crate::schema::MIGRATIONS;
use crate::{JobStore, StoreError, Stores};

pub(crate) use event::SqliteEventStore;
pub(crate) use job::SqliteJobStore;
pub(crate) use session::SqliteSessionStore;

/// How long a statement waits for another process's write lock before failing with "busy".
const BUSY_TIMEOUT_MS: u32 = 5_000;

type Task = Box<dyn FnOnce(&mut Connection) + Send>;

/// A handle to the thread that owns the connection. The thread ends when the last handle is
/// dropped (its channel closes).
#[derive(Clone)]
pub(crate) struct Db {
    tx: mpsc::Sender<Task>,
}

impl Db {
    /// Opens `path` (None: a private in-memory database), configures it and migrates it.
    async fn open(path: Option<&Path>) -> Result<Db, StoreError> {
        let path = path.map(Path::to_path_buf);
        let (tx, rx) = mpsc::channel::<Task>();
        let (ready_tx, ready_rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("staunch-sqlite".into())
            .spawn(move || {
                let mut conn = match connect(path.as_deref()) {
                    Ok(conn) => {
                        let _ = ready_tx.send(Ok(()));
                        conn
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok(task) = rx.recv() {
                    // A panicking task drops its reply sender (the caller sees WorkerGone for
                    // that call); the thread and the connection keep serving everyone else.
                    let _ =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(&mut conn)));
                }
            })
            .map_err(|e| StoreError::Open(format!("cannot start the SQLite thread: {e}")))?;
        ready_rx.await.map_err(|_| StoreError::WorkerGone)??;
        Ok(Db { tx })
    }

    /// Runs `f` on the connection thread. If the caller's future is dropped, `f` still runs to
    /// completion: a transaction is never abandoned halfway.
    pub(crate) async fn call<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let (reply_tx, reply_rx) = oneshot::channel();
        self.tx
            .send(Box::new(move |conn| {
                let _ = reply_tx.send(f(conn));
            }))
            .map_err(|_| StoreError::WorkerGone)?;
        reply_rx.await.map_err(|_| StoreError::WorkerGone)?
    }
}

/// Opens and prepares the connection. Several processes opening a *fresh* file at once can
/// get `SQLITE_BUSY` straight away, without the busy handler being consulted (switching the
/// journal to WAL needs an exclusive lock), so set-up is retried for up to `BUSY_TIMEOUT_MS`.
/// This runs on the store's own thread, so the sleeps block nothing else.
fn connect(path: Option<&Path>) -> Result<Connection, StoreError> {
    if let Some(p) = path {
        create_private(p);
    }
    let deadline = std::time::Instant::now() + Duration::from_millis(BUSY_TIMEOUT_MS.into());
    let mut pause = Duration::from_millis(5);
    loop {
        let mut conn = match path {
            Some(p) => Connection::open(p)?,
            None => Connection::open_in_memory()?,
        };
        match set_up(&mut conn, path.is_some()) {
            Ok(()) => return Ok(conn),
            Err(e) if e.is_transient() && std::time::Instant::now() < deadline => {
                drop(conn);
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Creates a store file that does not exist yet readable by its owner only (0600): it holds
/// job arguments and results and the HTTP session table. SQLite gives its `-wal` and `-shm`
/// files the database file's permissions. An existing file keeps whatever its owner chose;
/// any failure here is left to `Connection::open` to report.
fn create_private(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
    }
    #[cfg(not(unix))]
    let _ = path;
}

fn set_up(conn: &mut Connection, is_file: bool) -> Result<(), StoreError> {
    conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS.into()))?;
    if is_file {
        // WAL: readers in other processes do not block the writer and vice versa.
        // synchronous=FULL: a job is "durably recorded" before its id is handed out, even
        // across power loss (NORMAL could lose the last commits).
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Open(format!(
                "SQLite refused WAL mode (journal_mode is {mode}); is the file on a network share?"
            )));
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
    }
    migrate(conn)
}

/// Applies the missing migrations under the write lock, so two processes opening a fresh file
/// at once do not both run them. The schema version is SQLite's `user_version`.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    write_tx(conn, |tx| {
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let version = usize::try_from(version).unwrap_or(usize::MAX);
        if version > MIGRATIONS.len() {
            return Err(StoreError::Migration(format!(
                "the database has schema version {version}, newer than this build knows ({})",
                MIGRATIONS.len()
            )));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
            tx.execute_batch(sql)
                .map_err(|e| StoreError::Migration(format!("migration {}: {e}", i + 1)))?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        }
        Ok(())
    })
}

/// Runs `f` in a `BEGIN IMMEDIATE` transaction and commits it if `f` succeeds.
pub(crate) fn write_tx<R>(
    conn: &mut Connection,
    f: impl FnOnce(&Transaction<'_>) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let out = f(&tx)?;
    tx.commit()?;
    Ok(out)
}

/// Runs `f` in a read transaction: several statements see one snapshot.
pub(crate) fn read_tx<R>(
    conn: &mut Connection,
    f: impl FnOnce(&Transaction<'_>) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let out = f(&tx)?;
    tx.commit()?;
    Ok(out)
}

/// Opens (creating if needed) the SQLite file at `path` and returns its three stores, which
/// share one connection thread.
pub async fn open_sqlite(path: &Path) -> Result<Stores, StoreError> {
    let db = Db::open(Some(path)).await?;
    Ok(Stores {
        events: Arc::new(SqliteEventStore::new(db.clone())),
        sessions: Arc::new(SqliteSessionStore::new(db.clone())),
        jobs: Arc::new(SqliteJobStore::new(db)),
    })
}

/// A job store on a private in-memory SQLite database (for `--store :memory:`).
pub(crate) async fn open_memory_jobs() -> Result<Arc<dyn JobStore>, StoreError> {
    Ok(Arc::new(SqliteJobStore::new(Db::open(None).await?)))
}

/// Converts a stored BIGINT that the API exposes as unsigned (a negative value can only come
/// from a corrupted row).
pub(crate) fn to_u64(v: i64, what: &str) -> rusqlite::Result<u64> {
    u64::try_from(v).map_err(|_| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Integer,
            format!("negative {what}: {v}").into(),
        )
    })
}

/// u64 to a BIGINT parameter. Values past i64::MAX saturate (no store holds that many of anything).
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
