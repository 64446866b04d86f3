//! The invariants, checked after a run from what the store, the demo import table, the wire and the
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

/// The "instance" a worker talks to when it goes through the balancer: any of them.
pub const BALANCED: usize = usize::MAX;

/// A SIGKILL of an instance: when, and when it listened again.
#[derive(Debug, Clone, Copy)]
pub struct Kill {
    pub instance: usize,
    pub at: Instant,
    pub back: Instant,
}

/// Faults injected, with when, so failures can be explained.
#[derive(Debug)]
pub struct Faults {
    pub kills: Vec<Kill>,
    pub pg_kills: Vec<Instant>,
    pub pg_backends_killed: u64,
    pub sqlite_busy: Vec<Instant>,
    /// Lease faults: an instance SIGSTOPped past its job lease, then resumed.
    pub stalls: Vec<crate::faults::Stall>,
    /// PostgreSQL restarts: from the restart command to the server accepting again.
    pub pg_restarts: Vec<(Instant, Instant)>,
    /// A moment on both clocks, to compare the store's times (ms since the epoch) with these.
    pub base: (Instant, i64),
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            kills: Vec::new(),
            pg_kills: Vec::new(),
            pg_backends_killed: 0,
            sqlite_busy: Vec::new(),
            stalls: Vec::new(),
            pg_restarts: Vec::new(),
            base: (Instant::now(), epoch_ms_now()),
        }
    }
}

fn epoch_ms_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Faults {
    /// `t` in the store's clock (ms since the epoch).
    pub fn epoch_ms(&self, t: Instant) -> i64 {
        let (i, e) = self.base;
        if t >= i {
            e + i64::try_from((t - i).as_millis()).unwrap_or(i64::MAX / 2)
        } else {
            e - i64::try_from((i - t).as_millis()).unwrap_or(i64::MAX / 2)
        }
    }
}

/// How long after a kill's restart, a stall's end or a store fault a failure may still be
/// blamed on it (the clients notice their session is gone, a pooled connection is dead).
const AFTER_KILL: Duration = Duration::from_millis(250);
const AFTER_STORE_FAULT: Duration = Duration::from_secs(1);
/// How long after a call ended its failure is still its own (the error reaching the worker).
const AFTER_CALL: Duration = Duration::from_millis(100);

/// What explained the failures that are not violations.
#[derive(Default, Debug)]
pub struct Explained {
    pub by_kill: u64,
    pub by_pg_kill: u64,
    pub store_errors_after_pg_kill: u64,
    pub by_stall: u64,
    pub by_pg_restart: u64,
}

/// The instance whose worker holds or held job `id` (its `lease_owner`, `chaos-<i>/…`).
pub async fn runner(store: &StoreKind, id: &str) -> Option<usize> {
    let row = crate::faults::job_row(store, id).await.ok()??;
    instance_of_owner(row.lease_owner.as_deref()?)
}

