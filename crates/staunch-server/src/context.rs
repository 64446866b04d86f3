//! [`Context`]: what a handler receives.
//!
//! Cancellation is cooperative first and forced second: a handler observes its cancel through
//! [`Context::check`], [`Context::cancelled`], or by wrapping downstream calls in
//! [`Context::run`] (which drops them on cancel or deadline, so their socket or query ends
//! too). A handler that ignores it is dropped by the request core after the grace period.
//!
//! A context holds a narrow handle on its request — its key and token, its progress, the
//! connection it answers on and what it knows about its client — never the session, so the same
//! handler serves a session-era request and a stateless one. Questions to the client
//! ([`Context::elicit`], [`Context::sample`], [`Context::list_roots`], [`Context::ask`]) are a
//! server→client request in the session era and an input-required round in the stateless era
//! (see [`crate::input`]).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use staunch_protocol::mcp::{LoggingLevel, LoggingMessageParams, methods};
use staunch_protocol::{ErrorObject, RequestId, notification_bytes, request_bytes};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::{
    CancellationToken, WaitForCancellationFuture, WaitForCancellationFutureOwned,
};

use crate::codec::Peer;
use crate::conn::{Conn, RequestKey};
use crate::error::ToolError;
use crate::input::{Rounds, capability_for};
use crate::outbound::{Outbound, OutboundKind};
use crate::progress::Progress;

/// State one request's handler shares with the runtime.
pub(crate) struct RequestShared {
    /// The request's span (`None` unless traces are on).
    pub(crate) span: Option<Box<dyn crate::trace::RequestSpan>>,
    pub(crate) key: RequestKey,
    pub(crate) id: RequestId,
    /// Where its messages go.
    pub(crate) conn: Arc<Conn>,
    /// What it knows about its client.
    pub(crate) peer: Peer,
    /// The longest a cleanup may run.
    pub(crate) max_cleanup: Duration,
    pub(crate) token: CancellationToken,
    /// Why the token fired, once it has.
    pub(crate) why: crate::reason::WhyCell,
    pub(crate) deadline: Option<Instant>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) cleanups: Mutex<Vec<JoinHandle<()>>>,
    /// The request's `params._meta`, as sent.
    pub(crate) meta: Option<Value>,
    /// A stateless request's input-required rounds (tools/call, prompts/get, resources/read).
    pub(crate) rounds: Option<Rounds>,
    /// Where list changes are announced.
    pub(crate) listen: crate::changes::ListenHub,
    pub(crate) log: crate::lifecycle::LifecycleLog,
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
            .field("conn", &self.shared.conn.label)
            .finish()
    }
}

/// Sends notifications to a connection that may have outlived the request it came from.
#[derive(Clone)]
pub struct Notifier {
    conn: std::sync::Weak<Conn>,
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
        let Some(c) = self.conn.upgrade() else {
            return false;
        };
        c.send(Outbound::notification(
            None,
            notification_bytes(method, Some(&params)),
        ));
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
    /// `io.staunch/idempotency-key` live here), if any. Of a 2026-07-28 request's `_meta`, the
    /// protocol's own keys (version, capabilities, `clientInfo`, `logLevel`) are not here: they
    /// were read into the request ([`Context::client_capabilities`],
    /// [`Context::protocol_version`]).
    pub fn meta(&self) -> Option<&Value> {
        self.shared.meta.as_ref()
    }

    /// This request's span as a W3C `traceparent` value, when traces are on: work that
    /// outlives the request (a durable job) records it so its spans can link back here.
    pub fn traceparent(&self) -> Option<String> {
        self.shared.span.as_ref()?.traceparent()
    }

    /// The session (connection) the request came on: an HTTP session's id, `stdio`, or — for
    /// a stateless HTTP request — the key the lifecycle log uses for it.
    pub fn session_id(&self) -> &str {
        &self.shared.conn.label
    }

    /// The session that owns the work this request starts (jobs, tasks, idempotency keys): an
    /// HTTP session's id. `None` for stdio (one client per process, whose work outlives the
    /// process) and for stateless requests (no session).
    pub fn owning_session(&self) -> Option<&str> {
        let conn = &self.shared.conn;
        conn.owns_work.then_some(&*conn.label)
    }

