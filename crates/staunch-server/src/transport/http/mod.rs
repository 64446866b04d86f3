//! Streamable HTTP, both protocol eras on one endpoint, decided per request: 2025 sessions
//! (2025-03-26 … 2025-11-25) where a dropped stream loses nothing, and 2026-07-28 stateless
//! requests where closing a request's stream is its cancel (`stateless`).
//!
//! In the session era, one endpoint (default `/mcp`): POST carries one client message (a request is answered with an
//! SSE stream whose first event primes the client with an id and a `retry`), GET opens the
//! standalone stream or resumes any stream with `Last-Event-ID`, DELETE ends the session and
//! cancels its requests.
//!
//! Every message a session sends goes through its `session::HttpSession` writer, which gives
//! it its event id, keeps it in the stream's in-memory tail, hands it to the live connection, if
//! any, and queues it for the [`EventStore`] (committed in batches a few ms later by
//! `batch`, which also says what a crash in that window loses). So a client that drops the
//! connection — or whose call finishes while it is away — gets everything after its last
//! event id when it comes back, exactly once. A disconnect is never a cancel in these
//! versions: only `notifications/cancelled`, DELETE or session expiry are.
//!
//! Modules: `accept` (connections, their cap and header timeout), `guard` (Host/Origin
//! allow-list), [`auth`] (bearer tokens, OAuth JWTs, RFC 9728 metadata; off by default),
//! `handlers` (the endpoint: routing, POST and DELETE), `admit` (the checks a request passes
//! before it is served, one function each), `lookup` (the session a request
//! names, adopted from the store), `initialize`, `get` (standalone streams and resumes),
//! `json_answer` and `plain` (answers without SSE), `stateless` (2026-07-28 requests) with
//! `answer_queue` (a request's messages on their way to its response, or to a session
//! stream's live connection: `live`), `session` (per-session routing and the writer), `sse` (event streams and error bodies),
//! `batch` (the write-behind queue), `peer_share` (stateless in-flight shares per peer).

mod accept;
mod admit;
mod answer_queue;
pub mod auth;
mod batch;
mod get;
mod guard;
mod handlers;
mod head;
mod health;
mod initialize;
mod json_answer;
mod live;
mod lookup;
mod metrics_listener;
mod peer_share;
mod plain;
mod session;
mod sse;
mod stateless;
mod stream_id;
mod writer;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::any;
use staunch_store::{EventStore, JobStore, SessionStore, Signal};

use crate::fast_map::FastMap;
use crate::registry::CancelReason;
use crate::server::Server;

pub use auth::{
    AuthConfig, AuthMethod, Authenticator, Identity, JwksSource, OAuthConfig, StaticTokens,
};
pub use batch::EventQueueStats;
pub use guard::Allow;
pub use health::HEALTH_PATH;
pub use metrics_listener::{ListenerConfig, bind_metrics, serve_metrics};

