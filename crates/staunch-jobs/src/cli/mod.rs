//! The job runtime on the command line (the `cli` feature): its settings as flags
//! ([`JobArgs`], which `staunch serve` flattens into its own, and so can any binary that embeds
//! the runtime; each default is [`JobConfig::default`]'s), and the operator's `staunch jobs`
//! ([`JobsArgs`], [`run`]) that lists, shows, cancels and purges the jobs in a store.

mod command;
mod table;

pub use command::{JobsArgs, JobsCommand, ListArgs, run};

use std::time::Duration;

use clap::Args;
use staunch_server::cli::heading::{JOBS, LIMITS, STORE};
use staunch_server::cli::{millis, parse_at_least_one, parse_millis, parse_secs, secs};

use crate::JobConfig;

/// Flags of the job runtime ([`JobConfig`]).
#[derive(Debug, Clone, Args)]
pub struct JobArgs {
    /// Stable name of this instance (e.g. the host name), unique among those sharing a store.
    ///
    /// With it, a restart at once ends the jobs its previous run left running (side-effecting
    /// ones as failed(lease_lost), retry-safe ones re-queued); without it they end when their
    /// lease expires.
    #[arg(
        long,
        env = "STAUNCH_INSTANCE_NAME",
        value_name = "NAME",
        help_heading = STORE
    )]
    pub instance_name: Option<String>,

    /// How long a job's claim holds without a heartbeat, in ms.
    ///
    /// A job whose process died is resolved about this long (plus one reaper interval) later.
    #[arg(
        long,
        default_value_t = millis(JobConfig::default().lease),
        env = "STAUNCH_JOB_LEASE_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = JOBS,
        value_parser = parse_millis
    )]
    pub job_lease_ms: u64,
    /// How often a running job renews its lease and learns about cancels, in ms.
    ///
    /// Default: a third of the lease.
    #[arg(
        long,
        env = "STAUNCH_JOB_HEARTBEAT_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = JOBS,
        value_parser = parse_millis
    )]
    pub job_heartbeat_ms: Option<u64>,
    /// How often the reaper ends jobs with expired leases and purges old jobs, in ms.
    #[arg(
        long,
        default_value_t = millis(JobConfig::default().reap_interval),
        env = "STAUNCH_JOB_REAP_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = JOBS,
        value_parser = parse_millis
    )]
    pub job_reap_ms: u64,
    /// How often idle workers look for queued jobs, in ms.
    ///
    /// Wake-up signals make it faster; this is the backstop.
    #[arg(
        long,
        default_value_t = millis(JobConfig::default().claim_poll),
        env = "STAUNCH_JOB_CLAIM_POLL_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = JOBS,
        value_parser = parse_millis
    )]
    pub job_claim_poll_ms: u64,
    /// The polling interval suggested to clients (`poll_after_ms`, task `pollInterval`), in ms.
    #[arg(
        long,
        default_value_t = millis(JobConfig::default().poll_after),
        env = "STAUNCH_JOB_POLL_AFTER_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = JOBS,
        value_parser = parse_millis
    )]
    pub job_poll_after_ms: u64,
    /// How long a job body may run after its cancel before it is aborted, in ms.
    #[arg(
        long,
        default_value_t = millis(JobConfig::default().cancel_grace),
        env = "STAUNCH_JOB_CANCEL_GRACE_MS",
        value_name = "MS",
        help_heading = JOBS,
        value_parser = parse_millis
    )]
    pub job_cancel_grace_ms: u64,
    /// Longest a job may run per attempt, in seconds.
    #[arg(
        long,
        default_value_t = secs(JobConfig::default().max_runtime),
        env = "STAUNCH_JOB_MAX_RUNTIME_SECS",
        value_name = "SECS",
        help_heading = JOBS,
        value_parser = parse_secs
    )]
    pub job_max_runtime_secs: u64,
    /// Job bodies this instance runs at once.
    #[arg(
        long,
        default_value_t = JobConfig::default().workers,
        env = "STAUNCH_JOB_WORKERS",
        value_name = "N",
        value_parser = parse_at_least_one,
        help_heading = JOBS
    )]
    pub job_workers: usize,
    /// How long finished jobs are kept (and answered by get_x / tasks/get), in seconds.
    #[arg(
        long,
        default_value_t = secs(JobConfig::default().job_ttl),
        env = "STAUNCH_JOB_TTL_SECS",
        value_name = "SECS",
        help_heading = JOBS,
        value_parser = parse_secs
    )]
    pub job_ttl_secs: u64,
    /// How long idempotency keys are honoured, in seconds.
    #[arg(
        long,
        default_value_t = secs(JobConfig::default().idempotency_ttl),
        env = "STAUNCH_IDEMPOTENCY_TTL_SECS",
        value_name = "SECS",
        help_heading = JOBS,
        value_parser = parse_secs
    )]
    pub idempotency_ttl_secs: u64,
    /// Join an identical running call of a side-effecting job tool that carries no key.
    ///
    /// Agents re-call after a dropped stream; with this on, the re-call joins the job that is
    /// still running instead of starting a second one.
    #[arg(
        long,
        default_value_t = JobConfig::default().dedupe_inflight,
        action = clap::ArgAction::Set,
        env = "STAUNCH_DEDUPE_INFLIGHT",
        value_name = "BOOL",
        hide_short_help = true,
        help_heading = JOBS
    )]
    pub dedupe_inflight: bool,
    /// Jobs one owner may have queued or running (0: no limit).
    ///
    /// The owner is the principal, the session, or the id holders; one more start is refused
    /// with a message saying so.
    #[arg(
        long,
        default_value_t = JobConfig::default().max_active_per_owner.unwrap_or(0),
        env = "STAUNCH_JOB_MAX_ACTIVE_PER_OWNER",
        value_name = "N",
        help_heading = LIMITS
    )]
    pub job_max_active_per_owner: u64,
    /// Jobs one owner may have running at once, across instances sharing the store.
    ///
    /// Its next job waits while other owners' jobs run. 0: three quarters of --job-workers (at
    /// least one), so one owner's long jobs always leave a worker for others.
    #[arg(
        long,
        default_value_t = JobConfig::default().max_running_per_owner.unwrap_or(0),
        env = "STAUNCH_JOB_MAX_RUNNING_PER_OWNER",
        value_name = "N",
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub job_max_running_per_owner: u64,
}

