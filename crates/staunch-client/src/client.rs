//! [`Client`]: one connection to an MCP server (a 2025 session or a 2026 stateless peer), and
//! [`PendingRequest`], one request in flight.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use staunch_protocol::mcp::{ProgressToken, methods};
use staunch_protocol::raw::to_value;
use staunch_protocol::{RequestId, notification_bytes, request_bytes, request_bytes_with};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::era::{Dialect, ResultType, ServerInfo, mcp_name};
use crate::inbox::{Inbox, Route};
use crate::router::{Answer, Inbound, Registration, ReplyReceiver, Router};
use crate::tool_call::{ToolCall, Wire};
use crate::transport::http::HttpEndpoint;
use crate::transport::{Outgoing, Transport};
use crate::{CallOptions, ClientError, ConnectOptions, LateResponse, Observed, Progress};

pub(crate) struct Inner {
    router: Router,
    pub(crate) transport: Transport,
    next_id: AtomicI64,
    pub(crate) server: OnceLock<ServerInfo>,
    /// What the connection's era adds to every request.
    pub(crate) dialect: Dialect,
}

impl crate::timeout::Waiting for PendingRequest {
    fn sent_at(&self) -> Instant {
        PendingRequest::sent_at(self)
    }

    fn channels(
        &mut self,
    ) -> (
        &mut ReplyReceiver,
        Option<&mut mpsc::UnboundedReceiver<Progress>>,
    ) {
        (&mut self.reply, self.progress.as_mut())
    }

    fn mark_answered(&mut self) {
        self.finished = true;
    }

    fn cancel_now(&mut self, reason: &str) {
        PendingRequest::cancel_now(self, reason);
    }
}

impl Route for Inner {
    fn route_item(self: Arc<Self>, item: Inbound) {
        self.route(item);
    }
}

impl Inner {
    /// Routes one item a transport read, on the transport's task; sends the answer to a
    /// server request (one that takes time from a task of its own: a person or another peer
    /// may take minutes to answer).
    pub(crate) fn route(self: &Arc<Self>, item: Inbound) {
        match self.router.on_inbound(item) {
            None => {}
            Some(Answer::Now(bytes)) => self.transport.send(reply(bytes)),
            Some(Answer::Later(answer)) => {
                let weak = Arc::downgrade(self);
                tokio::spawn(async move {
                    let bytes = answer.await;
                    if let Some(inner) = weak.upgrade() {
                        inner.transport.send(reply(bytes));
                    }
                });
            }
        }
    }

    fn notify(&self, method: &str, params: Option<&Value>) {
        self.transport.send(Outgoing {
            bytes: notification_bytes(method, params),
            request: None,
            method: Some(method.to_string()),
            name: None,
        });
    }

    /// Gives up on `id` and, if it was still in flight, tells the server: with
    /// `notifications/cancelled`, or (stateless HTTP) by closing the request's stream.
    fn cancel(&self, id: &RequestId, reason: &str) {
        if self.router.abandon(id) {
            if self.transport.cancels_by_notification() {
                self.notify(
                    methods::CANCELLED,
                    Some(&json!({"requestId": id.to_value(), "reason": reason})),
                );
            }
            self.transport.abandoned(id);
        }
    }
}

