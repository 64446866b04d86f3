//! The request core: the one home of a request's whole life, whichever era it came in.
//!
//! - [`start`] admits a request (the concurrency limit, a duplicate id), registers it, writes
//!   its `request.start` line and spawns the one task that runs it — or, for a transport that
//!   waits on its own task for this request's answer ([`Origin::eager`]), runs that task's
//!   first step on the caller and spawns it only if it has to wait ([`eager`]);
//! - that task ([`run`]) supervises the handler ([`crate::supervise`]: grace after a stop, then
//!   the abort; panics caught; the deadline), waits for its cleanups, and decides from the
//!   Registry's record of *why* its token fired whether a response goes out — a request
//!   cancelled for any reason but its own deadline never gets one;
//! - [`cancel`] (and [`cancel_conn`], [`cancel_everything`], in `cancel.rs`) are the only ways
//!   a request's token fires; each records its reason and writes `request.cancel_received`
//!   under the Registry's lock, so the cancel line always precedes the end line;
//! - [`answer_now`] answers cheap methods inline, logged like the rest.
//!
//! A request needs no session: it needs a connection to answer on ([`Conn`]) and what it knows
//! about its client ([`Peer`]), which also writes its answer for its era ([`respond`]).

mod answer;
mod cancel;
mod eager;
mod respond;
mod span;

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use staunch_lifecycle::{Event, Outcome};
use staunch_protocol::mcp::{CallToolResult, ProgressToken};
use staunch_protocol::{ErrorObject, Request, codes};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use answer::error_object;
pub(crate) use answer::{Answer, Make};
pub(crate) use cancel::{cancel, cancel_conn, cancel_everything, cancel_quietly};
pub(crate) use respond::respond;

use crate::codec::Peer;
use crate::conn::{Conn, RequestKey};
use crate::context::{Context, RequestShared};
use crate::error::ToolError;
use crate::fingerprint::Fingerprint;
use crate::input::Rounds;
use crate::progress::Progress;
use crate::registry::{CancelReason, Slot};
use crate::shared::ServerInner;
use crate::supervise::{Ended, supervise};
use crate::tool::Shape;
use crate::trace::RequestEnd;
use span::{end_span, span_start};

/// Where a request came from: the connection it is answered on and what it knows about its
/// client.
#[derive(Clone, Debug)]
pub(crate) struct Origin {
    pub(crate) conn: Arc<Conn>,
    pub(crate) peer: Peer,
    /// The caller is a transport's task that does nothing but wait for this request's answer
    /// (an HTTP POST answered with one JSON body, a 2026 HTTP request): the request's first
    /// step may run on it ([`eager`]). Never for a connection that reads on (stdio,
    /// the session's other requests): a handler's first step must not hold up its cancel.
    pub(crate) eager: bool,
}

/// The work a started request does, as the dispatcher prepared it.
pub(crate) struct Work {
    pub(crate) tool: Option<Arc<str>>,
    pub(crate) shape: Option<Shape>,
    pub(crate) deadline: Option<Duration>,
    pub(crate) fingerprint: Option<Fingerprint>,
    /// A `tools/call`: a deadline becomes a tool error (`isError`) rather than a JSON-RPC error.
    pub(crate) is_tool_call: bool,
    /// Stateless requests that may ask the client for input (tools/call, prompts/get,
    /// resources/read): their input-required rounds.
    pub(crate) rounds: Option<Rounds>,
    /// A subscription: when the server shuts down it ends with a response.
    pub(crate) answers_at_shutdown: bool,
    /// Makes the handler's future from its context and the request's params (moved, not
    /// copied: a tool call's arguments and `_meta` are already taken out of them).
    pub(crate) make: Make,
}

