//! [`Session`]: one connection that can carry a session — a stdio pipe, or an HTTP session —
//! and every request that arrives on it, in either era.
//!
//! The message loop calls [`Session::handle_frame`] for each frame and gets control back at
//! once. A request that carries the stateless era's `_meta` is served statelessly (its own
//! version, capabilities and log level); any other request is session traffic, served with
//! what `initialize` negotiated. Either way it goes to the dispatcher and the request core; the
//! session only holds what a session needs (its connection and its negotiated facts).
//! Notifications are handled inline: `notifications/cancelled` goes to the request core, the
//! only place a request's token fires.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use staunch_protocol::mcp::{
    CancelledParams, InitializeParams, InitializeResult, SetLevelParams, methods,
};
use staunch_protocol::{
    ErrorObject, Message, Notification, Request, Response, codes, notification_bytes,
    parse_message, version,
};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::answer_relay::AnswerRelay;
use crate::changes::Change;
use crate::codec::{Peer, SessionFacts};
use crate::conn::Conn;
use crate::dispatch::{dispatch, parse_params};
use crate::outbound::{Outbound, OutboundKind, Sink};
use crate::registry::{CancelReason, CancelResult};
use crate::request::{self, Origin};
use crate::shared::ServerInner;

pub(crate) struct SessionInner {
    server: Arc<ServerInner>,
    conn: Arc<Conn>,
    facts: Arc<SessionFacts>,
    /// Fires when the session closes (ends its list-change forwarder).
    closed: CancellationToken,
    /// Whether the list-change forwarder runs (started once, at `notifications/initialized`).
    forwarding: AtomicBool,
}

/// One client connection (a stdio pipe, or an HTTP session). Cheap to clone.
#[derive(Clone)]
pub struct Session {
    inner: Arc<SessionInner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.inner.conn.label)
            .finish()
    }
}

