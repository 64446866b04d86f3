//! [`JobConfig`]: leases, heartbeats, retention and limits of a [`crate::JobRuntime`], and the
//! [`Clock`] it reads time from.
//!
//! Every default suits an interactive agent: a lease short enough that a crashed job is
//! resolved within half a minute, retention long enough (24 h) that an agent coming back the
//! next morning still finds its job and its idempotency keys.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use staunch_server::{Context, Metrics, Traces};

use crate::error::JobRuntimeError;

/// Where the runtime reads the time (epoch milliseconds) it writes into the store. Tests use a
/// clock that runs ahead to make leases expire without sleeping.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> i64 + Send + Sync>);

impl Clock {
    /// The wall clock.
    pub fn system() -> Self {
        Self(Arc::new(staunch_store::now_ms))
    }

    /// Any function of nothing that returns epoch milliseconds.
    pub fn from_fn(f: impl Fn() -> i64 + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// The current time in epoch milliseconds.
    pub fn now_ms(&self) -> i64 {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Clock({})", self.now_ms())
    }
}

/// Who is calling, when requests carry an auth context. Returning `Some` binds jobs and tasks
/// to that principal (and enables `tasks/list`); `None` everywhere means "no auth context".
pub type PrincipalFn = Arc<dyn Fn(&Context) -> Option<String> + Send + Sync>;

/// Leases, heartbeats, retention and limits.
#[derive(Clone)]
pub struct JobConfig {
    /// Stable name of this instance (e.g. the host name). With a name, the runtime ends the
    /// leases its previous incarnation held at start instead of waiting for them to expire.
    /// It must be unique among live instances sharing a store. Without one, each process gets
    /// a random name and leftovers of a crash are ended by the reaper once their lease expires.
    pub instance_name: Option<String>,
    /// How long a claim holds without a heartbeat. A crashed job is resolved about this long
    /// (plus one reaper interval) after its process died.
    pub lease: Duration,
    /// How often a running job renews its lease and learns about cancel requests; `None`
    /// means a third of the lease.
    pub heartbeat: Option<Duration>,
    /// Progress is written to the store at most this often per job (in addition to every
    /// heartbeat), so `get` shows it without a write per unit.
    pub progress_interval: Duration,
    /// The claim loop's polling backstop: signals are only hints and can be lost.
    pub claim_poll: Duration,
    /// How often the reaper looks for expired leases and purges old jobs.
    pub reap_interval: Duration,
    /// Expired leases handled per reaper statement.
    pub reap_batch: usize,
    /// How long a body may run after its cancel before it is aborted (recorded as cancelled).
    pub cancel_grace: Duration,
    /// Longest a body may run (per attempt) before it is cancelled and recorded as
    /// `failed(max_runtime)`, so a hung unit cannot renew its lease forever. Tools may set
    /// their own.
    pub max_runtime: Duration,
    /// Job bodies run at once by this instance.
    pub workers: usize,
    /// How long a finished job is kept (and answered by `get`) after it ends.
    pub job_ttl: Duration,
    /// Upper bound of a task's `ttl` that a client may ask for.
    pub max_task_ttl: Duration,
    /// How long an idempotency key is honoured (at least 24 h is what clients expect).
    pub idempotency_ttl: Duration,
    /// Join an identical call (same tool, same arguments, same principal) of a side-effecting
    /// tool that is still queued or running, when the call carries no idempotency key. Agents
    /// re-call a tool after a dropped stream or a timeout without a key; this keeps that from
    /// running the work twice. An explicit key always decides on its own.
    pub dedupe_inflight: bool,
    /// Jobs one owner scope (principal, session, or the id holders) may have queued or
    /// running at once; one more start is refused. `None`: no limit.
    pub max_active_per_owner: Option<u64>,
    /// Jobs one owner may have running at once, across the instances sharing the store; its
    /// next job waits while other owners' jobs are claimed. `None`: three quarters of
    /// `workers` (at least one), so one owner's long jobs always leave workers for others.
    pub max_running_per_owner: Option<u64>,
    /// Attempts of a retry-safe tool that does not say otherwise.
    pub retry_attempts: u32,
    /// The polling interval suggested to clients (`poll_after_ms`, task `pollInterval`).
    pub poll_after: Duration,
    /// The time source.
    pub clock: Clock,
    /// Who is calling, where requests carry an auth context (none in `staunch serve` today).
    pub principal: Option<PrincipalFn>,
    /// Where lease losses, reaper actions and idempotency hits are counted (a no-op unless
    /// enabled; share the server's handle).
    pub metrics: Metrics,
    /// Where attempt spans go (a no-op unless enabled; share the server's handle).
    pub traces: Traces,
}

impl JobConfig {
    /// The per-owner cap on running jobs in force: the setting, else three quarters of the
    /// workers — a quarter (at least one) kept for other owners — and never below one.
    pub fn running_cap(&self) -> u64 {
        let workers = u64::try_from(self.workers).unwrap_or(u64::MAX).max(1);
        let cap = self
            .max_running_per_owner
            .unwrap_or_else(|| workers - (workers / 4).max(1).min(workers - 1));
        cap.max(1)
    }
}

impl Default for JobConfig {
    fn default() -> Self {
        Self {
            instance_name: None,
            lease: Duration::from_secs(30),
            heartbeat: None,
            progress_interval: Duration::from_millis(500),
            claim_poll: Duration::from_secs(1),
            reap_interval: Duration::from_secs(10),
            reap_batch: 100,
            cancel_grace: Duration::from_secs(5),
            max_runtime: Duration::from_secs(60 * 60),
            workers: 8,
            max_running_per_owner: None,
            job_ttl: Duration::from_secs(24 * 60 * 60),
            max_task_ttl: Duration::from_secs(7 * 24 * 60 * 60),
            idempotency_ttl: Duration::from_secs(24 * 60 * 60),
            dedupe_inflight: true,
            max_active_per_owner: Some(1000),
            retry_attempts: 3,
            poll_after: Duration::from_secs(1),
            clock: Clock::system(),
            principal: None,
            metrics: Metrics::disabled(),
            traces: Traces::disabled(),
        }
    }
}

impl fmt::Debug for JobConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobConfig")
            .field("instance_name", &self.instance_name)
            .field("lease", &self.lease)
            .field("heartbeat", &self.heartbeat_interval())
            .field("workers", &self.workers)
            .field("job_ttl", &self.job_ttl)
            .field("idempotency_ttl", &self.idempotency_ttl)
            .field("dedupe_inflight", &self.dedupe_inflight)
            .field("principal", &self.principal.is_some())
            .finish_non_exhaustive()
    }
}

