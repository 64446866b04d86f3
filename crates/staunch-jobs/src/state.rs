//! The state a job runtime shares with its background tasks (claim loop, signal router,
//! reaper): the store, the registered tools, the jobs running here, the wake-ups. The runtime
//! (`runtime.rs`) is the public handle that starts those tasks; they see only this.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use staunch_server::{Change, ListenHub, Notifier};
use staunch_store::{JobRecord, JobStore};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::JobConfig;
use crate::context::{RunShared, StopReason};
use crate::declare::JobTool;
use crate::error::JobRuntimeError;
use crate::view;

/// How a wait for a job ended.
#[derive(Debug, Clone)]
pub(crate) enum Waited {
    Done(Box<JobRecord>),
    /// The job does not exist (any more).
    Gone,
    /// The waiter was cancelled.
    Stopped,
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn JobStore>,
    pub(crate) config: JobConfig,
    pub(crate) owner: String,
    pub(crate) instance: String,
    pub(crate) named: bool,
    pub(crate) tools: RwLock<HashMap<String, Arc<JobTool>>>,
    pub(crate) running: Mutex<HashMap<String, Arc<RunShared>>>,
    /// Notified whenever a running job ends.
    pub(crate) ended: Notify,
    /// Wakes the claim loop.
    pub(crate) wake: Notify,
    /// Bumped whenever a job changed in this process (progress written, finished,
    /// cancelled); waiters re-read their row. Other instances' changes are seen by polling.
    pub(crate) changed: watch::Sender<u64>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) started: AtomicBool,
    pub(crate) background: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) slots: Arc<Semaphore>,
    /// Sessions to tell about a task's end (`notifications/tasks/status`), by job id.
    pub(crate) watchers: Mutex<HashMap<String, Notifier>>,
    /// Where task changes go to `subscriptions/listen` streams (`notifications/tasks`), once
    /// the runtime is registered on a server.
    pub(crate) listen: Mutex<Option<ListenHub>>,
    /// Held while a task is read and announced (see `announce_task`).
    pub(crate) announcing: tokio::sync::Mutex<()>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Inner {
    pub(crate) fn tool(&self, name: &str) -> Option<Arc<JobTool>> {
        self.tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    pub(crate) fn tool_names(&self) -> Vec<String> {
        self.tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Stops the body of a job running in this process because its cancel was requested.
    pub(crate) fn deliver_cancel(&self, id: &str) {
        if let Some(run) = lock(&self.running).get(id) {
            tracing::info!(job_id = %id, "job.cancel delivered in-process");
            run.stop(StopReason::CancelRequested);
        }
    }

    /// Wakes the body of a job running in this process that waits for answers.
    pub(crate) fn deliver_input(&self, id: &str) {
        if let Some(run) = lock(&self.running).get(id) {
            run.input_wake.notify_one();
        }
    }

    pub(crate) fn bump_changed(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A job changed in this process: wake waiters, tell listen streams and a watching
    /// session, and tell the other instances (on PostgreSQL), whose listeners re-read it.
    pub(crate) async fn job_changed(&self, id: &str) {
        self.follow_change(id).await;
        if let Err(e) = self.store.notify_changed(id, &self.owner).await {
            // A hint only: other instances still see the change when they poll.
            tracing::debug!(job_id = %id, error = %e, "job change not signalled");
        }
    }

    /// A job changed (here, or on the instance a [`staunch_store::Signal::Changed`] came
    /// from): wake waiters, and re-read it for listen streams and a watching session.
    pub(crate) async fn follow_change(&self, id: &str) {
        self.bump_changed();
        self.announce_task(id).await;
        let Some(notifier) = lock(&self.watchers).get(id).cloned() else {
            return;
        };
        if let Ok(Some(job)) = self.store.get(id).await {
            self.notify_if_terminal(&job, &notifier);
        }
    }

    /// Re-reads every task a listen stream or a session watches: signals may have been
    /// missed (the store's signal connection came back, or this receiver lagged).
    pub(crate) async fn reread_watched(&self) {
        let watched = lock(&self.listen)
            .as_ref()
            .map(ListenHub::watched_tasks)
            .unwrap_or_default();
        for id in watched {
            self.announce_task(&id).await;
        }
        self.sweep_watchers().await;
    }

    /// `notifications/tasks` with the task's `DetailedTask`, for listen streams that asked for
    /// it; the hub passes on only what differs from what it last announced.
    async fn announce_task(&self, id: &str) {
        let Some(hub) = lock(&self.listen).clone().filter(|h| h.watches_task(id)) else {
            return;
        };
        // One read-and-announce at a time: a later read sees a newer row, so listeners hear
        // the changes in the order they were made, never an older status after a newer one.
        let _order = self.announcing.lock().await;
        let Ok(Some(job)) = self.store.get(id).await else {
            return;
        };
        let inputs = if job.state.is_terminal() {
            Vec::new()
        } else {
            self.store.inputs(id).await.unwrap_or_default()
        };
        let poll = u64::try_from(self.config.poll_after.as_millis()).unwrap_or(u64::MAX);
        hub.announce(Change::Task {
            id: id.to_string(),
            owner: job.principal.clone(),
            detail: crate::task_view::detailed_task(&job, &inputs, poll),
        });
    }

    fn notify_if_terminal(&self, job: &JobRecord, notifier: &Notifier) {
        if !view::task_terminal(job) {
            return;
        }
        lock(&self.watchers).remove(&job.id);
        let poll = u64::try_from(self.config.poll_after.as_millis()).unwrap_or(u64::MAX);
        notifier.notify("notifications/tasks/status", view::task_object(job, poll));
    }

    /// Tells watching sessions about tasks that ended elsewhere (another instance) and forgets
    /// watches whose job is gone.
    pub(crate) async fn sweep_watchers(&self) {
        let watched: Vec<(String, Notifier)> = lock(&self.watchers)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (id, notifier) in watched {
            match self.store.get(&id).await {
                Ok(Some(job)) => self.notify_if_terminal(&job, &notifier),
                Ok(None) => {
                    lock(&self.watchers).remove(&id);
                }
                Err(_) => {}
            }
        }
    }

    /// Re-reads the job until `done` holds, waking on in-process changes and polling for
    /// changes made elsewhere. `on_update` sees every row read.
    pub(crate) async fn wait_for(
        &self,
        id: &str,
        done: impl Fn(&JobRecord) -> bool,
        stop: &CancellationToken,
        mut on_update: impl FnMut(&JobRecord),
    ) -> Result<Waited, JobRuntimeError> {
        let poll = self.config.claim_poll.min(self.config.poll_after);
        loop {
            // Subscribe before reading, so a change between the read and the wait is seen.
            let mut rx = self.changed.subscribe();
            let Some(job) = self.store.get(id).await? else {
                return Ok(Waited::Gone);
            };
            on_update(&job);
            if done(&job) {
                return Ok(Waited::Done(Box::new(job)));
            }
            tokio::select! {
                _ = rx.changed() => {}
                _ = tokio::time::sleep(poll) => {}
                _ = stop.cancelled() => return Ok(Waited::Stopped),
            }
        }
    }

    /// Waits until no job runs in this process, at most `limit`. Returns whether it is idle.
    pub(crate) async fn wait_idle(&self, limit: Duration) -> bool {
        let end = tokio::time::Instant::now() + limit;
        loop {
            let ended = self.ended.notified();
            if lock(&self.running).is_empty() {
                return true;
            }
            if tokio::time::timeout_at(end, ended).await.is_err() {
                return lock(&self.running).is_empty();
            }
        }
    }
}