    /// Completes when the session of [`Context::owning_session`] closes (HTTP DELETE, expiry,
    /// shutdown), at once if it already has; `None` where there is no such session. For
    /// resources a handler keeps per session beyond its request (a proxy's per-session
    /// upstream), so they end with the session rather than at an idle timeout.
    pub fn session_closed(&self) -> Option<WaitForCancellationFutureOwned> {
        self.shared
            .conn
            .closed
            .clone()
            .map(CancellationToken::cancelled_owned)
    }

    /// Who made the request, when the transport authenticated it (HTTP with `--auth`): the
    /// token's principal — a static token's name or a JWT's `sub`. `None` on stdio and
    /// without auth. Durable work uses it to bind jobs and tasks to their owner.
    pub fn principal(&self) -> Option<&str> {
        self.shared.conn.principal.as_deref()
    }

    /// Writes `event` to the lifecycle log as a step of this request (its session key and id),
    /// e.g. a proxy's `upstream.*` lines.
    pub fn log_event(&self, event: &staunch_lifecycle::Event<'_>) {
        self.shared
            .log
            .event(&self.shared.conn.log_label, &self.shared.id, event);
    }

    /// Whether the request belongs to a session (the session era, 2025): tasks are the
    /// session's, log messages can reach the session after the request. A request without one
    /// (2026-07-28) carries everything in its own `_meta` and is cancelled by closing its
    /// stream.
    pub fn has_session(&self) -> bool {
        self.shared.peer.has_session()
    }

    /// Whether the client answers this request's questions (elicitation, sampling, roots) in
    /// input-required rounds — a new request of its own, which carries the answers — rather
    /// than answering a request of the server's while this one waits (see [`Context::ask`]).
    pub fn asks_in_rounds(&self) -> bool {
        self.shared.peer.asks_in_rounds()
    }

    /// Whether the request was cancelled (by the client, its session closing, or its deadline).
    pub fn is_cancelled(&self) -> bool {
        self.shared.token.is_cancelled()
    }

    /// Why the request was stopped, once it was: the client's cancel, its stream or session
    /// closing, shutdown, or the deadline. Set before the token fires, so a handler that wakes
    /// on [`Context::cancelled`] can read it. Work that outlives the request (a durable job)
    /// uses [`CancelReason::client_asked`](crate::reason::CancelReason::client_asked) to decide whether to stop it too.
    pub fn cancel_reason(&self) -> Option<crate::reason::CancelReason> {
        self.shared
            .why
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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
        self.shared
            .progress
            .report(progress, total, message, Map::new());
    }

    /// [`Context::progress`] with more fields in the notification's params (`_meta`, or
    /// fields staunch does not know), as a proxy passes on what its upstream sent. The
    /// protocol's own fields (`progressToken`, `progress`, `total`, `message`) are the
    /// arguments'; a coalesced value takes its fields with it.
    pub fn progress_with(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
        extra: Map<String, Value>,
    ) {
        self.shared.progress.report(progress, total, message, extra);
    }

    /// Sends a notification on this request's stream (stdio: in order with its other
    /// messages), unless the request was cancelled.
    pub fn notify(&self, method: &str, params: Value) {
        if self.shared.token.is_cancelled() {
            return;
        }
        self.shared.conn.send(Outbound::notification(
            Some(self.shared.id.clone()),
            notification_bytes(method, Some(&params)),
        ));
    }

