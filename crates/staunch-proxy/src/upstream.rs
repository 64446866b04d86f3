//! [`Upstream`]: one supervised connection to an upstream server (its connections are
//! pooled in [`crate::pool`]).
//!
//! The connection is made at start (a proxy whose upstream cannot start refuses to start) and
//! again on the first call after the upstream went away, with exponential back-off between
//! attempts, so a crashing upstream is restarted without being hammered. Calls in flight when
//! it dies fail with a clear error (see [`crate::forward`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use staunch_client::{
    CallOptions, Client, ConnectOptions, NotificationHandler, PendingRequest, StderrMode,
};
use staunch_protocol::mcp::methods::SUBSCRIPTIONS_LISTEN;
use staunch_server::Metrics;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::ProxyError;
use crate::child::UpstreamChild;
use crate::ledger::Ledger;
use crate::route::Calls;
use crate::spec::{Target, UpstreamSpec};

/// First wait before reconnecting after a failure.
const BACKOFF_MIN: Duration = Duration::from_millis(250);
/// Longest wait between reconnection attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(30);

struct Connected {
    client: Client,
    child: Option<UpstreamChild>,
    /// A 2026 upstream's `subscriptions/listen` for its tool list (dropping it ends it).
    _listen: Option<PendingRequest>,
}

/// For a 2026-07-28 upstream that may change its tools, prompts or resources: a
/// `subscriptions/listen` asking for those list changes, whose notifications reach the
/// client's notification handler like a 2025 session's do. (A 2025 upstream over stdio sends them unasked; over HTTP it would send
/// them on a GET stream, which this client does not open.)
fn listen_for_tool_changes(client: &Client, name: &str) -> Option<PendingRequest> {
    let caps = &client.server().capabilities;
    let dynamic = |kind: &str| caps[kind]["listChanged"] == true;
    let wanted: serde_json::Map<String, serde_json::Value> = [
        ("tools", "toolsListChanged"),
        ("prompts", "promptsListChanged"),
        ("resources", "resourcesListChanged"),
    ]
    .into_iter()
    .filter(|(kind, _)| dynamic(kind))
    .map(|(_, key)| (key.to_string(), serde_json::Value::Bool(true)))
    .collect();
    if client.has_session() || wanted.is_empty() {
        return None;
    }
    let params = serde_json::json!({"notifications": wanted});
    match client.start_request(SUBSCRIPTIONS_LISTEN, Some(params), false) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(upstream = %name, error = %e,
                "cannot listen for the upstream's list changes");
            None
        }
    }
}

#[derive(Default)]
struct Backoff {
    failures: u32,
    last_failure: Option<Instant>,
}

impl Backoff {
    fn wait(&self) -> Duration {
        let Some(at) = self.last_failure else {
            return Duration::ZERO;
        };
        let exp = BACKOFF_MIN.saturating_mul(1 << self.failures.min(8));
        exp.min(BACKOFF_MAX).saturating_sub(at.elapsed())
    }
}

/// One upstream connection, restarted when it goes away.
pub struct Upstream {
    /// Unique among the connections this process made (a key that outlives no reuse).
    id: u64,
    spec: Arc<UpstreamSpec>,
    opts: ConnectOptions,
    calls: Arc<Calls>,
    live: tokio::sync::Mutex<Option<Connected>>,
    current: Mutex<Option<Client>>,
    backoff: Mutex<Backoff>,
    /// Woken by the upstream's `notifications/tools/list_changed`, and by a restart (the new
    /// process may serve other tools): [`crate::follow`] lists its tools again.
    tools_changed: Arc<tokio::sync::Notify>,
    /// The upstream's prompt and resource list changes, which [`crate::follow`] announces
    /// downstream (those lists are read from the upstream at each request).
    lists_changed: tokio::sync::broadcast::Sender<ListChanged>,
    /// The params of the upstream's `notifications/resources/updated`, which
    /// [`crate::subscriptions`] passes to the downstream subscribers of that resource.
    resource_updates: tokio::sync::broadcast::Sender<serde_json::Value>,
    /// The params of the upstream's `notifications/tasks/status` (a 2026 upstream's
    /// `notifications/tasks`), which [`crate::tasks`] passes to whoever holds the task.
    task_statuses: tokio::sync::broadcast::Sender<serde_json::Value>,
    /// The number of restarts, published after each one: what the upstream was told (its
    /// resource subscriptions) is told again to the new process or connection.
    reconnected: tokio::sync::watch::Sender<u64>,
}

