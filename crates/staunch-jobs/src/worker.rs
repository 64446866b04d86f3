//! The worker: a claim loop that takes queued jobs while a worker slot is free, and the life
//! of one attempt — body in its own task, heartbeat beside it, cancel grace, maximum runtime,
//! and the one fenced write of the outcome.
//!
//! What is recorded when the body ends:
//!
//! | why it stopped | body returned | recorded |
//! |---|---|---|
//! | lease lost | anything | nothing: the lease holder (or the reaper) decides |
//! | shutdown | a result | `succeeded` |
//! | shutdown | anything else | nothing now; released by the shutdown like a crash |
//! | — / cancel / max runtime | a result | `succeeded` (a success that races a cancel is a success) |
//! | — / cancel / max runtime | a panic | `failed(panic)` with its message |
//! | cancel requested | an error, or aborted after the grace | `cancelled` |
//! | max runtime | an error, or aborted after the grace | `failed(max_runtime)` |
//! | — | an error | `failed(error)` with its message |

use std::sync::Arc;

use serde_json::{Value, json};
use staunch_server::supervise::{Ended, supervise};
use staunch_server::trace::JobAttempt;
use staunch_store::{FinishOutcome, Heartbeat, JobOutcome, Lease};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::ms;
use crate::context::{JobContext, LeaseRef, RunShared, StopReason};
use crate::declare::JobTool;
use crate::error::JobError;
use crate::state::Inner;
use crate::view::{REASON_ERROR, REASON_MAX_RUNTIME, REASON_PANIC};

/// Claims queued jobs of this runtime's tools while a slot is free; sleeps until a wake-up
/// (a signal, a local start) or the polling backstop.
pub(crate) async fn claim_loop(inner: Arc<Inner>) {
    let lease_ms = ms(inner.config.lease);
    loop {
        let permit = tokio::select! {
            p = inner.slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
            _ = inner.shutdown.cancelled() => return,
        };
        let tools = inner.tool_names();
        let now = inner.config.clock.now_ms();
        match inner
            .store
            .claim_next(
                &inner.owner,
                lease_ms,
                now,
                &tools,
                inner.config.running_cap(),
            )
            .await
        {
            Ok(Some(lease)) => {
                spawn_attempt(inner.clone(), lease, permit);
                continue;
            }
            Ok(None) => drop(permit),
            Err(e) => {
                drop(permit);
                tracing::warn!(error = %e, "job claim failed; retrying after the poll interval");
            }
        }
        tokio::select! {
            _ = inner.wake.notified() => {}
            _ = tokio::time::sleep(inner.config.claim_poll) => {}
            _ = inner.shutdown.cancelled() => return,
        }
    }
}

/// Registers the attempt as running (before anything can wait for it) and spawns it.
fn spawn_attempt(inner: Arc<Inner>, lease: Lease, permit: OwnedSemaphorePermit) {
    let job = lease.job;
    let checkpoint = job
        .checkpoint_json
        .as_deref()
        .and_then(|c| serde_json::from_str(c).ok());
    let mut run = RunShared::new(
        job.id.clone(),
        job.tool.clone(),
        job.attempt,
        checkpoint,
        LeaseRef {
            store: inner.store.clone(),
            owner: inner.owner.clone(),
            token: lease.token,
            lease_ms: ms(inner.config.lease),
            clock: inner.config.clock.clone(),
        },
    );
    run.input_poll = inner.config.claim_poll.min(inner.config.poll_after);
    let weak = Arc::downgrade(&inner);
    run.on_change = Some(Arc::new(move |id: &str| {
        if let Some(inner) = weak.upgrade() {
            let id = id.to_string();
            tokio::spawn(async move { inner.job_changed(&id).await });
        }
    }));
    let shared = Arc::new(run);
    inner
        .running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(job.id.clone(), shared.clone());
    let args: Value = serde_json::from_str(&job.args_json).unwrap_or(Value::Null);
    // Disabled: one branch, nothing built.
    let span = inner.config.traces.job_attempt(&JobAttempt {
        job_id: &job.id,
        tool: &job.tool,
        attempt: job.attempt,
        link: job.trace_parent.as_deref(),
    });
    tokio::spawn(async move {
        let _permit = permit;
        let id = shared.job_id.clone();
        let (state, reason) = run_attempt(&inner, shared, args).await;
        if let Some(span) = span {
            span.end(state, reason);
        }
        // Removed only after the outcome is written: shutdown waits for this map to empty
        // before it releases this process's leases.
        inner
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        inner.ended.notify_waiters();
        inner.job_changed(&id).await;
        // A slot is free again.
        inner.wake.notify_one();
    });
}

