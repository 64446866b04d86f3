//! The invariants, checked after a run from what the store, the demo import table and the
//! instances' lifecycle logs say — not from what the workload believed.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use staunch_audit::{AuditOptions, audit_reader};
use staunch_lifecycle::{Event, Parsed, parse_line};

use crate::instance::StoreKind;
use crate::workload::Record;

/// One broken promise.
#[derive(Debug, Clone)]
pub struct Violation {
    pub kind: &'static str,
    pub detail: String,
}

fn v(kind: &'static str, detail: String) -> Violation {
    Violation { kind, detail }
}

/// Faults injected, with when, so failures can be explained.
#[derive(Default, Debug)]
pub struct Faults {
    /// (instance, when) of each SIGKILL; the instance is back some time after.
    pub kills: Vec<(usize, Instant)>,
    pub pg_kills: Vec<Instant>,
    pub pg_backends_killed: u64,
    pub sqlite_busy: Vec<Instant>,
    /// Lease faults: an instance SIGSTOPped past its job lease, then resumed.
    pub stalls: Vec<crate::faults::Stall>,
    /// PostgreSQL restarts: from the restart command to the server accepting again.
    pub pg_restarts: Vec<(Instant, Instant)>,
}

/// What explained the failures that are not violations.
#[derive(Default, Debug)]
pub struct Explained {
    pub by_kill: u64,
    pub by_pg_kill: u64,
    pub store_errors_after_pg_kill: u64,
    pub by_stall: u64,
    pub by_pg_restart: u64,
}

/// Client-side failures: each one must fall in the window of a kill of its instance (or of a
/// PostgreSQL connection kill); any other is a violation.
pub fn failures(rec: &Record, faults: &Faults, out: &mut Vec<Violation>) -> Explained {
    let mut ex = Explained::default();
    for f in &rec.failures {
        let near = |t: Instant| {
            t + Duration::from_secs(3) >= f.started && t <= f.ended + Duration::from_millis(100)
        };
        if faults
            .kills
            .iter()
            .any(|(i, t)| (*i == f.instance || f.anywhere) && near(*t))
        {
            ex.by_kill += 1;
        } else if faults.pg_kills.iter().any(|t| near(*t)) {
            ex.by_pg_kill += 1;
        } else if faults
            .stalls
            .iter()
            .any(|s| (s.instance == f.instance || f.anywhere) && overlaps(f, s.from, s.to))
        {
            ex.by_stall += 1;
        } else if faults.pg_restarts.iter().any(|(a, b)| overlaps(f, *a, *b)) {
            ex.by_pg_restart += 1;
        } else {
            out.push(v(
                "unexplained failure",
                format!("{} on instance {}: {}", f.what, f.instance, f.error),
            ));
        }
    }
    // A start the store failed under, re-sent with its key: explained by a connection kill
    // (anything else is a violation).
    for t in &rec.store_errors {
        if faults
            .pg_kills
            .iter()
            .any(|k| *k <= *t && *t <= *k + Duration::from_secs(3))
            || faults
                .pg_restarts
                .iter()
                .any(|(a, b)| *a <= *t && *t <= *b + Duration::from_secs(3))
        {
            ex.store_errors_after_pg_kill += 1;
        } else {
            out.push(v(
                "store error without a fault",
                "start_import_rows could not record its job".into(),
            ));
        }
    }
    for w in &rec.wrong {
        out.push(v("wrong answer", w.clone()));
    }
    ex
}

/// Whether failure `f` overlaps a fault that lasted from `a` to `b` (with the same 3 s of
/// slack before as a kill, and after for the clients to notice the server is back).
fn overlaps(f: &crate::workload::Failure, a: Instant, b: Instant) -> bool {
    f.ended + Duration::from_millis(100) >= a && f.started <= b + Duration::from_secs(3)
}

/// Lease faults: the job a paused worker held ended once — terminal when first seen after the
/// pause, and the same row (state, reason, end time) at the end of the run, so the worker that
/// woke up recorded nothing over it. Its side effects are checked with every other job's (at
/// most one attempt, never more rows than asked). Returns how many were taken over while
/// paused (ended `failed` with a lost lease).
pub async fn stalls(faults: &Faults, store: &StoreKind, out: &mut Vec<Violation>) -> u64 {
    let mut taken_over = 0;
    for s in &faults.stalls {
        let Some(first) = &s.first_terminal else {
            out.push(v(
                "job not terminal",
                format!(
                    "lease fault job {}: not terminal 20 s after the pause",
                    s.job
                ),
            ));
            continue;
        };
        match crate::faults::job_row(store, &s.job).await {
            Ok(Some(now)) if now == *first => {
                if now.error_reason.as_deref() == Some("lease_lost") {
                    taken_over += 1;
                }
            }
            Ok(now) => out.push(v(
                "second terminal state",
                format!("lease fault job {}: {first:?}, later {now:?}", s.job),
            )),
            Err(e) => out.push(v("check failed", format!("job {}: {e}", s.job))),
        }
    }
    taken_over
}

