//! [`Session`]: one client connection's dispatcher.
//!
//! The message loop calls [`Session::handle_frame`] for each frame and gets control back at
//! once: cheap methods (`initialize`, `ping`, `tools/list`, `logging/setLevel`) are answered
//! inline; every other request is started in its own task through the Registry
//! ([`run_request`] is that task). Notifications are handled inline.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use staunch_protocol::mcp::{
    CallToolParams, CallToolResult, CancelledParams, InitializeParams, InitializeResult,
    LoggingLevel, ProgressToken, SetLevelParams, methods,
};
use staunch_protocol::{
    ErrorObject, Message, Notification, Request, RequestId, Response, codes, error_response_bytes,
    parse_message, result_response_bytes, version,
};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::context::{Context, RequestShared};
use crate::error::ToolError;
use crate::outbound::{Outbound, OutboundKind, Sink};
use crate::progress::Progress;
use crate::registry::{CancelResult, Registry, Slot};
use crate::server::ServerInner;
use crate::tool::Shape;

type ClientReply = Result<Value, ErrorObject>;

struct SessionState {
    protocol_version: Option<String>,
    client_capabilities: Value,
    log_level: LoggingLevel,
    initialize_id: Option<RequestId>,
    closed: bool,
}

pub(crate) struct SessionInner {
    pub(crate) id: String,
    pub(crate) server: Arc<ServerInner>,
    pub(crate) sink: Arc<dyn Sink>,
    token: CancellationToken,
    registry: Registry,
    state: Mutex<SessionState>,
    outgoing: Mutex<HashMap<RequestId, oneshot::Sender<ClientReply>>>,
    next_outgoing: AtomicU64,
}

/// One client connection (a stdio pipe, or an HTTP session). Cheap to clone.
#[derive(Clone)]
pub struct Session {
    inner: Arc<SessionInner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.inner.id)
            .finish()
    }
}

/// How a request's task ended.
enum Ended {
    Returned(Result<Value, ToolError>),
    Panicked(String),
    Aborted,
}

/// What kind of work a started request does.
struct Work {
    tool: Option<String>,
    shape: Option<Shape>,
    deadline: Option<Duration>,
    fingerprint: Option<String>,
    is_tool_call: bool,
    make: Box<dyn FnOnce(Context) -> BoxFuture<'static, Result<Value, ToolError>> + Send>,
}