/// Settings of the HTTP transport.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// The one MCP endpoint.
    pub endpoint: String,
    /// Host/Origin allow-list (DNS-rebinding protection).
    pub allow: Allow,
    /// Largest accepted POST body, in bytes; larger ones get 413.
    pub max_body_bytes: usize,
    /// Open SSE connections per session; one more gets 429.
    pub max_streams_per_session: usize,
    /// Sessions at once; one more `initialize` gets 503.
    pub max_sessions: usize,
    /// A session with no request and no open connection for this long expires; its in-flight
    /// requests are cancelled.
    pub session_idle: Duration,
    /// The `retry` sent in the priming event: how long a client waits before reconnecting.
    pub sse_retry: Duration,
    /// Interval of SSE keep-alive comments on open streams.
    pub keep_alive: Duration,
    /// SEP-1699 polling: when set, the connection of a request's stream is closed this long
    /// after the priming event if the call is still running; the client resumes with
    /// `Last-Event-ID`.
    pub poll_after: Option<Duration>,
    /// Events older than this are dropped from the event store.
    pub event_max_age: Duration,
    /// At most this many events are kept per stream.
    pub event_max_per_stream: u64,
    /// Stateless era: how long a silent request's answer waits for its first message before
    /// the response becomes an SSE stream (whose keep-alives then detect a client that left).
    /// A request that answers sooner gets a plain JSON body, with an HTTP status that follows
    /// its error.
    pub stateless_hold: Duration,
    /// Stateless era: SSE keep-alive interval on a silent request's stream; a closed
    /// connection is noticed at the latest on the second write after it closed.
    pub keep_alive_stateless: Duration,
    /// Largest `capabilities` plus `clientInfo` (as JSON) an `initialize` may ask a session to
    /// keep; a larger one is refused with 413 and -32602, and nothing is kept.
    pub max_client_info_bytes: usize,
    /// Sessions one peer — its principal when authenticated, else its address — may hold;
    /// past it the peer's oldest session that was never used gives way, and without one the
    /// `initialize` gets 429.
    pub max_sessions_per_peer: usize,
    /// A session that sent nothing after `initialize` (but `notifications/initialized`) expires
    /// after this long.
    pub session_unused: Duration,
    /// Open TCP connections; one more is answered 503 and closed.
    pub max_connections: usize,
    /// A connection must send a whole request head within this long (hyper closes it
    /// otherwise); it also ends idle keep-alive connections.
    pub header_read_timeout: Duration,
    /// A request body must arrive within this long after its head; a slower one gets 408.
    pub body_read_timeout: Duration,
    /// Authentication of every request (bearer tokens or OAuth JWTs); `None`: off.
    pub auth: Option<AuthConfig>,
    /// Writes queued for the event store (not yet committed) at which a new request waits
    /// for the store, and is refused with 503 if it does not catch up in time.
    pub event_queue_max: usize,
    /// Answer every 2025 session request with an SSE stream, even those `plain` would answer
    /// with a JSON body (no progress token, and safe to run again): every answer is then
    /// resumable, at the cost of storing it.
    pub always_sse: bool,
    /// Messages a connection may fall behind its stream before it is closed (the client
    /// resumes with `Last-Event-ID` and loses nothing): a client that stops reading costs
    /// at most this much memory.
    pub connection_backlog: usize,
    /// Threads that serve connections, each a single-threaded runtime (a request's task and
    /// its connection then stay on one thread; no work stealing between threads); 0, the
    /// default: on the runtime that called `serve`, like any task of it.
    pub conn_workers: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            endpoint: "/mcp".into(),
            allow: Allow::loopback(),
            max_body_bytes: 4 * 1024 * 1024,
            max_streams_per_session: 256,
            max_sessions: 10_000,
            session_idle: Duration::from_secs(30 * 60),
            sse_retry: Duration::from_millis(1000),
            keep_alive: Duration::from_secs(15),
            poll_after: None,
            event_max_age: Duration::from_secs(15 * 60),
            event_max_per_stream: 10_000,
            stateless_hold: Duration::from_millis(250),
            keep_alive_stateless: Duration::from_millis(500),
            max_client_info_bytes: 64 * 1024,
            max_sessions_per_peer: 1024,
            session_unused: Duration::from_secs(60),
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            auth: None,
            event_queue_max: 65_536,
            always_sse: false,
            connection_backlog: 1024,
            conn_workers: 0,
        }
    }
}

/// Shared state of the HTTP transport.
pub(crate) struct HttpState {
    pub(crate) server: Server,
    pub(crate) events: Arc<dyn EventStore>,
    pub(crate) sessions_store: Arc<dyn SessionStore>,
    pub(crate) cfg: HttpConfig,
    pub(crate) sessions: Mutex<FastMap<String, Arc<session::HttpSession>>>,
    /// Sessions closed at shutdown, still draining.
    pub(crate) closing: Mutex<Vec<Arc<session::HttpSession>>>,
    pub(crate) batcher: batch::Batcher,
    /// The authenticator, when auth is on.
    pub(crate) auth: Option<Arc<auth::Auth>>,
}

