//! Example job tools (the `job` shape): each becomes `start_x`, `get_x`, `cancel_x` and `x`
//! (task-capable) through `staunch_jobs`.
//!
//! - `import_rows {rows, delay_ms}` has side effects: every unit writes one row to the SQLite
//!   table `demo_import_rows` (job id, attempt, unit, time), so a double execution would be
//!   plain to see. It checks for cancellation before each write and is never re-run after a
//!   crash.
//! - `long_scan {steps, delay_ms}` is read-only and retry-safe: after a crash it runs again and
//!   resumes from its last checkpoint.
//! - `imported_rows {job_id}` (quick) counts what an import wrote, per attempt — for the job's
//!   owner only (the rule of `get_import_rows`): anyone else gets the answer a job id that
//!   never existed gets, so the tool cannot be used to probe for other callers' jobs.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use staunch_jobs::{JobContext, JobError, JobRuntime, JobTool, JobsExt};
use staunch_server::{CallToolResult, Context, ServerBuilder, ToolError, ToolSpec};

/// The table `import_rows` writes to.
pub const IMPORT_TABLE: &str = "demo_import_rows";

#[derive(Serialize, Deserialize, JsonSchema)]
struct ImportArgs {
    /// Rows to import; one row is written per unit of work.
    rows: u32,
    /// Milliseconds each row takes (simulated work after the write).
    #[serde(default = "default_import_delay")]
    delay_ms: u64,
}

fn default_import_delay() -> u64 {
    50
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ScanArgs {
    /// Steps to scan.
    steps: u32,
    /// Milliseconds each step takes.
    #[serde(default = "default_scan_delay")]
    delay_ms: u64,
}

fn default_scan_delay() -> u64 {
    50
}

#[derive(Deserialize, JsonSchema)]
struct JobIdArgs {
    /// The job_id of an import_rows job.
    job_id: String,
}

/// One connection to the import database, shared by every import (SQLite has one writer
/// anyway); each write runs on the blocking pool.
pub type ImportDb = Arc<Mutex<Connection>>;

/// Where `import_rows` writes for a server on the store `store`: `given` (`--import-db`), else
/// the store's own SQLite file (a separate table), else (PostgreSQL) `staunch-import.db` in the
/// user's state directory (in memory without one); in memory with a `:memory:` store.
pub fn import_db_path(store: &str, given: Option<&Path>) -> Option<std::path::PathBuf> {
    if let Some(p) = given {
        return Some(p.to_path_buf());
    }
    if store == ":memory:" {
        return None;
    }
    if store.starts_with("postgres://") || store.starts_with("postgresql://") {
        // The demo's rows stay on this machine, in the state directory (not the caller's).
        let beside =
            staunch_store::location::resolve_store(staunch_store::location::DEFAULT_STORE, true)
                .ok()?;
        return Some(Path::new(&beside).with_file_name("staunch-import.db"));
    }
    Some(store.strip_prefix("sqlite:").unwrap_or(store).into())
}

/// Opens (and creates) the import table. `None` keeps it in memory for this process.
pub fn open_import_db(path: Option<&Path>) -> rusqlite::Result<ImportDb> {
    let conn = match path {
        Some(p) => Connection::open(p)?,
        None => Connection::open_in_memory()?,
    };
    // The store may hold this file's write lock for a moment; wait instead of failing.
    conn.busy_timeout(Duration::from_secs(10))?;
    if path.is_some() {
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    }
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {IMPORT_TABLE} (
             id INTEGER PRIMARY KEY AUTOINCREMENT,
             job_id TEXT NOT NULL,
             attempt INTEGER NOT NULL,
             unit INTEGER NOT NULL,
             written_ms INTEGER NOT NULL
         );
         CREATE INDEX IF NOT EXISTS {IMPORT_TABLE}_job ON {IMPORT_TABLE} (job_id);"
    ))?;
    Ok(Arc::new(Mutex::new(conn)))
}

fn lock(db: &ImportDb) -> std::sync::MutexGuard<'_, Connection> {
    db.lock().unwrap_or_else(|p| p.into_inner())
}

/// Registers the job tools on `builder`, run by `rt`, importing into `db`.
pub fn register(builder: ServerBuilder, rt: &JobRuntime, db: ImportDb) -> ServerBuilder {
    let for_import = db.clone();
    let import = JobTool::new(
        "import_rows",
        "Imports `rows` rows into the demo table, one row per unit of work, with progress.",
        move |ctx: JobContext, a: ImportArgs| import_rows(ctx, a, for_import.clone()),
    )
    .title("Import rows")
    .side_effects(true)
    .retry_safe(false);
    let scan = JobTool::new(
        "long_scan",
        "Scans `steps` steps (read-only) with progress, and reports a checksum.",
        long_scan,
    )
    .title("Long scan")
    .side_effects(false)
    .retry_safe(true);
    let rt_count = rt.clone();
    builder.job_tool(rt, import).job_tool(rt, scan).tool(
        ToolSpec::quick(
            "imported_rows",
            "Counts the rows an import_rows job wrote, and in how many attempts (more than \
                 one would mean it ran twice).",
        )
        .annotations(json!({"readOnlyHint": true})),
        move |ctx: Context, a: JobIdArgs| {
            let (db, rt) = (db.clone(), rt_count.clone());
            async move {
                if !caller_owns_import(&rt, &ctx, &a.job_id).await? {
                    return Ok(unknown_import(&a.job_id));
                }
                count_rows(db, a.job_id).await
            }
        },
    )
}