/// The fair-share check of an HTTP session's request ([`crate::fair`]): its place in its
/// peer's count (held by the request's registry slot until it ends), or why it may not start.
fn admit(
    server: &Arc<ServerInner>,
    conn: &Conn,
) -> Result<Option<crate::fair::PeerSlot>, ErrorObject> {
    if !conn.owns_work {
        return Ok(None);
    }
    let caps = server.fair_caps();
    let free = server.limiter.available_permits();
    let held = conn.in_flight();
    match &conn.peer {
        Some(key) => server
            .fair
            .admit_peer(key.clone(), Some(held), caps, free)
            .map(Some),
        None => server
            .fair
            .admit_keyless_session(held, caps, free)
            .map(|()| None),
    }
}

/// Starts a request in its own task. Returns at once.
pub(crate) fn start(server: &Arc<ServerInner>, origin: &Origin, mut req: Request, work: Work) {
    let key = RequestKey {
        conn: origin.conn.id,
        id: req.id.clone(),
    };
    let peer_slot = match admit(server, &origin.conn) {
        Ok(slot) => slot,
        Err(e) => {
            reject(server, origin, &req, &work, "busy", e);
            return;
        }
    };
    let Ok(permit) = server.limiter.clone().try_acquire_owned() else {
        let e = ErrorObject::new(
            codes::SERVER_BUSY,
            format!(
                "server busy: {} requests are in flight (the limit); retry later",
                server.config.max_in_flight
            ),
        );
        reject(server, origin, &req, &work, "busy", e);
        return;
    };
    let token = CancellationToken::new();
    let progress = Arc::new(Progress::new(
        ProgressToken::from_params(req.params.as_ref()),
        req.id.clone(),
        server.config.progress_rate,
        origin.conn.sink.clone(),
    ));
    let started = Instant::now();
    let why = crate::registry::WhyCell::default();
    let inserted = server.registry.insert(
        key.clone(),
        Slot {
            label: origin.conn.log_label.clone(),
            what: work
                .tool
                .clone()
                .unwrap_or_else(|| Arc::from(req.method.as_str())),
            token: token.clone(),
            started,
            shape: work.shape,
            progress: progress.clone(),
            cancel: None,
            why: why.clone(),
            answers_at_shutdown: work.answers_at_shutdown,
            _peer_slot: peer_slot,
        },
    );
    if !inserted {
        let e = ErrorObject::new(
            codes::INVALID_REQUEST,
            format!(
                "request id {} is already in flight on this connection",
                req.id
            ),
        );
        reject(server, origin, &req, &work, "duplicate_id", e);
        return;
    }
    if origin.conn.request_started() && origin.conn.owns_work && origin.conn.peer.is_none() {
        server.fair.keyless_busy();
    }
    let metric_tool = work.tool.as_deref().unwrap_or(&req.method);
    server
        .metrics
        .request_started(metric_tool, origin.peer.era_label());
    let version = origin.peer.protocol_version();
    server.log.event(
        &origin.conn.log_label,
        &req.id,
        &Event::Start {
            method: Some(req.method.as_str().into()),
            tool: work.tool.as_deref().map(Into::into),
            args_fingerprint: work.fingerprint.as_ref().map(|f| f.as_str().into()),
            shape: work.shape.map(|s| s.as_str().into()),
            protocol_version: version.as_deref().map(Into::into),
        },
    );
    // Disabled: one branch, nothing built.
    let span = server.traces.request(|| {
        let version = version.as_deref().map(str::to_owned);
        span_start(origin, &req, work.tool.as_deref(), version)
    });
    let shared = Arc::new(RequestShared {
        span,
        key,
        id: req.id.clone(),
        conn: origin.conn.clone(),
        peer: origin.peer.clone(),
        max_cleanup: server.config.max_cleanup,
        token,
        why,
        deadline: work.deadline.map(|d| started + d),
        progress,
        cleanups: Mutex::new(Vec::new()),
        meta: request_meta(&mut req.params, work.is_tool_call),
        rounds: work.rounds,
        listen: server.listen.clone(),
        log: server.log.clone(),
    });
    let fut = work.make.make(
        Context {
            shared: shared.clone(),
        },
        req.params,
    );
    let end = EndInfo {
        method: req.method,
        tool: work.tool,
        is_tool_call: work.is_tool_call,
        started,
    };
    let server = server.clone();
    let task = async move {
        let _permit = permit;
        run(server, shared, fut, end).await;
    };
    if origin.eager {
        eager::start(task);
    } else {
        // Boxed first: the task's cell then holds a pointer, not the whole future, which
        // tokio would otherwise copy as it spawns it and twice more as it stores its output.
        tokio::spawn(Box::pin(task));
    }
}

