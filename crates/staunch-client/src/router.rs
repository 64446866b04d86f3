//! Routes what the server sends: responses to their waiting request, progress to its
//! request's channel, everything to the taps; late answers are recorded, never delivered.
//!
//! A request the client gave up on (timeout, Ctrl-C, dropped future) moves from `pending` to
//! `abandoned`. Its response, if the server sends one anyway, is a protocol smell (the spec
//! says a cancelled request gets no response) and is kept as a [`LateResponse`] for anyone
//! who wants the evidence (`staunch probe`).

use std::collections::VecDeque;

use foldhash::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use staunch_protocol::mcp::{ProgressParams, ProgressToken, methods};
use staunch_protocol::raw::{Incoming, to_value};
use staunch_protocol::{ErrorObject, Message, RequestId, codes, error_response_bytes};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::ClientError;

/// Abandoned ids remembered for late-response detection.
const MAX_ABANDONED: usize = 4096;
/// Late responses kept as evidence.
const MAX_LATE: usize = 256;

/// What a transport hands the router.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A message from the server (a response's result as the text it arrived as), and the
    /// request whose response stream carried it (HTTP).
    Message(Incoming, Option<RequestId>),
    /// The transport could not deliver an answer to this request.
    Failed { id: RequestId, error: ClientError },
    /// The connection is gone.
    Closed(String),
}

/// One progress notification of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Work done so far.
    pub progress: f64,
    /// Total, when the server knows it.
    pub total: Option<f64>,
    /// What is happening.
    pub message: Option<String>,
    /// Every other field of the notification's params (`_meta`, fields of later revisions).
    pub extra: Map<String, Value>,
    /// When it arrived.
    pub at: Instant,
}

/// A message as it arrived, for observers ([`Client::tap`](crate::Client::tap)).
#[derive(Debug, Clone)]
pub struct Observed {
    /// Arrival time.
    pub at: Instant,
    /// The message.
    pub msg: Message,
}

/// A response that arrived for a request this client had already given up on.
#[derive(Debug, Clone)]
pub struct LateResponse {
    /// The request's id.
    pub id: RequestId,
    /// Arrival time.
    pub at: Instant,
    /// How long after the client abandoned (cancelled) the request.
    pub since_abandoned: Duration,
    /// What the server answered.
    pub outcome: Result<Value, ErrorObject>,
}

/// Something the server sent about a request this client no longer waits for.
#[derive(Debug, Clone)]
pub enum Late {
    /// An answer to a request the client had given up on.
    Response(LateResponse),
    /// Progress whose token belongs to no request in flight (one given up on, or never sent).
    Progress {
        /// The token.
        token: ProgressToken,
        /// The value reported.
        progress: f64,
        /// Arrival time.
        at: Instant,
    },
}

/// What the reader does with the answer to a server request.
pub(crate) enum Answer {
    /// Send these bytes now.
    Now(Vec<u8>),
    /// Send what this future yields, from its own task.
    Later(futures_util::future::BoxFuture<'static, Vec<u8>>),
}

type Reply = oneshot::Sender<Result<Box<RawValue>, ClientError>>;

/// Where a request's answer arrives: its result as the text it came as, or why there is none.
pub(crate) type ReplyReceiver = oneshot::Receiver<Result<Box<RawValue>, ClientError>>;

#[derive(Default)]
struct Routes {
    pending: HashMap<RequestId, Reply>,
    abandoned: HashMap<RequestId, Instant>,
    abandoned_order: VecDeque<RequestId>,
    progress: HashMap<ProgressToken, mpsc::UnboundedSender<Progress>>,
    late: VecDeque<LateResponse>,
    taps: Vec<mpsc::UnboundedSender<Observed>>,
    late_feeds: Vec<mpsc::UnboundedSender<Late>>,
    closed: Option<String>,
}

/// The routing table shared by the client handle and its reader task.
#[derive(Default)]
pub(crate) struct Router {
    state: Mutex<Routes>,
    server_requests: Option<crate::ServerRequestHandler>,
    notifications: Option<crate::NotificationHandler>,
}

/// A registered request: where its answer and its progress will arrive.
pub(crate) struct Registration {
    pub reply: ReplyReceiver,
    pub progress: Option<mpsc::UnboundedReceiver<Progress>>,
}

impl Router {
    /// A router whose server requests `server_requests` answers and whose other
    /// notifications go to `notifications`.
    pub(crate) fn new(
        server_requests: Option<crate::ServerRequestHandler>,
        notifications: Option<crate::NotificationHandler>,
    ) -> Self {
        Self {
            state: Mutex::default(),
            server_requests,
            notifications,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Routes> {
        // A poisoned lock only means a panic elsewhere; the table itself stays consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a request before it is sent, so an immediate answer or progress is routed.
    pub(crate) fn register(
        &self,
        id: &RequestId,
        token: Option<&ProgressToken>,
    ) -> Result<Registration, ClientError> {
        let mut st = self.lock();
        if let Some(why) = &st.closed {
            return Err(ClientError::Closed(why.clone()));
        }
        let (tx, rx) = oneshot::channel();
        st.pending.insert(id.clone(), tx);
        let progress = token.map(|t| {
            let (ptx, prx) = mpsc::unbounded_channel();
            st.progress.insert(t.clone(), ptx);
            prx
        });
        Ok(Registration {
            reply: rx,
            progress,
        })
    }

    /// Whether the connection is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed.is_some()
    }

    /// Progress for `token` is no longer expected.
    pub(crate) fn forget_progress(&self, token: &ProgressToken) {
        self.lock().progress.remove(token);
    }

    /// Gives up on a request: its answer, if one still comes, is recorded as late.
    /// Returns whether it was still pending.
    pub(crate) fn abandon(&self, id: &RequestId) -> bool {
        let mut st = self.lock();
        let was_pending = st.pending.remove(id).is_some();
        if was_pending {
            st.abandoned.insert(id.clone(), Instant::now());
            st.abandoned_order.push_back(id.clone());
            while st.abandoned_order.len() > MAX_ABANDONED {
                if let Some(old) = st.abandoned_order.pop_front() {
                    st.abandoned.remove(&old);
                }
            }
        }
        was_pending
    }

    /// A new observer of every inbound message.
    pub(crate) fn tap(&self) -> mpsc::UnboundedReceiver<Observed> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().taps.push(tx);
        rx
    }

    /// Everything late from now on: answers to abandoned requests and progress nobody waits
    /// for, as they arrive.
    pub(crate) fn late_feed(&self) -> mpsc::UnboundedReceiver<Late> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().late_feeds.push(tx);
        rx
    }