pub fn instance_of_owner(owner: &str) -> Option<usize> {
    owner
        .strip_prefix("chaos-")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// Client-side failures: each one must overlap a fault of the instance it talked to (or, for a
/// job that lost its lease, of the instance that ran it) — a kill from the SIGKILL until the
/// instance listened again, a lease fault's pause — or a store fault (PostgreSQL backends
/// terminated, a PostgreSQL restart), with a short margin after; any other is a violation.
pub async fn failures(
    rec: &Record,
    faults: &Faults,
    store: &StoreKind,
    instances: usize,
    out: &mut Vec<Violation>,
) -> Explained {
    let mut ex = Explained::default();
    for f in &rec.failures {
        // Through the balancer a call may have reached any instance.
        let mut mine = if f.instance == BALANCED {
            (0..instances).collect()
        } else {
            vec![f.instance]
        };
        if let Some(job) = &f.job
            && let Some(r) = runner(store, job).await
        {
            mine.push(r);
        }
        let during = |a: Instant, b: Instant| a <= f.ended + AFTER_CALL && f.started <= b;
        if faults
            .kills
            .iter()
            .any(|k| mine.contains(&k.instance) && during(k.at, k.back + AFTER_KILL))
        {
            ex.by_kill += 1;
        } else if faults
            .stalls
            .iter()
            .any(|s| mine.contains(&s.instance) && during(s.from, s.to + AFTER_KILL))
        {
            ex.by_stall += 1;
        } else if faults
            .pg_kills
            .iter()
            .any(|t| during(*t, *t + AFTER_STORE_FAULT))
        {
            ex.by_pg_kill += 1;
        } else if faults
            .pg_restarts
            .iter()
            .any(|(a, b)| during(*a, *b + AFTER_STORE_FAULT))
        {
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

/// What the keyed jobs came to, for the figures.
#[derive(Default, Debug)]
pub struct JobFigures {
    pub keys: u64,
    /// Keys whose every start went unanswered, and whose job the store holds all the same.
    pub unanswered_found_by_key: u64,
    /// Keys with no job and no answer (each start's failure explained by a fault).
    pub unanswered_without_job: u64,
    pub jobs: u64,
    pub succeeded: u64,
    pub cancelled: u64,
    /// `failed(lease_lost)` while a fault of the instance running it (or of the store) lasted.
    pub lease_lost_explained: u64,
    /// Units (rows) read back from the import table.
    pub units: u64,
}

/// Units the demo import wrote for `job`: (attempt, unit, times written), read from its table
/// directly (`imported_rows` answers only the job's owner, and the sessions that started
/// these jobs are gone).
fn units_of(db: &rusqlite::Connection, job: &str) -> rusqlite::Result<Vec<(i64, i64, i64)>> {
    let mut st = db.prepare_cached(
        "SELECT attempt, unit, COUNT(*) FROM demo_import_rows WHERE job_id = ?1 \
         GROUP BY attempt, unit ORDER BY attempt, unit",
    )?;
    st.query_map([job], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}

/// Whether a fault that lasted from `a` to `b` (ms since the epoch) fell while the job ran.
fn while_running(job: &crate::faults::JobRow, a: i64, b: i64) -> bool {
    let (Some(s), Some(f)) = (job.started_ms, job.finished_ms) else {
        return false;
    };
    a <= f && s <= b + 100
}

/// Per idempotency key, from the store: exactly one job (a doubled start shows as two rows,
/// a lost one as none); every start answered or its job found by key; every job terminal, in a
/// state that what happened explains — `succeeded`; `cancelled` only when the client
/// cancelled it; `failed(lease_lost)` only when the instance running it was killed or paused,
/// or the store failed, while it ran; nothing else. From the import table: each unit written
/// at most once and in one attempt (the import is never re-run), units within the rows asked,
/// no gap, and all of them when the job succeeded.
pub async fn jobs(
    import_db: &std::path::Path,
    store: &StoreKind,
    rec: &Record,
    faults: &Faults,
    out: &mut Vec<Violation>,
) -> JobFigures {
    let mut fig = JobFigures::default();
    let db = match rusqlite::Connection::open_with_flags(
        import_db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(db) => db,
        Err(e) => {
            out.push(v("check failed", format!("opening the import table: {e}")));
            return fig;
        }
    };
    // The instances may still hold the write lock for a moment.
    let _ = db.busy_timeout(Duration::from_secs(10));
    for (key, k) in &rec.keys {
        fig.keys += 1;
        // The store decides, not the client's memory: a first start whose answer was lost plus
        // a re-send that made a second job shows only here, and so does a key whose every
        // start went unanswered but was recorded.
        let stored = match crate::faults::job_ids_by_key(store, key).await {
            Ok(ids) => ids,
            Err(e) => {
                out.push(v("check failed", format!("key {key}: {e}")));
                continue;
            }
        };
        if stored.len() > 1 {
            out.push(v(
                "one key, several jobs",
                format!(
                    "key {key} ({} on instance {}, {} start(s) sent): the store holds {} jobs: \
                     {stored:?}",
                    if k.task { "task" } else { "start_import_rows" },
                    k.instance,
                    k.sent,
                    stored.len()
                ),
            ));
        }
        if let Some(id) = k.told.iter().find(|id| !stored.contains(id)) {
            out.push(v(
                "answered job not in the store",
                format!("key {key}: the client was given job {id}; the store has {stored:?}"),
            ));
        }
        if !k.answered && k.sent > 0 {
            // Every start went unanswered: the job is found by key, or none was made — then
            // each start failed or was given up on, which the failure checks hold to a fault.
            if stored.is_empty() {
                fig.unanswered_without_job += 1;
            } else {
                fig.unanswered_found_by_key += 1;
            }
        }
        let ids: BTreeSet<&String> = stored.iter().chain(k.told.iter()).collect();
        for id in ids {
            fig.jobs += 1;
            let until = Instant::now() + Duration::from_secs(20);
            let row = loop {
                match crate::faults::job_row(store, id).await {
                    Ok(Some(r)) if r.terminal() => break Ok(Some(r)),
                    Ok(r) if Instant::now() > until => break Ok(r),
                    Err(e) if Instant::now() > until => break Err(e),
                    _ => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            };
            let row = match row {
                Ok(Some(r)) => r,
                Ok(None) => {
                    out.push(v("answered job not in the store", format!("job {id}")));
                    continue;
                }
                Err(e) => {
                    out.push(v("check failed", format!("job {id}: {e}")));
                    continue;
                }
            };
            if !row.terminal() {
                out.push(v("job not terminal", format!("job {id}: {}", row.state)));
                continue;
            }
            terminal_explained(id, &row, k, faults, &mut fig, out);
            let units = match units_of(&db, id) {
                Ok(u) => u,
                Err(e) => {
                    out.push(v("check failed", format!("units of job {id}: {e}")));
                    continue;
                }
            };
            fig.units += units.iter().map(|u| u.2).sum::<i64>().unsigned_abs();
            units_checked(id, &row, k.rows, &units, out);
        }
    }
    fig
}

/// The job's terminal state must be one that what happened explains.
fn terminal_explained(
    id: &str,
    row: &crate::faults::JobRow,
    k: &crate::workload::KeyRec,
    faults: &Faults,
    fig: &mut JobFigures,
    out: &mut Vec<Violation>,
) {
    match (row.state.as_str(), row.error_reason.as_deref()) {
        ("succeeded", _) => fig.succeeded += 1,
        ("cancelled", _) if k.cancel_sent => fig.cancelled += 1,
        ("cancelled", why) => out.push(v(
            "cancelled without a cancel",
            format!("job {id} ended cancelled ({why:?}); the client never cancelled it"),
        )),
        ("failed", Some("lease_lost")) => {
            let ran_on = row.lease_owner.as_deref().and_then(instance_of_owner);
            let ms = |t: Instant| faults.epoch_ms(t);
            let explained =
                faults.kills.iter().any(|kl| {
                    Some(kl.instance) == ran_on && while_running(row, ms(kl.at), ms(kl.back))
                }) || faults.stalls.iter().any(|s| {
                    Some(s.instance) == ran_on && while_running(row, ms(s.from), ms(s.to))
                }) || faults
                    .pg_kills
                    .iter()
                    .any(|t| while_running(row, ms(*t), ms(*t + AFTER_STORE_FAULT)))
                    || faults
                        .pg_restarts
                        .iter()
                        .any(|(a, b)| while_running(row, ms(*a), ms(*b + AFTER_STORE_FAULT)));
            if explained {
                fig.lease_lost_explained += 1;
            } else {
                out.push(v(
                    "failed without a fault",
                    format!(
                        "job {id} failed(lease_lost) on {:?}, and no fault of that instance or \
                         the store fell while it ran",
                        row.lease_owner
                    ),
                ));
            }
        }
        (state, why) => out.push(v(
            "failed without a fault",
            format!("job {id} ended {state} ({why:?}): nothing injected explains it"),
        )),
    }
}

/// The import's units: each written at most once, in one attempt, within the rows asked,
/// in order (no gap), all of them when the job succeeded.
fn units_checked(
    id: &str,
    row: &crate::faults::JobRow,
    rows: u32,
    units: &[(i64, i64, i64)],
    out: &mut Vec<Violation>,
) {
    let attempts: BTreeSet<i64> = units.iter().map(|u| u.0).collect();
    if attempts.len() > 1 {
        out.push(v(
            "side effect executed twice",
            format!("job {id}: units written in attempts {attempts:?} (it is never re-run)"),
        ));
    }
    for (attempt, unit, n) in units {
        if *n > 1 {
            out.push(v(
                "unit written twice",
                format!("job {id}: unit {unit} written {n} times in attempt {attempt}"),
            ));
        }
        if *unit < 0 || *unit >= i64::from(rows) {
            out.push(v(
                "unit out of range",
                format!("job {id}: unit {unit} of {rows}"),
            ));
        }
    }
    let distinct: BTreeSet<i64> = units.iter().map(|u| u.1).collect();
    let want = if row.state == "succeeded" {
        i64::from(rows)
    } else {
        // Written in order, a cancel or a lost lease stopping it: a prefix.
        distinct.last().map_or(0, |l| l + 1)
    };
    let missing: Vec<i64> = (0..want).filter(|u| !distinct.contains(u)).collect();
    if !missing.is_empty() {
        out.push(v(
            "unit missing",
            format!(
                "job {id} ({}): units {missing:?} of {rows} never written",
                row.state
            ),
        ));
    }
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
            let key = (l.session.clone(), l.request_id.to_string());
            match &l.event {
                Event::Start { .. } => {
                    fig.requests += 1;
                    fig.seen.insert(
                        key,
                        Logged {
                            killed: *killed,
                            ..Logged::default()
                        },
                    );
                }
                Event::CancelReceived { .. } => {
                    fig.cancels += 1;
                    if let Some(r) = fig.seen.get_mut(&key)
                        && !r.ended
                    {
                        r.cancel_before_end = true;
                    }
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
                    if let Some(r) = fig.seen.get_mut(&key) {
                        r.ended = true;
                        r.answered = matches!(outcome.as_ref(), "ok" | "error") && !suppressed;
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

/// A request as its instance's lifecycle log tells it.
#[derive(Default, Debug, Clone, Copy)]
pub struct Logged {
    /// `request.cancel_received` came before its end.
    pub cancel_before_end: bool,
    pub ended: bool,
    /// It ended with an answer the server says it sent (`ok`/`error`, not suppressed).
    pub answered: bool,
    /// In the log of an incarnation that was killed.
    pub killed: bool,
}

#[derive(Default, Debug)]
pub struct LogFigures {
    /// Every request logged, by (log label, request id).
    pub seen: HashMap<(String, String), Logged>,
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

/// What the wire showed for cancelled requests, for the figures.
#[derive(Default, Debug)]
pub struct WireFigures {
    /// Answers that arrived after the client gave up on the request.
    pub late_responses: u64,
    /// Of those, answers the server sent before it received the cancel (the race won by the
    /// result, the cancel still in flight).
    pub late_raced: u64,
    /// Of those, in an incarnation that was killed before it logged the request's end.
    pub late_in_killed: u64,
    /// Of those, on stateless requests (read as the stream that is their cancel closed).
    pub late_stateless: u64,
    /// Progress that arrived after the client gave up on a request.
    pub late_progress: u64,
    /// Of those, cancelled while their instance was paused (a lease fault).
    pub late_progress_after_pause: u64,
}

/// How long after a client gave up on a request its progress may still arrive: the servers'
/// cancel grace (500 ms) and some transit.
const PROGRESS_AFTER_CANCEL: Duration = Duration::from_millis(1500);

/// What the clients received for requests they had cancelled (session era: the stream stays
/// open for a while after `notifications/cancelled`; a stateless request's cancel closes its
/// stream, so nothing can come after it), matched with the server's own account of each
/// request: an answer is allowed only when the server sent it before it received the
/// cancel (a race the result won); an answer to a request the server had seen cancelled is a
/// violation, whatever its log says. Progress more than 1.5 s after the cancel is orphaned
/// work, unless the instance was paused (a lease fault) when the cancel was sent, or had woken
/// less than 1.5 s before — through a balancer, any instance, since the client cannot tell
/// which one ran the request.
pub fn wire(
    rec: &Record,
    seen: &HashMap<(String, String), Logged>,
    killed: &[usize],
    faults: &Faults,
    out: &mut Vec<Violation>,
) -> WireFigures {
    let mut fig = WireFigures::default();
    for l in &rec.late {
        if !l.response {
            fig.late_progress += 1;
            // A cancel sent while its instance was paused (a lease fault) is read only when it
            // resumes: what it had sent before comes then.
            // Through a balancer the client cannot tell which instance ran the request: a
            // pause of any instance over that time may be the one. An instance that has just
            // woken is still working through what piled up while it was stopped (every timer
            // due at once), so a cancel sent in its first moments counts as sent in the pause.
            let gave_up = l.at.checked_sub(l.since_abandoned).unwrap_or(l.at);
            let paused = faults.stalls.iter().any(|s| {
                (s.instance == l.instance || l.instance == BALANCED)
                    && gave_up <= s.to + PROGRESS_AFTER_CANCEL
                    && s.from <= l.at
            });
            if paused {
                fig.late_progress_after_pause += 1;
            } else if l.since_abandoned > PROGRESS_AFTER_CANCEL {
                // Named as the lifecycle log names it, so the server's account of the
                // request can be looked up.
                out.push(v(
                    "orphaned work (on the wire)",
                    format!(
                        "instance {}: progress {} ms after the client cancelled (session {}, \
                         request {})",
                        l.instance,
                        l.since_abandoned.as_millis(),
                        l.session.as_deref().map_or("-".into(), session_hash),
                        l.request_id.as_deref().unwrap_or("-")
                    ),
                ));
            }
            continue;
        }
        fig.late_responses += 1;
        let Some(session) = l.session.as_deref() else {
            // A stateless request: closing its stream is the cancel, so what still arrived
            // was read from it before it closed, sent before the server could know.
            fig.late_stateless += 1;
            continue;
        };
        let label = session_hash(session);
        let id = l.request_id.clone().unwrap_or_default();
        match seen.get(&(label.clone(), id.clone())) {
            Some(r) if r.answered && !r.cancel_before_end => fig.late_raced += 1,
            Some(r) if r.killed && !r.ended => fig.late_in_killed += 1,
            // A killed incarnation may not have written its last lines.
            None if killed.contains(&l.instance) => fig.late_in_killed += 1,
            r => out.push(v(
                "response after a cancel (on the wire)",
                format!(
                    "instance {}: session {label} request {id} answered {} ms after the client \
                     cancelled it; the server's log: {r:?}",
                    l.instance,
                    l.since_abandoned.as_millis()
                ),
            )),
        }
    }
    fig
}

/// How the lifecycle log names an HTTP session: the first 12 hex digits of the SHA-256 of its
/// id (the id is a credential).
fn session_hash(id: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(id.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::faults::Stall;
    use crate::workload::{LateSeen, Record};

    fn late_progress(instance: usize, at: Instant) -> LateSeen {
        LateSeen {
            instance,
            session: Some("s".into()),
            request_id: None,
            since_abandoned: Duration::from_millis(2900),
            at,
            response: false,
        }
    }

    fn stall(instance: usize, from: Instant, to: Instant) -> Stall {
        Stall {
            instance,
            from,
            to,
            job: String::new(),
            key: String::new(),
            rows: 0,
            first_terminal: None,
        }
    }

    fn violations(late: LateSeen, stalls: Vec<Stall>) -> usize {
        let rec = Record {
            late: vec![late],
            ..Record::default()
        };
        let faults = Faults {
            stalls,
            ..Faults::default()
        };
        let mut out = Vec::new();
        wire(&rec, &HashMap::new(), &[], &faults, &mut out);
        out.len()
    }

    #[test]
    fn late_progress_is_orphaned_work_unless_its_instance_was_paused() {
        let t0 = Instant::now();
        let at = t0 + Duration::from_secs(5);
        let paused = |i| {
            vec![stall(
                i,
                t0 + Duration::from_secs(2),
                t0 + Duration::from_secs(4),
            )]
        };
        // Nothing paused: the defect the check exists to find.
        assert_eq!(violations(late_progress(0, at), vec![]), 1);
        // Its own instance was paused when the cancel was sent: excused.
        assert_eq!(violations(late_progress(0, at), paused(0)), 0);
        // The cancel went out just after its instance woke (the pause ended 1 s before the
        // late progress's cancel): still catching up, excused; long after the pause, not.
        let cancel_at = at - Duration::from_millis(2900);
        let woke_before = |d| vec![stall(0, t0, cancel_at - Duration::from_millis(d))];
        assert_eq!(violations(late_progress(0, at), woke_before(1000)), 0);
        assert_eq!(violations(late_progress(0, at), woke_before(1600)), 1);
        // Another instance was paused: not an excuse for a client that knows its instance.
        assert_eq!(violations(late_progress(0, at), paused(1)), 1);
        // Through a balancer the client does not know it: any pause excuses.
        assert_eq!(violations(late_progress(BALANCED, at), paused(1)), 0);
        assert_eq!(violations(late_progress(BALANCED, at), vec![]), 1);
    }
}