/// The request's `params._meta` for its context: moved out of a tool call's params (its
/// handler gets only the arguments), copied from anything else's (a method handler gets the
/// params as sent).
fn request_meta(params: &mut Option<Value>, tool_call: bool) -> Option<Value> {
    let Some(Value::Object(p)) = params else {
        return None;
    };
    if tool_call {
        p.remove("_meta")
    } else {
        p.get("_meta").cloned()
    }
}

/// Answers a request inline (cheap methods), logged as a request that started and ended.
pub(crate) fn answer_now(
    server: &ServerInner,
    origin: &Origin,
    req: &Request,
    outcome: Result<Value, ErrorObject>,
) {
    let label = &origin.conn.log_label;
    let version = origin.peer.protocol_version();
    server.log.event(
        label,
        &req.id,
        &Event::Start {
            method: Some(req.method.as_str().into()),
            tool: None,
            args_fingerprint: None,
            shape: None,
            protocol_version: version.as_deref().map(Into::into),
        },
    );
    let ok = if outcome.is_ok() {
        Outcome::Ok
    } else {
        Outcome::Error
    };
    server
        .metrics
        .request_answered_inline(&req.method, origin.peer.era_label(), ok.as_str());
    if let Some(span) = server
        .traces
        .request(|| span_start(origin, req, None, version.as_deref().map(str::to_owned)))
    {
        span.end(&RequestEnd {
            outcome: ok.as_str(),
            cancel: None,
            rejected_why: None,
            panic: None,
        });
    }
    server.log.event(
        label,
        &req.id,
        &Event::End {
            method: Some(req.method.as_str().into()),
            tool: None,
            outcome: ok.as_str().into(),
            duration_ms: Some(0),
            after_cancel_ms: None,
            why: None,
            panic: None,
            response_suppressed: false,
        },
    );
    respond(
        server,
        origin,
        &req.id,
        &req.method,
        outcome.map(Answer::Value),
    );
}

fn reject(
    server: &ServerInner,
    origin: &Origin,
    req: &Request,
    work: &Work,
    why: &'static str,
    e: ErrorObject,
) {
    let label = &origin.conn.log_label;
    let metric_tool = work.tool.as_deref().unwrap_or(&req.method);
    server.metrics.request_answered(
        metric_tool,
        origin.peer.era_label(),
        Outcome::Rejected.as_str(),
    );
    if let Some(span) = server.traces.request(|| {
        span_start(
            origin,
            req,
            work.tool.as_deref(),
            origin.peer.protocol_version().map(Cow::into_owned),
        )
    }) {
        span.end(&RequestEnd {
            outcome: Outcome::Rejected.as_str(),
            cancel: None,
            rejected_why: Some(why),
            panic: None,
        });
    }
    server.log.event(
        label,
        &req.id,
        &Event::Start {
            method: Some(req.method.as_str().into()),
            tool: work.tool.as_deref().map(Into::into),
            args_fingerprint: None,
            shape: None,
            protocol_version: None,
        },
    );
    server.log.event(
        label,
        &req.id,
        &Event::End {
            method: Some(req.method.as_str().into()),
            tool: work.tool.as_deref().map(Into::into),
            outcome: Outcome::Rejected.as_str().into(),
            duration_ms: Some(0),
            after_cancel_ms: None,
            why: Some(why.into()),
            panic: None,
            response_suppressed: false,
        },
    );
    respond(server, origin, &req.id, &req.method, Err(e));
}

