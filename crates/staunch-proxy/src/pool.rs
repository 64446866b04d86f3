//! [`Pool`]: the connections of one upstream — one shared connection, or one per downstream
//! session (`--isolate`), which ends with its session — and, under the stop policy, one per
//! call or the session's own, retired after a cancel.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::HashMap;
use staunch_client::ConnectOptions;
use staunch_server::{Context, Metrics, ToolError};
use tokio::time::Instant;

use crate::ProxyError;
use crate::ledger::Ledger;
use crate::park::Lot;
use crate::spec::{Target, UpstreamSpec};
use crate::tasks::UpstreamTasks;
use crate::upstream::Upstream;

/// Per-session connections (`--isolate`): each with when it was last used.
type PerSession = Mutex<HashMap<String, (Arc<Upstream>, Instant)>>;

/// The upstream connections of one [`UpstreamSpec`].
///
/// With `isolate`, a session's connection ends when the session does (DELETE, expiry,
/// shutdown: [`Context::session_closed`]); [`Pool::reap_idle`] is the backstop for a
/// connection idle that long.
#[derive(Debug)]
pub struct Pool {
    spec: Arc<UpstreamSpec>,
    opts: ConnectOptions,
    metrics: Metrics,
    /// Calls whose upstream went on after their cancel, over all its connections.
    ledger: Arc<Ledger>,
    /// The shared connection; with `isolate`, the one that listed the tools at start (and
    /// serves stateless requests, which have no session).
    shared: Arc<Upstream>,
    per_session: Arc<PerSession>,
    /// Calls parked while their 2026 clients answer the upstream's questions.
    lot: Arc<Lot>,
    /// The upstream's tasks its 2025 clients hold (`crate::tasks`).
    tasks: Arc<UpstreamTasks>,
}

impl Pool {
    /// Connects the first (shared) upstream of `spec`.
    pub async fn start(
        spec: UpstreamSpec,
        opts: &ConnectOptions,
        metrics: &Metrics,
    ) -> Result<Arc<Self>, ProxyError> {
        let stops = spec.kill_after_cancel.is_some()
            || spec.tools.values().any(|r| r.kill_after_cancel.is_some());
        if let (true, Target::Http { url, .. }) = (stops, &spec.target) {
            return Err(ProxyError::StopPolicyNeedsCommand {
                upstream: spec.name.clone(),
                url: url.clone(),
            });
        }
        let spec = Arc::new(spec);
        let ledger = Arc::new(Ledger::default());
        let shared = Upstream::connect(spec.clone(), opts, metrics, ledger.clone()).await?;
        let lot = Arc::new(Lot::new(&spec.name, metrics.clone()));
        Ok(Arc::new(Self {
            spec,
            opts: opts.clone(),
            metrics: metrics.clone(),
            ledger,
            shared,
            per_session: Arc::default(),
            lot,
            tasks: Arc::default(),
        }))
    }

    /// The spec.
    pub fn spec(&self) -> &UpstreamSpec {
        &self.spec
    }

    /// Where its upstream work is counted.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Its recent calls whose upstream went on after their cancel (the live page's list).
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    /// Calls parked while their 2026 clients answer the upstream's questions.
    pub(crate) fn lot(&self) -> &Arc<Lot> {
        &self.lot
    }

    /// The upstream's tasks its 2025 clients hold.
    pub(crate) fn tasks(&self) -> &Arc<UpstreamTasks> {
        &self.tasks
    }

    /// The connection for `ctx`'s request ([`Pool::for_request`]) and its live client, or
    /// the request's error saying why there is none.
    pub(crate) async fn connection(
        &self,
        ctx: &Context,
    ) -> Result<(Arc<Upstream>, staunch_client::Client), ToolError> {
        let internal = |e: ProxyError| ToolError::Internal(e.to_string());
        let up = self.for_request(ctx).await.map_err(internal)?;
        let client = up.client().await.map_err(internal)?;
        Ok((up, client))
    }

    /// The shared connection.
    pub fn shared(&self) -> &Arc<Upstream> {
        &self.shared
    }

    /// A new connection — for a command upstream, a new process — for one call of a tool under
    /// the stop policy ([`UpstreamSpec::kill_after_cancel`]); the caller ends it.
    pub async fn for_one_call(&self) -> Result<Arc<Upstream>, ProxyError> {
        Upstream::connect(
            self.spec.clone(),
            &self.opts,
            &self.metrics,
            self.ledger.clone(),
        )
        .await
    }

