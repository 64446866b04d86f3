//! `staunch-chaos`: a mixed MCP workload against one or several `staunch serve --http`
//! instances (loopback only) while faults are injected, then the invariants checked from the
//! store, the demo import table and the lifecycle logs. Bounded in count and time.
//!
//! ```sh
//! cargo build --release -p staunch -p staunch-chaos
//! target/release/staunch-chaos --runs 3 --seconds 20                        # SQLite, 1 instance
//! target/release/staunch-chaos --runs 3 --seconds 20 --postgres postgres://postgres@127.0.0.1:5432/test --instances 2
//! target/release/staunch-chaos --soak 10                                    # steady load, periodic faults
//! target/release/staunch-chaos --instances 2 --postgres postgres://postgres@127.0.0.1:5432/test --pg-restart  # + a server restart
//! ```
//!
//! Faults: SIGKILL + restart of an instance (same port, same instance name), PostgreSQL
//! connection kills (`pg_terminate_backend` on the run's own database only), SQLite busy
//! (another connection holding the store's write lock), dropped and resumed streams (every
//! instance runs with `--poll-after-ms 150`, so any call longer than that loses its connection
//! and resumes), cancels racing completion, client timeouts re-sent with the same
//! idempotency key, MCP tasks followed or cancelled, a lease fault (the instance running a
//! long side-effecting job SIGSTOPped past its lease, then SIGCONTed), and with `--pg-restart`
//! a restart of the machine's PostgreSQL server. Exit code 0 when no invariant was violated, 1
//! otherwise.

mod balancer;
mod checks;
mod faults;
mod instance;
mod workload;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use instance::{Instance, StoreKind};
use workload::{Record, Rng};

#[derive(Parser, Debug)]
#[command(about = "Chaos and soak runs against staunch serve --http (loopback only)")]
struct Args {
    /// The staunch binary.
    #[arg(long, default_value = "target/release/staunch")]
    bin: PathBuf,
    /// Runs (each with fresh instances and store).
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Seconds of load per run.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Soak mode: one run of this many minutes, steady load, faults every 30 s, figures per
    /// minute (p99 and RSS drift).
    #[arg(long)]
    soak: Option<u64>,
    /// Instances (several need --postgres).
    #[arg(long, default_value_t = 1)]
    instances: usize,
    /// Concurrent client connections.
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// PostgreSQL server URL; the run uses its own database `staunch_chaos` on it. Only this
    /// flag selects PostgreSQL (not STAUNCH_TEST_POSTGRES, which `.ci/run` exports for the
    /// tests: its SQLite run must stay on SQLite).
    #[arg(long)]
    postgres: Option<String>,
    /// Seed of the workload's choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also restart the machine's PostgreSQL server once per run (`pg_ctlcluster <ver> main
    /// restart`; only for a server on 127.0.0.1). Off by default: it disturbs everything else
    /// using that server.
    #[arg(long, requires = "postgres")]
    pg_restart: bool,
    /// Send the workload through this nginx binary running `--balancer-config` (round robin
    /// over every instance, no stickiness) instead of spreading workers over the instances.
    #[arg(long, requires = "postgres")]
    balancer: Option<PathBuf>,
    /// The balancer's configuration template.
    #[arg(long, default_value = "deploy/nginx/staunch.conf")]
    balancer_config: PathBuf,
}