impl JobConfig {
    /// The heartbeat period actually used.
    pub fn heartbeat_interval(&self) -> Duration {
        self.heartbeat.unwrap_or(self.lease / 3)
    }

    /// Checks the combinations that cannot work.
    pub fn validate(&self) -> Result<(), JobRuntimeError> {
        let bad = |m: &str| Err(JobRuntimeError::Config(m.to_string()));
        if let Some(name) = &self.instance_name
            && (name.is_empty() || name.contains('/'))
        {
            return bad("the instance name must be non-empty and must not contain '/'");
        }
        if self.lease < Duration::from_millis(30) {
            return bad("the lease must be at least 30 ms");
        }
        let hb = self.heartbeat_interval();
        if hb.is_zero() || hb >= self.lease {
            return bad("the heartbeat must be shorter than the lease (a third of it is usual)");
        }
        if self.workers == 0 {
            return bad("at least one worker is needed");
        }
        if self.retry_attempts == 0 {
            return bad("retry_attempts must be at least 1");
        }
        for (what, d) in [
            ("claim_poll", self.claim_poll),
            ("reap_interval", self.reap_interval),
            ("max_runtime", self.max_runtime),
            ("poll_after", self.poll_after),
        ] {
            if d.is_zero() {
                return Err(JobRuntimeError::Config(format!("{what} must not be zero")));
            }
        }
        if self.reap_batch == 0 {
            return bad("reap_batch must be at least 1");
        }
        Ok(())
    }
}

/// Milliseconds as the store wants them.
pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_cap_keeps_a_quarter_of_the_workers_for_other_owners() {
        let cap = |workers, set| {
            JobConfig {
                workers,
                max_running_per_owner: set,
                ..JobConfig::default()
            }
            .running_cap()
        };
        assert_eq!(
            [
                cap(1, None),
                cap(2, None),
                cap(4, None),
                cap(8, None),
                cap(16, None)
            ],
            [1, 1, 3, 6, 12]
        );
        assert_eq!(cap(8, Some(8)), 8, "the setting wins");
        assert_eq!(cap(8, Some(0)), 1, "never below one");
    }

    #[test]
    fn defaults_are_valid_and_bad_combinations_are_refused() {
        JobConfig::default().validate().unwrap();
        let c = JobConfig {
            heartbeat: Some(Duration::from_secs(30)),
            ..JobConfig::default()
        };
        assert!(matches!(c.validate(), Err(JobRuntimeError::Config(_))));
        let c = JobConfig {
            instance_name: Some("a/b".into()),
            ..JobConfig::default()
        };
        assert!(c.validate().is_err());
        let c = JobConfig {
            workers: 0,
            ..JobConfig::default()
        };
        assert!(c.validate().is_err());
    }
}