impl Session {
    pub(crate) fn new(
        server: Arc<ServerInner>,
        id: String,
        sink: Arc<dyn Sink>,
        owns_work: bool,
        principal: Option<Arc<str>>,
        peer: Option<std::net::IpAddr>,
    ) -> Self {
        let key = crate::fair::PeerKey::of(principal.as_deref(), peer);
        Self {
            inner: Arc::new(SessionInner {
                server,
                conn: Conn::build(id, sink, owns_work, principal, key),
                facts: Arc::new(SessionFacts::new()),
                closed: CancellationToken::new(),
                forwarding: AtomicBool::new(false),
            }),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.inner.conn.label
    }

    /// What the session's requests and its place among sessions count against: its
    /// principal, else the address that opened it ([`crate::fair`]).
    pub(crate) fn peer_key(&self) -> Option<&crate::fair::PeerKey> {
        self.inner.conn.peer.as_ref()
    }

    /// The principal the session is bound to (the one that created it, when the transport
    /// authenticates); `None` without auth.
    pub fn principal(&self) -> Option<&str> {
        self.inner.conn.principal.as_deref()
    }

    /// Requests in flight on this session's connection.
    pub fn in_flight(&self) -> usize {
        self.inner.conn.in_flight()
    }

    /// The negotiated protocol version, once initialized.
    pub fn protocol_version(&self) -> Option<String> {
        self.inner.facts.lock().protocol_version.clone()
    }

    /// Cancels request `id` of this session if it runs here, for a client whose cancel reached
    /// another instance; says nothing when it does not (every instance holding the session
    /// hears the relayed cancel).
    pub(crate) fn cancel_relayed(&self, id: &staunch_protocol::RequestId, reason: Option<String>) {
        request::cancel_quietly(
            &self.inner.server,
            &self.inner.conn,
            id,
            CancelReason::Client(reason),
        );
    }

    /// Lets answers to server→client requests cross instances through `store` (an HTTP
    /// session on a store other instances share): an answer nobody here waits for is kept
    /// there, and a request waiting here also looks there ([`crate::answer_relay`]).
    pub(crate) fn relay_answers(&self, store: Arc<dyn staunch_store::SessionStore>) {
        let _ = self
            .inner
            .conn
            .relay
            .set(AnswerRelay::new(store, self.inner.conn.label.clone()));
    }

    /// Restores a session initialized elsewhere (another instance, same shared store): the
    /// negotiated version and the client's capabilities.
    pub fn restore(&self, protocol_version: &str, client_capabilities: Value) {
        let mut st = self.inner.facts.lock();
        st.protocol_version = Some(protocol_version.to_string());
        st.client_capabilities = client_capabilities;
    }

    /// Handles one frame: parses it and dispatches it; malformed frames are answered with
    /// the matching JSON-RPC error. Never blocks on tool work.
    pub fn handle_frame(&self, frame: &[u8]) {
        match parse_message(frame) {
            Ok(msg) => self.handle(msg),
            Err(e) => {
                tracing::warn!(session = %self.id(), error = %e, "malformed message");
                let code = e.to_error().code;
                self.inner.conn.send(Outbound {
                    related: e.id().cloned(),
                    kind: OutboundKind::Response,
                    bytes: e.to_response_bytes(),
                    error_code: Some(code),
                });
            }
        }
    }

    /// Handles one parsed message.
    pub fn handle(&self, msg: Message) {
        match msg {
            Message::Request(r) => self.inner.on_request(r, false),
            Message::Notification(n) => self.inner.on_notification(n),
            Message::Response(r) => self.inner.on_response(r),
        }
    }

    /// Handles one request for a transport whose caller does nothing but wait for its answer
    /// (an HTTP POST answered with one JSON body): the request's first step may run here
    /// ([`Origin::eager`](crate::request::Origin)).
    pub(crate) fn handle_request_eagerly(&self, req: Request) {
        self.inner.on_request(req, true);
    }

    /// Closes the session: no new requests; every in-flight request is cancelled with
    /// `reason` (and logged as such). Use [`Session::drain`] to wait for them.
    pub fn close(&self, reason: CancelReason) {
        {
            let mut st = self.inner.facts.lock();
            if st.closed {
                return;
            }
            st.closed = true;
        }
        self.inner.closed.cancel();
        if let Some(closed) = &self.inner.conn.closed {
            closed.cancel();
        }
        request::cancel_conn(&self.inner.server, &self.inner.conn, reason);
        self.inner.conn.clear_outgoing();
    }

    /// Waits until every in-flight request has ended, at most the server's `drain_timeout`.
    /// Returns whether all ended.
    pub async fn drain(&self) -> bool {
        let limit = self.inner.server.config.drain_timeout;
        self.inner.conn.wait_empty(limit).await
    }
}

impl SessionInner {
    fn origin(&self, peer: Peer, eager: bool) -> Origin {
        Origin {
            conn: self.conn.clone(),
            peer,
            eager,
        }
    }

    fn on_request(&self, mut req: Request, eager: bool) {
        // The era of this request, decided here once: a stateless-era request is served on
        // this connection in its own terms (its `_meta`), cancelled by `notifications/cancelled`.
        let peer = match Peer::of_request(&mut req, &self.facts) {
            Ok(peer) => peer,
            Err(e) => {
                // Answered even though its `_meta` is unusable.
                let origin = self.origin(Peer::Session(self.facts.clone()), eager);
                return request::answer_now(&self.server, &origin, &req, Err(e));
            }
        };
        let origin = self.origin(peer, eager);
        if !origin.peer.has_session() {
            return dispatch(&self.server, &origin, req);
        }
        if self.facts.lock().closed {
            let e = ErrorObject::new(codes::INVALID_REQUEST, "the session is closed");
            return request::answer_now(&self.server, &origin, &req, Err(e));
        }
        match req.method.as_str() {
            methods::INITIALIZE => {
                let outcome = self.initialize(&req);
                request::answer_now(&self.server, &origin, &req, outcome);
            }
            methods::LOGGING_SET_LEVEL => {
                let outcome = parse_params::<SetLevelParams>(req.params.as_ref()).map(|p| {
                    self.facts.lock().log_level = p.level;
                    json!({})
                });
                request::answer_now(&self.server, &origin, &req, outcome);
            }
            _ => dispatch(&self.server, &origin, req),
        }
    }

