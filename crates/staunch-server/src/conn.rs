//! [`Conn`]: one place messages leave through — a stdio pipe, an HTTP session, or the response
//! stream of one stateless HTTP request.
//!
//! A connection knows where its messages go (its [`Sink`]), how many of its requests are in
//! flight (so closing it can wait for them), and the server→client requests it is waiting on
//! (sampling, elicitation and roots in the session era). Request ids are unique per
//! connection, so a request is keyed by the connection's [`ConnId`] and its own id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use staunch_protocol::RequestId;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::answer_relay::{AnswerRelay, ClientReply, OUTGOING_PREFIX};
use crate::outbound::{Outbound, Sink};

/// A connection's identity within this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ConnId(pub(crate) u64);

/// A request in flight: its connection and its JSON-RPC id (unique per connection).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RequestKey {
    pub(crate) conn: ConnId,
    pub(crate) id: RequestId,
}

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// Random per process: in the ids of server→client requests, so that two instances serving
/// one session never send the same id.
static PROCESS_TAG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let mut tag = [0u8; 4];
    let _ = getrandom::fill(&mut tag);
    tag.iter().map(|b| format!("{b:02x}")).collect()
});

pub(crate) struct Conn {
    pub(crate) id: ConnId,
    /// How the lifecycle log names it: the session id, `stdio`, or a stateless request's key.
    pub(crate) label: Arc<str>,
    /// Whether the work its requests start (jobs, tasks) belongs to this connection's session:
    /// true for an HTTP session, whose id is a secret shared by one client; false for stdio
    /// (one client per process, whose work outlives the process) and stateless requests.
    pub(crate) owns_work: bool,
    /// How logs name it: the label, or for an HTTP session (whose id is a credential) a short
    /// hash of it ([`crate::session_hash`]), computed once here rather than per line.
    pub(crate) log_label: Arc<str>,
    pub(crate) sink: Arc<dyn Sink>,
    /// Who the transport authenticated for this connection (HTTP with auth on); `None` on
    /// stdio and without auth.
    pub(crate) principal: Option<Arc<str>>,
    /// What an HTTP session's requests count against in the fair share ([`crate::fair`]):
    /// its principal, else the address that opened it; `None` elsewhere.
    pub(crate) peer: Option<crate::fair::PeerKey>,
    in_flight: AtomicUsize,
    emptied: Notify,
    outgoing: Mutex<HashMap<RequestId, oneshot::Sender<ClientReply>>>,
    next_outgoing: AtomicU64,
    /// Set for an HTTP session on a shared store: where answers to server→client requests
    /// that reached another instance wait ([`AnswerRelay`]).
    pub(crate) relay: std::sync::OnceLock<AnswerRelay>,
    /// Fires when the session this connection carries closes (HTTP DELETE, expiry, shutdown:
    /// [`crate::Session::close`]), for work that lives as long as the session
    /// ([`crate::Context::session_closed`]). Only a connection that owns its work (an HTTP
    /// session) has one: a stateless request's connection would make one per request for
    /// nothing.
    pub(crate) closed: Option<CancellationToken>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("id", &self.id)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// A connection whose requests were made by `principal` (authenticated by the transport;
    /// `None` on stdio and without auth).
    pub(crate) fn with_principal(
        label: impl Into<Arc<str>>,
        sink: Arc<dyn Sink>,
        principal: Option<Arc<str>>,
    ) -> Arc<Self> {
        Self::build(label, sink, false, principal, None)
    }

    /// A connection; `owns_work` for an HTTP session (see the field).
    pub(crate) fn build(
        label: impl Into<Arc<str>>,
        sink: Arc<dyn Sink>,
        owns_work: bool,
        principal: Option<Arc<str>>,
        peer: Option<crate::fair::PeerKey>,
    ) -> Arc<Self> {
        let label: Arc<str> = label.into();
        let log_label = if owns_work {
            Arc::from(crate::redact::session_hash(&label))
        } else {
            label.clone()
        };
        Arc::new(Self {
            id: ConnId(NEXT_CONN.fetch_add(1, Ordering::Relaxed)),
            label,
            owns_work,
            log_label,
            sink,
            principal,
            peer,
            in_flight: AtomicUsize::new(0),
            emptied: Notify::new(),
            outgoing: Mutex::new(HashMap::new()),
            next_outgoing: AtomicU64::new(1),
            relay: std::sync::OnceLock::new(),
            closed: owns_work.then(CancellationToken::new),
        })
    }

    pub(crate) fn send(&self, msg: Outbound) {
        self.sink.send(msg);
    }

    /// Counts a request that started on this connection; true if it is the only one.
    pub(crate) fn request_started(&self) -> bool {
        self.in_flight.fetch_add(1, Ordering::AcqRel) == 0
    }

    /// Counts a request that ended; wakes [`Conn::wait_empty`] at zero. True if none is left.
    pub(crate) fn request_ended(&self) -> bool {
        let last = self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1;
        if last {
            self.emptied.notify_waiters();
        }
        last
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Waits until no request of this connection is in flight, or `limit` passes; returns
    /// whether it emptied.
    pub(crate) async fn wait_empty(&self, limit: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.emptied.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.in_flight() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }

    /// A new server→client request id and the receiver of its answer. The id names this
    /// process (several instances may send requests in one session) and the request.
    pub(crate) fn register_outgoing(&self) -> (RequestId, oneshot::Receiver<ClientReply>) {
        let n = self.next_outgoing.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::String(format!("{}{}-{n}", OUTGOING_PREFIX, *PROCESS_TAG));
        let (tx, rx) = oneshot::channel();
        self.lock_outgoing().insert(id.clone(), tx);
        (id, rx)
    }

    pub(crate) fn forget_outgoing(&self, id: &RequestId) {
        self.lock_outgoing().remove(id);
    }

    /// Hands the client's answer to whoever waits for it here; gives it back when nobody here
    /// waits for that id.
    pub(crate) fn resolve_outgoing(
        &self,
        id: &RequestId,
        reply: ClientReply,
    ) -> Result<(), ClientReply> {
        match self.lock_outgoing().remove(id) {
            Some(tx) => {
                let _ = tx.send(reply);
                Ok(())
            }
            None => Err(reply),
        }
    }

    /// Fails every pending server→client request (the connection is closing).
    pub(crate) fn clear_outgoing(&self) {
        self.lock_outgoing().clear();
    }

    fn lock_outgoing(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RequestId, oneshot::Sender<ClientReply>>> {
        self.outgoing.lock().unwrap_or_else(|p| p.into_inner())
    }
}