impl JobArgs {
    /// The job runtime's settings (metrics, traces and the principal hook are the caller's).
    pub fn config(&self) -> JobConfig {
        JobConfig {
            instance_name: self.instance_name.clone(),
            lease: Duration::from_millis(self.job_lease_ms),
            heartbeat: self.job_heartbeat_ms.map(Duration::from_millis),
            reap_interval: Duration::from_millis(self.job_reap_ms),
            claim_poll: Duration::from_millis(self.job_claim_poll_ms),
            poll_after: Duration::from_millis(self.job_poll_after_ms),
            cancel_grace: Duration::from_millis(self.job_cancel_grace_ms),
            max_runtime: Duration::from_secs(self.job_max_runtime_secs),
            workers: self.job_workers,
            job_ttl: Duration::from_secs(self.job_ttl_secs),
            idempotency_ttl: Duration::from_secs(self.idempotency_ttl_secs),
            dedupe_inflight: self.dedupe_inflight,
            // 0: no limit of its own (the runtime's default share for running jobs).
            max_active_per_owner: (self.job_max_active_per_owner > 0)
                .then_some(self.job_max_active_per_owner),
            max_running_per_owner: (self.job_max_running_per_owner > 0)
                .then_some(self.job_max_running_per_owner),
            ..JobConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        jobs: JobArgs,
    }

    fn config(words: &[&str]) -> JobConfig {
        Flags::try_parse_from(std::iter::once("serve").chain(words.iter().copied()))
            .expect("flags parse")
            .jobs
            .config()
    }

    /// No flag gives the library's default; a flag reaches its field in its unit.
    #[test]
    fn flags_default_to_the_librarys_settings() {
        let pick = |c: &JobConfig| {
            (
                c.lease,
                c.heartbeat,
                c.reap_interval,
                c.claim_poll,
                c.poll_after,
                c.cancel_grace,
                c.max_runtime,
                c.workers,
                c.job_ttl,
                c.idempotency_ttl,
                c.dedupe_inflight,
                (c.max_active_per_owner, c.max_running_per_owner),
            )
        };
        assert_eq!(pick(&config(&[])), pick(&JobConfig::default()));
        let set = config(&[
            "--job-lease-ms=1m",
            "--job-ttl-secs=7d",
            "--dedupe-inflight=false",
            "--job-max-active-per-owner=0",
            "--job-max-running-per-owner=2",
        ]);
        assert_eq!(set.lease, Duration::from_secs(60));
        assert_eq!(set.job_ttl, Duration::from_secs(7 * 86_400));
        assert!(!set.dedupe_inflight);
        assert_eq!(set.max_active_per_owner, None);
        assert_eq!(set.max_running_per_owner, Some(2));
    }
}
