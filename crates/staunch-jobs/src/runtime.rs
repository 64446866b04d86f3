//! [`JobRuntime`]: one per process. It owns the instance's owner id, the registered job tools,
//! the jobs this process is running, and the background tasks (claim loop, signal router,
//! reaper) that [`JobRuntime::start`] spawns.
//!
//! At start a named instance ends the leases its previous incarnation held
//! (`release_owner(owner_prefix(name))`), so a restart resolves a crash at once instead of
//! after the lease. Owner ids carry a fresh random part per process, so a zombie of the old
//! process can never renew a lease the new one holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::Value;
use staunch_server::{Context, ListenHub, Notifier};
use staunch_store::{
    CancelOutcome, CreateOutcome, JobRecord, JobStore, NewJob, owner_id, owner_prefix,
};
use tokio::sync::{Notify, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::config::{JobConfig, ms};
use crate::context::StopReason;
use crate::declare::JobTool;
use crate::error::JobRuntimeError;
use crate::idempotency::{canonical_json, fingerprint};
use crate::reaper::ReapReport;
use crate::scope::OwnerScope;
use crate::state::{Inner, Waited, lock};

/// A request to start a job.
#[derive(Debug, Clone)]
pub struct Submit {
    /// Name of the job tool to run.
    pub tool: String,
    /// The arguments as a JSON object (without any idempotency key).
    pub args: Value,
    /// The caller's idempotency key, if it gave one.
    pub idempotency_key: Option<String>,
    /// The owner scope's key ([`OwnerScope::key`]): the principal, a session's scope, or ""
    /// for whoever holds the job's id. Idempotency keys and in-flight dedupe are scoped by it.
    pub principal: String,
    /// The HTTP session that asked, if any, as the lifecycle log names it
    /// ([`staunch_server::session_hash`]; the id itself is a credential): recorded so an
    /// operator can find the session's log lines, not used for access.
    pub session_id: Option<String>,
    /// Retention after the job ends (default: the runtime's `job_ttl`).
    pub ttl: Option<Duration>,
    /// The W3C `traceparent` of the request span that started the job; its attempt spans
    /// link to it.
    pub trace_parent: Option<String>,
}

impl Submit {
    /// A job of `tool` with these arguments and nothing else set.
    pub fn new(tool: impl Into<String>, args: Value) -> Self {
        Self {
            tool: tool.into(),
            args,
            idempotency_key: None,
            principal: String::new(),
            session_id: None,
            ttl: None,
            trace_parent: None,
        }
    }

    /// With an idempotency key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// The answer to [`JobRuntime::submit`].
#[derive(Debug, Clone)]
pub struct Submitted {
    /// The job as recorded (durable by the time this is returned).
    pub job: JobRecord,
    /// False when an idempotency key or in-flight dedupe pointed at an existing job.
    pub created: bool,
}

/// The job runtime of one process. Cheap to clone.
#[derive(Clone)]
pub struct JobRuntime {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for JobRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRuntime")
            .field("owner", &self.inner.owner)
            .field("running", &self.running_jobs())
            .finish()
    }
}

fn random_name() -> String {
    let mut b = [0u8; 8];
    // Without OS randomness two anonymous instances could share a name and release each
    // other's leases; refusing to run is better than that.
    getrandom::fill(&mut b).expect("the OS random number generator failed");
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("anon-{hex}")
}

impl JobRuntime {
    /// A runtime on `store`. Nothing runs until [`JobRuntime::start`].
    pub fn new(store: Arc<dyn JobStore>, config: JobConfig) -> Result<Self, JobRuntimeError> {
        config.validate()?;
        let (instance, named) = match &config.instance_name {
            Some(n) => (n.clone(), true),
            None => (random_name(), false),
        };
        let owner = owner_id(&instance);
        let workers = config.workers;
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                config,
                owner,
                instance,
                named,
                tools: RwLock::new(HashMap::new()),
                running: Mutex::new(HashMap::new()),
                ended: Notify::new(),
                wake: Notify::new(),
                changed: watch::channel(0).0,
                shutdown: CancellationToken::new(),
                started: AtomicBool::new(false),
                background: Mutex::new(Vec::new()),
                slots: Arc::new(Semaphore::new(workers)),
                watchers: Mutex::new(HashMap::new()),
                listen: Mutex::new(None),
                announcing: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// This process's owner id (`"{instance}/{random}"`).
    pub fn owner_id(&self) -> &str {
        &self.inner.owner
    }

    /// The instance name (random `anon-…` when none was configured).
    pub fn instance_name(&self) -> &str {
        &self.inner.instance
    }

    /// The configuration.
    pub fn config(&self) -> &JobConfig {
        &self.inner.config
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.inner.store
    }

    /// Makes a job tool runnable by this runtime, without adding any faces to a server (use
    /// [`JobRuntime::register`] for that). Jobs of tools not added here are never claimed by
    /// this instance.
    pub fn add_tool(&self, tool: JobTool) -> Arc<JobTool> {
        let tool = Arc::new(tool);
        self.inner
            .tools
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tool.name.clone(), tool.clone());
        self.inner.wake.notify_one();
        tool
    }

    /// Starts the background tasks: releases the leases of this instance's previous
    /// incarnation (named instances only), then runs the claim loop, the signal router and
    /// the reaper until [`JobRuntime::shutdown`]. Calling it again does nothing.
    pub async fn start(&self) -> Result<(), JobRuntimeError> {
        if self.inner.started.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        if self.inner.named {
            let prefix = owner_prefix(&self.inner.instance);
            let released = self
                .inner
                .store
                .release_owner(&prefix, self.inner.config.clock.now_ms())
                .await?;
            for r in &released {
                tracing::warn!(
                    job_id = %r.id,
                    new_state = %r.new_state,
                    instance = %self.inner.instance,
                    "job.released: its previous run of this instance stopped while it ran"
                );
            }
        }
        let inner = &self.inner;
        let tasks = vec![
            tokio::spawn(crate::worker::claim_loop(inner.clone())),
            tokio::spawn(crate::signals::route_signals(inner.clone())),
            tokio::spawn(crate::reaper::reaper_loop(inner.clone())),
        ];
        lock(&inner.background).extend(tasks);
        Ok(())
    }

    /// Records a new job (or finds the one its idempotency key or in-flight dedupe points
    /// at). Arguments are validated first; nothing is written when they do not fit. The
    /// returned job is durable.
    pub async fn submit(&self, s: Submit) -> Result<Submitted, JobRuntimeError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(JobRuntimeError::ShuttingDown);
        }
        let tool = self
            .inner
            .tool(&s.tool)
            .ok_or_else(|| JobRuntimeError::UnknownTool(s.tool.clone()))?;
        if let Some(k) = &s.idempotency_key {
            crate::idempotency::check_key(k)?;
        }
        let args = tool
            .body
            .normalize(s.args)
            .map_err(JobRuntimeError::InvalidArguments)?;
        let args_json = canonical_json(&args);
        let cfg = &self.inner.config;
        let mut job = NewJob::new(
            s.principal,
            tool.name.clone(),
            args_json.clone(),
            fingerprint(&args_json),
            cfg.clock.now_ms(),
        );
        job.session_id = s.session_id;
        job.trace_parent = s.trace_parent;
        job.idem_ttl_ms = ms(cfg.idempotency_ttl);
        job.retry_safe = tool.retry_safe;
        job.max_attempts = tool.attempts(cfg.retry_attempts);
        job.ttl_ms = ms(s.ttl.unwrap_or(cfg.job_ttl));
        // An explicit key decides on its own (a new key is a new job); dedupe is the safety
        // net for callers that send none.
        job.dedupe_inflight = s.idempotency_key.is_none()
            && tool
                .dedupe_inflight
                .unwrap_or(cfg.dedupe_inflight && tool.side_effects);
        job.idem_key = s.idempotency_key.clone();
        job.max_active = cfg.max_active_per_owner;
        // Fault injection, debug builds only (compiled out of release builds): a keyed start
        // records a second job for its key (under another owner, which the store's unique
        // index allows), so that the chaos driver can be shown to report a doubled start
        // (benches/chaos/tests/detects.rs).
        #[cfg(debug_assertions)]
        let double = (job.idem_key.is_some() && staunch_server::fault_injected("double_start"))
            .then(|| NewJob {
                principal: format!("{}#injected-double", job.principal),
                ..job.clone()
            });
        match self.inner.store.create(job).await? {
            CreateOutcome::Created(job) => {
                #[cfg(debug_assertions)]
                if let Some(double) = double {
                    let _ = self.inner.store.create(double).await;
                }
                tracing::info!(job_id = %job.id, tool = %job.tool, "job.created");
                self.inner.wake.notify_one();
                Ok(Submitted { job, created: true })
            }
            CreateOutcome::Existing(job) => {
                self.inner.config.metrics.idempotency_hit();
                Ok(Submitted {
                    job,
                    created: false,
                })
            }
            CreateOutcome::KeyReused { existing_job_id } => Err(JobRuntimeError::KeyReused {
                key: s.idempotency_key.unwrap_or_default(),
                existing_job_id,
            }),
            CreateOutcome::TooManyActive { limit } => {
                tracing::warn!(tool = %tool.name, limit, "job refused: too many active jobs for its owner");
                Err(JobRuntimeError::TooManyActive { limit })
            }
        }
    }

    /// The job's row.
    pub async fn get(&self, id: &str) -> Result<Option<JobRecord>, JobRuntimeError> {
        Ok(self.inner.store.get(id).await?)
    }

    /// Cancels a queued job, asks a running one to stop (delivered at once when it runs in
    /// this process, through the store's signals or its next heartbeat otherwise), leaves a
    /// finished one alone. The caller checks who may cancel it.
    pub async fn cancel(&self, id: &str, by: &str) -> Result<CancelOutcome, JobRuntimeError> {
        let out = self
            .inner
            .store
            .request_cancel(id, by, self.inner.config.clock.now_ms())
            .await?;
        match &out {
            CancelOutcome::Requested(_) => {
                self.inner.deliver_cancel(id);
                self.inner.job_changed(id).await;
            }
            CancelOutcome::CancelledQueued(_) => self.inner.job_changed(id).await,
            CancelOutcome::AlreadyTerminal(_) | CancelOutcome::NotFound => {}
        }
        Ok(out)
    }

    /// Waits (without limit: wrap it in a timeout) until the job is in a terminal state.
    /// `None` if it does not exist.
    pub async fn wait_terminal(&self, id: &str) -> Result<Option<JobRecord>, JobRuntimeError> {
        let never = CancellationToken::new();
        match self
            .inner
            .wait_for(id, |j| j.state.is_terminal(), &never, |_| {})
            .await?
        {
            Waited::Done(j) => Ok(Some(*j)),
            Waited::Gone | Waited::Stopped => Ok(None),
        }
    }

    /// One reaper pass now: expired leases are ended (or re-queued), old jobs purged.
    pub async fn reap_once(&self) -> Result<ReapReport, JobRuntimeError> {
        self.inner.reap_once().await
    }

    /// Job bodies running in this process.
    pub fn running_jobs(&self) -> usize {
        lock(&self.inner.running).len()
    }

    /// Stops the runtime: no more claims; running jobs get `drain` to finish on their own,
    /// then are told to stop (and get the cancel grace); what still holds a lease after that
    /// is released like a crash would be (retry-safe jobs go back to the queue for another
    /// instance, the others end `failed(lease_lost)`), instead of waiting for the lease.
    pub async fn shutdown(&self, drain: Duration) {
        let inner = &self.inner;
        if inner.shutdown.is_cancelled() {
            return;
        }
        inner.shutdown.cancel();
        let tasks = std::mem::take(&mut *lock(&inner.background));
        for t in tasks {
            let _ = t.await;
        }
        if !inner.wait_idle(drain).await {
            for run in lock(&inner.running).values() {
                run.stop(StopReason::Shutdown);
            }
            inner
                .wait_idle(inner.config.cancel_grace + Duration::from_secs(1))
                .await;
        }
        match inner
            .store
            .release_owner(&inner.owner, inner.config.clock.now_ms())
            .await
        {
            Ok(released) => {
                for r in released {
                    tracing::warn!(job_id = %r.id, new_state = %r.new_state, "job.released at shutdown");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not release leases at shutdown"),
        }
    }

    /// Who is calling, when requests carry an auth context.
    pub(crate) fn principal_of(&self, ctx: &Context) -> Option<String> {
        self.inner.config.principal.as_ref().and_then(|f| f(ctx))
    }

    /// Who the work a request starts belongs to (see [`OwnerScope`]).
    pub fn scope_of(&self, ctx: &Context) -> OwnerScope {
        OwnerScope::of(self.principal_of(ctx), ctx)
    }

    /// Whether the caller of `ctx` may see `job` (through any face): the job is of a tool
    /// this runtime serves, and of the caller's owner scope.
    pub(crate) fn visible_to(&self, job: &JobRecord, ctx: &Context) -> bool {
        self.tool(&job.tool).is_some() && self.scope_of(ctx).owns(job, ctx)
    }

    /// The registered job tool of this name.
    pub(crate) fn tool(&self, name: &str) -> Option<Arc<JobTool>> {
        self.inner.tool(name)
    }

    /// Tells `notifier`'s session when this task reaches a terminal status.
    pub(crate) fn watch_task(&self, id: &str, notifier: Notifier) {
        lock(&self.inner.watchers).insert(id.to_string(), notifier);
    }

    /// Announces this runtime's task changes on `hub` (done by `register`).
    pub(crate) fn set_listen_hub(&self, hub: ListenHub) {
        *lock(&self.inner.listen) = Some(hub);
    }

    pub(crate) fn poll_after_ms(&self) -> u64 {
        u64::try_from(self.inner.config.poll_after.as_millis()).unwrap_or(u64::MAX)
    }
}
