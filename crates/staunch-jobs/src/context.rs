//! [`JobContext`]: what a job body receives — the capabilities of a request's `Context`
//! (cooperative cancellation, `run`, `sleep`, `blocking`, progress) plus a durable checkpoint.
//!
//! A job's cancellation token fires for four reasons ([`StopReason`]): a cancel request (from
//! any face, on any instance, delivered by the heartbeat or at once in-process), a lost lease,
//! the maximum runtime, or the runtime shutting down. The body only needs to stop; the worker
//! decides what to record.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use staunch_store::{Heartbeat, JobStore};
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::config::Clock;
use crate::error::JobError;

/// Why a running job's token fired. The first reason wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// Someone asked to cancel the job.
    CancelRequested,
    /// The lease is gone (reaped, or the heartbeat could not renew it in time): another
    /// instance may own the job now, so nothing more may be written.
    LeaseLost,
    /// It ran past its maximum runtime.
    MaxRuntime,
    /// This runtime is shutting down.
    Shutdown,
}

/// The claim a running attempt holds, for the writes it makes.
pub(crate) struct LeaseRef {
    pub(crate) store: Arc<dyn JobStore>,
    pub(crate) owner: String,
    pub(crate) token: u64,
    pub(crate) lease_ms: i64,
    pub(crate) clock: Clock,
}

/// Called with a job's id when its body changed what `tasks/get` shows.
pub(crate) type OnChange = Arc<dyn Fn(&str) + Send + Sync>;

/// State shared by a running attempt's body, its heartbeat and the runtime.
pub(crate) struct RunShared {
    pub(crate) job_id: String,
    pub(crate) tool: String,
    pub(crate) attempt: u32,
    pub(crate) checkpoint_before: Option<Value>,
    pub(crate) token: CancellationToken,
    stop: Mutex<Option<StopReason>>,
    /// Progress not yet written, as the store's JSON.
    pending_progress: Mutex<Option<String>>,
    /// Wakes the heartbeat when there is progress to write.
    pub(crate) progress_wake: Notify,
    pub(crate) lease: LeaseRef,
    /// Wakes a body waiting for answers to its questions (`tasks/update` in this process;
    /// answers given on another instance are found by polling).
    pub(crate) input_wake: Notify,
    /// Numbers unnamed questions: the n-th question of a kind gets the same key on every
    /// attempt, so a re-run finds the answers already given.
    pub(crate) input_counter: std::sync::atomic::AtomicU32,
    /// How often a waiting body re-reads its answers.
    pub(crate) input_poll: Duration,
    /// Tells the runtime the task changed (input asked), for `notifications/tasks`.
    pub(crate) on_change: Option<OnChange>,
}

impl RunShared {
    pub(crate) fn new(
        job_id: String,
        tool: String,
        attempt: u32,
        checkpoint_before: Option<Value>,
        lease: LeaseRef,
    ) -> Self {
        Self {
            job_id,
            tool,
            attempt,
            checkpoint_before,
            token: CancellationToken::new(),
            stop: Mutex::new(None),
            pending_progress: Mutex::new(None),
            progress_wake: Notify::new(),
            lease,
            input_wake: Notify::new(),
            input_counter: std::sync::atomic::AtomicU32::new(0),
            input_poll: Duration::from_secs(1),
            on_change: None,
        }
    }

    /// Fires the token; the first reason is the one that counts.
    pub(crate) fn stop(&self, reason: StopReason) {
        {
            let mut s = self.stop.lock().unwrap_or_else(|p| p.into_inner());
            if s.is_none() {
                *s = Some(reason);
            }
        }
        self.token.cancel();
    }

    pub(crate) fn stop_reason(&self) -> Option<StopReason> {
        *self.stop.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the progress waiting to be written.
    pub(crate) fn take_progress(&self) -> Option<String> {
        self.pending_progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Puts back progress whose write failed, unless newer progress arrived meanwhile.
    pub(crate) fn restore_progress(&self, p: String) {
        let mut slot = self
            .pending_progress
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(p);
        }
    }

    fn set_progress(&self, p: String) {
        *self
            .pending_progress
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(p);
        self.progress_wake.notify_one();
    }

    /// Applies a heartbeat answer: a cancel flag or a lost lease fires the token.
    pub(crate) fn apply(&self, hb: Heartbeat) {
        match hb {
            Heartbeat::Held {
                cancel_requested: true,
            } => self.stop(StopReason::CancelRequested),
            Heartbeat::Held { .. } => {}
            Heartbeat::Lost => self.stop(StopReason::LeaseLost),
        }
    }
}

/// The handle a job body gets. Cheap to clone.
#[derive(Clone)]
pub struct JobContext {
    pub(crate) shared: Arc<RunShared>,
}

impl std::fmt::Debug for JobContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext")
            .field("job_id", &self.shared.job_id)
            .field("attempt", &self.shared.attempt)
            .finish()
    }
}