#[derive(Default, Debug)]
struct RunFigures {
    calls: u64,
    answered: u64,
    timed_out: u64,
    cancel_races: u64,
    cancel_races_won_by_result: u64,
    resent_with_key: u64,
    resumes: u64,
    kills: u64,
    pg_kills: u64,
    pg_backends_killed: u64,
    sqlite_busy: u64,
    stalls: u64,
    stalls_taken_over: u64,
    pg_restarts: u64,
    tasks: u64,
    tasks_completed: u64,
    tasks_cancel_sent: u64,
    tasks_cancel_honoured: u64,
    tasks_cancel_raced: u64,
    keys: u64,
    keys_unanswered_found_by_key: u64,
    keys_unanswered_without_job: u64,
    jobs: u64,
    jobs_succeeded: u64,
    jobs_cancelled: u64,
    jobs_lease_lost_explained: u64,
    units: u64,
    late_responses: u64,
    late_raced: u64,
    late_in_killed: u64,
    late_stateless: u64,
    late_progress: u64,
    late_progress_after_pause: u64,
    rss_checked: u64,
    failures_explained_by_kill: u64,
    failures_explained_by_pg_kill: u64,
    store_errors_after_pg_kill: u64,
    failures_explained_by_stall: u64,
    failures_explained_by_pg_restart: u64,
    raced_completion: u64,
    suppressed: u64,
    log_requests: u64,
    log_cancels: u64,
    unended_explained_by_kill: u64,
    rss_start_kib: Vec<u64>,
    rss_end_kib: Vec<u64>,
    violations: Vec<String>,
    /// Soak: per window (minute): (requests so far, p99 of quick calls in ms, RSS of instance 0).
    windows: Vec<(u64, f64, u64)>,
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

/// The URL of the chaos database on the same server (created if missing), so connection
/// kills never touch anyone else's sessions.
async fn chaos_database(url: &str) -> anyhow::Result<String> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting to PostgreSQL")?;
    tokio::spawn(conn);
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_database WHERE datname = 'staunch_chaos'",
            &[],
        )
        .await?
        .is_some();
    if !exists {
        client
            .batch_execute("CREATE DATABASE staunch_chaos")
            .await?;
    }
    let base = url.rsplit_once('/').map_or(url, |(b, _)| b);
    Ok(format!("{base}/staunch_chaos"))
}

/// Terminates every backend of the chaos database but this connection; how many.
async fn kill_pg_connections(url: &str) -> anyhow::Result<u64> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await?;
    Ok(rows.len() as u64)
}

/// A store fault: PostgreSQL backends terminated, or the SQLite write lock held for `hold_ms`.
async fn store_fault(
    faults: &mut checks::Faults,
    store: &StoreKind,
    pg_url: Option<&str>,
    hold_ms: u64,
) {
    if let Some(url) = pg_url {
        faults.pg_kills.push(Instant::now());
        faults.pg_backends_killed += kill_pg_connections(url).await.unwrap_or(0);
    } else if let StoreKind::Sqlite(p) = store {
        faults.sqlite_busy.push(Instant::now());
        let p = p.clone();
        let _ =
            tokio::task::spawn_blocking(move || sqlite_busy(&p, Duration::from_millis(hold_ms)))
                .await;
    }
}

/// Holds the SQLite store's write lock for `hold` (another process's long transaction).
fn sqlite_busy(path: &std::path::Path, hold: Duration) -> anyhow::Result<()> {
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    std::thread::sleep(hold);
    conn.execute_batch("COMMIT")?;
    Ok(())
}