/// A list of the upstream's, besides its tools, that it says changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListChanged {
    /// `notifications/prompts/list_changed`.
    Prompts,
    /// `notifications/resources/list_changed`.
    Resources,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Connects to `spec` (starting its process for a stdio target); its calls' late work is
    /// counted in `metrics` and listed in `ledger`.
    pub async fn connect(
        spec: Arc<UpstreamSpec>,
        base: &ConnectOptions,
        metrics: &Metrics,
        ledger: Arc<Ledger>,
    ) -> Result<Arc<Self>, ProxyError> {
        let calls = Calls::new(&spec.name, metrics.clone(), ledger);
        let mut opts = base.clone();
        opts.server_requests = Some(calls.server_request_handler());
        opts.stderr = StderrMode::Inherit;
        let tools_changed = Arc::new(tokio::sync::Notify::new());
        let wake = tools_changed.clone();
        let logs = calls.clone();
        let (lists_changed, _) = tokio::sync::broadcast::channel(16);
        let lists = lists_changed.clone();
        let (resource_updates, _) = tokio::sync::broadcast::channel(64);
        let updates = resource_updates.clone();
        let (task_statuses, _) = tokio::sync::broadcast::channel(64);
        let statuses = task_statuses.clone();
        opts.notifications = Some(NotificationHandler::new(
            move |method, params| match method {
                "notifications/tools/list_changed" => wake.notify_one(),
                "notifications/message" => logs.forward_log(params),
                "notifications/prompts/list_changed" => {
                    let _ = lists.send(ListChanged::Prompts);
                }
                "notifications/resources/list_changed" => {
                    let _ = lists.send(ListChanged::Resources);
                }
                "notifications/resources/updated" => {
                    if let Some(p) = params {
                        let _ = updates.send(p.clone());
                    }
                }
                // A 2025 upstream's status note, or a 2026 upstream's whole task on a listen.
                "notifications/tasks/status" | "notifications/tasks" => {
                    if let Some(p) = params {
                        let _ = statuses.send(p.clone());
                    }
                }
                _ => {}
            },
        ));
        if let Target::Http { headers, .. } = &spec.target {
            opts.http.headers.extend(headers.iter().cloned());
            // A 2025 server sends its list changes and the log messages of no request on the
            // session's standalone stream, which is only there once the client opens it.
            opts.http.listen = true;
        }
        if let Some(p) = &spec.protocol {
            let (era, version) =
                staunch_client::EraChoice::parse(p).map_err(|message| ProxyError::Protocol {
                    upstream: spec.name.clone(),
                    message,
                })?;
            opts.era = era;
            if let Some(v) = version {
                opts.protocol_version = v;
            }
        }
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let up = Arc::new(Self {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            spec,
            opts,
            calls,
            live: tokio::sync::Mutex::new(None),
            current: Mutex::new(None),
            backoff: Mutex::default(),
            tools_changed,
            lists_changed,
            resource_updates,
            task_statuses,
            reconnected: tokio::sync::watch::Sender::new(0),
        });
        up.client().await?;
        Ok(up)
    }

    /// This connection's id, unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The upstream's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// What it fronts.
    pub fn spec(&self) -> &UpstreamSpec {
        &self.spec
    }

    /// The call table (routing and late logging).
    pub fn calls(&self) -> &Arc<Calls> {
        &self.calls
    }

    /// Woken when the upstream's tool list may have changed.
    pub fn tools_changed(&self) -> &Arc<tokio::sync::Notify> {
        &self.tools_changed
    }

    /// The upstream's prompt and resource list changes, from now on.
    pub fn lists_changed(&self) -> tokio::sync::broadcast::Receiver<ListChanged> {
        self.lists_changed.subscribe()
    }

    /// The params of each `notifications/resources/updated` the upstream sends, from now on.
    pub fn resource_updates(&self) -> tokio::sync::broadcast::Receiver<serde_json::Value> {
        self.resource_updates.subscribe()
    }

    /// The params of each `notifications/tasks/status` the upstream sends, from now on.
    pub fn task_statuses(&self) -> tokio::sync::broadcast::Receiver<serde_json::Value> {
        self.task_statuses.subscribe()
    }

    /// Changes after each restart of the connection (its value: the restarts so far).
    pub fn reconnected(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reconnected.subscribe()
    }

    /// How many times the connection was made again after the first.
    pub fn restarts(&self) -> u64 {
        *self.reconnected.borrow()
    }

    /// The process id of a stdio upstream's current process.
    pub async fn pid(&self) -> Option<u32> {
        self.live
            .lock()
            .await
            .as_ref()
            .and_then(|l| l.child.as_ref().map(UpstreamChild::pid))
    }

    /// The capabilities the upstream declared (`None` while it is down).
    pub fn capabilities(&self) -> Option<serde_json::Value> {
        self.current().map(|c| c.server().capabilities.clone())
    }

    /// The protocol version spoken with it (`None` while it is down).
    pub fn protocol_version(&self) -> Option<String> {
        self.current().map(|c| c.server().protocol_version.clone())
    }

    /// Whether it runs tool calls as 2025-11-25 tasks (`false` while it is down).
    pub fn runs_tool_tasks(&self) -> bool {
        self.current()
            .is_some_and(|c| c.server().supports_tool_tasks())
    }

    /// Whether it offers the 2026-07-28 tasks extension (`false` while it is down).
    pub fn offers_tasks_extension(&self) -> bool {
        self.current().is_some_and(|c| c.offers_tasks_extension())
    }

    /// Whether it runs tasks in either era's way.
    pub fn runs_tasks(&self) -> bool {
        self.current().is_some_and(|c| c.runs_tasks())
    }

    fn current(&self) -> Option<Client> {
        let c = self.current.lock().unwrap_or_else(|p| p.into_inner());
        c.as_ref().filter(|c| !c.is_closed()).cloned()
    }

    /// The live connection, made again (after the back-off) if it went away.
    pub async fn client(&self) -> Result<Client, ProxyError> {
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let mut live = self.live.lock().await;
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let had_one = live.is_some();
        if let Some(old) = live.take() {
            // Reap what is left of the old process (it normally exited already).
            if let Some(child) = &old.child {
                child.shut_down(&old.client).await;
            }
        }
        let wait = self
            .backoff
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .wait();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let made = match &self.spec.target {
            Target::Stdio {
                program,
                args,
                env,
                cwd,
            } => {
                let display = self.spec.target.display();
                let cmd = crate::child::Command {
                    program,
                    args,
                    env,
                    cwd: cwd.as_deref(),
                    display: &display,
                };
                crate::child::start(&self.spec.name, cmd, &self.opts)
                    .await
                    .map(|(c, child)| (c, Some(child)))
            }
            Target::Http { url, .. } => Client::connect_http(url, &self.opts)
                .await
                .map(|c| (c, None))
                .map_err(|source| ProxyError::Connect {
                    upstream: self.spec.name.clone(),
                    source,
                }),
        };
        let mut backoff = self.backoff.lock().unwrap_or_else(|p| p.into_inner());
        match made {
            Ok((client, child)) => {
                *backoff = Backoff::default();
                drop(backoff);
                if had_one {
                    tracing::warn!(upstream = %self.spec.name, "upstream.restarted");
                    self.tools_changed.notify_one();
                }
                let mut late = client.late_feed();
                let calls = self.calls.clone();
                tokio::spawn(async move {
                    while let Some(l) = late.recv().await {
                        calls.log_late(&l);
                    }
                });
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(client.clone());
                if had_one {
                    // Counted once the new connection is current: whoever hears of it talks
                    // to the new one.
                    self.reconnected.send_modify(|n| *n += 1);
                }
                *live = Some(Connected {
                    _listen: listen_for_tool_changes(&client, &self.spec.name),
                    client: client.clone(),
                    child,
                });
                Ok(client)
            }
            Err(e) => {
                backoff.failures += 1;
                backoff.last_failure = Some(Instant::now());
                Err(e)
            }
        }
    }

    /// The stop policy's end of a connection whose only call was cancelled: stdin closed,
    /// `grace` to exit, then the process group killed. `Some(killed)` for a process, `None`
    /// for an HTTP upstream (nothing to stop).
    pub async fn stop_after_cancel(&self, grace: Duration) -> Option<bool> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let old = self.live.lock().await.take()?;
        match &old.child {
            Some(child) => Some(child.stop(&old.client, grace).await),
            None => {
                old.client.close().await;
                None
            }
        }
    }

    /// Ends the connection (the spec's stdio shutdown for a process).
    pub async fn shut_down(&self) {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(old) = self.live.lock().await.take() {
            match &old.child {
                Some(child) => child.shut_down(&old.client).await,
                None => old.client.close().await,
            }
        }
    }
}

/// How a request to an upstream waits: no timeout of the proxy's own (the downstream request's
/// deadline and cancel rule apply, through `cancel`), progress only when wanted.
pub(crate) fn request_options(progress: bool, cancel: CancellationToken) -> CallOptions {
    CallOptions {
        timeout: None,
        reset_on_progress: false,
        max_total: None,
        progress,
        cancel: Some(cancel),
    }
}

/// The connections something follows (their notifications, their restarts), by
/// [`Upstream::id`]: each is followed once, for as long as it lives.
#[derive(Debug, Default)]
pub(crate) struct Followed(Mutex<HashSet<u64>>);

impl Followed {
    /// Whether `up` is not followed yet (then it is, from now on).
    pub(crate) fn start(&self, up: &Upstream) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(up.id())
    }

    /// The connection `id` is no longer followed (it is gone).
    pub(crate) fn end(&self, id: u64) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }
}
