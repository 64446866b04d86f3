//! [`Context`]: what a handler receives.
//!
//! Cancellation is cooperative first and forced second: a handler observes its cancel through
//! [`Context::check`], [`Context::cancelled`], or by wrapping downstream calls in
//! [`Context::run`] (which drops them on cancel or deadline, so their socket or query ends
//! too). A handler that ignores it is dropped by the Registry after the grace period.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use staunch_protocol::mcp::{LoggingLevel, LoggingMessageParams, methods};
use staunch_protocol::{RequestId, notification_bytes, request_bytes};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::error::ToolError;
use crate::outbound::{Outbound, OutboundKind};
use crate::progress::Progress;
use crate::session::SessionInner;

/// State one request's handler shares with the runtime.
pub(crate) struct RequestShared {
    pub(crate) id: RequestId,
    pub(crate) session: Arc<SessionInner>,
    pub(crate) token: CancellationToken,
    pub(crate) deadline: Option<Instant>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) cleanups: Mutex<Vec<JoinHandle<()>>>,
    /// The request's `params._meta`, as sent.
    pub(crate) meta: Option<Value>,
}

/// The handle a tool handler gets for its request. Cheap to clone.
#[derive(Clone)]
pub struct Context {
    pub(crate) shared: Arc<RequestShared>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("request_id", &self.shared.id)
            .field("session", &self.shared.session.id)
            .finish()
    }
}

/// Sends notifications to a session that may have outlived the request it came from.
#[derive(Clone)]
pub struct Notifier {
    session: std::sync::Weak<SessionInner>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").finish_non_exhaustive()
    }
}

impl Notifier {
    /// Sends a notification unrelated to any request (on HTTP: the standalone stream).
    /// Returns false when the session is gone.
    pub fn notify(&self, method: &str, params: Value) -> bool {
        let Some(s) = self.session.upgrade() else {
            return false;
        };
        s.sink.send(Outbound {
            related: None,
            kind: OutboundKind::Notification,
            bytes: notification_bytes(method, Some(&params)),
        });
        true
    }
}

/// Handed to [`Context::blocking`] closures: ask it between units of blocking work.
#[derive(Clone, Debug)]
pub struct BlockingUnit {
    token: CancellationToken,
    deadline: Option<Instant>,
}

impl BlockingUnit {
    /// Whether the request was cancelled (or ran out of time).
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// `Err` when the request was cancelled; call it at the top of each unit.
    pub fn check(&self) -> Result<(), ToolError> {
        check_token(&self.token, self.deadline)
    }
}

fn check_token(token: &CancellationToken, deadline: Option<Instant>) -> Result<(), ToolError> {
    if !token.is_cancelled() {
        return Ok(());
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        Err(ToolError::DeadlineExceeded)
    } else {
        Err(ToolError::Cancelled)
    }
}

impl Context {
    /// The JSON-RPC id of the request.
    pub fn request_id(&self) -> &RequestId {
        &self.shared.id
    }

    /// The request's `params._meta` object as the client sent it (vendor keys such as
    /// `io.staunch/idempotency-key` live here), if any.
    pub fn meta(&self) -> Option<&Value> {
        self.shared.meta.as_ref()
    }

    /// The session (connection) the request came on.
    pub fn session_id(&self) -> &str {
        &self.shared.session.id
    }

    /// Whether the request was cancelled (by the client, its session closing, or its deadline).
    pub fn is_cancelled(&self) -> bool {
        self.shared.token.is_cancelled()
    }

