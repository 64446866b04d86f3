//! A 2025 upstream's question in the middle of a 2026-07-28 client's call.
//!
//! A session-era upstream asks (elicitation, sampling, roots) with a request of its own and
//! waits for the answer inside the call. A 2026-07-28 client answers questions in
//! input-required rounds, each a new request. The proxy joins the two by parking the upstream
//! call:
//!
//! 1. The question goes to the client as this round's `inputRequests`, under a key that names
//!    the call (`staunch-proxy-<32 hex>-<n>`, random, so nobody else can answer for it). The
//!    round ends; the upstream call stays in flight, parked in the pool's [`Lot`].
//! 2. The client's next round of the same call (same tool, same arguments, same caller) carries
//!    the answer under that key. The call leaves the lot, the upstream gets its answer, and the
//!    proxy waits for the result — or the next question — as part of the new request: its
//!    cancel, its deadline, its progress.
//! 3. A call whose client does not come back within the upstream's
//!    [`question_wait`](crate::UpstreamSpec::question_wait) is cancelled upstream, as any
//!    abandoned call is (its late work reported). A round that answers a call no longer
//!    parked gets a tool error that says so: the call is not started again, since the
//!    upstream may have acted before it asked.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::HashMap;
use serde_json::Value;
use staunch_client::{CallOptions, ClientError, PendingRequest, Progress};
use staunch_protocol::{ErrorObject, codes};
use staunch_server::{Context, Metrics, ToolError};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::route::{Question, Tracked};
use crate::upstream::Upstream;

/// The start of the `inputRequests` keys of a parked call's questions.
const KEY_PREFIX: &str = "staunch-proxy-";

/// Calls of one upstream parked at once, at most; a question beyond it is refused to the
/// upstream (with an error saying why) instead of put to the client.
pub(crate) const MAX_PARKED: usize = 1024;

/// An upstream call whose client answers the upstream's questions in rounds of its own.
pub(crate) struct AskingCall {
    /// The connection it runs on, kept while it is parked.
    pub(crate) up: Arc<Upstream>,
    pending: PendingRequest,
    tracked: Tracked,
    questions: mpsc::Receiver<Question>,
    /// The question put to the client and not answered yet, with its key.
    asked: Option<(String, Question)>,
    /// The call's name in keys: random, made when it first asks.
    id: String,
    /// Questions put to the client so far.
    count: u32,
    /// What the call is: only a round of the same tool, arguments and caller goes on with it.
    tool: Arc<str>,
    args: Value,
    caller: Option<String>,
}

impl AskingCall {
    /// Upstream call `pending` of `tool` with `args`, made for `ctx`; its questions arrive on
    /// `questions`.
    pub(crate) fn new(
        up: Arc<Upstream>,
        (pending, tracked, questions): (PendingRequest, Tracked, mpsc::Receiver<Question>),
        tool: &str,
        args: Value,
        ctx: &Context,
    ) -> Box<Self> {
        Box::new(Self {
            up,
            pending,
            tracked,
            questions,
            asked: None,
            id: String::new(),
            count: 0,
            tool: tool.into(),
            args,
            caller: ctx.principal().map(str::to_string),
        })
    }

    fn is_for(&self, ctx: &Context, tool: &str, args: &Value) -> bool {
        *self.tool == *tool && self.args == *args && self.caller.as_deref() == ctx.principal()
    }

    /// Gives the call up: the upstream request is cancelled first, then its open question
    /// answered with `error`, so that the upstream stops rather than answers the call.
    fn give_up(mut self: Box<Self>, error: &str) {
        let asked = self.asked.take();
        drop(self);
        if let Some((_, q)) = asked {
            let _ = q
                .reply
                .send(Err(ErrorObject::new(codes::INTERNAL_ERROR, error)));
        }
    }
}