impl HttpState {
    pub(crate) fn session(&self, id: &str) -> Option<Arc<session::HttpSession>> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// Forgets every session (shutdown), handing them to the caller to close.
    pub(crate) fn take_sessions(&self) -> Vec<Arc<session::HttpSession>> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect()
    }

    pub(crate) fn session_count(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Ends a session: cancels its requests, forgets it, deletes its stored state.
    pub(crate) async fn end_session(&self, id: &str, reason: CancelReason) -> bool {
        let removed = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        let Some(s) = removed else { return false };
        s.close(reason);
        if let Err(e) = self.sessions_store.delete(id).await {
            tracing::warn!(session = %crate::session_hash(id), error = %e, "could not delete session record");
        }
        // Through the write queue, so it lands after the session's pending writes.
        self.batcher.delete_session(id.to_string());
        true
    }
}

/// An HTTP server for `server`, ready to be bound.
#[derive(Clone)]
pub struct HttpTransport {
    state: Arc<HttpState>,
    /// Routes served beside the MCP endpoint (the live page); they do their own access checks.
    extra: Option<Router>,
    /// Where the store says a session was deleted on another instance.
    signals: Option<Arc<dyn JobStore>>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("endpoint", &self.state.cfg.endpoint)
            .finish()
    }
}

impl HttpTransport {
    /// The transport for `server`, keeping SSE events and session records in the given stores.
    /// Must be called inside a tokio runtime (it starts the event-store writer).
    pub fn new(
        server: Server,
        events: Arc<dyn EventStore>,
        sessions: Arc<dyn SessionStore>,
        cfg: HttpConfig,
    ) -> Self {
        let metrics = server.metrics().clone();
        Self {
            state: Arc::new(HttpState {
                server,
                auth: cfg.auth.clone().map(|a| Arc::new(auth::Auth::new(a))),
                batcher: batch::Batcher::start(events.clone(), cfg.event_queue_max, metrics),
                events,
                sessions_store: sessions,
                cfg,
                sessions: Mutex::new(FastMap::default()),
                closing: Mutex::new(Vec::new()),
            }),
            extra: None,
            signals: None,
        }
    }

    /// Ends a session held here as soon as `store`'s signals say another instance deleted it
    /// ([`Signal::SessionEnded`], PostgreSQL), instead of at the next maintenance tick; after
    /// the signals reconnect or lag, every held session is checked against the store.
    pub fn with_store_signals(mut self, store: Arc<dyn JobStore>) -> Self {
        self.signals = Some(store);
        self
    }

    /// Serves `routes` beside the MCP endpoint (e.g. the live page). They must not overlap
    /// the endpoint, and they run their own access checks (Host/Origin, authentication).
    pub fn with_routes(mut self, routes: Router) -> Self {
        self.extra = Some(routes);
        self
    }

    /// The endpoint's token check, when auth is on, for routes added with
    /// [`HttpTransport::with_routes`] that must ask for the same credentials.
    pub fn authenticator(&self) -> Option<Authenticator> {
        self.state
            .auth
            .clone()
            .map(|a| Authenticator::new(a, self.state.cfg.endpoint.clone()))
    }

    /// The axum router (tests call it without a socket).
    pub fn router(&self) -> Router {
        let limit = self.state.cfg.max_body_bytes;
        let mut router = Router::new().route(&self.state.cfg.endpoint, any(handlers::endpoint));
        if let Some(auth) = &self.state.auth {
            for path in auth.metadata_paths(&self.state.cfg.endpoint) {
                router = router.route(&path, any(handlers::resource_metadata));
            }
        }
        let mcp = router
            .layer(DefaultBodyLimit::max(limit))
            .with_state(self.state.clone());
        // A balancer's probe; an endpoint configured at the same path keeps it.
        let mcp = if self.state.cfg.endpoint == health::HEALTH_PATH {
            mcp
        } else {
            mcp.merge(health::routes(
                self.state.sessions_store.clone(),
                self.state.server.shutdown_token(),
                self.state.cfg.allow.clone(),
            ))
        };
        match &self.extra {
            Some(extra) => mcp.merge(extra.clone()),
            None => mcp,
        }
    }

