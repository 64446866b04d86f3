//! Which downstream request an upstream message belongs to.
//!
//! Every forwarded call is tracked by the id the proxy gave it upstream ([`Calls::track`]).
//! That table routes the upstream's own requests (sampling, elicitation, roots) to the
//! downstream client that caused them, and — once a call is abandoned — names the downstream
//! request in the `upstream.late` line when the upstream answers or reports progress anyway.
//!
//! A 2026-07-28 client answers questions in rounds of its own, not within the call: a call
//! of such a client on a 2025 upstream is tracked with a channel (`Calls::track_asking`),
//! and the upstream's questions go down it to the call, which puts them to its client
//! (`park`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use foldhash::HashMap;

use serde_json::{Value, json};
use staunch_client::{Late, ServerRequest, ServerRequestHandler};
use staunch_protocol::mcp::{LoggingLevel, ProgressToken};
use staunch_protocol::{ErrorObject, RequestId, codes};
use staunch_server::{Context, LifecycleEvent, Metrics, ToolError, UpstreamStep};
use tokio::sync::{mpsc, oneshot};

use crate::ledger::{CallKey, Ledger, Sent};

/// The logger of the proxy's own log messages to a client about its upstream's work.
pub const LATE_LOGGER: &str = "staunch.proxy";

/// Abandoned calls remembered for `upstream.late` lines.
const MAX_ABANDONED: usize = 4096;

/// A call's downstream request and the upstream's own name of its tool.
type CallOf = (Context, Arc<str>);

/// A question an upstream asked in the middle of a call whose client answers in rounds of its
/// own: its method and params, and where its answer goes.
#[derive(Debug)]
pub(crate) struct Question {
    pub(crate) method: String,
    pub(crate) params: Value,
    pub(crate) reply: oneshot::Sender<Result<Value, ErrorObject>>,
}

/// Questions waiting for their call to take them; the upstream waits for each anyway.
const QUESTIONS_WAITING: usize = 4;

/// A call in flight.
#[derive(Clone)]
struct LiveCall {
    ctx: Context,
    tool: Arc<str>,
    /// Where the upstream's questions go when the call's client answers them in rounds of its
    /// own (a 2026-07-28 client).
    questions: Option<mpsc::Sender<Question>>,
}

#[derive(Default)]
struct Table {
    live: HashMap<i64, LiveCall>,
    /// With when the call was abandoned.
    abandoned: HashMap<i64, (CallOf, Instant)>,
    abandoned_order: VecDeque<i64>,
}

/// Who an upstream message that does not name its call is for.
enum SoleCall {
    /// No call in flight.
    None,
    /// Calls of several downstream sessions: it cannot be told.
    Several,
    /// The newest call in flight, all of them from one session.
    One(LiveCall),
}

impl Table {
    /// The downstream call a message that names none belongs to: the newest in flight, when
    /// all of them come from one downstream session.
    fn sole_session_call(&self) -> SoleCall {
        let mut sessions = self.live.values().map(|l| l.ctx.session_id());
        let Some(first) = sessions.next() else {
            return SoleCall::None;
        };
        if sessions.any(|s| s != first) {
            return SoleCall::Several;
        }
        match self.live.iter().max_by_key(|(id, _)| **id) {
            Some((_, live)) => SoleCall::One(live.clone()),
            None => SoleCall::None,
        }
    }
}

/// The calls of one upstream connection, by upstream id.
#[derive(Default)]
pub struct Calls {
    upstream: String,
    metrics: Metrics,
    ledger: Arc<Ledger>,
    table: Mutex<Table>,
}