/// A job's status as the store has it, through `staunch jobs show` (the operator's view): the
/// job tools answer only the job's owner, and the sessions that started these jobs are gone.
async fn store_status(bin: &std::path::Path, store: &StoreKind, id: &str) -> String {
    let mut c = tokio::process::Command::new(bin);
    c.args(["jobs", "show", id, "--json", "--store"]);
    match store {
        StoreKind::Sqlite(p) => {
            c.arg(p);
        }
        StoreKind::Postgres { url, schema } => {
            c.arg(url).arg("--store-schema").arg(schema);
        }
    }
    match tokio::time::timeout(Duration::from_secs(10), c.output()).await {
        Ok(Ok(o)) if o.status.success() => serde_json::from_slice::<Value>(&o.stdout)
            .ok()
            .and_then(|v| v["status"].as_str().map(str::to_string))
            .unwrap_or_else(|| "error: unreadable `staunch jobs show` output".into()),
        Ok(Ok(o)) => format!("error: {}", String::from_utf8_lossy(&o.stderr).trim()),
        Ok(Err(e)) => format!("error: {e}"),
        Err(_) => "error: `staunch jobs show` timed out".into(),
    }
}

/// Rows the demo import wrote for `job`, and in how many attempts, read from its table
/// directly: `imported_rows` answers only the job's owner, and the sessions that started these
/// jobs are gone. `(-1, -1)` when the table cannot be read.
fn import_counts(db: &rusqlite::Connection, job: &str) -> (i64, i64) {
    db.query_row(
        "SELECT COUNT(*), COUNT(DISTINCT attempt) FROM demo_import_rows WHERE job_id = ?1",
        [job],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap_or((-1, -1))
}

/// Per idempotency key: one job; every job terminal; its side effects done once.
pub async fn jobs(
    import_db: &std::path::Path,
    bin: &std::path::Path,
    store: &StoreKind,
    rec: &Record,
    out: &mut Vec<Violation>,
) -> (u64, u64) {
    let db = match rusqlite::Connection::open_with_flags(
        import_db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(db) => db,
        Err(e) => {
            out.push(v("check failed", format!("opening the import table: {e}")));
            return (0, 0);
        }
    };
    // The instances may still hold the write lock for a moment.
    let _ = db.busy_timeout(Duration::from_secs(10));
    let mut jobs = 0;
    let mut terminal = 0;
    for (key, (_instance, rows, told)) in &rec.keys {
        // The store decides, not the client's memory: a first start whose answer was lost plus
        // a re-send that made a second job shows only here, and so does a key whose every
        // start went unanswered but was recorded.
        // Tasks are recorded under their task id (`task:<id>`): they have no key to look up,
        // and the job the client was told of is the task itself.
        let stored = if key.starts_with("task:") {
            told.iter().cloned().collect()
        } else {
            match crate::faults::job_ids_by_key(store, key).await {
                Ok(ids) => ids,
                Err(e) => {
                    out.push(v("check failed", format!("key {key}: {e}")));
                    continue;
                }
            }
        };
        if stored.len() > 1 {
            out.push(v(
                "one key, several jobs",
                format!(
                    "key {key}: the store holds {} jobs: {stored:?}",
                    stored.len()
                ),
            ));
        }
        if let Some(id) = told.iter().find(|id| !stored.contains(id)) {
            out.push(v(
                "answered job not in the store",
                format!("key {key}: the client was given job {id}; the store has {stored:?}"),
            ));
        }
        if stored.is_empty() && !told.is_empty() {
            continue;
        }
        let ids: BTreeSet<&String> = stored.iter().chain(told.iter()).collect();
        for id in ids {
            jobs += 1;
            let until = Instant::now() + Duration::from_secs(20);
            let status = loop {
                let s = store_status(bin, store, id).await;
                if matches!(s.as_str(), "succeeded" | "failed" | "cancelled")
                    || Instant::now() > until
                {
                    break s;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            };
            if !matches!(status.as_str(), "succeeded" | "failed" | "cancelled") {
                out.push(v("job not terminal", format!("job {id}: {status}")));
                continue;
            }
            terminal += 1;
            let (written, attempts) = import_counts(&db, id);
            if attempts > 1 || written > i64::from(*rows) {
                out.push(v(
                    "side effect executed twice",
                    format!("job {id}: {written} rows in {attempts} attempts for {rows} asked"),
                ));
            }
            if status == "succeeded" && written != i64::from(*rows) {
                out.push(v(
                    "succeeded without its rows",
                    format!("job {id}: {written} of {rows} rows"),
                ));
            }
        }
    }
    (jobs, terminal)
}

/// From the lifecycle logs: no response after a cancel (an `ok`/`error` end after
/// `cancel_received`); `staunch audit` clean — no orphaned work, and requests that never ended
/// only in the logs of incarnations that were killed.
pub fn logs(logs: &[(PathBuf, bool)], out: &mut Vec<Violation>) -> LogFigures {
    let mut fig = LogFigures::default();
    for (path, killed) in logs {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let mut cancelled: HashSet<(String, String)> = HashSet::new();
        for line in text.lines() {
            // Raw JSON: `response_suppressed` (an atomic call that finished after its cancel
            // and sent nothing) is not part of the audit's typed event.
            let Ok(Some(Parsed::Known(l))) = parse_line(line.as_bytes()) else {
                continue;
            };
            let raw: Value = serde_json::from_str(line).unwrap_or(Value::Null);
            let key = (l.session.clone(), format!("{:?}", l.request_id));
            match &l.event {
                Event::Start { .. } => fig.requests += 1,
                Event::CancelReceived { .. } => {
                    fig.cancels += 1;
                    cancelled.insert(key);
                }
                Event::End {
                    outcome,
                    after_cancel_ms,
                    ..
                } => {
                    // Ran on after its cancel: orphaned work, unless it ended within the
                    // audit's slow-stop threshold (a cancel that raced the completion).
                    if matches!(outcome.as_ref(), "late_finish" | "aborted") {
                        match after_cancel_ms {
                            Some(ms) if *ms <= 100 => fig.raced_completion += 1,
                            _ => out.push(v(
                                "orphaned work",
                                format!(
                                    "{}: session {} request {:?} ended {outcome} {after_cancel_ms:?} ms after its cancel",
                                    path.display(),
                                    l.session,
                                    l.request_id
                                ),
                            )),
                        }
                    }
                    let suppressed = raw["response_suppressed"] == Value::Bool(true);
                    if suppressed {
                        fig.suppressed += 1;
                    }
                    if cancelled.contains(&key)
                        && matches!(outcome.as_ref(), "ok" | "error")
                        && !suppressed
                    {
                        out.push(v(
                            "response after a cancel",
                            format!(
                                "{}: session {} request {:?} ended {outcome} after its cancel",
                                path.display(),
                                l.session,
                                l.request_id
                            ),
                        ));
                    }
                }
                _ => {}
            }
        }
        let report = match std::fs::File::open(path) {
            Ok(f) => audit_reader(std::io::BufReader::new(f), &AuditOptions::default()),
            Err(e) => {
                out.push(v("check failed", format!("{}: {e}", path.display())));
                continue;
            }
        };
        let Ok(report) = report else { continue };
        let unended = report.never_ended.len() as u64;
        if *killed {
            fig.unended_explained_by_kill += unended;
        } else if unended > 0 {
            out.push(v(
                "request never ended",
                format!(
                    "{}: {unended} requests without an end, and no kill explains it",
                    path.display()
                ),
            ));
        }
    }
    fig
}

#[derive(Default, Debug)]
pub struct LogFigures {
    pub requests: u64,
    /// Atomic calls that finished after their cancel with the response suppressed.
    pub suppressed: u64,
    /// Handlers that finished within 100 ms after a cancel that raced their completion (the
    /// response was dropped).
    pub raced_completion: u64,
    pub cancels: u64,
    pub unended_explained_by_kill: u64,
}

/// Counts by kind, for the summary.
pub fn by_kind(vs: &[Violation]) -> HashMap<&'static str, usize> {
    let mut m = HashMap::new();
    for x in vs {
        *m.entry(x.kind).or_insert(0) += 1;
    }
    m
}
