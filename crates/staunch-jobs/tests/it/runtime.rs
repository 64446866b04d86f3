//! The job runtime on a real SQLite file: the worker, cancellation (cooperative, forced, from
//! another process), panics, idempotency under concurrency, lease loss, restarts, the maximum
//! runtime and TTL purge. Waits are bounded and wait on signals from the bodies, not sleeps;
//! lease expiry is made to happen with a clock that runs ahead, never by waiting for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use staunch_jobs::{
    Clock, JobConfig, JobContext, JobError, JobRuntime, JobRuntimeError, JobTool, Submit,
};
use staunch_store::{CancelOutcome, JobRecord, JobState, JobStore, REASON_LEASE_LOST};
use tokio::sync::watch;

const LIMIT: Duration = Duration::from_secs(15);

#[derive(Serialize, Deserialize, JsonSchema)]
struct Steps {
    steps: u32,
    #[serde(default)]
    delay_ms: u64,
}

/// What a counting body did, observable from the test.
#[derive(Clone)]
struct Probe {
    /// Units completed, across all executions.
    units: Arc<AtomicU32>,
    /// Bodies started.
    executions: Arc<AtomicU32>,
    /// Units completed, as a signal the test can wait on.
    tx: watch::Sender<u32>,
    /// Set when a body saw its cancellation.
    saw_cancel: Arc<AtomicBool>,
}

impl Probe {
    fn new() -> Self {
        Self {
            units: Arc::default(),
            executions: Arc::default(),
            tx: watch::channel(0).0,
            saw_cancel: Arc::default(),
        }
    }

    async fn wait_units(&self, n: u32) {
        let mut rx = self.tx.subscribe();
        tokio::time::timeout(LIMIT, rx.wait_for(|u| *u >= n))
            .await
            .expect("the body made progress")
            .unwrap();
    }
}

/// A body that does `steps` units of `delay_ms`, checking for cancellation before each one.
fn counting_tool(name: &str, probe: Probe) -> JobTool {
    JobTool::new(
        name.to_string(),
        "counts",
        move |ctx: JobContext, a: Steps| {
            let p = probe.clone();
            async move {
                p.executions.fetch_add(1, Ordering::SeqCst);
                for i in 0..a.steps {
                    if ctx.check().is_err() {
                        p.saw_cancel.store(true, Ordering::SeqCst);
                        return Err(JobError::Cancelled);
                    }
                    let n = p.units.fetch_add(1, Ordering::SeqCst) + 1;
                    p.tx.send_replace(n);
                    ctx.progress(f64::from(i + 1), Some(f64::from(a.steps)), None);
                    if let Err(e) = ctx.sleep(Duration::from_millis(a.delay_ms)).await {
                        p.saw_cancel.store(true, Ordering::SeqCst);
                        return Err(e);
                    }
                }
                Ok(json!({"counted": a.steps}))
            }
        },
    )
}

/// Where the jobs live: a SQLite file in a temp dir, or a fresh schema of the PostgreSQL
/// database named by `STAUNCH_TEST_POSTGRES` (dropped at the end).
enum Db {
    Sqlite {
        _dir: tempfile::TempDir,
        path: String,
    },
    Postgres {
        url: String,
        schema: String,
    },
}

impl Db {
    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db").display().to_string();
        Db::Sqlite { _dir: dir, path }
    }

    fn postgres(test: &str) -> Option<Self> {
        let (url, schema) = staunch_testkit::pg::fresh_schema(test)?;
        Some(Db::Postgres { url, schema })
    }

    /// A separate store handle: another "process" (its own connections and its own signal
    /// subscription; on SQLite no in-process signal crosses between handles).
    async fn store(&self) -> Arc<dyn JobStore> {
        match self {
            Db::Sqlite { path, .. } => staunch_store::open(path).await.unwrap().jobs,
            Db::Postgres { url, schema } => {
                staunch_store::open_postgres_in_schema(url, schema)
                    .await
                    .unwrap()
                    .jobs
            }
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Db::Postgres { url, schema } = self {
            staunch_testkit::pg::drop_schema(url, schema);
        }
    }
}