/// What an attempt left its job in, for its span: the state it recorded (and the failure's
/// reason), or `lease_lost` / `released` when it recorded nothing.
type AttemptEnd = (&'static str, Option<&'static str>);

async fn run_attempt(inner: &Arc<Inner>, shared: Arc<RunShared>, args: Value) -> AttemptEnd {
    let Some(tool) = inner.tool(&shared.tool) else {
        // claim_next only takes our tools; a tool can only vanish if the process is being
        // rebuilt. Fail loudly rather than leave the job running.
        let outcome = failed(REASON_ERROR, format!("unknown job tool {}", shared.tool));
        return finish(inner, &shared, outcome).await;
    };
    tracing::info!(job_id = %shared.job_id, tool = %shared.tool, attempt = shared.attempt, "job.start");
    let hb_stop = CancellationToken::new();
    let hb = tokio::spawn(heartbeat_loop(
        inner.clone(),
        shared.clone(),
        hb_stop.clone(),
    ));
    let ended = run_body(inner, &shared, &tool, args).await;
    hb_stop.cancel();
    let _ = hb.await;

    let reason = shared.stop_reason();
    let outcome = match (reason, ended) {
        (Some(StopReason::LeaseLost), _) => {
            inner.config.metrics.job_lease_lost();
            tracing::warn!(job_id = %shared.job_id, "job.lease_lost: the outcome of this attempt is discarded");
            return (ATTEMPT_LEASE_LOST, None);
        }
        (Some(StopReason::Shutdown), Ended::Returned(Ok(v))) => succeeded(v),
        (Some(StopReason::Shutdown), _) => return ("released", None),
        (_, Ended::Returned(Ok(v))) => succeeded(v),
        (_, Ended::Panicked(m)) => failed(
            REASON_PANIC,
            format!("the job failed unexpectedly (panic: {m})"),
        ),
        (Some(StopReason::CancelRequested), _) => JobOutcome::Cancelled,
        (Some(StopReason::MaxRuntime), _) => {
            let limit = tool.max_runtime.unwrap_or(inner.config.max_runtime);
            failed(
                REASON_MAX_RUNTIME,
                format!("stopped after {:.1} s", limit.as_secs_f64()),
            )
        }
        (None, Ended::Returned(Err(JobError::Failed(m)))) => failed(REASON_ERROR, m),
        (None, Ended::Returned(Err(JobError::Cancelled)) | Ended::Aborted) => failed(
            REASON_ERROR,
            "the job stopped as if cancelled, but nobody cancelled it".to_string(),
        ),
    };
    // The last progress goes in before the end, so `get` shows how far it got.
    if let Some(p) = shared.take_progress() {
        let l = &shared.lease;
        let _ = inner
            .store
            .heartbeat(
                &shared.job_id,
                &l.owner,
                l.token,
                l.lease_ms,
                l.clock.now_ms(),
                Some(p),
                None,
            )
            .await;
    }
    finish(inner, &shared, outcome).await
}

/// The attempt's span state when its lease was gone before it could record anything.
const ATTEMPT_LEASE_LOST: &str = "lease_lost";

/// Runs the body under the same supervision as a request (`staunch_server::supervise`): a panic
/// is caught, a stop (cancel, lost lease, shutdown) grants the grace and then drops the body,
/// and the maximum runtime is the body's limit.
async fn run_body(
    inner: &Inner,
    shared: &Arc<RunShared>,
    tool: &JobTool,
    args: Value,
) -> Ended<Result<Value, JobError>> {
    let ctx = JobContext {
        shared: shared.clone(),
    };
    let body = tool.body.clone();
    // Built inside the supervised future: a panic while building it is caught the same way.
    let fut = async move { body.run(ctx, args).await };
    let max_runtime = tool.max_runtime.unwrap_or(inner.config.max_runtime);
    let grace = inner.config.cancel_grace;
    let supervised = supervise(
        fut,
        &shared.token,
        grace,
        Some(Instant::now() + max_runtime),
        || shared.stop(StopReason::MaxRuntime),
    )
    .await;
    if matches!(supervised.ended, Ended::Aborted) {
        tracing::warn!(job_id = %shared.job_id, ?grace, "job.aborted: the body ignored its cancel");
    }
    supervised.ended
}