    /// Sessions open right now.
    pub fn session_count(&self) -> usize {
        self.state.session_count()
    }

    /// The write-behind queue to the event store: depth, capacity, delayed and refused
    /// requests.
    pub fn event_queue_stats(&self) -> EventQueueStats {
        self.state.batcher.stats()
    }

    /// Serves on `listener` until the server's shutdown token fires; then closes every session
    /// (cancelling their requests) and waits for them to drain.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let shutdown = self.state.server.shutdown_token();
        let maintenance = tokio::spawn(maintenance(self.state.clone()));
        // Until every stream is drained: followers elsewhere must not take a draining
        // instance for dead.
        let beat = tokio::spawn(writer::beat(self.state.clone()));
        let deletes = self
            .signals
            .clone()
            .map(|store| tokio::spawn(follow_deletes(self.state.clone(), store)));
        // Shutdown begins by ending the work, so that open streams close and the graceful
        // shutdown below does not wait for calls to finish on their own: subscriptions end with
        // a response, every other request is cancelled (never answered), sessions close.
        let closer = {
            let state = self.state.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                shutdown.cancelled().await;
                state.server.cancel_all_requests();
                for s in state.take_sessions() {
                    s.close(CancelReason::Shutdown);
                    state
                        .closing
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(s);
                }
            })
        };
        let app = self.router();
        let limits = accept::ConnLimits {
            max_connections: self.state.cfg.max_connections,
            header_read_timeout: self.state.cfg.header_read_timeout,
        };
        let workers = self.state.cfg.conn_workers;
        let served =
            accept::serve(listener, self.state.clone(), app, limits, shutdown, workers).await;
        let (result, workers) = match served {
            Ok(w) => (Ok(()), w),
            Err(e) => (Err(e), None),
        };
        maintenance.abort();
        if let Some(d) = deletes {
            d.abort();
        }
        let _ = closer.await;
        let mut sessions =
            std::mem::take(&mut *self.state.closing.lock().unwrap_or_else(|p| p.into_inner()));
        // Sessions opened while shutting down.
        sessions.extend(self.state.take_sessions());
        for s in &sessions {
            s.close(CancelReason::Shutdown);
        }
        for s in &sessions {
            s.drain().await;
        }
        if let Some(w) = workers {
            w.stop().await;
        }
        self.state.batcher.flush().await;
        beat.abort();
        self.state.server.lifecycle_log().flush();
        result
    }

    /// Binds `addr` and serves (see [`HttpTransport::serve`]).
    pub async fn bind_and_serve(self, addr: SocketAddr) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        self.serve(listener).await
    }
}

/// How old a session must be before its absence from the store means it was deleted: its row
/// is written just after it is registered here, so a younger one may simply not be there yet.
const STORE_CHECK_MIN_AGE_MS: i64 = 2_000;