/// Every case runs on SQLite, and on PostgreSQL when `STAUNCH_TEST_POSTGRES` is set.
macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(&super::Db::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(db) = super::Db::postgres(stringify!($case)) else { return };
                    super::$case(&db).await;
                }
            )*
        }
    };
}

on_both_backends!(
    a_job_runs_to_success_and_its_last_progress_is_recorded,
    a_cancel_stops_the_body_at_its_next_unit,
    a_cancel_from_another_process_reaches_the_body,
    a_queued_job_is_cancelled_at_once_and_never_runs,
    a_body_that_ignores_its_cancel_is_aborted_after_the_grace_and_recorded_cancelled,
    a_panic_is_recorded_as_failed_with_its_message,
    an_error_is_recorded_as_failed_and_the_runtime_goes_on,
    fifty_concurrent_starts_with_one_key_make_one_job_and_one_execution,
    a_key_reused_with_other_arguments_is_refused_and_bad_arguments_record_nothing,
    an_identical_call_without_a_key_joins_the_running_job_of_a_side_effecting_tool,
    a_side_effecting_job_whose_lease_is_lost_ends_failed_and_its_worker_writes_nothing,
    a_retry_safe_job_whose_lease_is_lost_runs_again_from_its_checkpoint,
    a_named_instance_ends_its_previous_runs_leases_when_it_starts_again,
    a_job_past_its_maximum_runtime_is_stopped_and_recorded_failed,
    finished_jobs_and_their_keys_are_purged_after_their_ttl,
    shutdown_lets_short_jobs_finish_and_releases_the_rest,
);

fn fast() -> JobConfig {
    JobConfig {
        lease: Duration::from_millis(600),
        heartbeat: Some(Duration::from_millis(100)),
        progress_interval: Duration::from_millis(20),
        claim_poll: Duration::from_millis(50),
        reap_interval: Duration::from_secs(3600), // tests reap explicitly
        cancel_grace: Duration::from_millis(200),
        ..JobConfig::default()
    }
}

async fn runtime(store: Arc<dyn JobStore>, config: JobConfig, tools: Vec<JobTool>) -> JobRuntime {
    let rt = JobRuntime::new(store, config).unwrap();
    for t in tools {
        rt.add_tool(t);
    }
    rt.start().await.unwrap();
    rt
}

async fn terminal(rt: &JobRuntime, id: &str) -> JobRecord {
    tokio::time::timeout(LIMIT, rt.wait_terminal(id))
        .await
        .expect("the job ended")
        .unwrap()
        .expect("the job exists")
}

fn error_code(job: &JobRecord) -> String {
    let e: Value = serde_json::from_str(job.error_json.as_deref().unwrap()).unwrap();
    e["code"].as_str().unwrap().to_string()
}