struct EndInfo {
    method: String,
    tool: Option<Arc<str>>,
    is_tool_call: bool,
    started: Instant,
}

/// The task of one request: supervises the handler, waits for its cleanups, then answers (or
/// not) and logs the end.
async fn run(
    server: Arc<ServerInner>,
    shared: Arc<RequestShared>,
    fut: answer::HandlerFuture,
    end: EndInfo,
) {
    let grace = server.config.cancel_grace;
    let supervised = supervise(fut, &shared.token, grace, shared.deadline, || {
        // The deadline: recorded (it still answers) before the token fires.
        server
            .registry
            .cancel(&shared.key, CancelReason::Deadline, |_| {});
    })
    .await;
    let cleanups = std::mem::take(&mut *shared.cleanups.lock().unwrap_or_else(|p| p.into_inner()));
    for c in cleanups {
        let _ = c.await;
    }

    let slot = server.registry.finish(&shared.key);
    let mark = slot.as_ref().and_then(|s| s.cancel.clone());
    // Only with a span to end: the cancel becomes its event (not the request's own deadline,
    // which the log does not call a cancel either: the outcome says it).
    let traced_cancel = shared
        .span
        .as_ref()
        .and(mark.as_ref())
        .filter(|m| m.reason != CancelReason::Deadline)
        .map(|m| (m.at, m.reason.log_text().map(str::to_owned)));
    let atomic = slot.as_ref().and_then(|s| s.shape) == Some(Shape::Atomic);
    let now = Instant::now();
    let ended = supervised.ended;
    let mut after_cancel_ms = None;
    let mut stop_latency = None;
    let mut panic = None;
    let mut response_suppressed = false;

    let origin = Origin {
        conn: shared.conn.clone(),
        peer: shared.peer.clone(),
        eager: false,
    };
    let outcome = match mark {
        Some(mark) if !mark.answers => {
            // The client gave up, its session closed, or the server is going away: never
            // answer. The stream ends here whatever fired the token (a shutdown cancels
            // without a connection at hand to end it).
            shared.progress.close();
            // Fault injection, debug builds only (compiled out of release builds): it breaks
            // the rule above on purpose (the stream was left open at the cancel for it), so
            // that the chaos driver's wire check can be shown to report an answer after a
            // cancel (benches/chaos/tests/detects.rs).
            #[cfg(debug_assertions)]
            if crate::fault_injected("answer_after_cancel") {
                let e = ErrorObject::internal("injected fault: an answer after the cancel");
                respond(&server, &origin, &shared.id, &end.method, Err(e));
            }
            shared.conn.sink.end_stream(&shared.id);
            let since = now.duration_since(mark.at);
            after_cancel_ms = Some(ms(since));
            stop_latency = Some(since);
            match &ended {
                Ended::Aborted => {
                    server.log.event(
                        &shared.conn.log_label,
                        &shared.id,
                        &Event::Aborted {
                            since_cancel_ms: Some(ms(since)),
                        },
                    );
                    Outcome::Aborted
                }
                Ended::Panicked(m) => {
                    panic = Some(m.clone());
                    Outcome::Panic
                }
                Ended::Returned(Err(
                    ToolError::Cancelled | ToolError::DeadlineExceeded | ToolError::InputRequired,
                )) => Outcome::Cancelled,
                Ended::Returned(_) if atomic => {
                    response_suppressed = true;
                    Outcome::Ok
                }
                Ended::Returned(_) => Outcome::LateFinish,
            }
        }
        mark => {
            let deadline_hit = supervised.limit_hit
                || mark
                    .as_ref()
                    .is_some_and(|m| m.reason == CancelReason::Deadline);
            let (outcome, response) =
                decide(&server, &shared, &end, ended, deadline_hit, &mut panic);
            respond(&server, &origin, &shared.id, &end.method, response);
            outcome
        }
    };

    let progress = shared.progress.stats();
    server.metrics.request_ended(
        end.tool.as_deref().unwrap_or(&end.method),
        shared.peer.era_label(),
        outcome.as_str(),
        stop_latency,
        (progress.sent, progress.coalesced),
    );
    server.log.event(
        &shared.conn.log_label,
        &shared.id,
        &Event::End {
            method: Some(end.method.as_str().into()),
            tool: end.tool.as_deref().map(Into::into),
            outcome: outcome.as_str().into(),
            duration_ms: Some(ms(now.duration_since(end.started))),
            after_cancel_ms,
            why: None,
            panic: panic.as_deref().map(Into::into),
            response_suppressed,
        },
    );
    if let Some(span) = &shared.span {
        end_span(span.as_ref(), outcome, traced_cancel, now, panic.as_deref());
    }
    // Counted out last, once its end line is appended: a connection that closes waits for its
    // requests to reach zero and then flushes the log, so an end counted out before its line
    // was written could be lost when the process exits right after.
    if shared.conn.request_ended() && shared.conn.owns_work && shared.conn.peer.is_none() {
        server.fair.keyless_idle();
    }
}

