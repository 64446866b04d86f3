//! The one error type every store operation returns.

/// Why a store operation failed.
///
/// Outcomes that are part of the protocol (a lost lease, a reused idempotency key, a replay
/// cursor older than what is retained) are *not* errors: they are variants of the operation's
/// result type, so callers cannot forget to handle them. `StoreError` is for bad input and for
/// the database itself misbehaving.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The `--store` value could not be understood.
    #[error("invalid store spec {spec:?}: {reason}")]
    InvalidSpec {
        /// The value as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The caller passed something the store refuses (an over-long idempotency key, a bad cursor).
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A record with this id exists already (session or stream ids are chosen by the caller).
    #[error("{what} {id:?} already exists")]
    AlreadyExists {
        /// What kind of record: `session` or `stream`.
        what: &'static str,
        /// The id that is taken.
        id: String,
    },

    /// The stream does not exist *for this session* (it may exist for another one: we do not say).
    #[error("unknown stream {0:?}")]
    UnknownStream(String),

    /// The stream was marked closed; its events stay for replay but nothing more is appended.
    #[error("stream {0:?} is closed")]
    StreamClosed(String),

    /// A row holds a value this version cannot read (e.g. an unknown job state).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),

    /// The database could not be opened or configured as the driver requires.
    #[error("cannot open the store: {0}")]
    Open(String),

    /// Applying the schema migrations failed.
    #[error("migration failed: {0}")]
    Migration(String),

    /// The thread that owns the SQLite connection is gone (it panicked or the store was dropped).
    #[error("the SQLite worker thread is gone")]
    WorkerGone,

    /// SQLite reported an error.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),

    /// PostgreSQL reported an error, or its connection failed.
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),

    /// Getting a connection from the PostgreSQL pool failed.
    #[error("postgres pool: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),

    /// The PostgreSQL connection pool could not be built.
    #[error("postgres pool setup: {0}")]
    PoolBuild(#[from] deadpool_postgres::BuildError),
}

impl StoreError {
    /// True when retrying the same call later may succeed: the database was busy, a connection
    /// dropped, or PostgreSQL picked this transaction as a deadlock / serialization victim.
    /// Everything else (bad input, corrupt rows) will fail the same way again.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ),
            StoreError::Postgres(e) => {
                e.is_closed()
                    || e.code().is_some_and(|c| {
                        *c == tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
                            || *c == tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED
                    })
            }
            StoreError::Pool(_) => true,
            _ => false,
        }
    }
}