/// Whether `job_id` is an `import_rows` job the caller may see: it exists, and belongs to the
/// caller's owner scope (the rule every face of the job applies).
async fn caller_owns_import(
    rt: &JobRuntime,
    ctx: &Context,
    job_id: &str,
) -> Result<bool, ToolError> {
    let job = rt
        .get(job_id)
        .await
        .map_err(|e| ToolError::Internal(format!("reading the job failed: {e}")))?;
    Ok(job.is_some_and(|j| j.tool == "import_rows" && rt.scope_of(ctx).owns(&j, ctx)))
}

/// The one answer for a job the caller may not see and for one that does not exist.
fn unknown_import(job_id: &str) -> CallToolResult {
    CallToolResult::error(format!(
        "No import_rows job with job_id \"{job_id}\" is known here: it never existed, belongs \
         to another caller, or ended long ago and was deleted."
    ))
}

async fn import_rows(
    ctx: JobContext,
    a: ImportArgs,
    db: ImportDb,
) -> Result<serde_json::Value, JobError> {
    let total = f64::from(a.rows);
    for unit in 0..a.rows {
        // The cancel check comes before the write: once a cancel is seen, nothing more is
        // written.
        ctx.check()?;
        let (db, job, attempt) = (db.clone(), ctx.job_id().to_string(), ctx.attempt());
        // Fault injection, debug builds only (compiled out of release builds): unit 1 is not
        // written, and the job still succeeds, so that the chaos driver can be shown to report
        // a missing unit (benches/chaos/tests/detects.rs).
        #[cfg(debug_assertions)]
        let dropped = unit == 1 && staunch_server::fault_injected("drop_unit");
        #[cfg(not(debug_assertions))]
        let dropped = false;
        ctx.blocking(move |u| {
            u.check()?;
            if dropped {
                return Ok(());
            }
            lock(&db)
                .execute(
                    &format!(
                        "INSERT INTO {IMPORT_TABLE} (job_id, attempt, unit, written_ms) \
                         VALUES (?1, ?2, ?3, ?4)"
                    ),
                    params![job, attempt, unit, staunch_store::now_ms()],
                )
                .map_err(|e| JobError::failed(format!("writing row {unit} failed: {e}")))?;
            Ok(())
        })
        .await?;
        ctx.progress(
            f64::from(unit + 1),
            Some(total),
            Some(format!("imported {} of {} rows", unit + 1, a.rows)),
        );
        ctx.sleep(Duration::from_millis(a.delay_ms)).await?;
    }
    Ok(json!({"imported": a.rows}))
}

async fn long_scan(ctx: JobContext, a: ScanArgs) -> Result<serde_json::Value, JobError> {
    let resumed_from = ctx
        .last_checkpoint()
        .and_then(|c| c["next"].as_u64())
        .map_or(0, |n| n.min(u64::from(a.steps)) as u32);
    let mut checksum = ctx
        .last_checkpoint()
        .and_then(|c| c["checksum"].as_u64())
        .unwrap_or(0);
    let mut last_saved = tokio::time::Instant::now();
    for step in resumed_from..a.steps {
        ctx.check()?;
        ctx.sleep(Duration::from_millis(a.delay_ms)).await?;
        checksum = checksum.wrapping_mul(31).wrapping_add(u64::from(step));
        ctx.progress(
            f64::from(step + 1),
            Some(f64::from(a.steps)),
            Some(format!("scanned {} of {} steps", step + 1, a.steps)),
        );
        // A checkpoint is a store write: a few per second is plenty to resume from.
        if last_saved.elapsed() >= Duration::from_millis(250) {
            ctx.checkpoint(json!({"next": step + 1, "checksum": checksum}))
                .await?;
            last_saved = tokio::time::Instant::now();
        }
    }
    Ok(json!({
        "scanned": a.steps,
        "checksum": checksum,
        "resumed_from": resumed_from,
        "attempt": ctx.attempt(),
    }))
}

async fn count_rows(db: ImportDb, job_id: String) -> Result<CallToolResult, ToolError> {
    let id = job_id.clone();
    let counted = tokio::task::spawn_blocking(move || {
        lock(&db).query_row(
            &format!(
                "SELECT COUNT(*), COUNT(DISTINCT attempt), COALESCE(MAX(unit), -1) \
                 FROM {IMPORT_TABLE} WHERE job_id = ?1"
            ),
            [&id],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            },
        )
    })
    .await
    .map_err(|e| ToolError::Internal(e.to_string()))?
    .map_err(|e| ToolError::Internal(format!("counting rows failed: {e}")))?;
    let (rows, attempts, max_unit) = counted;
    Ok(CallToolResult::structured(json!({
        "job_id": job_id,
        "rows": rows,
        "attempts": attempts,
        "last_unit": max_unit,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_rows_writes_where_it_is_told_else_beside_a_sqlite_store() {
        let given = Path::new("/tmp/rows.db");
        assert_eq!(
            import_db_path("staunch.db", Some(given)),
            Some(given.to_path_buf())
        );
        assert_eq!(
            import_db_path("sqlite:/var/lib/s.db", None),
            Some("/var/lib/s.db".into())
        );
        assert_eq!(import_db_path(":memory:", None), None);
    }
}