impl Session {
    pub(crate) fn new(server: Arc<ServerInner>, id: String, sink: Arc<dyn Sink>) -> Self {
        let token = server.shutdown.child_token();
        Self {
            inner: Arc::new(SessionInner {
                id,
                server,
                sink,
                token,
                registry: Registry::default(),
                state: Mutex::new(SessionState {
                    protocol_version: None,
                    client_capabilities: Value::Null,
                    log_level: LoggingLevel::Info,
                    initialize_id: None,
                    closed: false,
                }),
                outgoing: Mutex::new(HashMap::new()),
                next_outgoing: AtomicU64::new(1),
            }),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Requests in flight in this session.
    pub fn in_flight(&self) -> usize {
        self.inner.registry.len()
    }

    /// The negotiated protocol version, once initialized.
    pub fn protocol_version(&self) -> Option<String> {
        self.inner.protocol_version()
    }

    /// Restores a session initialized elsewhere (another instance, same shared store): the
    /// negotiated version and the client's capabilities.
    pub fn restore(&self, protocol_version: &str, client_capabilities: Value) {
        let mut st = self.inner.lock_state();
        st.protocol_version = Some(protocol_version.to_string());
        st.client_capabilities = client_capabilities;
    }

    /// Handles one frame: parses it and dispatches it; malformed frames are answered with
    /// the matching JSON-RPC error. Never blocks on tool work.
    pub fn handle_frame(&self, frame: &[u8]) {
        match parse_message(frame) {
            Ok(msg) => self.handle(msg),
            Err(e) => {
                tracing::warn!(session = %self.inner.id, error = %e, "malformed message");
                self.inner.sink.send(Outbound {
                    related: e.id().cloned(),
                    kind: OutboundKind::Response,
                    bytes: e.to_response_bytes(),
                });
            }
        }
    }

    /// Handles one parsed message.
    pub fn handle(&self, msg: Message) {
        match msg {
            Message::Request(r) => self.inner.clone().on_request(r),
            Message::Notification(n) => self.inner.on_notification(n),
            Message::Response(r) => self.inner.on_response(r),
        }
    }

    /// Closes the session: no new requests; every in-flight request is cancelled (and logged
    /// as such). Use [`Session::drain`] to wait for them.
    pub fn close(&self, reason: &str) {
        {
            let mut st = self.inner.lock_state();
            if st.closed {
                return;
            }
            st.closed = true;
        }
        self.inner.registry.cancel_all(|id, since_start, ignored| {
            self.inner
                .log_cancel(id, Some(reason), since_start, ignored);
        });
        self.inner.token.cancel();
        self.inner
            .outgoing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Waits until every in-flight request has ended, at most the server's `drain_timeout`.
    /// Returns whether all ended.
    pub async fn drain(&self) -> bool {
        let limit = self.inner.server.config.drain_timeout;
        self.inner.registry.wait_empty(limit).await
    }
}

impl SessionInner {
    fn lock_state(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn log_level(&self) -> LoggingLevel {
        self.lock_state().log_level
    }

    pub(crate) fn client_capabilities(&self) -> Value {
        self.lock_state().client_capabilities.clone()
    }

    pub(crate) fn protocol_version(&self) -> Option<String> {
        self.lock_state().protocol_version.clone()
    }

    pub(crate) fn register_outgoing(&self) -> (RequestId, oneshot::Receiver<ClientReply>) {
        let n = self.next_outgoing.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::String(format!("staunch-{n}"));
        let (tx, rx) = oneshot::channel();
        self.outgoing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), tx);
        (id, rx)
    }

    pub(crate) fn forget_outgoing(&self, id: &RequestId) {
        self.outgoing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    fn respond(&self, id: &RequestId, outcome: Result<Value, ErrorObject>) {
        let bytes = match &outcome {
            Ok(v) => result_response_bytes(id, v),
            Err(e) => error_response_bytes(Some(id), e),
        };
        self.sink.send(Outbound {
            related: Some(id.clone()),
            kind: OutboundKind::Response,
            bytes,
        });
    }

    fn log(&self, event: &str, id: &RequestId, extra: Map<String, Value>) {
        self.server.log.emit(event, &self.id, id, extra);
    }

    fn log_cancel(
        &self,
        id: &RequestId,
        reason: Option<&str>,
        since_start: Duration,
        ignored: bool,
    ) {
        if !self.server.log.enabled() {
            return;
        }
        let mut extra = Map::new();
        if let Some(r) = reason {
            extra.insert("reason".into(), r.into());
        }
        extra.insert("since_start_ms".into(), ms(since_start).into());
        self.log("request.cancel_received", id, extra.clone());
        if ignored {
            extra.insert("why".into(), "atomic".into());
            self.log("request.cancel_ignored", id, extra);
        }
    }

    /// Answers a request inline and logs its start and end.
    fn answer_inline(&self, req: &Request, outcome: Result<Value, ErrorObject>) {
        if self.server.log.enabled() {
            let mut start = Map::new();
            start.insert("method".into(), req.method.as_str().into());
            self.log("request.start", &req.id, start);
            let mut end = Map::new();
            end.insert("method".into(), req.method.as_str().into());
            end.insert(
                "outcome".into(),
                if outcome.is_ok() { "ok" } else { "error" }.into(),
            );
            end.insert("duration_ms".into(), 0.into());
            self.log("request.end", &req.id, end);
        }
        self.respond(&req.id, outcome);
    }

    fn on_request(self: Arc<Self>, req: Request) {
        if self.lock_state().closed {
            self.respond(
                &req.id,
                Err(ErrorObject::new(
                    codes::INVALID_REQUEST,
                    "the session is closed",
                )),
            );
            return;
        }
        match req.method.as_str() {
            methods::INITIALIZE => {
                let outcome = self.initialize(&req);
                self.answer_inline(&req, outcome);
            }
            methods::PING => self.answer_inline(&req, Ok(json!({}))),
            methods::TOOLS_LIST => {
                let list = self.server.tool_list.clone();
                self.answer_inline(&req, Ok(list));
            }
            methods::LOGGING_SET_LEVEL => {
                let outcome = parse_params::<SetLevelParams>(req.params.as_ref()).map(|p| {
                    self.lock_state().log_level = p.level;
                    json!({})
                });
                self.answer_inline(&req, outcome);
            }
            methods::SERVER_DISCOVER => {
                // A 2026-07-28 client probes with this first; a clean "not found" makes it
                // fall back to `initialize`.
                let e = ErrorObject::new(
                    codes::METHOD_NOT_FOUND,
                    "server/discover is not supported: this server speaks protocol versions \
                     2025-03-26 to 2025-11-25; send initialize",
                )
                .with_data(json!({"supported": version::SUPPORTED}));
                self.answer_inline(&req, Err(e));
            }
            methods::TOOLS_CALL => match self.tool_call_work(&req) {
                Ok(work) => self.start(req, work),
                Err(e) => self.answer_inline(&req, Err(e)),
            },
            other => match self.server.methods.get(other) {
                Some(entry) => {
                    let handler = entry.handler.clone();
                    let params = req.params.clone();
                    let work = Work {
                        tool: None,
                        shape: None,
                        deadline: handler.deadline(self.server.config.quick_deadline),
                        fingerprint: None,
                        is_tool_call: false,
                        make: Box::new(move |ctx| handler.call(ctx, params)),
                    };
                    self.start(req, work);
                }
                None => {
                    let e = ErrorObject::method_not_found(other);
                    self.answer_inline(&req, Err(e));
                }
            },
        }
    }

    fn initialize(&self, req: &Request) -> Result<Value, ErrorObject> {
        let p: InitializeParams = parse_params(req.params.as_ref())?;
        let negotiated = version::negotiate(&p.protocol_version);
        {
            let mut st = self.lock_state();
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

    fn tool_call_work(&self, req: &Request) -> Result<Work, ErrorObject> {
        let p: CallToolParams = parse_params(req.params.as_ref())?;
        let Some(entry) = self.server.tools.get(&p.name).cloned() else {
            return Err(ErrorObject::invalid_params(format!(
                "unknown tool: {}",
                p.name
            )));
        };
        let args = Value::Object(p.arguments.unwrap_or_default());
        let fingerprint = self.server.log.enabled().then(|| fingerprint(&args));
        // Tasks (2025-11-25): a server that does not declare them ignores the `task` field.
        let tasks_declared = self
            .server
            .capabilities
            .get("tasks")
            // `get` rather than `pointer`: this runs on every call, and `pointer` allocates
            // a string per path segment.
            .and_then(|t| t.get("requests")?.get("tools")?.get("call"))
            .is_some();
        let support = entry.spec.task_support();
        let task = p.task.filter(|_| tasks_declared);
        if tasks_declared && task.is_none() && support == "required" {
            return Err(ErrorObject::new(
                codes::METHOD_NOT_FOUND,
                format!(
                    "tool {} must be called as a task (execution.taskSupport = required)",
                    p.name
                ),
            ));
        }
        if let Some(task) = task {
            if support == "forbidden" {
                return Err(ErrorObject::new(
                    codes::METHOD_NOT_FOUND,
                    format!("tool {} does not support tasks", p.name),
                ));
            }
            let name = p.name.clone();
            return Ok(Work {
                tool: Some(p.name),
                shape: Some(entry.spec.shape),
                deadline: Some(self.server.config.quick_deadline),
                fingerprint,
                is_tool_call: false,
                make: Box::new(
                    move |ctx| match entry.handler.call_as_task(ctx, args, task) {
                        Some(fut) => fut,
                        None => {
                            Box::pin(std::future::ready(Err(ToolError::Rpc(ErrorObject::new(
                                codes::METHOD_NOT_FOUND,
                                format!("tool {name} does not run as a task"),
                            )))))
                        }
                    },
                ),
            });
        }
        let cfg = &self.server.config;
        let deadline = entry.spec.deadline.or(match entry.spec.shape {
            Shape::Quick => Some(cfg.quick_deadline),
            Shape::Streaming => Some(cfg.streaming_deadline),
            // An atomic write is never interrupted; a job tool answers at once.
            Shape::Atomic | Shape::Job => None,
        });
        Ok(Work {
            tool: Some(p.name),
            shape: Some(entry.spec.shape),
            deadline,
            fingerprint,
            is_tool_call: true,
            make: Box::new(move |ctx| {
                let fut = entry.handler.call(ctx, args);
                Box::pin(async move {
                    match fut.await {
                        Ok(r) => Ok(to_value(&r)),
                        Err(ToolError::Tool(m)) => Ok(to_value(&CallToolResult::error(m))),
                        Err(e) => Err(e),
                    }
                })
            }),
        })
    }

    /// Starts a request in its own task, through the Registry.
    fn start(self: Arc<Self>, req: Request, work: Work) {
        let Ok(permit) = self.server.limiter.clone().try_acquire_owned() else {
            let e = ErrorObject::new(
                codes::SERVER_BUSY,
                format!(
                    "server busy: {} requests are in flight (the limit); retry later",
                    self.server.config.max_in_flight
                ),
            );
            self.log_rejected(&req, &work, "busy");
            self.respond(&req.id, Err(e));
            return;
        };
        let token = self.token.child_token();
        let progress = Arc::new(Progress::new(
            ProgressToken::from_params(req.params.as_ref()),
            req.id.clone(),
            self.server.config.progress_rate,
            self.sink.clone(),
        ));
        let started = Instant::now();
        let inserted = self.registry.insert(
            req.id.clone(),
            Slot {
                token: token.clone(),
                started,
                shape: work.shape,
                progress: progress.clone(),
                cancel: None,
            },
        );
        if !inserted {
            let e = ErrorObject::new(
                codes::INVALID_REQUEST,
                format!("request id {} is already in flight in this session", req.id),
            );
            self.log_rejected(&req, &work, "duplicate_id");
            self.respond(&req.id, Err(e));
            return;
        }
        if self.server.log.enabled() {
            let mut extra = Map::new();
            extra.insert("method".into(), req.method.as_str().into());
            if let Some(t) = &work.tool {
                extra.insert("tool".into(), t.as_str().into());
            }
            if let Some(s) = work.shape {
                extra.insert("shape".into(), s.as_str().into());
            }
            if let Some(f) = &work.fingerprint {
                extra.insert("args_fingerprint".into(), f.as_str().into());
            }
            self.log("request.start", &req.id, extra);
        }
        let deadline = work.deadline.map(|d| started + d);
        let shared = Arc::new(RequestShared {
            id: req.id.clone(),
            session: self.clone(),
            token,
            deadline,
            progress,
            cleanups: Mutex::new(Vec::new()),
            meta: req.params.as_ref().and_then(|p| p.get("_meta")).cloned(),
        });
        let fut = (work.make)(Context {
            shared: shared.clone(),
        });
        let meta = EndMeta {
            method: req.method,
            tool: work.tool,
            is_tool_call: work.is_tool_call,
            started,
        };
        tokio::spawn(async move {
            let _permit = permit;
            run_request(shared, fut, meta).await;
        });
    }

    fn log_rejected(&self, req: &Request, work: &Work, why: &str) {
        if !self.server.log.enabled() {
            return;
        }
        let mut extra = Map::new();
        extra.insert("method".into(), req.method.as_str().into());
        if let Some(t) = &work.tool {
            extra.insert("tool".into(), t.as_str().into());
        }
        self.log("request.start", &req.id, extra.clone());
        extra.insert("outcome".into(), "rejected".into());
        extra.insert("why".into(), why.into());
        extra.insert("duration_ms".into(), 0.into());
        self.log("request.end", &req.id, extra);
    }

    fn on_notification(&self, n: Notification) {
        match n.method.as_str() {
            methods::CANCELLED => {
                let p: CancelledParams = match parse_params(n.params.as_ref()) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(session = %self.id, error = %e, "malformed cancel ignored");
                        return;
                    }
                };
                let Some(id) = p.request_id else {
                    tracing::info!(session = %self.id, "cancel without requestId ignored (tasks use tasks/cancel)");
                    return;
                };
                self.on_cancel(&id, p.reason.as_deref());
            }
            methods::INITIALIZED => {}
            other => tracing::debug!(session = %self.id, method = other, "notification ignored"),
        }
    }

    fn on_cancel(&self, id: &RequestId, reason: Option<&str>) {
        let routed = self.registry.cancel(id, |since_start, ignored| {
            self.log_cancel(id, reason, since_start, ignored);
        });
        match routed {
            // No response will follow: the request's stream (HTTP) can close now.
            CancelResult::Routed => self.sink.end_stream(id),
            CancelResult::Repeated => {}
            CancelResult::Unknown => {
                let why = if self.lock_state().initialize_id.as_ref() == Some(id) {
                    "not_cancellable"
                } else {
                    "unknown_id"
                };
                tracing::info!(session = %self.id, request_id = %id, why, "cancel ignored");
                if self.server.log.enabled() {
                    let mut extra = Map::new();
                    extra.insert("why".into(), why.into());
                    if let Some(r) = reason {
                        extra.insert("reason".into(), r.into());
                    }
                    self.log("request.cancel_ignored", id, extra);
                }
            }
        }
    }

    fn on_response(&self, r: Response) {
        let waiter = self
            .outgoing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&r.id);
        match waiter {
            Some(tx) => {
                let _ = tx.send(r.outcome);
            }
            None => {
                tracing::info!(session = %self.id, id = %r.id, "response to an unknown request ignored")
            }
        }
    }
}

struct EndMeta {
    method: String,
    tool: Option<String>,
    is_tool_call: bool,
    started: Instant,
}

/// The task of one request: runs the handler, enforces the grace period after a cancel and
/// the deadline, waits for cleanups, then answers (or not) and logs the end.
async fn run_request(
    shared: Arc<RequestShared>,
    fut: BoxFuture<'static, Result<Value, ToolError>>,
    meta: EndMeta,
) {
    let session = shared.session.clone();
    let grace = session.server.config.cancel_grace;
    let mut fut = std::panic::AssertUnwindSafe(fut).catch_unwind();
    let deadline_sleep = async {
        match shared.deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    let mut deadline_hit = false;
    let finished = |r: Result<Result<Value, ToolError>, Box<dyn std::any::Any + Send>>| match r {
        Ok(r) => Ended::Returned(r),
        Err(p) => Ended::Panicked(panic_message(&p)),
    };
    let ended = tokio::select! {
        biased;
        r = &mut fut => finished(r),
        _ = shared.token.cancelled() => match tokio::time::timeout(grace, &mut fut).await {
            Ok(r) => finished(r),
            Err(_) => Ended::Aborted,
        },
        _ = deadline_sleep => {
            deadline_hit = true;
            shared.token.cancel();
            match tokio::time::timeout(grace, &mut fut).await {
                Ok(r) => finished(r),
                Err(_) => Ended::Aborted,
            }
        }
    };
    // Dropping the handler future here is the abort, when it came to that.
    drop(fut);
    let cleanups = std::mem::take(&mut *shared.cleanups.lock().unwrap_or_else(|p| p.into_inner()));
    for c in cleanups {
        let _ = c.await;
    }

    let slot = session.registry.finish(&shared.id);
    let cancel_at = slot.as_ref().and_then(|s| s.cancel.as_ref().map(|c| c.at));
    let atomic = slot.as_ref().and_then(|s| s.shape) == Some(Shape::Atomic);
    let now = Instant::now();
    let mut extra = Map::new();

    let outcome: &str = if let Some(cancel_at) = cancel_at {
        // The client gave up (or its session closed): never answer.
        shared.progress.close();
        extra.insert(
            "after_cancel_ms".into(),
            ms(now.duration_since(cancel_at)).into(),
        );
        match &ended {
            Ended::Aborted => {
                if session.server.log.enabled() {
                    let mut a = Map::new();
                    a.insert(
                        "since_cancel_ms".into(),
                        ms(now.duration_since(cancel_at)).into(),
                    );
                    session.log("request.aborted", &shared.id, a);
                }
                "aborted"
            }
            Ended::Panicked(_) => "panic",
            Ended::Returned(Err(ToolError::Cancelled | ToolError::DeadlineExceeded)) => "cancelled",
            Ended::Returned(_) if atomic => {
                extra.insert("response_suppressed".into(), true.into());
                "ok"
            }
            Ended::Returned(_) => "late_finish",
        }
    } else {
        let (outcome, response) = match ended {
            Ended::Returned(Ok(v)) => {
                shared.progress.finish();
                let is_error = meta.is_tool_call && v.get("isError") == Some(&Value::Bool(true));
                (if is_error { "error" } else { "ok" }, Ok(v))
            }
            Ended::Returned(Err(e)) if deadline_hit || matches!(e, ToolError::DeadlineExceeded) => {
                shared.progress.close();
                ("deadline", deadline_response(&meta, &shared))
            }
            Ended::Aborted => {
                shared.progress.close();
                ("deadline", deadline_response(&meta, &shared))
            }
            Ended::Returned(Err(e)) => {
                shared.progress.finish();
                ("error", Err(error_object(e)))
            }
            Ended::Panicked(msg) => {
                shared.progress.close();
                tracing::error!(session = %session.id, request_id = %shared.id, panic = %msg, "handler panicked");
                extra.insert("panic".into(), msg.as_str().into());
                (
                    "panic",
                    Err(ErrorObject::internal(format!(
                        "the handler failed unexpectedly: {msg}"
                    ))),
                )
            }
        };
        session.respond(&shared.id, response);
        outcome
    };

    if session.server.log.enabled() {
        extra.insert("method".into(), meta.method.into());
        if let Some(t) = meta.tool {
            extra.insert("tool".into(), t.into());
        }
        extra.insert("outcome".into(), outcome.into());
        extra.insert(
            "duration_ms".into(),
            ms(now.duration_since(meta.started)).into(),
        );
        session.log("request.end", &shared.id, extra);
    }
}

fn deadline_response(meta: &EndMeta, shared: &RequestShared) -> Result<Value, ErrorObject> {
    let limit = shared
        .deadline
        .map(|d| d.duration_since(meta.started))
        .unwrap_or_default();
    let msg = format!(
        "stopped after its deadline of {:.1} s; the work was cancelled. Retry with less work, \
         or use a job tool for long work",
        limit.as_secs_f64()
    );
    if meta.is_tool_call {
        Ok(to_value(&CallToolResult::error(msg)))
    } else {
        Err(ErrorObject::new(codes::DEADLINE_EXCEEDED, msg))
    }
}

fn error_object(e: ToolError) -> ErrorObject {
    match e {
        ToolError::Rpc(e) => e,
        ToolError::Tool(m) => ErrorObject::invalid_params(m),
        ToolError::Internal(m) => ErrorObject::internal(m),
        // Only reached when the runtime itself did not cancel: the handler gave up on its own.
        ToolError::Cancelled => ErrorObject::internal("the handler stopped as if cancelled"),
        ToolError::DeadlineExceeded => {
            ErrorObject::new(codes::DEADLINE_EXCEEDED, "deadline exceeded")
        }
    }
}

fn parse_params<T: serde::de::DeserializeOwned>(params: Option<&Value>) -> Result<T, ErrorObject> {
    // Fast path (every well-formed request): straight from the borrowed value — no copy of the
    // whole params, no path tracking. serde_path_to_error allocates a path segment per key and
    // was ~15 % of the instructions of a `tools/call` (callgrind, benches/profile); only a
    // failure pays for it now, to say where the input is wrong.
    let empty = Value::Object(Map::new());
    let v = params.unwrap_or(&empty);
    if let Ok(t) = <T as serde::Deserialize>::deserialize(v) {
        return Ok(t);
    }
    serde_path_to_error::deserialize::<_, T>(v.clone()).map_err(|e| {
        let path = e.path().to_string();
        ErrorObject::invalid_params(if path == "." {
            format!("invalid params: {}", e.into_inner())
        } else {
            format!("invalid params: `{path}`: {}", e.into_inner())
        })
    })
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// First 16 hex digits of SHA-256 of the canonical arguments (keys sorted: serde_json's map
/// is ordered).
pub(crate) fn fingerprint(args: &Value) -> String {
    let digest = Sha256::digest(args.to_string().as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
