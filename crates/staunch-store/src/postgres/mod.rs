//! The PostgreSQL driver: for several `staunch serve` instances sharing one database.
//!
//! - A deadpool pool of tokio-postgres connections (no TLS: `sslmode=require` is refused by
//!   the connector; put the database on a private network or a local socket).
//! - Migrations at open, inside one transaction holding `pg_advisory_xact_lock`, so instances
//!   starting at once apply them exactly once; PostgreSQL DDL is transactional, so a failed
//!   migration leaves nothing behind.
//! - Optional schema: `?options=-csearch_path%3Dname` in the URL works as usual, and
//!   [`open_postgres_in_schema`] creates the schema and sets `search_path` on every connection
//!   (as a startup option, so pooled and LISTEN connections all get it).
//! - Claims with `FOR UPDATE SKIP LOCKED`; cancel and wake-up signals with `LISTEN/NOTIFY` on a
//!   channel named after the schema (see `listen.rs`).

mod event;
mod input;
mod job;
mod job_create;
mod job_operator;
mod job_row;
mod listen;
mod session;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

use crate::schema::MIGRATIONS;
use crate::{StoreError, Stores};

/// Connections per pool. Each instance holds at most this many, plus one for LISTEN.
const POOL_SIZE: usize = 16;
/// How long a caller waits for a free connection, or for a new one, before an error.
const POOL_TIMEOUT: Duration = Duration::from_secs(30);
/// Advisory lock key serialising migrations across every process on the database
/// ("STAUNCH" in ASCII, then 1).
const MIGRATION_LOCK: i64 = 0x5354_4155_4e43_4801;

/// What the three PostgreSQL stores share.
pub(crate) struct Pg {
    pool: Pool,
    /// The schema the tables live in (`current_schema()` at open). Advisory locks are
    /// database-wide, so their keys include it: stores in other schemas never contend.
    schema: String,
}

impl Pg {
    async fn client(&self) -> Result<deadpool_postgres::Client, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// A read-only statement returning at most one row, made again on the next connection
    /// when the one it ran on turns out dead ([`connection_lost`]): reading twice is harmless.
    async fn read_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        self.reading(|c| async move { query_opt(&c, sql, params).await })
            .await
    }

    /// [`Pg::read_opt`] for a statement returning rows.
    async fn read(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.reading(|c| async move { query(&c, sql, params).await })
            .await
    }

    /// Runs `read` on a pooled connection, and again on the next one while the connection
    /// turns out dead: at most once per pooled connection, since each dead one leaves the pool
    /// as it fails.
    async fn reading<T, F, Fut>(&self, read: F) -> Result<T, StoreError>
    where
        F: Fn(deadpool_postgres::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let mut lost = 0;
        loop {
            match read(self.client().await?).await {
                Err(e) if connection_lost(&e) && lost < POOL_SIZE => lost += 1,
                r => return r,
            }
        }
    }
}

/// The connection died under the statement: its backend was terminated (a failover, an idle
/// killer, an operator) or crashed, and the pool, which hands out a connection without asking
/// the server first, had not noticed yet. The connection is closed by now, so the pool drops it
/// when it comes back.
fn connection_lost(e: &StoreError) -> bool {
    use tokio_postgres::error::SqlState;
    match e {
        StoreError::Postgres(e) => {
            e.is_closed()
                || e.code().is_some_and(|c| {
                    *c == SqlState::ADMIN_SHUTDOWN || *c == SqlState::CRASH_SHUTDOWN
                })
        }
        _ => false,
    }
}

/// Opens the stores on the database at `url` (`postgres://…`) and applies migrations.
pub async fn open_postgres(url: &str) -> Result<Stores, StoreError> {
    open_pg(url, None).await
}

/// Like [`open_postgres`], with every table in `schema` (created if missing). `schema` must be
/// an unquoted identifier: ASCII letters, digits and `_`, not starting with a digit, at most
/// 63 bytes. Tests use a fresh schema per run so concurrent runs never see each other's rows.
pub async fn open_postgres_in_schema(url: &str, schema: &str) -> Result<Stores, StoreError> {
    let valid = !schema.is_empty()
        && schema.len() <= 63
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(StoreError::InvalidInput(format!(
            "bad schema name {schema:?}"
        )));
    }
    open_pg(url, Some(schema)).await
}

async fn open_pg(url: &str, schema: Option<&str>) -> Result<Stores, StoreError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| StoreError::InvalidSpec {
        spec: redact(url),
        reason: format!("{e}"),
    })?;
    if let Some(schema) = schema {
        let options = match config.get_options() {
            Some(existing) if !existing.is_empty() => format!("{existing} -c search_path={schema}"),
            _ => format!("-c search_path={schema}"),
        };
        config.options(&options);
    }
    if config.get_application_name().is_none() {
        config.application_name("staunch");
    }
    let manager = Manager::from_config(
        config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(POOL_SIZE)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(POOL_TIMEOUT))
        .create_timeout(Some(POOL_TIMEOUT))
        .build()?;
    let schema = migrate(&pool, schema).await?;
    let pg = Arc::new(Pg { pool, schema });
    Ok(Stores {
        events: Arc::new(event::PgEventStore::new(pg.clone())),
        sessions: Arc::new(session::PgSessionStore::new(pg.clone())),
        jobs: Arc::new(job::PgJobStore::new(pg, config)),
    })
}

/// Applies missing migrations; returns the schema the tables are in.
async fn migrate(pool: &Pool, create_schema: Option<&str>) -> Result<String, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    if let Some(schema) = create_schema {
        // Under the lock: two processes creating one schema at once would otherwise race on
        // the catalog's unique index even with IF NOT EXISTS. The name was validated.
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await?;
    }
    let schema: Option<String> = tx.query_one("SELECT current_schema()", &[]).await?.get(0);
    let schema = schema.ok_or_else(|| {
        StoreError::Migration("search_path names no existing schema to create tables in".into())
    })?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS staunch_migrations \
         (version BIGINT PRIMARY KEY, applied_ms BIGINT NOT NULL)",
    )
    .await?;
    let version: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM staunch_migrations",
            &[],
        )
        .await?
        .get(0);
    let version = usize::try_from(version).unwrap_or(usize::MAX);
    if version > MIGRATIONS.len() {
        return Err(StoreError::Migration(format!(
            "the database has schema version {version}, newer than this build knows ({})",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| StoreError::Migration(format!("migration {}: {e}", i + 1)))?;
        tx.execute(
            "INSERT INTO staunch_migrations (version, applied_ms) VALUES ($1, $2)",
            &[&((i + 1) as i64), &crate::now_ms()],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(schema)
}

/// The URL without its password, for error messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// Prepares (cached per connection) and runs a statement returning at most one row.
async fn query_opt(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, StoreError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.query_opt(&stmt, params).await?)
}

async fn query(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.query(&stmt, params).await?)
}

async fn execute(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, StoreError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.execute(&stmt, params).await?)
}

/// A BIGINT the API exposes as unsigned; negative only in a corrupted row.
fn to_u64(v: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {what}: {v}")))
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