/// Renews the lease every heartbeat interval and writes progress (at most every
/// `progress_interval`); applies the cancel flag and a lost lease to the token. If the store
/// cannot be reached for a whole lease, the attempt fences itself off: by then a reaper may
/// have given the job to someone else.
async fn heartbeat_loop(inner: Arc<Inner>, shared: Arc<RunShared>, stop: CancellationToken) {
    let cfg = &inner.config;
    let every = cfg.heartbeat_interval();
    let mut last_ok = Instant::now();
    let mut last_write = Instant::now();
    let mut next = Instant::now() + every;
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
            _ = shared.progress_wake.notified() => {
                let earliest = last_write + cfg.progress_interval;
                if Instant::now() < earliest {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep_until(earliest) => {}
                    }
                }
            }
        }
        let progress = shared.take_progress();
        let l = &shared.lease;
        let r = inner
            .store
            .heartbeat(
                &shared.job_id,
                &l.owner,
                l.token,
                l.lease_ms,
                l.clock.now_ms(),
                progress.clone(),
                None,
            )
            .await;
        last_write = Instant::now();
        next = last_write + every;
        match r {
            Ok(hb) => {
                last_ok = last_write;
                shared.apply(hb);
                if progress.is_some() {
                    // Listen streams hear a task's progress while it works, not only its end.
                    let (inner, id) = (inner.clone(), shared.job_id.clone());
                    tokio::spawn(async move { inner.job_changed(&id).await });
                }
                if hb == Heartbeat::Lost {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(job_id = %shared.job_id, error = %e, "job heartbeat failed");
                if let Some(p) = progress {
                    shared.restore_progress(p);
                }
                if last_ok.elapsed() >= cfg.lease {
                    shared.stop(StopReason::LeaseLost);
                    return;
                }
            }
        }
    }
}

fn succeeded(v: Value) -> JobOutcome {
    JobOutcome::Succeeded {
        result_json: v.to_string(),
    }
}

fn failed(reason: &str, message: String) -> JobOutcome {
    JobOutcome::Failed {
        error_json: json!({"code": reason, "message": message}).to_string(),
        reason: reason.to_string(),
    }
}

/// Writes the outcome; says what the job was left in (for the attempt's span).
async fn finish(inner: &Inner, shared: &RunShared, outcome: JobOutcome) -> AttemptEnd {
    let (label, reason) = match &outcome {
        JobOutcome::Succeeded { .. } => ("succeeded", None),
        JobOutcome::Failed { reason, .. } => ("failed", failure_reason(reason)),
        JobOutcome::Cancelled => ("cancelled", None),
    };
    let l = &shared.lease;
    match inner
        .store
        .finish(&shared.job_id, &l.owner, l.token, outcome, l.clock.now_ms())
        .await
    {
        Ok(FinishOutcome::Recorded) => {
            tracing::info!(job_id = %shared.job_id, outcome = label, "job.end");
            (label, reason)
        }
        Ok(other) => {
            tracing::warn!(job_id = %shared.job_id, outcome = label, ?other, "job.end not recorded: the attempt no longer held the job");
            (ATTEMPT_LEASE_LOST, None)
        }
        Err(e) => {
            // The lease runs out and the reaper ends the job; nothing better can be done here.
            tracing::error!(job_id = %shared.job_id, outcome = label, error = %e, "job.end could not be written");
            ("unrecorded", None)
        }
    }
}

/// A failure's reason as a static label (the ones this worker writes).
fn failure_reason(reason: &str) -> Option<&'static str> {
    [REASON_ERROR, REASON_MAX_RUNTIME, REASON_PANIC]
        .into_iter()
        .find(|r| *r == reason)
}