/// How a stretch of an asking call ended.
pub(crate) enum Step {
    /// The upstream answered (or the wait ended: cancel, a lost connection).
    Ended(Result<Box<serde_json::value::RawValue>, ClientError>),
    /// The upstream asked a question this round's client has not answered: park the call and
    /// end the round.
    Parked(Box<AskingCall>),
}

/// What the wait for the upstream saw first.
enum Next {
    Ended(Result<Box<serde_json::value::RawValue>, ClientError>),
    Question(Question),
}

/// Goes on with `call` as part of `ctx`: the open question answered from this round, then the
/// upstream's answer awaited under `opts`, each new question put to the client. The question
/// channel stays open while the call is tracked (its sender is in the call table), so only the
/// answer ends the wait.
pub(crate) async fn go_on(
    mut call: Box<AskingCall>,
    ctx: &Context,
    lot: &Lot,
    opts: &CallOptions,
    mut on_progress: impl FnMut(&Progress) + Send,
) -> Step {
    loop {
        if let Some((key, q)) = call.asked.take() {
            let answer = match ctx.ask(Some(&key), &q.method, q.params.clone()).await {
                Ok(answer) => Ok(answer),
                Err(ToolError::InputRequired) => {
                    call.asked = Some((key, q));
                    return Step::Parked(call);
                }
                // A client without the capability: the upstream hears why, and decides.
                Err(ToolError::Rpc(e)) => Err(e),
                Err(other) => Err(ErrorObject::new(codes::INTERNAL_ERROR, other.to_string())),
            };
            let _ = q.reply.send(answer);
            continue;
        }
        let next = tokio::select! {
            r = call.pending.wait_raw_borrowed(opts, &mut on_progress) => Next::Ended(r),
            Some(q) = call.questions.recv() => Next::Question(q),
        };
        match next {
            Next::Ended(r) => {
                // Only a cancel leaves the upstream request abandoned (its late answer logged).
                if !matches!(r, Err(ClientError::Cancelled)) {
                    call.tracked.answered();
                }
                return Step::Ended(r);
            }
            Next::Question(q) if lot.is_full() => {
                let _ = q.reply.send(Err(ErrorObject::new(
                    codes::INTERNAL_ERROR,
                    format!(
                        "staunch proxy has {MAX_PARKED} calls waiting for their clients' answers; \
                         this question cannot be put to the client now"
                    ),
                )));
            }
            Next::Question(q) => {
                if call.id.is_empty() {
                    call.id = random_id();
                }
                call.count += 1;
                let key = format!("{KEY_PREFIX}{}-{}", call.id, call.count);
                call.asked = Some((key, q));
            }
        }
    }
}

/// 128 random bits as hex: a name only its holder learns (a parked call's, an upstream
/// task's under the proxy's id).
pub(crate) fn random_id() -> String {
    let mut id = [0u8; 16];
    if getrandom::fill(&mut id).is_err() {
        panic!("the operating system's random number generator failed");
    }
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The call a key of [`KEY_PREFIX`] names.
fn call_id(key: &str) -> Option<&str> {
    let (id, n) = key.strip_prefix(KEY_PREFIX)?.rsplit_once('-')?;
    let well_formed = id.len() == 32
        && id.bytes().all(|b| b.is_ascii_hexdigit())
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit());
    well_formed.then_some(id)
}

/// A parked call and its expiry.
struct Parked {
    call: Box<AskingCall>,
    expiry: AbortHandle,
}

/// The parked calls of one upstream, by the id their keys carry; counted in its metrics.
pub(crate) struct Lot {
    upstream: String,
    metrics: Metrics,
    parked: Mutex<HashMap<String, Parked>>,
}

impl std::fmt::Debug for Lot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lot")
            .field("parked", &self.lock().len())
            .finish()
    }
}