/// Ends the sessions held here that the store no longer has: a DELETE (or an expiry) that
/// another instance sharing the store handled. One query per maintenance tick, so a session
/// deleted elsewhere ends here within one tick (at most 10 s) — its requests cancelled, its
/// next request answered 404.
async fn end_sessions_gone_from_the_store(state: &HttpState, now: i64) {
    let held: Vec<String> = {
        let sessions = state.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions
            .values()
            .filter(|s| now - s.created_ms() >= STORE_CHECK_MIN_AGE_MS)
            .map(|s| s.id().to_string())
            .collect()
    };
    if held.is_empty() {
        return;
    }
    match state.sessions_store.missing(&held).await {
        Ok(gone) => {
            for id in gone {
                tracing::info!(session = %crate::session_hash(&id), "session ended elsewhere");
                state
                    .end_session(&id, CancelReason::SessionClosed("session deleted"))
                    .await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not check sessions against the store"),
    }
}

/// Ends sessions held here the moment the store says another instance deleted them, and
/// cancels requests running here that a client cancelled through another instance.
async fn follow_deletes(state: Arc<HttpState>, store: Arc<dyn JobStore>) {
    use tokio::sync::broadcast::error::RecvError;
    let mut rx = store.subscribe_signals();
    loop {
        match rx.recv().await {
            Ok(Signal::RequestCancelled {
                session_id,
                request_id,
                reason,
            }) => {
                let held = state
                    .sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&session_id)
                    .cloned();
                if let (Some(s), Ok(id)) = (held, serde_json::from_str(&request_id)) {
                    s.session().cancel_relayed(&id, reason);
                }
            }
            Ok(Signal::SessionEnded(id)) => {
                if state
                    .end_session(&id, CancelReason::SessionClosed("session deleted"))
                    .await
                {
                    tracing::info!(session = %crate::session_hash(&id), "session ended elsewhere");
                }
            }
            // Signals may have been missed: check what is held.
            Ok(Signal::Reconnected) | Err(RecvError::Lagged(_)) => {
                end_sessions_gone_from_the_store(&state, staunch_store::now_ms()).await;
            }
            Ok(_) => {}
            Err(RecvError::Closed) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                rx = store.subscribe_signals();
            }
        }
    }
}

/// Expires idle and unused sessions (here and in the shared store), tells the store which
/// sessions are still in use, and applies event retention, every few seconds.
async fn maintenance(state: Arc<HttpState>) {
    let period = (state.cfg.session_idle.min(state.cfg.session_unused) / 4)
        .clamp(Duration::from_millis(50), Duration::from_secs(10));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let idle_ms = i64::try_from(state.cfg.session_idle.as_millis()).unwrap_or(i64::MAX);
    // Often enough that the store never sees a session in use as idle, rarely enough that
    // many open streams do not turn into a write per stream per tick.
    let sync_every = state.cfg.session_idle / 4;
    loop {
        tick.tick().await;
        let now = staunch_store::now_ms();
        let (expired, seen) = {
            let sessions = state.sessions.lock().unwrap_or_else(|p| p.into_inner());
            let expired: Vec<(String, &'static str)> = sessions
                .values()
                .filter_map(|s| {
                    if !s.used() && s.idle_for(now) > state.cfg.session_unused {
                        Some((
                            s.id().to_string(),
                            "session expired: unused after initialize",
                        ))
                    } else if s.idle_for(now) > state.cfg.session_idle {
                        Some((s.id().to_string(), "session expired"))
                    } else {
                        None
                    }
                })
                .collect();
            // Sessions in use here whose `last_seen` the store should learn, so that other
            // instances (and this one after a restart) do not expire or refuse them.
            let seen: Vec<(String, i64)> = sessions
                .values()
                .filter_map(|s| {
                    s.seen_to_sync(now, sync_every)
                        .map(|t| (s.id().to_string(), t))
                })
                .collect();
            (expired, seen)
        };
        for (id, why) in expired {
            tracing::info!(session = %crate::session_hash(&id), "{why}");
            state
                .end_session(&id, CancelReason::SessionClosed(why))
                .await;
        }
        for (id, t) in seen {
            if let Err(e) = state.sessions_store.touch(&id, t).await {
                tracing::warn!(error = %e, "could not record session activity");
            }
        }
        end_sessions_gone_from_the_store(&state, now).await;
        // Sessions no instance has seen for the idle period, including those of instances
        // that are gone.
        match state.sessions_store.expire_idle(now, idle_ms).await {
            Ok(ids) => {
                for id in ids {
                    let local = state
                        .end_session(&id, CancelReason::SessionClosed("session expired"))
                        .await;
                    if !local {
                        state.batcher.delete_session(id);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "session expiry in the store failed"),
        }
        let max_age = i64::try_from(state.cfg.event_max_age.as_millis()).unwrap_or(i64::MAX);
        if let Err(e) = state
            .events
            .purge(now, max_age, state.cfg.event_max_per_stream)
            .await
        {
            tracing::warn!(error = %e, "event retention failed");
        }
    }
}