    /// Completes when the request is cancelled.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.shared.token.cancelled()
    }

    /// `Err(Cancelled)` (or `Err(DeadlineExceeded)`) once the request is cancelled. Put it at
    /// the top of each unit of work, before the expensive call.
    pub fn check(&self) -> Result<(), ToolError> {
        check_token(&self.shared.token, self.shared.deadline)
    }

    /// The tool's own deadline, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.shared.deadline
    }

    /// A token that fires with this request's cancel, for code that takes one.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.shared.token.clone()
    }

    /// Runs a downstream future; drops it (ending its I/O) when the request is cancelled or
    /// its deadline passes.
    pub async fn run<F: Future>(&self, fut: F) -> Result<F::Output, ToolError> {
        tokio::select! {
            biased;
            _ = self.shared.token.cancelled() => Err(self.check().err().unwrap_or(ToolError::Cancelled)),
            out = fut => Ok(out),
        }
    }

    /// Sleeps, unless the request is cancelled first.
    pub async fn sleep(&self, d: Duration) -> Result<(), ToolError> {
        self.run(tokio::time::sleep(d)).await
    }

    /// Runs blocking work on tokio's blocking pool, off the message loop. The closure gets a
    /// [`BlockingUnit`] to check between units; this returns when the closure does (it stops
    /// at its next check after a cancel).
    pub async fn blocking<T, F>(&self, f: F) -> Result<T, ToolError>
    where
        T: Send + 'static,
        F: FnOnce(&BlockingUnit) -> Result<T, ToolError> + Send + 'static,
    {
        self.check()?;
        let unit = BlockingUnit {
            token: self.shared.token.clone(),
            deadline: self.shared.deadline,
        };
        match tokio::task::spawn_blocking(move || f(&unit)).await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(ToolError::Cancelled),
        }
    }

    /// Reports progress. A no-op when the client gave no progress token; values that do not
    /// increase are dropped; a flood is coalesced to the latest value; nothing is sent after
    /// the response or after a cancel.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.shared.progress.report(progress, total, message);
    }

    /// Whether the client asked for progress (sent a token).
    pub fn wants_progress(&self) -> bool {
        self.shared.progress.has_token()
    }

    /// Runs compensation that must happen even though the request is being cancelled: it is
    /// spawned shielded from the cancel (and from the handler being dropped), bounded by
    /// `limit` (capped by the server's `max_cleanup`). The request's end is logged only after
    /// it finishes or times out.
    pub fn cleanup<F>(&self, limit: Duration, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let limit = limit.min(self.shared.session.server.config.max_cleanup);
        let handle = tokio::spawn(async move {
            if tokio::time::timeout(limit, fut).await.is_err() {
                tracing::warn!(?limit, "cleanup did not finish within its limit");
            }
        });
        self.shared
            .cleanups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(handle);
    }

    /// Sends a client-visible log message (`notifications/message`) if the session's level
    /// lets it through.
    pub fn log(&self, level: LoggingLevel, data: impl Into<Value>) {
        if level < self.shared.session.log_level() {
            return;
        }
        let params = LoggingMessageParams {
            level,
            logger: None,
            data: data.into(),
        };
        let params = serde_json::to_value(params).unwrap_or_default();
        self.shared.session.sink.send(Outbound {
            related: Some(self.shared.id.clone()),
            kind: OutboundKind::Notification,
            bytes: notification_bytes(methods::MESSAGE, Some(&params)),
        });
    }

    /// Closes the connection carrying this request's SSE stream, without ending the stream:
    /// the client reconnects with `Last-Event-ID` and gets what it missed (Streamable HTTP
    /// 2025-11-25 polling). A no-op on stdio.
    pub fn close_sse_stream(&self) {
        self.shared.session.sink.close_connection(&self.shared.id);
    }

    /// A handle that can send notifications to this session after the request has ended
    /// (e.g. `notifications/tasks/status` from a job), for as long as the session lives.
    pub fn notifier(&self) -> Notifier {
        Notifier {
            session: Arc::downgrade(&self.shared.session),
        }
    }

    /// The capabilities the client declared at `initialize`.
    pub fn client_capabilities(&self) -> Value {
        self.shared.session.client_capabilities()
    }

    /// The negotiated protocol version, once initialized.
    pub fn protocol_version(&self) -> Option<String> {
        self.shared.session.protocol_version()
    }

    /// Sends a request to the client (sampling, elicitation, roots) on this request's stream
    /// and waits for its answer; gives up (and tells the client) if this request is cancelled.
    pub async fn request_client(&self, method: &str, params: Value) -> Result<Value, ToolError> {
        let session = &self.shared.session;
        let (id, rx) = session.register_outgoing();
        session.sink.send(Outbound {
            related: Some(self.shared.id.clone()),
            kind: OutboundKind::Request,
            bytes: request_bytes(&id, method, Some(&params)),
        });
        match self.run(rx).await {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(e))) => Err(ToolError::Rpc(e)),
            Ok(Err(_)) => Err(ToolError::Internal("the session closed".into())),
            Err(e) => {
                session.forget_outgoing(&id);
                let params =
                    serde_json::json!({"requestId": id.to_value(), "reason": "request cancelled"});
                session.sink.send(Outbound {
                    related: Some(self.shared.id.clone()),
                    kind: OutboundKind::Notification,
                    bytes: notification_bytes(methods::CANCELLED, Some(&params)),
                });
                Err(e)
            }
        }
    }
}