impl std::fmt::Debug for Calls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calls")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl Calls {
    /// The table of upstream `upstream`; late work is counted in `metrics` and listed in
    /// `ledger`.
    pub fn new(upstream: &str, metrics: Metrics, ledger: Arc<Ledger>) -> Arc<Self> {
        Arc::new(Self {
            upstream: upstream.to_string(),
            metrics,
            ledger,
            table: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts tracking upstream call `id` of `tool` for downstream request `ctx`; the guard
    /// ends it.
    pub fn track(self: &Arc<Self>, id: i64, ctx: &Context, tool: &str) -> Tracked {
        self.track_with(id, ctx, tool, None)
    }

    /// [`Calls::track`] for a call whose client answers questions in rounds of its own: the
    /// upstream's questions arrive on the receiver.
    pub(crate) fn track_asking(
        self: &Arc<Self>,
        id: i64,
        ctx: &Context,
        tool: &str,
    ) -> (Tracked, mpsc::Receiver<Question>) {
        let (tx, rx) = mpsc::channel(QUESTIONS_WAITING);
        (self.track_with(id, ctx, tool, Some(tx)), rx)
    }

    fn track_with(
        self: &Arc<Self>,
        id: i64,
        ctx: &Context,
        tool: &str,
        questions: Option<mpsc::Sender<Question>>,
    ) -> Tracked {
        let live = LiveCall {
            ctx: ctx.clone(),
            tool: Arc::from(tool),
            questions,
        };
        self.lock().live.insert(id, live);
        ctx.log_event(&LifecycleEvent::Upstream {
            step: UpstreamStep::Sent,
            upstream: self.upstream.as_str().into(),
            upstream_id: id,
            late: None,
        });
        Tracked {
            calls: self.clone(),
            id,
            answered: false,
        }
    }

    /// Calls in flight.
    pub fn in_flight(&self) -> usize {
        self.lock().live.len()
    }

    /// The downstream request an upstream request (sampling, elicitation …) belongs to: the
    /// call whose stream carried it, else — over stdio, where the wire does not say — the
    /// calls in flight when they all come from one downstream session.
    fn owner(&self, req: &ServerRequest) -> Result<LiveCall, ErrorObject> {
        let t = self.lock();
        if let Some(RequestId::Number(n)) = &req.on_stream_of
            && let Some(live) = t.live.get(n)
        {
            return Ok(live.clone());
        }
        match t.sole_session_call() {
            SoleCall::One(live) => Ok(live),
            SoleCall::None => Err(ErrorObject::new(
                codes::INVALID_REQUEST,
                format!(
                    "{} arrived while no call was in flight: there is no client to ask",
                    req.method
                ),
            )),
            SoleCall::Several => Err(ErrorObject::new(
                codes::INTERNAL_ERROR,
                format!(
                    "staunch proxy cannot tell which of several clients {} is for (stdio does \
                     not say which call caused it); run the proxy with --isolate",
                    req.method
                ),
            )),
        }
    }

    /// Answers the upstream's own requests by asking the downstream client that caused them.
    pub fn server_request_handler(self: &Arc<Self>) -> ServerRequestHandler {
        let calls = self.clone();
        ServerRequestHandler::new(move |req| {
            let owner = calls.owner(&req);
            Box::pin(async move {
                let LiveCall { ctx, questions, .. } = owner?;
                let params = req.params.unwrap_or(Value::Object(Default::default()));
                if ctx.asks_in_rounds() {
                    // A 2026 client answers questions in input-required rounds, each a new
                    // request, while the upstream waits inside one call: the call puts the
                    // question to its client and parks until the next round brings the answer.
                    let Some(questions) = questions else {
                        return Err(ErrorObject::new(
                            codes::INTERNAL_ERROR,
                            format!(
                                "the client has no session and answers questions in rounds of \
                                 its own: {} in the middle of this call cannot be bridged to it",
                                req.method
                            ),
                        ));
                    };
                    return ask_in_rounds(&questions, req.method, params).await;
                }
                ctx.request_client(&req.method, params)
                    .await
                    .map_err(|e| match e {
                        ToolError::Rpc(e) => e,
                        other => ErrorObject::new(codes::INTERNAL_ERROR, other.to_string()),
                    })
            })
        })
    }

    /// An upstream's `notifications/message` (its log), passed on unchanged to the downstream
    /// client whose call it is logging for, at that client's level: the newest call in flight,
    /// when all of them come from one downstream session (`--isolate` makes that always so) —
    /// a notification does not say which call it is for. With no call in flight, or calls of
    /// several sessions, there is nobody it surely belongs to, and it is dropped (logged at
    /// debug).
    pub fn forward_log(&self, params: Option<&Value>) {
        let Some(params) = params else { return };
        let owner = self.lock().sole_session_call();
        match owner {
            SoleCall::One(live) => {
                live.ctx.forward_log(params);
            }
            SoleCall::None | SoleCall::Several => tracing::debug!(upstream = %self.upstream,
                "upstream log message with no single downstream session to pass it to"),
        }
    }

    /// Writes `upstream.late` for something that arrived after its call was abandoned: an
    /// error answer within [`STOPPED_ANSWER`] of the cancel as `error`, any other answer as
    /// `response`, progress as `progress`.
    pub fn log_late(&self, late: &Late) {
        if let Some((id, what)) = late_kind(late) {
            self.log_late_id(id, what);
        }
    }

    fn log_late_id(&self, id: i64, what: &'static str) {
        let call = self.lock().abandoned.get(&id).cloned();
        match call {
            Some(((ctx, tool), abandoned_at)) => {
                self.metrics.upstream_late(&self.upstream, &tool, what);
                let request_id = ctx.request_id().to_string();
                let key = CallKey {
                    upstream: &self.upstream,
                    tool: &tool,
                    session: ctx.session_id(),
                    request_id: &request_id,
                };
                let sent = match what {
                    "response" => Some(Sent::Response),
                    "progress" => Some(Sent::Progress),
                    // An error answer to the cancelled request: the upstream stopped and said so
                    // late, where the spec asks for no answer at all. A protocol slip, dropped
                    // here and logged, but no work went on: the ledger and the client's session
                    // do not hear of it.
                    _ => None,
                };
                if let Some(sent) = sent
                    && self.ledger.sent(key, abandoned_at, sent)
                {
                    // The client's view is clean (nothing late reaches it), so it is told, once
                    // per call, on its session: the work it cancelled went on upstream.
                    let after = abandoned_at.elapsed();
                    ctx.log_to_session(
                        LoggingLevel::Warning,
                        LATE_LOGGER,
                        json!({
                            "message": format!(
                                "the upstream server {:?} kept working on cancelled request {} \
                                 (tool {tool}): it sent {what} {} ms after the cancel",
                                self.upstream,
                                request_id,
                                after.as_millis()
                            ),
                            "upstream": self.upstream,
                            "tool": &*tool,
                            "requestId": ctx.request_id(),
                            "sent": what,
                            "afterCancelMs": u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
                        }),
                    );
                }
                ctx.log_event(&LifecycleEvent::Upstream {
                    step: UpstreamStep::Late,
                    upstream: self.upstream.as_str().into(),
                    upstream_id: id,
                    late: Some(what.into()),
                });
            }
            None => {
                tracing::debug!(upstream = %self.upstream, id, what, "upstream.late for a forgotten call")
            }
        }
    }
}

/// Hands an upstream's question to the call it belongs to, which asks its client in a round of
/// its own, and waits for the answer.
async fn ask_in_rounds(
    questions: &mpsc::Sender<Question>,
    method: String,
    params: Value,
) -> Result<Value, ErrorObject> {
    let ended = || {
        ErrorObject::new(
            codes::INTERNAL_ERROR,
            "the call this question belongs to ended before its client answered",
        )
    };
    let (reply, answer) = oneshot::channel();
    let question = Question {
        method,
        params,
        reply,
    };
    if questions.send(question).await.is_err() {
        return Err(ended());
    }
    answer.await.unwrap_or_else(|_| Err(ended()))
}

/// The proxy's own upstream id of a late message and what it was (`upstream.late`'s `late`);
/// `None` for an id the proxy did not send (it numbers its requests).
fn late_kind(late: &Late) -> Option<(i64, &'static str)> {
    match late {
        // An error answer soon after the cancel is the upstream saying, late, that it stopped;
        // one that comes later still shows how long it went on.
        Late::Response(r) => {
            let RequestId::Number(n) = r.id else {
                return None;
            };
            let stopped = r.outcome.is_err() && r.since_abandoned <= STOPPED_ANSWER;
            Some((n, if stopped { "error" } else { "response" }))
        }
        Late::Progress {
            token: ProgressToken::Number(n),
            ..
        } => Some((*n, "progress")),
        Late::Progress { .. } => None,
    }
}

/// How soon after its cancel an upstream's error answer counts as the upstream saying it
/// stopped (the Python SDK's "Request cancelled" comes within milliseconds) rather than as
/// work that went on and then failed.
pub const STOPPED_ANSWER: std::time::Duration = std::time::Duration::from_secs(1);

/// A tracked call; dropping it unanswered marks the call abandoned (its cancel was sent).
pub struct Tracked {
    calls: Arc<Calls>,
    id: i64,
    answered: bool,
}

impl Tracked {
    /// The upstream answered: nothing late can come.
    pub fn answered(mut self) {
        self.answered = true;
    }

    /// The call goes on as part of `ctx`, a later round of the same call: what the upstream
    /// asks or sends late is that request's now.
    pub(crate) fn hand_to(&self, ctx: &Context) {
        if let Some(live) = self.calls.lock().live.get_mut(&self.id) {
            live.ctx = ctx.clone();
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut t = self.calls.lock();
        let Some(call) = t.live.remove(&self.id) else {
            return;
        };
        if self.answered {
            return;
        }
        call.ctx.log_event(&LifecycleEvent::Upstream {
            step: UpstreamStep::CancelSent,
            upstream: self.calls.upstream.as_str().into(),
            upstream_id: self.id,
            late: None,
        });
        t.abandoned
            .insert(self.id, ((call.ctx, call.tool), Instant::now()));
        t.abandoned_order.push_back(self.id);
        while t.abandoned_order.len() > MAX_ABANDONED {
            if let Some(old) = t.abandoned_order.pop_front() {
                t.abandoned.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use staunch_client::LateResponse;
    use staunch_protocol::{ErrorObject, RequestId};

    use super::*;

    fn answer(outcome: Result<Value, ErrorObject>, after: Duration) -> Late {
        Late::Response(LateResponse {
            id: RequestId::Number(7),
            at: tokio::time::Instant::now(),
            since_abandoned: after,
            outcome,
        })
    }

    #[test]
    fn an_error_answer_soon_after_the_cancel_says_the_upstream_stopped() {
        let cancelled = || Err(ErrorObject::new(0, "Request cancelled"));
        let ms = Duration::from_millis;
        // The Python SDK's answer, milliseconds after the cancel: it stopped.
        assert_eq!(late_kind(&answer(cancelled(), ms(6))), Some((7, "error")));
        // An error long after the cancel: the work went on, then failed.
        assert_eq!(
            late_kind(&answer(cancelled(), ms(3_000))),
            Some((7, "response"))
        );
        // A result, however soon: the work was done.
        assert_eq!(
            late_kind(&answer(Ok(json!({"content": []})), ms(6))),
            Some((7, "response"))
        );
        let progress = Late::Progress {
            token: ProgressToken::Number(9),
            progress: 1.0,
            at: tokio::time::Instant::now(),
        };
        assert_eq!(late_kind(&progress), Some((9, "progress")));
        // Not an id the proxy sent.
        let foreign = Late::Response(LateResponse {
            id: RequestId::String("x".into()),
            at: tokio::time::Instant::now(),
            since_abandoned: ms(1),
            outcome: cancelled(),
        });
        assert_eq!(late_kind(&foreign), None);
    }
}