    /// Announces a change to every `subscriptions/listen` stream that asked for it (e.g. the
    /// tool list changed).
    pub fn announce(&self, change: crate::changes::Change) {
        self.shared.listen.announce(change);
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
        let limit = limit.min(self.shared.max_cleanup);
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

    /// Sends a client-visible log message (`notifications/message`) if the client's level lets
    /// it through (a session's level; a stateless request's own `logLevel` — none without it).
    pub fn log(&self, level: LoggingLevel, data: impl Into<Value>) {
        if !self.logs_at(level) {
            return;
        }
        let params = LoggingMessageParams {
            level,
            logger: None,
            data: data.into(),
        };
        let params = serde_json::to_value(params).unwrap_or_default();
        self.shared.conn.send(Outbound::notification(
            Some(self.shared.id.clone()),
            notification_bytes(methods::MESSAGE, Some(&params)),
        ));
    }

    /// Passes on a `notifications/message` another server sent (`staunch proxy`), its params
    /// unchanged — level, logger, data and any field staunch does not know — if the client's
    /// level lets it through, as [`Context::log`] does. A message without a readable level is
    /// dropped. Returns whether it was sent.
    pub fn forward_log(&self, params: &Value) -> bool {
        let level = params
            .get("level")
            .and_then(|l| serde_json::from_value::<LoggingLevel>(l.clone()).ok());
        if !level.is_some_and(|l| self.logs_at(l)) || self.shared.token.is_cancelled() {
            return false;
        }
        self.shared.conn.send(Outbound::notification(
            Some(self.shared.id.clone()),
            notification_bytes(methods::MESSAGE, Some(params)),
        ));
        true
    }

    /// Sends a log message (`notifications/message`) to this request's session, not on the
    /// request's own stream — so it is sent even after the request was cancelled, when
    /// nothing more may go out about the request itself. A 2025 session gets it on its
    /// standalone stream (stdout over stdio) if its level lets it through; a stateless request
    /// has no session, and gets nothing. Returns whether it was sent. For a proxy telling the
    /// client that work it cancelled went on elsewhere.
    pub fn log_to_session(&self, level: LoggingLevel, logger: &str, data: Value) -> bool {
        if !self.shared.peer.has_session() || !self.logs_at(level) {
            return false;
        }
        let params = LoggingMessageParams {
            level,
            logger: Some(logger.to_string()),
            data,
        };
        let params = serde_json::to_value(params).unwrap_or_default();
        self.shared.conn.send(Outbound::notification(
            None,
            notification_bytes(methods::MESSAGE, Some(&params)),
        ));
        true
    }

    /// Whether the client wants log messages at `level` (a session's level; a stateless
    /// request's own `logLevel` — none without it).
    fn logs_at(&self, level: LoggingLevel) -> bool {
        self.shared.peer.log_level().is_some_and(|min| level >= min)
    }

    /// Closes the connection carrying this request's SSE stream, without ending the stream:
    /// the client reconnects with `Last-Event-ID` and gets what it missed (Streamable HTTP
    /// 2025-11-25 polling). A no-op on stdio.
    pub fn close_sse_stream(&self) {
        self.shared.conn.sink.close_connection(&self.shared.id);
    }

    /// A handle that can send notifications to this connection after the request has ended
    /// (e.g. `notifications/tasks/status` from a job), for as long as the connection lives.
    pub fn notifier(&self) -> Notifier {
        Notifier {
            conn: Arc::downgrade(&self.shared.conn),
        }
    }

    /// The capabilities the client declared (at `initialize`, or in this request's `_meta`).
    pub fn client_capabilities(&self) -> Value {
        self.shared.peer.client_capabilities()
    }

    /// The protocol version the request is served in (a session's negotiated version, or a
    /// stateless request's own).
    pub fn protocol_version(&self) -> Option<String> {
        self.shared
            .peer
            .protocol_version()
            .map(std::borrow::Cow::into_owned)
    }

    /// Rounds of input the client has answered so far for this request (stateless era; always
    /// 0 in the session era, where questions are answered within one request).
    pub fn input_round(&self) -> u32 {
        self.shared.rounds.as_ref().map_or(0, Rounds::round)
    }

    /// The keys of the questions the client has answered so far in this request's
    /// input-required rounds (stateless era; none in the session era). A handler that keys its
    /// questions by something it keeps between rounds finds its place with them.
    pub fn answered_keys(&self) -> impl Iterator<Item = &str> {
        self.shared
            .rounds
            .iter()
            .flat_map(|rounds| rounds.answered_keys())
    }

    /// Asks the user through the client (`elicitation/create`; `params` are its params:
    /// `message`, `requestedSchema`). Returns the client's answer (`action`, `content`).
    ///
    /// In the stateless era an unanswered question ends this round: propagate the
    /// [`ToolError::InputRequired`] this returns (with `?`), and the client retries the
    /// request with the answer; the handler runs again from the start. Ask before acting.
    pub async fn elicit(&self, params: Value) -> Result<Value, ToolError> {
        self.ask(None, "elicitation/create", params).await
    }

    /// [`Context::elicit`] with the key the question carries in `inputRequests` (stateless era;
    /// keys must be unique within the request).
    pub async fn elicit_as(&self, key: &str, params: Value) -> Result<Value, ToolError> {
        self.ask(Some(key), "elicitation/create", params).await
    }

    /// Asks the client's model (`sampling/createMessage`; `params` are its params). See
    /// [`Context::elicit`] for the stateless era.
    pub async fn sample(&self, params: Value) -> Result<Value, ToolError> {
        self.ask(None, "sampling/createMessage", params).await
    }

    /// Asks the client for its roots (`roots/list`). See [`Context::elicit`] for the stateless
    /// era.
    pub async fn list_roots(&self) -> Result<Value, ToolError> {
        self.ask(None, "roots/list", Value::Object(Default::default()))
            .await
    }

    /// Asks the client one question: `method` (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`) with `params`, under `key` when given. A client that did not declare the
    /// capability the method needs gets -32021 (`requiredCapabilities`) in the stateless era,
    /// and a tool error saying so in the session era (which has no code for it).
    pub async fn ask(
        &self,
        key: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, ToolError> {
        let mut answers = self.ask_all(vec![(key, method, params)]).await?;
        Ok(answers.pop().unwrap_or_default())
    }

    /// Asks several questions at once: one round in the stateless era (every unanswered one
    /// goes out in the same `inputRequests`), concurrent server→client requests in the session
    /// era. The answers come back in order.
    pub async fn ask_all(
        &self,
        questions: Vec<(Option<&str>, &str, Value)>,
    ) -> Result<Vec<Value>, ToolError> {
        for (_, method, _) in &questions {
            if let Some(cap) = capability_for(method)
                && !self.shared.peer.has_capability(cap)
            {
                return Err(self.shared.peer.missing_capability(cap, method));
            }
        }
        if let Some(rounds) = &self.shared.rounds {
            let mut answers = Vec::with_capacity(questions.len());
            let mut missing = false;
            for (key, method, params) in &questions {
                let key = match key {
                    Some(k) => (*k).to_string(),
                    None => rounds.next_key(method.split('/').next().unwrap_or("input")),
                };
                match rounds.answer_or_ask(&key, method, params) {
                    Some(a) => answers.push(a),
                    None => missing = true,
                }
            }
            return if missing {
                Err(ToolError::InputRequired)
            } else {
                Ok(answers)
            };
        }
        if self.shared.peer.asks_in_rounds() {
            return Err(ToolError::Rpc(ErrorObject::internal(
                "this request cannot ask the client for input (only tools/call, prompts/get and \
                 resources/read can ask in input-required rounds)",
            )));
        }
        let calls = questions
            .into_iter()
            .map(|(_, method, params)| self.request_client(method, params));
        futures_util::future::join_all(calls)
            .await
            .into_iter()
            .collect()
    }

    /// Sends a request to the client (sampling, elicitation, roots) on this request's stream
    /// and waits for its answer; gives up (and tells the client) if this request is cancelled.
    /// In the stateless era this is [`Context::ask`] (an input-required round).
    pub async fn request_client(&self, method: &str, params: Value) -> Result<Value, ToolError> {
        if self.shared.peer.asks_in_rounds() {
            return self.ask(None, method, params).await;
        }
        let conn = &self.shared.conn;
        let (id, rx) = conn.register_outgoing();
        conn.send(Outbound {
            related: Some(self.shared.id.clone()),
            kind: OutboundKind::Request,
            bytes: request_bytes(&id, method, Some(&params)),
            error_code: None,
        });
        // The answer comes through this instance, or (HTTP behind a balancer) through
        // another one that kept it in the shared store.
        let answer = async {
            match conn.relay.get() {
                Some(relay) => tokio::select! {
                    r = rx => r.map_err(|_| ()),
                    r = relay.wait(&id) => Ok(r),
                },
                None => rx.await.map_err(|_| ()),
            }
        };
        match self.run(answer).await {
            Ok(Ok(Ok(v))) => {
                conn.forget_outgoing(&id);
                Ok(v)
            }
            Ok(Ok(Err(e))) => {
                conn.forget_outgoing(&id);
                Err(ToolError::Rpc(e))
            }
            Ok(Err(())) => Err(ToolError::Internal("the session closed".into())),
            Err(e) => {
                conn.forget_outgoing(&id);
                let params =
                    serde_json::json!({"requestId": id.to_value(), "reason": "request cancelled"});
                conn.send(Outbound::notification(
                    Some(self.shared.id.clone()),
                    notification_bytes(methods::CANCELLED, Some(&params)),
                ));
                Err(e)
            }
        }
    }
}