    /// The late responses seen so far.
    pub(crate) fn late(&self) -> Vec<LateResponse> {
        self.lock().late.iter().cloned().collect()
    }

    /// Handles one inbound item; returns what to send back (the answer to a server request).
    pub(crate) fn on_inbound(&self, inbound: Inbound) -> Option<Answer> {
        match inbound {
            Inbound::Message(msg, stream_of) => self.on_message(msg, stream_of),
            Inbound::Failed { id, error } => {
                let tx = self.lock().pending.remove(&id);
                if let Some(tx) = tx {
                    let _ = tx.send(Err(error));
                }
                None
            }
            Inbound::Closed(why) => {
                self.close(&why);
                None
            }
        }
    }

    /// Fails every pending request; later registrations fail at once.
    pub(crate) fn close(&self, why: &str) {
        let mut st = self.lock();
        if st.closed.is_none() {
            st.closed = Some(why.to_string());
        }
        for (_, tx) in st.pending.drain() {
            let _ = tx.send(Err(ClientError::Closed(why.to_string())));
        }
        st.progress.clear();
        st.taps.clear();
        st.late_feeds.clear();
    }

    fn on_message(&self, msg: Incoming, stream_of: Option<RequestId>) -> Option<Answer> {
        let at = Instant::now();
        let mut st = self.lock();
        if !st.taps.is_empty() {
            let seen = match &msg {
                Incoming::Response(r) => Message::Response(r.clone().into_response()),
                Incoming::Other(m) => m.clone(),
            };
            st.taps.retain(|t| {
                t.send(Observed {
                    at,
                    msg: seen.clone(),
                })
                .is_ok()
            });
        }
        let msg = match msg {
            Incoming::Response(r) => {
                if let Some(tx) = st.pending.remove(&r.id) {
                    let _ = tx.send(r.outcome.map_err(ClientError::Rpc));
                } else if let Some(when) = st.abandoned.remove(&r.id) {
                    tracing::debug!(id = %r.id, "discarding a late response to an abandoned request");
                    let late = LateResponse {
                        id: r.id,
                        at,
                        since_abandoned: at.saturating_duration_since(when),
                        outcome: r.outcome.map(|raw| to_value(&raw)),
                    };
                    let feed = Late::Response(late.clone());
                    st.late_feeds.retain(|f| f.send(feed.clone()).is_ok());
                    st.late.push_back(late);
                    if st.late.len() > MAX_LATE {
                        st.late.pop_front();
                    }
                } else {
                    tracing::debug!(id = %r.id, "response to an unknown request id");
                }
                return None;
            }
            Incoming::Other(m) => m,
        };
        match msg {
            // `parse_incoming` reads every response as `Incoming::Response`.
            Message::Response(_) => None,
            Message::Notification(n) => {
                if n.method == methods::PROGRESS {
                    let parsed = n
                        .params
                        .and_then(|p| serde_json::from_value::<ProgressParams>(p).ok());
                    match parsed {
                        Some(p) => match st.progress.get(&p.progress_token) {
                            Some(tx) => {
                                let _ = tx.send(Progress {
                                    progress: p.progress,
                                    total: p.total,
                                    message: p.message,
                                    extra: p.extra,
                                    at,
                                });
                            }
                            None => {
                                let feed = Late::Progress {
                                    token: p.progress_token,
                                    progress: p.progress,
                                    at,
                                };
                                st.late_feeds.retain(|f| f.send(feed.clone()).is_ok());
                            }
                        },
                        None => tracing::debug!("unreadable progress notification"),
                    }
                } else if let Some(h) = &self.notifications {
                    drop(st);
                    h.notify(&n.method, n.params.as_ref());
                }
                None
            }
            Message::Request(req) => {
                drop(st);
                // `ping` is always answered here; the rest by the caller's handler, if any.
                if req.method == methods::PING {
                    return Some(Answer::Now(staunch_protocol::result_response_bytes(
                        &req.id,
                        &serde_json::json!({}),
                    )));
                }
                let Some(handler) = &self.server_requests else {
                    let e = ErrorObject::new(
                        codes::METHOD_NOT_FOUND,
                        format!("this client does not serve {}", req.method),
                    );
                    return Some(Answer::Now(error_response_bytes(Some(&req.id), &e)));
                };
                let id = req.id.clone();
                let answer = handler.answer(crate::ServerRequest {
                    id: req.id,
                    method: req.method,
                    params: req.params,
                    on_stream_of: stream_of,
                });
                Some(Answer::Later(Box::pin(async move {
                    match answer.await {
                        Ok(v) => staunch_protocol::result_response_bytes(&id, &v),
                        Err(e) => error_response_bytes(Some(&id), &e),
                    }
                })))
            }
        }
    }
}