/// The answer to a request that was not cancelled (or only by its own deadline).
fn decide(
    server: &ServerInner,
    shared: &RequestShared,
    end: &EndInfo,
    ended: Ended<Result<Answer, ToolError>>,
    deadline_hit: bool,
    panic: &mut Option<String>,
) -> (Outcome, Result<Answer, ErrorObject>) {
    // An input-required round: the handler asked the client something it has not answered.
    // That is the answer, whatever the handler did with the question.
    if let Some(rounds) = &shared.rounds
        && rounds.pending()
        && !deadline_hit
        && !matches!(ended, Ended::Panicked(_))
    {
        shared.progress.finish();
        let now = staunch_store::now_ms();
        return (
            Outcome::InputRequired,
            Ok(Answer::Value(rounds.input_required(&server.state_key, now))),
        );
    }
    match ended {
        Ended::Returned(Ok(v)) => {
            shared.progress.finish();
            let is_error = end.is_tool_call && v.is_tool_error();
            (
                if is_error {
                    Outcome::Error
                } else {
                    Outcome::Ok
                },
                Ok(v),
            )
        }
        Ended::Returned(Err(e)) if deadline_hit || matches!(e, ToolError::DeadlineExceeded) => {
            shared.progress.close();
            (Outcome::Deadline, deadline_response(shared, end))
        }
        Ended::Aborted => {
            shared.progress.close();
            (Outcome::Deadline, deadline_response(shared, end))
        }
        Ended::Returned(Err(e)) => {
            shared.progress.finish();
            (Outcome::Error, Err(error_object(e)))
        }
        Ended::Panicked(msg) => {
            shared.progress.close();
            tracing::error!(conn = %shared.conn.log_label, request_id = %shared.id, panic = %msg, "handler panicked");
            let e = ErrorObject::internal(format!("the handler failed unexpectedly: {msg}"));
            *panic = Some(msg);
            (Outcome::Panic, Err(e))
        }
    }
}

fn deadline_response(shared: &RequestShared, end: &EndInfo) -> Result<Answer, ErrorObject> {
    let limit = shared
        .deadline
        .map(|d| d.duration_since(end.started))
        .unwrap_or_default();
    let msg = format!(
        "stopped after its deadline of {:.1} s; the work was cancelled. Retry with less work, \
         or use a job tool for long work",
        limit.as_secs_f64()
    );
    if end.is_tool_call {
        Ok(Answer::Tool(CallToolResult::error(msg)))
    } else {
        Err(ErrorObject::new(codes::DEADLINE_EXCEEDED, msg))
    }
}

pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