/// A connected MCP client: a 2025 session after `initialize`, or a 2026-07-28 stateless peer
/// after `server/discover`. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.server.get())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client on `transport` before its handshake: the inbox routes to it from now on.
    pub(crate) fn unconnected(transport: Transport, inbox: &Inbox, opts: &ConnectOptions) -> Self {
        let inner = Arc::new(Inner {
            router: Router::new(opts.server_requests.clone(), opts.notifications.clone()),
            transport,
            next_id: AtomicI64::new(1),
            server: OnceLock::new(),
            dialect: Dialect::default(),
        });
        inbox.attach(&inner);
        Self { inner }
    }

    /// Keeps what the handshake learned about the server.
    pub(crate) fn set_server(&self, info: ServerInfo) {
        let _ = self.inner.server.set(info);
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// What the server said in `initialize` or `server/discover`.
    pub fn server(&self) -> &ServerInfo {
        // `start` only returns a client after the handshake stored this.
        self.inner
            .server
            .get()
            .unwrap_or_else(|| unreachable!("client used before its handshake"))
    }

    /// The HTTP endpoint, when connected over HTTP.
    pub fn http_endpoint(&self) -> Option<&HttpEndpoint> {
        match &self.inner.transport {
            Transport::Http(t) => Some(t.endpoint()),
            Transport::Stdio(_) => None,
        }
    }

    /// The HTTP session id, when the server gave one.
    pub fn session_id(&self) -> Option<String> {
        match &self.inner.transport {
            Transport::Http(t) => t.session_id(),
            Transport::Stdio(_) => None,
        }
    }

    /// How many dropped HTTP streams were resumed with `Last-Event-ID` so far.
    pub fn resumes(&self) -> u64 {
        match &self.inner.transport {
            Transport::Http(t) => t.resumes(),
            Transport::Stdio(_) => 0,
        }
    }

    /// Sends a request and returns at once; the answer is awaited with
    /// [`PendingRequest::wait`]. With `progress`, `_meta.progressToken` is added to `params`
    /// (which must then be an object or absent); in the stateless era so are the version,
    /// capabilities and client info every request carries.
    pub fn start_request(
        &self,
        method: &str,
        params: Option<Value>,
        progress: bool,
    ) -> Result<PendingRequest, ClientError> {
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::Number(n);
        let token = progress.then_some(ProgressToken::Number(n));
        let mut params = params;
        if let Some(t) = &token {
            let obj = params.get_or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(map) = obj else {
                return Err(ClientError::Protocol(
                    "progress needs params to be an object".into(),
                ));
            };
            let meta = map
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert("progressToken".into(), json!(t));
            }
        }
        self.inner.dialect.decorate(&mut params)?;
        let out = Outgoing {
            bytes: request_bytes(&id, method, params.as_ref()),
            request: Some(id.clone()),
            method: Some(method.to_string()),
            name: mcp_name(method, params.as_ref()),
        };
        self.send_registered(id, token, out)
    }

    /// Sends a `tools/call` with params written as they are sent (see [`ToolCall`]); as
    /// [`start_request`](Self::start_request) otherwise.
    pub fn start_tool_call(
        &self,
        call: &ToolCall<'_>,
        progress: bool,
    ) -> Result<PendingRequest, ClientError> {
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::Number(n);
        let token = progress.then_some(ProgressToken::Number(n));
        let bytes = self.inner.dialect.with_meta(|era| {
            let params = Wire {
                call,
                progress: token.as_ref(),
                era,
            };
            request_bytes_with(&id, methods::TOOLS_CALL, &params)
        });
        let out = Outgoing {
            bytes,
            request: Some(id.clone()),
            method: Some(methods::TOOLS_CALL.to_string()),
            name: Some(call.name().to_string()),
        };
        self.send_registered(id, token, out)
    }

    /// Registers request `id` (and its progress `token`), then sends it: the answer or a
    /// first progress may come back at once.
    fn send_registered(
        &self,
        id: RequestId,
        token: Option<ProgressToken>,
        out: Outgoing,
    ) -> Result<PendingRequest, ClientError> {
        let Registration {
            reply,
            progress: progress_rx,
        } = self.inner.router.register(&id, token.as_ref())?;
        self.inner.transport.send(out);
        Ok(PendingRequest {
            inner: self.inner.clone(),
            id,
            token,
            reply,
            progress: progress_rx,
            sent_at: Instant::now(),
            finished: false,
            cancellable: true,
        })
    }

    /// Sends a request and waits for its answer under `opts`. A stateless result that needs
    /// input is [`ClientError::InputRequired`] (use
    /// [`request_with_input`](Self::request_with_input) to answer it); an unknown
    /// `resultType` is [`ClientError::UnknownResultType`].
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        opts: &CallOptions,
    ) -> Result<Value, ClientError> {
        let p = self.start_request(method, params, opts.progress)?;
        let r = p.wait(opts, |_| {}).await?;
        match ResultType::of(&r)? {
            ResultType::InputRequired => Err(ClientError::InputRequired(r)),
            ResultType::Complete | ResultType::Task => Ok(r),
        }
    }

    /// `tools/call`: the raw result (check `isError`; see the [`result`](crate::result)
    /// helpers) or the error. `on_progress` sees each progress notification. A 2026-07-28
    /// server asking for input makes this [`ClientError::InputRequired`]; answer such rounds
    /// with [`call_tool_with_input`](Self::call_tool_with_input).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        opts: &CallOptions,
        on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Value, ClientError> {
        self.call_tool_with_input(name, arguments, opts, on_progress, crate::input::no_answers)
            .await
    }

    /// `tools/list` (all pages, bounded).
    pub async fn list_tools(&self, opts: &CallOptions) -> Result<Vec<Value>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let params = cursor.as_ref().map(|c| json!({"cursor": c}));
            let opts = CallOptions {
                progress: false,
                ..opts.clone()
            };
            let r = self.request(methods::TOOLS_LIST, params, &opts).await?;
            if let Some(list) = r["tools"].as_array() {
                tools.extend(list.iter().cloned());
            }
            match r["nextCursor"].as_str() {
                Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
                _ => break,
            }
        }
        Ok(tools)
    }

    /// Whether the connection is gone (the server exited or closed its stream for good);
    /// every request on it fails from then on.
    pub fn is_closed(&self) -> bool {
        self.inner.router.is_closed()
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Option<Value>) {
        self.inner.notify(method, params.as_ref());
    }

    /// Cancels a request by id (`notifications/cancelled`), if it is still in flight.
    pub fn cancel(&self, id: &RequestId, reason: &str) {
        self.inner.cancel(id, reason);
    }

    /// Every message the server sends from now on, with its arrival time.
    pub fn tap(&self) -> mpsc::UnboundedReceiver<Observed> {
        self.inner.router.tap()
    }

    /// What arrives late from now on (answers to requests this client gave up on, progress
    /// nobody waits for), as it arrives; a proxy logs it.
    pub fn late_feed(&self) -> mpsc::UnboundedReceiver<crate::Late> {
        self.inner.router.late_feed()
    }

    /// Answers that arrived for requests this client had already cancelled (and discarded).
    pub fn late_responses(&self) -> Vec<LateResponse> {
        self.inner.router.late()
    }

    /// Ends the connection: stdin EOF and a bounded wait for the process, or HTTP DELETE (a
    /// session-era HTTP session only).
    pub async fn close(&self) {
        self.inner.transport.close().await;
        self.inner.router.close("the client closed the connection");
    }
}

