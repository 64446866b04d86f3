//! The reaper, run by every instance (it is idempotent, so no leader is needed): running jobs
//! whose lease expired end as `cancelled` (a cancel was asked for), go back to the queue
//! (retry-safe with attempts left) or end `failed(lease_lost)`; finished jobs past their
//! retention are deleted and expired idempotency keys released.

use std::sync::Arc;

use staunch_store::{JobState, ReapedJob};

use crate::error::JobRuntimeError;
use crate::state::Inner;

/// What one reaper pass did.
#[derive(Debug, Clone, Default)]
pub struct ReapReport {
    /// Jobs whose lease had expired, and where each went.
    pub reaped: Vec<ReapedJob>,
    /// Finished jobs deleted after their retention.
    pub purged: u64,
}

/// Upper bound of reaper statements per pass, so one pass cannot monopolise the store.
const MAX_BATCHES: usize = 50;

pub(crate) async fn reaper_loop(inner: Arc<Inner>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(inner.config.reap_interval) => {}
            _ = inner.shutdown.cancelled() => return,
        }
        if let Err(e) = inner.reap_once().await {
            tracing::warn!(error = %e, "job reaper pass failed");
        }
        inner.sweep_watchers().await;
    }
}

impl Inner {
    pub(crate) async fn reap_once(&self) -> Result<ReapReport, JobRuntimeError> {
        let now = self.config.clock.now_ms();
        let mut report = ReapReport::default();
        for _ in 0..MAX_BATCHES {
            let batch = self.store.reap_expired(now, self.config.reap_batch).await?;
            let n = batch.len();
            report.reaped.extend(batch);
            if n < self.config.reap_batch {
                break;
            }
        }
        for r in &report.reaped {
            tracing::warn!(job_id = %r.id, new_state = %r.new_state, "job.reaped: its lease expired");
            self.config.metrics.job_reaped(reap_action(r.new_state), 1);
        }
        if report
            .reaped
            .iter()
            .any(|r| r.new_state == JobState::Queued)
        {
            self.wake.notify_one();
        }
        for r in &report.reaped {
            self.job_changed(&r.id).await;
        }
        report.purged = self.store.purge(now).await?;
        self.config.metrics.job_reaped("purged", report.purged);
        Ok(report)
    }
}

/// The metric label of a job the reaper moved to `state`.
fn reap_action(state: JobState) -> &'static str {
    match state {
        JobState::Queued => "requeued",
        JobState::Cancelled => "cancelled",
        _ => "failed",
    }
}