async fn a_job_runs_to_success_and_its_last_progress_is_recorded(db: &Db) {
    let probe = Probe::new();
    let rt = runtime(
        db.store().await,
        fast(),
        vec![counting_tool("count", probe.clone())],
    )
    .await;
    let s = rt
        .submit(Submit::new("count", json!({"steps": 5, "delay_ms": 5})))
        .await
        .unwrap();
    assert!(s.created);
    assert_eq!(s.job.state, JobState::Queued);
    let job = terminal(&rt, &s.job.id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    assert_eq!(job.result_json.as_deref(), Some(r#"{"counted":5}"#));
    let p: Value = serde_json::from_str(job.progress_json.as_deref().unwrap()).unwrap();
    assert_eq!(p["progress"], 5);
    assert_eq!(p["total"], 5);
    assert_eq!(job.attempt, 1);
    assert_eq!(probe.executions.load(Ordering::SeqCst), 1);
    rt.shutdown(Duration::from_secs(1)).await;
}

async fn a_cancel_stops_the_body_at_its_next_unit(db: &Db) {
    let probe = Probe::new();
    let rt = runtime(
        db.store().await,
        fast(),
        vec![counting_tool("count", probe.clone())],
    )
    .await;
    let s = rt
        .submit(Submit::new(
            "count",
            json!({"steps": 10_000, "delay_ms": 10}),
        ))
        .await
        .unwrap();
    probe.wait_units(3).await;
    let out = rt.cancel(&s.job.id, "test").await.unwrap();
    assert!(matches!(out, CancelOutcome::Requested(_)), "{out:?}");
    let at_cancel = probe.units.load(Ordering::SeqCst);
    let job = terminal(&rt, &s.job.id).await;
    assert_eq!(job.state, JobState::Cancelled, "{job:?}");
    assert_eq!(job.cancel_requested_by.as_deref(), Some("test"));
    assert!(probe.saw_cancel.load(Ordering::SeqCst));
    // At most the unit that was already under way when the cancel landed.
    let after = probe.units.load(Ordering::SeqCst);
    assert!(
        after <= at_cancel + 1,
        "{after} units after a cancel at {at_cancel}"
    );
    // The recorded progress is where it stopped.
    let p: Value = serde_json::from_str(job.progress_json.as_deref().unwrap()).unwrap();
    assert_eq!(p["progress"], after);
    // Cancelling again is a no-op that reports the end.
    let again = rt.cancel(&s.job.id, "test").await.unwrap();
    assert!(matches!(again, CancelOutcome::AlreadyTerminal(j) if j.state == JobState::Cancelled));
    rt.shutdown(Duration::from_secs(1)).await;
}

async fn a_cancel_from_another_process_reaches_the_body(db: &Db) {
    let probe = Probe::new();
    let a = runtime(
        db.store().await,
        fast(),
        vec![counting_tool("count", probe.clone())],
    )
    .await;
    // B shares only the database: on SQLite no in-process signal reaches A, so the cancel
    // arrives with A's next heartbeat; on PostgreSQL it comes through NOTIFY (or the heartbeat).
    let b = JobRuntime::new(db.store().await, fast()).unwrap();
    let s = a
        .submit(Submit::new(
            "count",
            json!({"steps": 10_000, "delay_ms": 10}),
        ))
        .await
        .unwrap();
    probe.wait_units(2).await;
    assert!(matches!(
        b.cancel(&s.job.id, "b").await.unwrap(),
        CancelOutcome::Requested(_)
    ));
    let job = terminal(&b, &s.job.id).await;
    assert_eq!(job.state, JobState::Cancelled);
    assert!(probe.saw_cancel.load(Ordering::SeqCst));
    a.shutdown(Duration::from_secs(1)).await;
}

async fn a_queued_job_is_cancelled_at_once_and_never_runs(db: &Db) {
    let probe = Probe::new();
    // Not started: nothing claims.
    let rt = JobRuntime::new(db.store().await, fast()).unwrap();
    rt.add_tool(counting_tool("count", probe.clone()));
    let s = rt
        .submit(Submit::new("count", json!({"steps": 1})))
        .await
        .unwrap();
    let out = rt.cancel(&s.job.id, "t").await.unwrap();
    assert!(matches!(out, CancelOutcome::CancelledQueued(j) if j.state == JobState::Cancelled));
    rt.start().await.unwrap();
    let job = terminal(&rt, &s.job.id).await;
    assert_eq!(job.state, JobState::Cancelled);
    assert_eq!(probe.executions.load(Ordering::SeqCst), 0);
    rt.shutdown(Duration::from_secs(1)).await;
}

/// Drops set a flag: proof that an aborted body's future is gone.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn a_body_that_ignores_its_cancel_is_aborted_after_the_grace_and_recorded_cancelled(db: &Db) {
    let dropped = Arc::new(AtomicBool::new(false));
    let (started_tx, mut started_rx) = watch::channel(false);
    let d = dropped.clone();
    let stubborn = JobTool::new(
        "stubborn",
        "ignores cancels",
        move |_ctx: JobContext, _a: Steps| {
            let guard = DropFlag(d.clone());
            let started = started_tx.clone();
            async move {
                let _guard = guard;
                started.send_replace(true);
                // Never looks at its context.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, JobError>(json!({}))
            }
        },
    );
    let rt = runtime(db.store().await, fast(), vec![stubborn]).await;
    let s = rt
        .submit(Submit::new("stubborn", json!({"steps": 1})))
        .await
        .unwrap();
    tokio::time::timeout(LIMIT, started_rx.wait_for(|s| *s))
        .await
        .unwrap()
        .unwrap();
    rt.cancel(&s.job.id, "t").await.unwrap();
    let job = terminal(&rt, &s.job.id).await;
    assert_eq!(job.state, JobState::Cancelled, "{job:?}");
    assert!(dropped.load(Ordering::SeqCst), "the body was not dropped");
    // The attempt leaves the in-process map just after it wrote the outcome.
    let idle = tokio::time::timeout(LIMIT, async {
        while rt.running_jobs() != 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        idle.is_ok(),
        "the aborted attempt never left the running map"
    );
    rt.shutdown(Duration::from_secs(1)).await;
}

async fn a_panic_is_recorded_as_failed_with_its_message(db: &Db) {
    let bad = JobTool::new("bad", "panics", |_ctx: JobContext, a: Steps| async move {
        if a.steps > 0 {
            panic!("boom at step {}", a.steps);
        }
        Ok::<_, JobError>(json!({}))
    });
    let rt = runtime(db.store().await, fast(), vec![bad]).await;
    let s = rt
        .submit(Submit::new("bad", json!({"steps": 42})))
        .await
        .unwrap();
    let job = terminal(&rt, &s.job.id).await;
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(error_code(&job), "panic");
    assert!(job.error_json.unwrap().contains("boom at step 42"));
    rt.shutdown(Duration::from_secs(1)).await;
}

async fn an_error_is_recorded_as_failed_and_the_runtime_goes_on(db: &Db) {
    let probe = Probe::new();
    let bad = JobTool::new("bad", "fails", |_ctx: JobContext, _a: Steps| async move {
        Err::<Value, _>(JobError::failed("the source is offline; retry later"))
    });
    let rt = runtime(
        db.store().await,
        fast(),
        vec![bad, counting_tool("count", probe.clone())],
    )
    .await;
    let s = rt
        .submit(Submit::new("bad", json!({"steps": 1})))
        .await
        .unwrap();
    let job = terminal(&rt, &s.job.id).await;
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(error_code(&job), "error");
    assert!(job.error_json.unwrap().contains("offline"));
    let s = rt
        .submit(Submit::new("count", json!({"steps": 1})))
        .await
        .unwrap();
    assert_eq!(terminal(&rt, &s.job.id).await.state, JobState::Succeeded);
    rt.shutdown(Duration::from_secs(1)).await;
}

async fn fifty_concurrent_starts_with_one_key_make_one_job_and_one_execution(db: &Db) {
    let probe = Probe::new();
    let rt = runtime(
        db.store().await,
        fast(),
        vec![counting_tool("count", probe.clone())],
    )
    .await;
    let mut calls = Vec::new();
    for _ in 0..50 {
        let rt = rt.clone();
        calls.push(tokio::spawn(async move {
            rt.submit(
                Submit::new("count", json!({"steps": 3, "delay_ms": 5})).key("import-2026-01"),
            )
            .await
            .unwrap()
        }));
    }
    let mut ids = std::collections::HashSet::new();
    let mut created = 0;
    for c in calls {
        let s = c.await.unwrap();
        ids.insert(s.job.id.clone());
        created += usize::from(s.created);
    }
    assert_eq!(ids.len(), 1, "one job");
    assert_eq!(created, 1, "one create");
    let id = ids.into_iter().next().unwrap();
    assert_eq!(terminal(&rt, &id).await.state, JobState::Succeeded);
    // A late retry after the job ended gets the same job, and runs nothing.
    let late = rt
        .submit(Submit::new("count", json!({"steps": 3, "delay_ms": 5})).key("import-2026-01"))
        .await
        .unwrap();
    assert_eq!(late.job.id, id);
    assert_eq!(late.job.state, JobState::Succeeded);
    let (all, _) = rt.store().list("", None, 100).await.unwrap();
    assert_eq!(all.len(), 1, "one row");
    assert_eq!(probe.executions.load(Ordering::SeqCst), 1, "one execution");
    rt.shutdown(Duration::from_secs(1)).await;
}

async fn a_key_reused_with_other_arguments_is_refused_and_bad_arguments_record_nothing(db: &Db) {
    let probe = Probe::new();
    let rt = JobRuntime::new(db.store().await, fast()).unwrap();
    rt.add_tool(counting_tool("count", probe));
    let first = rt
        .submit(Submit::new("count", json!({"steps": 1})).key("k"))
        .await
        .unwrap();
    // Arguments are normalised before fingerprinting: the default makes these the same call.
    let same = rt
        .submit(Submit::new("count", json!({"delay_ms": 0, "steps": 1})).key("k"))
        .await
        .unwrap();
    assert_eq!(same.job.id, first.job.id);
    assert!(!same.created);
    match rt
        .submit(Submit::new("count", json!({"steps": 2})).key("k"))
        .await
    {
        Err(JobRuntimeError::KeyReused {
            existing_job_id, ..
        }) => assert_eq!(existing_job_id, first.job.id),
        other => panic!("expected KeyReused, got {other:?}"),
    }
    let bad = rt
        .submit(Submit::new("count", json!({"steps": "many"})).key("k2"))
        .await;
    assert!(matches!(bad, Err(JobRuntimeError::InvalidArguments(m)) if m.contains("steps")));
    let unknown = rt.submit(Submit::new("nope", json!({}))).await;
    assert!(matches!(unknown, Err(JobRuntimeError::UnknownTool(_))));
    let (all, _) = rt.store().list("", None, 100).await.unwrap();
    assert_eq!(all.len(), 1);
}

async fn an_identical_call_without_a_key_joins_the_running_job_of_a_side_effecting_tool(db: &Db) {
    let probe = Probe::new();
    let rt = JobRuntime::new(db.store().await, fast()).unwrap();
    rt.add_tool(counting_tool("count", probe.clone()));
    rt.add_tool(
        counting_tool("scan", probe)
            .side_effects(false)
            .retry_safe(true),
    );
    let args = json!({"steps": 1});
    let a = rt.submit(Submit::new("count", args.clone())).await.unwrap();
    let b = rt.submit(Submit::new("count", args.clone())).await.unwrap();
    assert_eq!(a.job.id, b.job.id, "deduplicated while in flight");
    assert!(!b.created);
    // An explicit key is the caller saying "this is new work".
    let c = rt
        .submit(Submit::new("count", args.clone()).key("fresh"))
        .await
        .unwrap();
    assert_ne!(c.job.id, a.job.id);
    // Read-only tools are not deduplicated by default.
    let d = rt.submit(Submit::new("scan", args.clone())).await.unwrap();
    let e = rt.submit(Submit::new("scan", args)).await.unwrap();
    assert_ne!(d.job.id, e.job.id);
}

/// Reaper passes until one takes the job. On PostgreSQL the reaper skips a row that a worker
/// is writing at that instant (`FOR UPDATE SKIP LOCKED`) and takes it on a later pass.
async fn reap_until_taken(rt: &JobRuntime) -> Vec<staunch_store::ReapedJob> {
    tokio::time::timeout(LIMIT, async {
        loop {
            let report = rt.reap_once().await.unwrap();
            if !report.reaped.is_empty() {
                return report.reaped;
            }
        }
    })
    .await
    .expect("the reaper took the job")
}

/// A clock that can be moved forward.
fn movable_clock() -> (Clock, Arc<AtomicI64>) {
    let offset = Arc::new(AtomicI64::new(0));
    let o = offset.clone();
    (
        Clock::from_fn(move || staunch_store::now_ms() + o.load(Ordering::SeqCst)),
        offset,
    )
}

async fn a_side_effecting_job_whose_lease_is_lost_ends_failed_and_its_worker_writes_nothing(
    db: &Db,
) {
    let probe = Probe::new();
    let a = runtime(
        db.store().await,
        fast(),
        vec![counting_tool("count", probe.clone())],
    )
    .await;
    let s = a
        .submit(Submit::new(
            "count",
            json!({"steps": 10_000, "delay_ms": 10}),
        ))
        .await
        .unwrap();
    probe.wait_units(2).await;
    // Another instance whose clock says the lease ran out long ago.
    let (clock, offset) = movable_clock();
    offset.store(10 * 60 * 1000, Ordering::SeqCst);
    let b = JobRuntime::new(db.store().await, JobConfig { clock, ..fast() }).unwrap();
    let reaped = reap_until_taken(&b).await;
    assert_eq!(reaped.len(), 1);
    assert_eq!(reaped[0].new_state, JobState::Failed);
    // A's next heartbeat finds the lease gone and stops the body; it records nothing.
    tokio::time::timeout(LIMIT, async {
        while a.running_jobs() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("A's attempt ended");
    assert!(probe.saw_cancel.load(Ordering::SeqCst));
    let job = a.get(&s.job.id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.error_reason.as_deref(), Some(REASON_LEASE_LOST));
    assert_eq!(probe.executions.load(Ordering::SeqCst), 1, "never re-run");
    a.shutdown(Duration::from_secs(1)).await;
}

async fn a_retry_safe_job_whose_lease_is_lost_runs_again_from_its_checkpoint(db: &Db) {
    let executions = Arc::new(AtomicU32::new(0));
    let stopped_first = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = watch::channel(0u32);
    let (e, st) = (executions.clone(), stopped_first.clone());
    let scan = JobTool::new("scan", "scans", move |ctx: JobContext, a: Steps| {
        let (e, st, tx) = (e.clone(), st.clone(), tx.clone());
        async move {
            e.fetch_add(1, Ordering::SeqCst);
            let from = ctx
                .last_checkpoint()
                .and_then(|c| c["next"].as_u64())
                .unwrap_or(0) as u32;
            if ctx.attempt() > 1 {
                return Ok(json!({"resumed_from": from, "attempt": ctx.attempt()}));
            }
            for i in from..a.steps {
                if ctx.sleep(Duration::from_millis(10)).await.is_err() {
                    st.store(true, Ordering::SeqCst);
                    return Err(JobError::Cancelled);
                }
                // A checkpoint is a fenced write: after the lease was lost it fails, which
                // stops this attempt just as well.
                if let Err(e) = ctx.checkpoint(json!({"next": i + 1})).await {
                    st.store(true, Ordering::SeqCst);
                    return Err(e);
                }
                tx.send_replace(i + 1);
            }
            Ok(json!({"resumed_from": from, "attempt": ctx.attempt()}))
        }
    })
    .side_effects(false)
    .retry_safe(true);
    let a = runtime(db.store().await, fast(), vec![scan]).await;
    let s = a
        .submit(Submit::new("scan", json!({"steps": 100_000})))
        .await
        .unwrap();
    tokio::time::timeout(LIMIT, rx.wait_for(|n| *n >= 3))
        .await
        .unwrap()
        .unwrap();
    let (clock, offset) = movable_clock();
    offset.store(10 * 60 * 1000, Ordering::SeqCst);
    let b = JobRuntime::new(db.store().await, JobConfig { clock, ..fast() }).unwrap();
    let reaped = reap_until_taken(&b).await;
    assert_eq!(reaped.len(), 1);
    assert_eq!(reaped[0].new_state, JobState::Queued);
    let job = terminal(&a, &s.job.id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    assert_eq!(job.attempt, 2);
    let r: Value = serde_json::from_str(job.result_json.as_deref().unwrap()).unwrap();
    assert_eq!(r["attempt"], 2);
    assert!(r["resumed_from"].as_u64().unwrap() >= 3, "{r}");
    assert_eq!(executions.load(Ordering::SeqCst), 2);
    tokio::time::timeout(LIMIT, async {
        while !stopped_first.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the first attempt was stopped when its lease was lost");
    a.shutdown(Duration::from_secs(1)).await;
}

async fn a_named_instance_ends_its_previous_runs_leases_when_it_starts_again(db: &Db) {
    let probe = Probe::new();
    let named = || JobConfig {
        instance_name: Some("node-1".into()),
        // Long enough that only the restart can explain the job ending.
        lease: Duration::from_secs(600),
        heartbeat: Some(Duration::from_millis(100)),
        ..fast()
    };
    let first = runtime(
        db.store().await,
        named(),
        vec![counting_tool("count", probe.clone())],
    )
    .await;
    let s = first
        .submit(Submit::new(
            "count",
            json!({"steps": 10_000, "delay_ms": 10}),
        ))
        .await
        .unwrap();
    probe.wait_units(2).await;
    // The "restarted" process: same name, fresh owner id.
    let second = runtime(
        db.store().await,
        named(),
        vec![counting_tool("count", Probe::new())],
    )
    .await;
    assert_ne!(first.owner_id(), second.owner_id());
    let job = second.get(&s.job.id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.error_reason.as_deref(), Some(REASON_LEASE_LOST));
    // The zombie of the old run learns it at its next heartbeat and stops.
    tokio::time::timeout(LIMIT, async {
        while first.running_jobs() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    assert!(probe.saw_cancel.load(Ordering::SeqCst));
    first.shutdown(Duration::from_secs(1)).await;
    second.shutdown(Duration::from_secs(1)).await;
}

async fn a_job_past_its_maximum_runtime_is_stopped_and_recorded_failed(db: &Db) {
    let probe = Probe::new();
    let tool = counting_tool("count", probe.clone()).max_runtime(Duration::from_millis(100));
    let rt = runtime(db.store().await, fast(), vec![tool]).await;
    let s = rt
        .submit(Submit::new(
            "count",
            json!({"steps": 10_000, "delay_ms": 10}),
        ))
        .await
        .unwrap();
    let job = terminal(&rt, &s.job.id).await;
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(error_code(&job), "max_runtime");
    assert!(probe.saw_cancel.load(Ordering::SeqCst));
    rt.shutdown(Duration::from_secs(1)).await;
}

async fn finished_jobs_and_their_keys_are_purged_after_their_ttl(db: &Db) {
    let probe = Probe::new();
    let (clock, offset) = movable_clock();
    let config = JobConfig {
        clock,
        job_ttl: Duration::from_secs(60),
        idempotency_ttl: Duration::from_secs(120),
        ..fast()
    };
    let rt = runtime(
        db.store().await,
        config,
        vec![counting_tool("count", probe.clone())],
    )
    .await;
    let s = rt
        .submit(Submit::new("count", json!({"steps": 1})).key("nightly"))
        .await
        .unwrap();
    assert_eq!(terminal(&rt, &s.job.id).await.state, JobState::Succeeded);
    // Within the retention nothing goes.
    assert_eq!(rt.reap_once().await.unwrap().purged, 0);
    // Past the job's TTL the row goes; the key (kept longer) went with its row.
    offset.store(61_000, Ordering::SeqCst);
    assert_eq!(rt.reap_once().await.unwrap().purged, 1);
    assert!(rt.get(&s.job.id).await.unwrap().is_none());
    // The key is free again: the same key starts new work.
    let again = rt
        .submit(Submit::new("count", json!({"steps": 1})).key("nightly"))
        .await
        .unwrap();
    assert!(again.created);
    assert_ne!(again.job.id, s.job.id);
    assert_eq!(
        terminal(&rt, &again.job.id).await.state,
        JobState::Succeeded
    );
    assert_eq!(probe.executions.load(Ordering::SeqCst), 2);
    rt.shutdown(Duration::from_secs(1)).await;
}

async fn shutdown_lets_short_jobs_finish_and_releases_the_rest(db: &Db) {
    let probe = Probe::new();
    let scan_probe = Probe::new();
    let rt = runtime(
        db.store().await,
        fast(),
        vec![
            counting_tool("count", probe.clone()),
            counting_tool("scan", scan_probe.clone())
                .side_effects(false)
                .retry_safe(true),
        ],
    )
    .await;
    let long = rt
        .submit(Submit::new(
            "count",
            json!({"steps": 10_000, "delay_ms": 10}),
        ))
        .await
        .unwrap();
    let scan = rt
        .submit(Submit::new(
            "scan",
            json!({"steps": 10_000, "delay_ms": 10}),
        ))
        .await
        .unwrap();
    probe.wait_units(1).await;
    scan_probe.wait_units(1).await;
    rt.shutdown(Duration::from_millis(50)).await;
    assert_eq!(rt.running_jobs(), 0);
    let long = rt.get(&long.job.id).await.unwrap().unwrap();
    assert_eq!(long.state, JobState::Failed);
    assert_eq!(long.error_reason.as_deref(), Some(REASON_LEASE_LOST));
    // The retry-safe one waits in the queue for the next instance.
    let scan = rt.get(&scan.job.id).await.unwrap().unwrap();
    assert_eq!(scan.state, JobState::Queued, "{scan:?}");
    assert!(matches!(
        rt.submit(Submit::new("count", json!({"steps": 1}))).await,
        Err(JobRuntimeError::ShuttingDown)
    ));
}