impl Lot {
    /// The lot of `upstream`, counted in `metrics`.
    pub(crate) fn new(upstream: &str, metrics: Metrics) -> Self {
        Self {
            upstream: upstream.to_string(),
            metrics,
            parked: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Parked>> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_full(&self) -> bool {
        self.lock().len() >= MAX_PARKED
    }

    /// Parks `call` until a round answers its question, at most `wait`; then it is given up
    /// (the upstream's question refused, the upstream request cancelled) and `on_expiry` runs.
    pub(crate) fn park(
        self: &Arc<Self>,
        call: Box<AskingCall>,
        wait: Duration,
        on_expiry: impl FnOnce() + Send + 'static,
    ) {
        let id = call.id.clone();
        let lot = Arc::downgrade(self);
        let key = id.clone();
        // Held until the call is in: an expiry that fires at once still finds it.
        let mut parked = self.lock();
        let expiry = tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let Some(lot) = lot.upgrade() else { return };
            let Some(parked) = lot.lock().remove(&key) else {
                return;
            };
            lot.metrics.upstream_parked(&lot.upstream, -1);
            lot.metrics
                .upstream_unanswered(&lot.upstream, &parked.call.tool);
            tracing::warn!(upstream = %parked.call.up.name(), tool = %parked.call.tool,
                wait_ms = wait.as_millis() as u64,
                "upstream.unanswered: the client did not answer the upstream's question in time; the upstream call is cancelled");
            parked.call.give_up(&format!(
                "the client did not answer within {} s",
                wait.as_secs()
            ));
            on_expiry();
        })
        .abort_handle();
        parked.insert(id, Parked { call, expiry });
        drop(parked);
        self.metrics.upstream_parked(&self.upstream, 1);
    }

    /// The parked call `ctx` (a round of `tool` with `args`) answers, taken out of the lot and
    /// handed to `ctx`: `Ok(None)` when its answers name no parked call; an error for the
    /// client when they name one that is gone or is not its own.
    pub(crate) fn take(
        &self,
        ctx: &Context,
        tool: &str,
        args: &Value,
    ) -> Result<Option<Box<AskingCall>>, String> {
        let Some(id) = ctx.answered_keys().find_map(call_id) else {
            return Ok(None);
        };
        let mut parked = self.lock();
        match parked.get(id) {
            Some(p) if p.call.is_for(ctx, tool, args) => {}
            Some(_) => {
                return Err(
                    "the answers of this request are for another call (another tool, \
                            other arguments or another caller): retry without inputResponses \
                            and requestState"
                        .into(),
                );
            }
            None => {
                return Err(
                    "the upstream call these answers are for no longer waits for them: \
                            its client took longer than the proxy waits, the proxy restarted, \
                            or the answer went to another instance. It is not started again, \
                            since it may have acted before it asked: check, then call the \
                            tool again without inputResponses and requestState"
                        .into(),
                );
            }
        }
        let p = parked.remove(id);
        drop(parked);
        self.metrics.upstream_parked(&self.upstream, -1);
        Ok(p.map(|p| {
            p.expiry.abort();
            p.call.tracked.hand_to(ctx);
            p.call
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_calls_name_is_random_and_reads_back_from_its_keys() {
        let (a, b) = (random_id(), random_id());
        assert_ne!(a, b);
        assert_eq!(call_id(&format!("{KEY_PREFIX}{a}-1")), Some(a.as_str()));
    }

    #[test]
    fn only_a_well_formed_key_names_a_parked_call() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(call_id(&format!("staunch-proxy-{id}-1")), Some(id));
        assert_eq!(call_id(&format!("staunch-proxy-{id}-12")), Some(id));
        for other in [
            "elicitation-1".to_string(),
            format!("staunch-proxy-{id}"),
            format!("staunch-proxy-{id}-"),
            format!("staunch-proxy-{id}-x"),
            format!("staunch-proxy-{}-1", &id[1..]),
            format!("staunch-proxy-{}-1", id.replace('0', "g")),
            format!("other-{id}-1"),
        ] {
            assert_eq!(call_id(&other), None, "{other}");
        }
    }
}