    fn initialize(&self, req: &Request) -> Result<Value, ErrorObject> {
        let p: InitializeParams = parse_params(req.params.as_ref())?;
        let negotiated = version::negotiate(&p.protocol_version);
        {
            let mut st = self.facts.lock();
            st.protocol_version = Some(negotiated.to_string());
            st.client_capabilities = p.capabilities;
            st.initialize_id = Some(req.id.clone());
        }
        let result = InitializeResult {
            protocol_version: negotiated.to_string(),
            capabilities: self.server.capabilities.clone(),
            server_info: self.server.info.clone(),
            instructions: self.server.instructions.clone(),
        };
        serde_json::to_value(result).map_err(|e| ErrorObject::internal(e.to_string()))
    }

    fn on_notification(&self, n: Notification) {
        match n.method.as_str() {
            methods::CANCELLED => {
                let p: CancelledParams = match parse_params(n.params.as_ref()) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(session = %self.conn.log_label, error = %e, "malformed cancel ignored");
                        return;
                    }
                };
                let Some(id) = p.request_id else {
                    tracing::info!(session = %self.conn.log_label, "cancel without requestId ignored (tasks use tasks/cancel)");
                    return;
                };
                let not_cancellable = self.facts.lock().initialize_id.as_ref() == Some(&id);
                let result = request::cancel(
                    &self.server,
                    &self.conn,
                    &id,
                    CancelReason::Client(p.reason.clone()),
                    not_cancellable,
                );
                // Not running here: behind a balancer it may run on another instance.
                if result == CancelResult::Unknown
                    && !not_cancellable
                    && self.conn.relay.get().is_some()
                {
                    let conn = self.conn.clone();
                    tokio::spawn(async move {
                        if let Some(relay) = conn.relay.get() {
                            relay
                                .relay_cancel(&id, p.reason.as_deref(), &conn.log_label)
                                .await;
                        }
                    });
                }
            }
            methods::INITIALIZED => self.forward_list_changes(),
            other => {
                tracing::debug!(session = %self.conn.log_label, method = other, "notification ignored")
            }
        }
    }

    /// 2025 sessions learn of list changes the old way: a `notifications/*/list_changed` on
    /// the session (stdout, or the HTTP standalone stream), for each kind whose capability
    /// declares `listChanged`. (2026 clients use `subscriptions/listen`.)
    fn forward_list_changes(&self) {
        if self.forwarding.swap(true, Ordering::AcqRel) {
            return;
        }
        let caps = &self.server.capabilities;
        let declared =
            |kind: &str| caps.get(kind).and_then(|c| c.get("listChanged")) == Some(&json!(true));
        let kinds = [
            (Change::ToolsListChanged, declared("tools")),
            (Change::PromptsListChanged, declared("prompts")),
            (Change::ResourcesListChanged, declared("resources")),
        ];
        let wanted: Vec<Change> = kinds
            .into_iter()
            .filter(|(_, d)| *d)
            .map(|(c, _)| c)
            .collect();
        if wanted.is_empty() {
            return;
        }
        let hub = self.server.listen.clone();
        let mut rx = hub.subscribe();
        let (conn, closed) = (self.conn.clone(), self.closed.clone());
        tokio::spawn(async move {
            loop {
                let change = tokio::select! {
                    _ = closed.cancelled() => return,
                    _ = hub.closing() => return,
                    r = rx.recv() => r,
                };
                let changes = match change {
                    Ok(c) => vec![c],
                    // Fell behind: say every kind changed, once.
                    Err(RecvError::Lagged(_)) => wanted.clone(),
                    Err(RecvError::Closed) => return,
                };
                for c in changes.into_iter().filter(|c| wanted.contains(c)) {
                    conn.send(Outbound::notification(
                        None,
                        notification_bytes(c.method(), None),
                    ));
                }
            }
        });
    }

    fn on_response(&self, r: Response) {
        let Response { id, outcome } = r;
        let Err(outcome) = self.conn.resolve_outgoing(&id, outcome) else {
            return;
        };
        // Another instance serving this session may have asked: keep it there.
        if self.conn.relay.get().is_some() && AnswerRelay::may_be_ours(&id) {
            let conn = self.conn.clone();
            tokio::spawn(async move {
                if let Some(relay) = conn.relay.get() {
                    relay.keep(&id, &outcome, &conn.log_label).await;
                }
            });
            return;
        }
        tracing::info!(session = %self.conn.log_label, id = %id, "response to an unknown request ignored");
    }
}