async fn run(args: &Args, run_no: u32, seconds: u64, soak: bool) -> anyhow::Result<RunFigures> {
    let dir = tempfile::tempdir()?;
    let (store, pg_url) = match &args.postgres {
        Some(url) => {
            let db = chaos_database(url).await?;
            let schema = format!("chaos_{}_{}", std::process::id(), run_no);
            (
                StoreKind::Postgres {
                    url: db.clone(),
                    schema,
                },
                Some(db),
            )
        }
        None => (StoreKind::Sqlite(dir.path().join("store.db")), None),
    };
    let import_db = dir.path().join("import.db");
    let mut instances = Vec::new();
    for i in 0..args.instances.max(1) {
        instances.push(Instance::start(i, &args.bin, dir.path(), &store, &import_db).await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for inst in &mut instances {
        inst.rss_base_kib = inst.rss_kib();
    }
    let mut fig = RunFigures::default();

    let shared: workload::Shared = Arc::new(Mutex::new(Record::default()));
    let stop = Instant::now() + Duration::from_secs(seconds);
    let balancer = match &args.balancer {
        Some(nginx) => {
            let ports: Vec<u16> = instances.iter().map(|i| i.port).collect();
            Some(balancer::Balancer::start(nginx, &args.balancer_config, dir.path(), &ports).await?)
        }
        None => None,
    };
    let urls: Vec<String> = match &balancer {
        Some(b) => vec![b.url()],
        None => instances.iter().map(Instance::url).collect(),
    };
    let mut handles = Vec::new();
    for w in 0..args.workers {
        let inst = if balancer.is_some() {
            checks::BALANCED
        } else {
            w % urls.len()
        };
        handles.push(tokio::spawn(workload::worker(
            w,
            inst,
            urls[w % urls.len()].clone(),
            args.seed.wrapping_add(u64::from(run_no)),
            stop,
            shared.clone(),
        )));
    }

    // Faults, spread over the run (soak: every 30 s, instance 0 never killed so its RSS
    // drift is measured over the whole soak).
    let mut faults = checks::Faults::default();
    let mut rng = Rng::new(args.seed ^ 0x5eed ^ u64::from(run_no));
    let period = if soak {
        Duration::from_secs(30)
    } else {
        Duration::from_secs((seconds / 6).max(2))
    };
    let started = Instant::now();
    let mut next_window = started + Duration::from_secs(60);
    let mut round = 0u64;
    let mut restarted = false;
    while Instant::now() + period < stop {
        tokio::time::sleep(period).await;
        round += 1;
        match round % 5 {
            1 => {
                let candidates: Vec<usize> = if soak && instances.len() > 1 {
                    (1..instances.len()).collect()
                } else if soak {
                    Vec::new()
                } else {
                    (0..instances.len()).collect()
                };
                if !candidates.is_empty() {
                    let i = candidates[rng.below(candidates.len() as u64) as usize];
                    let at = Instant::now();
                    let restarted = instances[i]
                        .kill_and_restart(Duration::from_millis(300))
                        .await;
                    faults.kills.push(checks::Kill {
                        instance: i,
                        at,
                        back: Instant::now(),
                    });
                    restarted?;
                }
            }
            2 => {
                // A lease fault (soak: never on instance 0, whose RSS is measured).
                let at = if soak && instances.len() > 1 {
                    1 + rng.below(instances.len() as u64 - 1) as usize
                } else {
                    rng.below(instances.len() as u64) as usize
                };
                // The instance paused is the one whose worker claimed the job (on PostgreSQL
                // that may be another one than `at`).
                match faults::lease_fault(&instances, at, &store).await {
                    Ok(stall) => faults.stalls.push(stall),
                    Err(e) => eprintln!("run {run_no}: lease fault not injected: {e:#}"),
                }
            }
            3 if args.pg_restart && !restarted => {
                if let Some(url) = &pg_url {
                    restarted = true;
                    faults.pg_restarts.push(faults::pg_restart(url).await?);
                }
            }
            3 => store_fault(&mut faults, &store, pg_url.as_deref(), 500).await,
            _ => store_fault(&mut faults, &store, pg_url.as_deref(), 300).await,
        }
        if soak && Instant::now() >= next_window {
            next_window += Duration::from_secs(60);
            let rec = shared.lock().unwrap_or_else(|p| p.into_inner());
            let window_start = Instant::now() - Duration::from_secs(60);
            let lat: Vec<f64> = rec
                .quick_ms
                .iter()
                .filter(|(t, _)| *t >= window_start)
                .map(|(_, ms)| *ms)
                .collect();
            let rss = instances[0].rss_kib().unwrap_or(0);
            fig.windows.push((rec.calls, percentile(lat, 0.99), rss));
            eprintln!(
                "soak: {:>4} s, {} calls, p99 {:.2} ms, RSS {} KiB",
                started.elapsed().as_secs(),
                rec.calls,
                fig.windows.last().map_or(0.0, |w| w.1),
                rss
            );
        }
    }
    for h in handles {
        let _ = h.await;
    }
    // Let the instances settle (jobs finish, buffers freed), then measure.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut violations = Vec::new();
    let rec = std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()));
    let explained = checks::failures(&rec, &faults, &store, instances.len(), &mut violations).await;
    let mut rec = rec;
    // The lease faults' jobs are checked like every other keyed job (one job, terminal, side
    // effects once), and for a second terminal state.
    for s in &faults.stalls {
        let mut k = workload::KeyRec::new(s.instance, s.rows, false);
        k.told.insert(s.job.clone());
        k.sent = 1;
        k.answered = true;
        rec.keys.insert(s.key.clone(), k);
    }
    let jf = checks::jobs(&import_db, &store, &rec, &faults, &mut violations).await;
    fig.stalls_taken_over = checks::stalls(&faults, &store, &mut violations).await;
    // Work resumes after a PostgreSQL restart.
    for (_, back) in &faults.pg_restarts {
        let after = rec.quick_ms.iter().filter(|(t, _)| t > back).count();
        if after == 0 && *back + Duration::from_secs(3) < stop {
            violations.push(checks::Violation {
                kind: "no work after the PostgreSQL restart",
                detail: "no quick call answered after the server was back".into(),
            });
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    fig.rss_end_kib = instances.iter().map(|i| i.rss_kib().unwrap_or(0)).collect();
    for inst in &mut instances {
        inst.stop().await;
    }
    let logs: Vec<(PathBuf, bool)> = instances.iter().flat_map(|i| i.logs.clone()).collect();
    let lf = checks::logs(&logs, &mut violations);
    let killed: Vec<usize> = instances
        .iter()
        .filter(|i| i.kills > 0)
        .map(|i| i.index)
        .collect();
    let wf = checks::wire(&rec, &lf.seen, &killed, &faults, &mut violations);
    // Memory back near its baseline: every instance that lived through the run, held to the
    // baseline of its last incarnation (measured once it settled after its start or restart).
    fig.rss_start_kib = instances
        .iter()
        .map(|i| i.rss_base_kib.unwrap_or(0))
        .collect();
    for (i, inst) in instances.iter().enumerate() {
        let (Some(s), Some(&e)) = (
            inst.rss_base_kib,
            fig.rss_end_kib.get(i).filter(|e| **e > 0),
        ) else {
            violations.push(checks::Violation {
                kind: "memory not measured",
                detail: format!("instance {i}: no RSS at its start or at the end"),
            });
            continue;
        };
        fig.rss_checked += 1;
        if e > s * 2 + 64 * 1024 {
            violations.push(checks::Violation {
                kind: "memory not back near baseline",
                detail: format!("instance {i}: RSS {s} KiB at start, {e} KiB at the end"),
            });
        }
    }

    fig.calls = rec.calls;
    fig.answered = rec.answered;
    fig.timed_out = rec.timed_out;
    fig.cancel_races = rec.cancel_races;
    fig.cancel_races_won_by_result = rec.cancel_races_won_by_result;
    fig.resent_with_key = rec.resent_with_key;
    fig.resumes = rec.resumes;
    fig.kills = faults.kills.len() as u64;
    fig.pg_kills = faults.pg_kills.len() as u64;
    fig.pg_backends_killed = faults.pg_backends_killed;
    fig.sqlite_busy = faults.sqlite_busy.len() as u64;
    fig.stalls = faults.stalls.len() as u64;
    fig.pg_restarts = faults.pg_restarts.len() as u64;
    fig.tasks = rec.tasks;
    fig.tasks_completed = rec.tasks_completed;
    fig.tasks_cancel_sent = rec.tasks_cancel_sent;
    fig.tasks_cancel_honoured = rec.tasks_cancel_honoured;
    fig.tasks_cancel_raced = rec.tasks_cancel_raced;
    fig.failures_explained_by_stall = explained.by_stall;
    fig.failures_explained_by_pg_restart = explained.by_pg_restart;
    fig.keys = jf.keys;
    fig.keys_unanswered_found_by_key = jf.unanswered_found_by_key;
    fig.keys_unanswered_without_job = jf.unanswered_without_job;
    fig.jobs = jf.jobs;
    fig.jobs_succeeded = jf.succeeded;
    fig.jobs_cancelled = jf.cancelled;
    fig.jobs_lease_lost_explained = jf.lease_lost_explained;
    fig.units = jf.units;
    fig.late_responses = wf.late_responses;
    fig.late_raced = wf.late_raced;
    fig.late_in_killed = wf.late_in_killed;
    fig.late_stateless = wf.late_stateless;
    fig.late_progress = wf.late_progress;
    fig.late_progress_after_pause = wf.late_progress_after_pause;
    fig.failures_explained_by_kill = explained.by_kill;
    fig.failures_explained_by_pg_kill = explained.by_pg_kill;
    fig.store_errors_after_pg_kill = explained.store_errors_after_pg_kill;
    fig.raced_completion = lf.raced_completion;
    fig.suppressed = lf.suppressed;
    fig.log_requests = lf.requests;
    fig.log_cancels = lf.cancels;
    fig.unended_explained_by_kill = lf.unended_explained_by_kill;
    for (kind, n) in checks::by_kind(&violations) {
        eprintln!("run {run_no}: {n} violation(s) of kind {kind:?}");
    }
    fig.violations = violations
        .iter()
        .map(|x| format!("{}: {}", x.kind, x.detail))
        .collect();
    if !fig.violations.is_empty() {
        // Keep the logs and store of a run that broke a promise, for inspection.
        eprintln!("run {run_no}: logs kept in {}", dir.path().display());
        std::mem::forget(dir);
    }
    if !soak {
        let lat: Vec<f64> = rec.quick_ms.iter().map(|(_, ms)| *ms).collect();
        fig.windows.push((rec.calls, percentile(lat, 0.99), 0));
    }
    Ok(fig)
}

fn print(run_no: u32, f: &RunFigures) {
    println!(
        "run {run_no}: {} calls ({} answered, {} timed out and cancelled), {} cancel races ({} won by the result), \
         {} re-sent with the same key, {} stream resumes; {} tasks ({} completed, {} cancelled with tasks/cancel: \
         {} stayed cancelled, {} completed first); faults: {} SIGKILL+restart, {} PostgreSQL kills ({} backends), \
         {} SQLite busy, {} lease faults (SIGSTOP past the lease; {} jobs taken over), {} PostgreSQL restarts; \
         {} keys ({} unanswered but found by key, {} unanswered without a job), {} jobs ({} succeeded, \
         {} cancelled by the client, {} failed(lease_lost) under a fault of their instance or the store), \
         {} units read back; wire: {} answers after a cancel ({} sent before the cancel arrived, \
         {} in killed incarnations, {} read as a stateless stream closed), {} progress after a cancel ({} cancelled while the instance was paused); failures explained: {} by a kill, {} by a PostgreSQL kill, {} by a lease fault, \
         {} by a PostgreSQL restart; \
         {} store errors after a PostgreSQL kill or restart (re-sent with the key); log: {} requests, {} cancels, \
         {} cancels that raced completion (ended <= 100 ms after), {} atomic responses suppressed, \
         {} unended in killed incarnations; RSS KiB (last incarnation's baseline) {:?} end {:?}, {} instances checked; \
         violations: {}",
        f.calls,
        f.answered,
        f.timed_out,
        f.cancel_races,
        f.cancel_races_won_by_result,
        f.resent_with_key,
        f.resumes,
        f.tasks,
        f.tasks_completed,
        f.tasks_cancel_sent,
        f.tasks_cancel_honoured,
        f.tasks_cancel_raced,
        f.kills,
        f.pg_kills,
        f.pg_backends_killed,
        f.sqlite_busy,
        f.stalls,
        f.stalls_taken_over,
        f.pg_restarts,
        f.keys,
        f.keys_unanswered_found_by_key,
        f.keys_unanswered_without_job,
        f.jobs,
        f.jobs_succeeded,
        f.jobs_cancelled,
        f.jobs_lease_lost_explained,
        f.units,
        f.late_responses,
        f.late_raced,
        f.late_in_killed,
        f.late_stateless,
        f.late_progress,
        f.late_progress_after_pause,
        f.failures_explained_by_kill,
        f.failures_explained_by_pg_kill,
        f.failures_explained_by_stall,
        f.failures_explained_by_pg_restart,
        f.store_errors_after_pg_kill,
        f.log_requests,
        f.log_cancels,
        f.raced_completion,
        f.suppressed,
        f.unended_explained_by_kill,
        f.rss_start_kib,
        f.rss_end_kib,
        f.rss_checked,
        f.violations.len()
    );
    for v in f.violations.iter().take(20) {
        println!("  violation: {v}");
    }
}

fn to_json(f: &RunFigures) -> serde_json::Value {
    serde_json::json!({
        "calls": f.calls, "answered": f.answered, "timed_out": f.timed_out,
        "cancel_races": f.cancel_races, "cancel_races_won_by_result": f.cancel_races_won_by_result,
        "resent_with_key": f.resent_with_key, "resumes": f.resumes,
        "faults": {"sigkill_restart": f.kills, "pg_kills": f.pg_kills,
                   "pg_backends_killed": f.pg_backends_killed, "sqlite_busy": f.sqlite_busy,
                   "lease_stalls": f.stalls, "lease_stall_jobs_taken_over": f.stalls_taken_over,
                   "pg_restarts": f.pg_restarts},
        "tasks": {"created": f.tasks, "completed": f.tasks_completed,
                  "cancel_sent": f.tasks_cancel_sent, "cancel_honoured": f.tasks_cancel_honoured,
                  "cancel_raced_completion": f.tasks_cancel_raced},
        "keys": {"used": f.keys, "unanswered_found_by_key": f.keys_unanswered_found_by_key,
                 "unanswered_without_job": f.keys_unanswered_without_job},
        "jobs": {"checked": f.jobs, "succeeded": f.jobs_succeeded, "cancelled": f.jobs_cancelled,
                 "lease_lost_explained": f.jobs_lease_lost_explained, "units": f.units},
        "wire": {"late_responses": f.late_responses, "late_raced": f.late_raced,
                 "late_in_killed": f.late_in_killed, "late_stateless": f.late_stateless, "late_progress": f.late_progress, "late_progress_after_pause": f.late_progress_after_pause},
        "rss_checked": f.rss_checked,
        "explained": {"by_kill": f.failures_explained_by_kill, "by_pg_kill": f.failures_explained_by_pg_kill,
                      "store_errors_after_pg_kill": f.store_errors_after_pg_kill,
                      "by_lease_stall": f.failures_explained_by_stall,
                      "by_pg_restart": f.failures_explained_by_pg_restart,
                      "cancel_raced_completion": f.raced_completion, "atomic_suppressed": f.suppressed,
                      "unended_in_killed_logs": f.unended_explained_by_kill},
        "log_requests": f.log_requests, "log_cancels": f.log_cancels,
        "rss_start_kib": f.rss_start_kib, "rss_end_kib": f.rss_end_kib,
        "windows": f.windows.iter().map(|(c, p, r)| serde_json::json!({"calls": c, "p99_ms": p, "rss_kib": r})).collect::<Vec<_>>(),
        "violations": f.violations,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.instances <= 1 || args.postgres.is_some(),
        "several instances need --postgres"
    );
    anyhow::ensure!(
        args.balancer.is_none() || args.instances >= 2,
        "--balancer needs --instances 2 or more"
    );
    anyhow::ensure!(
        args.bin.exists(),
        "no staunch binary at {}",
        args.bin.display()
    );
    let mut all = Vec::new();
    let mut failed = false;
    let (runs, seconds, soak) = match args.soak {
        Some(minutes) => (1, minutes.clamp(1, 240) * 60, true),
        None => (args.runs.clamp(1, 100), args.seconds.clamp(5, 3600), false),
    };
    for r in 1..=runs {
        let f = run(&args, r, seconds, soak).await?;
        print(r, &f);
        if soak && let (Some(first), Some(last)) = (f.windows.first(), f.windows.last()) {
            println!(
                "soak: {} min, {} requests; p99 of quick calls {:.2} ms in the first minute, {:.2} ms in the last; RSS of instance 0 {} KiB after the first minute, {} KiB at the end",
                seconds / 60,
                f.calls,
                first.1,
                last.1,
                first.2,
                last.2
            );
        }
        failed |= !f.violations.is_empty();
        all.push(to_json(&f));
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&all)?)?;
    }
    std::process::exit(i32::from(failed));
}