/// Handed to [`JobContext::blocking`] closures: ask it between units of blocking work.
#[derive(Clone, Debug)]
pub struct JobUnit {
    token: CancellationToken,
}

impl JobUnit {
    /// Whether the job was told to stop.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// `Err(Cancelled)` once the job was told to stop; call it at the top of each unit.
    pub fn check(&self) -> Result<(), JobError> {
        if self.token.is_cancelled() {
            Err(JobError::Cancelled)
        } else {
            Ok(())
        }
    }
}

impl JobContext {
    /// The job's id (also its task id).
    pub fn job_id(&self) -> &str {
        &self.shared.job_id
    }

    /// The tool it belongs to.
    pub fn tool(&self) -> &str {
        &self.shared.tool
    }

    /// Which attempt this is, from 1. Only retry-safe jobs see more than one.
    pub fn attempt(&self) -> u32 {
        self.shared.attempt
    }

    /// The checkpoint an earlier attempt saved, to resume from.
    pub fn last_checkpoint(&self) -> Option<&Value> {
        self.shared.checkpoint_before.as_ref()
    }

    /// Whether the job was told to stop.
    pub fn is_cancelled(&self) -> bool {
        self.shared.token.is_cancelled()
    }

    /// Completes when the job is told to stop.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.shared.token.cancelled()
    }

    /// `Err(Cancelled)` once the job was told to stop. Put it at the top of each unit of
    /// work, before the expensive call.
    pub fn check(&self) -> Result<(), JobError> {
        if self.is_cancelled() {
            Err(JobError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// A token that fires when the job is told to stop, for code that takes one.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.shared.token.clone()
    }

    /// Runs a downstream future; drops it (ending its I/O) when the job is told to stop.
    pub async fn run<F: Future>(&self, fut: F) -> Result<F::Output, JobError> {
        tokio::select! {
            biased;
            _ = self.shared.token.cancelled() => Err(JobError::Cancelled),
            out = fut => Ok(out),
        }
    }

    /// Sleeps, unless the job is told to stop first.
    pub async fn sleep(&self, d: Duration) -> Result<(), JobError> {
        self.run(tokio::time::sleep(d)).await
    }

    /// Runs blocking work on tokio's blocking pool. The closure gets a [`JobUnit`] to check
    /// between units; a thread cannot be killed, so a closure that never checks runs on after
    /// the job was recorded as ended.
    pub async fn blocking<T, F>(&self, f: F) -> Result<T, JobError>
    where
        T: Send + 'static,
        F: FnOnce(&JobUnit) -> Result<T, JobError> + Send + 'static,
    {
        self.check()?;
        let unit = JobUnit {
            token: self.shared.token.clone(),
        };
        match tokio::task::spawn_blocking(move || f(&unit)).await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(JobError::Cancelled),
        }
    }

    /// Records progress. It is written to the store with the next heartbeat, at most every
    /// `progress_interval`, so `get_<tool>` and `tasks/get` show it; the latest value wins and
    /// the last one is written before the job's end. Non-finite numbers are ignored.
    pub fn progress(&self, done: f64, total: Option<f64>, message: Option<String>) {
        if !done.is_finite() || total.is_some_and(|t| !t.is_finite()) {
            return;
        }
        let p = json!({
            "progress": crate::view::number(done),
            "total": total.map(crate::view::number),
            "message": message,
        });
        self.shared.set_progress(p.to_string());
    }

    /// Saves a checkpoint durably now (a retry-safe job's next attempt reads it with
    /// [`JobContext::last_checkpoint`]). Fails with `Cancelled` when the lease is gone.
    pub async fn checkpoint(&self, value: impl Serialize) -> Result<(), JobError> {
        let v = serde_json::to_string(&value)
            .map_err(|e| JobError::failed(format!("the checkpoint is not JSON: {e}")))?;
        let l = &self.shared.lease;
        let progress = self.shared.take_progress();
        let hb = l
            .store
            .heartbeat(
                &self.shared.job_id,
                &l.owner,
                l.token,
                l.lease_ms,
                l.clock.now_ms(),
                progress.clone(),
                Some(v),
            )
            .await;
        match hb {
            Ok(hb) => {
                self.shared.apply(hb);
                if hb == Heartbeat::Lost {
                    return Err(JobError::Cancelled);
                }
                Ok(())
            }
            Err(e) => {
                if let Some(p) = progress {
                    self.shared.restore_progress(p);
                }
                Err(JobError::failed(format!(
                    "could not save the checkpoint: {e}"
                )))
            }
        }
    }
}