fn reply(bytes: Vec<u8>) -> Outgoing {
    Outgoing {
        bytes,
        request: None,
        method: None,
        name: None,
    }
}

/// A request in flight. Dropping it before its answer cancels it on the wire.
pub struct PendingRequest {
    inner: Arc<Inner>,
    id: RequestId,
    token: Option<ProgressToken>,
    reply: ReplyReceiver,
    progress: Option<mpsc::UnboundedReceiver<Progress>>,
    sent_at: Instant,
    finished: bool,
    pub(crate) cancellable: bool,
}

impl std::fmt::Debug for PendingRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingRequest")
            .field("id", &self.id)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl PendingRequest {
    /// The request's id.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// Its progress token, if it asked for progress.
    pub fn progress_token(&self) -> Option<&ProgressToken> {
        self.token.as_ref()
    }

    /// When it was sent.
    pub fn sent_at(&self) -> Instant {
        self.sent_at
    }

    /// Waits for the answer under `opts` (timeout, progress reset, ceiling, caller cancel).
    pub async fn wait(
        mut self,
        opts: &CallOptions,
        mut on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Value, ClientError> {
        let r = crate::timeout::wait(&mut self, opts, &mut on_progress).await;
        r.map(|raw| to_value(&raw))
    }

    /// Like [`wait`](Self::wait), but borrows the request: a wait given up before the answer
    /// (its future dropped) leaves the request pending, to be waited for again later or
    /// cancelled by dropping it. A proxy parks an upstream call this way while its client
    /// answers a question in a round of its own.
    pub async fn wait_borrowed(
        &mut self,
        opts: &CallOptions,
        mut on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Value, ClientError> {
        let r = crate::timeout::wait(self, opts, &mut on_progress).await;
        r.map(|raw| to_value(&raw))
    }

    /// Like [`wait`](Self::wait), but keeps the request's progress subscription alive after
    /// the answer, when the request asked for progress: a 2025-11-25 task's progress outlives
    /// the `tools/call` that created it (its token stays valid until the task ends).
    pub async fn wait_keeping_progress(
        self,
        opts: &CallOptions,
        on_progress: &mut (dyn FnMut(&Progress) + Send),
    ) -> (Result<Value, ClientError>, Option<ProgressStream>) {
        let (r, progress) = self.wait_raw_keeping_progress(opts, on_progress).await;
        (r.map(|raw| to_value(&raw)), progress)
    }

    /// Like [`wait_borrowed`](Self::wait_borrowed), the answer as the text it arrived as: a
    /// proxy passes it on unread, every key and number as the server wrote them.
    pub async fn wait_raw_borrowed(
        &mut self,
        opts: &CallOptions,
        mut on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Box<RawValue>, ClientError> {
        crate::timeout::wait(self, opts, &mut on_progress).await
    }

    /// Like [`wait_keeping_progress`](Self::wait_keeping_progress), the answer as the text it
    /// arrived as.
    pub async fn wait_raw_keeping_progress(
        mut self,
        opts: &CallOptions,
        on_progress: &mut (dyn FnMut(&Progress) + Send),
    ) -> (Result<Box<RawValue>, ClientError>, Option<ProgressStream>) {
        let r = crate::timeout::wait(&mut self, opts, on_progress).await;
        let sub = match (self.progress.take(), self.token.take()) {
            (Some(rx), Some(token)) => Some(ProgressStream {
                inner: self.inner.clone(),
                token,
                rx,
            }),
            _ => None,
        };
        (r, sub)
    }

    /// Cancels it now (`notifications/cancelled` with `reason`).
    pub fn cancel(mut self, reason: &str) {
        self.cancel_now(reason);
    }

    pub(crate) fn cancel_now(&mut self, reason: &str) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.cancellable {
            self.inner.cancel(&self.id, reason);
        } else {
            self.inner.router.abandon(&self.id);
        }
    }
}

impl Drop for PendingRequest {
    fn drop(&mut self) {
        self.cancel_now("request abandoned by the caller");
        if let Some(t) = &self.token {
            self.inner.router.forget_progress(t);
        }
    }
}

/// The progress of a request that outlives its answer (a task's); unsubscribes when dropped
/// ([`PendingRequest::wait_keeping_progress`]).
pub struct ProgressStream {
    inner: Arc<Inner>,
    token: ProgressToken,
    rx: mpsc::UnboundedReceiver<Progress>,
}

impl std::fmt::Debug for ProgressStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressStream").finish_non_exhaustive()
    }
}

impl ProgressStream {
    /// The next progress notification; `None` once the connection is gone.
    pub async fn next(&mut self) -> Option<Progress> {
        self.rx.recv().await
    }
}

impl Drop for ProgressStream {
    fn drop(&mut self) {
        self.inner.router.forget_progress(&self.token);
    }
}