    /// The connection that serves `ctx`: the shared one, or with `isolate` the session's own
    /// (made on its first call).
    pub async fn for_request(&self, ctx: &Context) -> Result<Arc<Upstream>, ProxyError> {
        let session = match (self.spec.isolate, ctx.owning_session()) {
            (true, Some(s)) => s.to_string(),
            _ => return Ok(self.shared.clone()),
        };
        let found = {
            let mut map = self.per_session.lock().unwrap_or_else(|p| p.into_inner());
            map.get_mut(&session).map(|(up, used)| {
                *used = Instant::now();
                up.clone()
            })
        };
        if let Some(up) = found {
            return Ok(up);
        }
        let up = Upstream::connect(
            self.spec.clone(),
            &self.opts,
            &self.metrics,
            self.ledger.clone(),
        )
        .await?;
        // Another call of the same session may have connected meanwhile: keep the first.
        let chosen = {
            let mut map = self.per_session.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(session.clone())
                .or_insert_with(|| (up.clone(), Instant::now()))
                .0
                .clone()
        };
        if !Arc::ptr_eq(&chosen, &up) {
            up.shut_down().await;
        } else if let Some(closed) = ctx.session_closed() {
            self.end_with_session(session, &up, closed);
        }
        Ok(chosen)
    }

    /// The stop policy with `isolate`: takes `up`, the process of `session`, out of service
    /// after a call of it that started at `since` was cancelled, so the session's next call
    /// gets a fresh one — unless another call is in flight on it or picked it since (it then
    /// serves on, and false is returned). The caller stops what it took.
    pub fn retire(&self, session: &str, up: &Arc<Upstream>, since: Instant) -> bool {
        let mut map = self.per_session.lock().unwrap_or_else(|p| p.into_inner());
        let Some((current, used)) = map.get(session) else {
            return false;
        };
        if !Arc::ptr_eq(current, up) || *used > since || up.calls().in_flight() > 0 {
            return false;
        }
        map.remove(session);
        true
    }

    /// Ends `up`, the connection of `session`, once `closed` (the session's end) completes —
    /// unless it was replaced or reaped meanwhile. Holds neither the pool nor the connection,
    /// so it keeps nothing alive.
    fn end_with_session(
        &self,
        session: String,
        up: &Arc<Upstream>,
        closed: impl Future<Output = ()> + Send + 'static,
    ) {
        let map = Arc::downgrade(&self.per_session);
        let up = Arc::downgrade(up);
        tokio::spawn(async move {
            closed.await;
            let (Some(map), Some(up)) = (map.upgrade(), up.upgrade()) else {
                return;
            };
            let ours = {
                let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
                let ours = map.get(&session).is_some_and(|(u, _)| Arc::ptr_eq(u, &up));
                if ours {
                    map.remove(&session);
                }
                ours
            };
            if ours {
                tracing::debug!(upstream = %up.name(), "upstream.session_ended");
                up.shut_down().await;
            }
        });
    }

    /// Ends per-session connections idle for `idle` with no call in flight.
    pub async fn reap_idle(&self, idle: Duration) -> usize {
        let gone: Vec<Arc<Upstream>> = {
            let mut map = self.per_session.lock().unwrap_or_else(|p| p.into_inner());
            let stale: Vec<String> = map
                .iter()
                .filter(|(_, (up, used))| used.elapsed() >= idle && up.calls().in_flight() == 0)
                .map(|(k, _)| k.clone())
                .collect();
            stale
                .iter()
                .filter_map(|k| map.remove(k).map(|(u, _)| u))
                .collect()
        };
        for up in &gone {
            up.shut_down().await;
        }
        gone.len()
    }

    /// How many per-session connections are open.
    pub fn sessions(&self) -> usize {
        self.per_session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Ends every connection.
    pub async fn shut_down(&self) {
        let all: Vec<Arc<Upstream>> = {
            let mut map = self.per_session.lock().unwrap_or_else(|p| p.into_inner());
            map.drain().map(|(_, (u, _))| u).collect()
        };
        for up in all {
            up.shut_down().await;
        }
        self.shared.shut_down().await;
    }
}
