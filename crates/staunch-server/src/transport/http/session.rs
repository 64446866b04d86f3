//! One HTTP session: its [`Session`], where each of its messages goes, and the in-memory tail of
//! every stream.
//!
//! Each client request gets its own SSE stream; messages related to that request go on it, the
//! others on the standalone (GET) stream. A stream outlives its connections: connections come
//! and go (drops, SEP-1699 polling, resumption), and at most one is attached at a time.
//!
//! When the session sends a message, [`HttpSession::deliver`] — under one lock — gives it the
//! stream's next sequence number, keeps it in the stream's in-memory tail, hands it to the live
//! connection if there is one, and queues it for the durable [`EventStore`] (written in
//! batches by [`super::batch`]). A client that reconnects to this instance is served from the
//! tail (older events from the store); another instance serves it from the store.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use staunch_protocol::RequestId;
use staunch_store::{EventWrite, now_ms};
use tokio::sync::mpsc;

use super::batch::Batcher;
use crate::outbound::{Outbound, OutboundKind, Sink};
use crate::server::Server;
use crate::session::Session;

/// What a live connection receives.
#[derive(Debug)]
pub(crate) enum SseItem {
    /// One message with its event id.
    Event { id: String, data: Arc<str> },
    /// End this connection (the stream goes on; the client resumes with `Last-Event-ID`).
    Close,
}

pub(crate) type LiveTx = mpsc::UnboundedSender<SseItem>;
pub(crate) type LiveRx = mpsc::UnboundedReceiver<SseItem>;

/// Events kept in memory per stream for resumption on this instance (at most; never more than
/// the store's retention per stream); older ones are read from the store.
const TAIL: usize = 1024;

/// Ended streams remembered per session (a resume of an older one that ran here is treated like
/// one that ran elsewhere: replayed from the store, then followed until its response).
const ENDED: usize = 4096;

struct StreamState {
    last_seq: u64,
    live: Option<LiveTx>,
    tail: VecDeque<(u64, Arc<str>)>,
}

impl StreamState {
    fn new(live: Option<LiveTx>) -> Self {
        Self {
            last_seq: 0,
            live,
            tail: VecDeque::new(),
        }
    }
}

#[derive(Default)]
struct Routes {
    /// In-flight client request → its stream.
    by_request: HashMap<RequestId, String>,
    streams: HashMap<String, StreamState>,
    /// The standalone stream, once a GET opened it.
    standalone: Option<String>,
    /// Streams that ended here (response written, or the request was cancelled), newest last:
    /// a resume is served from the store and then ends. Bounded by `ENDED`.
    ended: HashSet<String>,
    ended_order: VecDeque<String>,
}

impl Routes {
    /// Forgets a finished stream's state (its events are queued for the store) and remembers
    /// that it ended.
    fn end(&mut self, stream_id: &str) {
        self.streams.remove(stream_id);
        if self.ended.insert(stream_id.to_string()) {
            self.ended_order.push_back(stream_id.to_string());
            if self.ended_order.len() > ENDED
                && let Some(old) = self.ended_order.pop_front()
            {
                self.ended.remove(&old);
            }
        }
    }
}

struct HttpSink(Weak<HttpSession>);

impl Sink for HttpSink {
    fn send(&self, msg: Outbound) {
        if let Some(s) = self.0.upgrade() {
            s.deliver(msg);
        }
    }

    fn close_connection(&self, related: &RequestId) {
        if let Some(s) = self.0.upgrade() {
            s.close_connection(related);
        }
    }

    fn end_stream(&self, related: &RequestId) {
        if let Some(s) = self.0.upgrade() {
            s.end_request_stream(related);
        }
    }
}

/// Result of attaching a resuming connection to a stream.
pub(crate) enum Attach {
    /// This instance has the stream: read `(after, upto]` from the store first when
    /// `from_store` is set, then `events` from memory, then `live` (none once it is done).
    Local {
        from_store: Option<u64>,
        events: Vec<(u64, Arc<str>)>,
        live: Option<LiveRx>,
    },
    /// The stream ended here: everything is in the store (after a flush); replay it and end.
    Ended,
    /// This instance does not know the stream: serve it from the store.
    NotLocal,
}

/// Opening a request stream failed because the id is already in flight.
pub(crate) struct DuplicateId;

pub(crate) struct HttpSession {
    id: String,
    session: Session,
    batcher: Batcher,
    tail_cap: usize,
    routes: Mutex<Routes>,
    last_seen_ms: AtomicI64,
    open_connections: AtomicUsize,
}

impl HttpSession {
    /// `retained`: events the store keeps per stream (the memory tail keeps no more).
    pub(crate) fn start(
        server: &Server,
        id: String,
        batcher: Batcher,
        retained: u64,
        principal: Option<String>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            session: server.session_for(id.clone(), Arc::new(HttpSink(me.clone())), principal),
            id,
            batcher,
            tail_cap: usize::try_from(retained).unwrap_or(TAIL).clamp(1, TAIL),
            routes: Mutex::new(Routes::default()),
            last_seen_ms: AtomicI64::new(now_ms()),
            open_connections: AtomicUsize::new(0),
        })
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn session(&self) -> &Session {
        &self.session
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn touch(&self) {
        self.last_seen_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// How long the client has not been heard from: zero while one of its connections is
    /// open. Work still running for a client that went away does not keep the session alive
    /// (its expiry cancels that work).
    pub(crate) fn idle_for(&self, now: i64) -> Duration {
        if self.open_connections.load(Ordering::Relaxed) > 0 {
            return Duration::ZERO;
        }
        let idle = now - self.last_seen_ms.load(Ordering::Relaxed);
        Duration::from_millis(u64::try_from(idle).unwrap_or(0))
    }

    pub(crate) fn open_connections(&self) -> usize {
        self.open_connections.load(Ordering::Relaxed)
    }

    /// Counts an open SSE connection until the guard drops.
    pub(crate) fn connection_guard(self: &Arc<Self>) -> ConnectionGuard {
        self.open_connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.clone())
    }

    fn create_in_store(&self, stream_id: &str) {
        self.batcher.write(EventWrite::Create {
            session_id: self.id.clone(),
            stream_id: stream_id.to_string(),
        });
    }

    /// A new stream for client request `req`, with a live connection attached.
    pub(crate) fn open_request_stream(
        &self,
        req: &RequestId,
    ) -> Result<(String, LiveRx), DuplicateId> {
        let mut routes = self.routes();
        if routes.by_request.contains_key(req) {
            return Err(DuplicateId);
        }
        let stream_id = new_stream_id();
        let (tx, rx) = mpsc::unbounded_channel();
        routes.by_request.insert(req.clone(), stream_id.clone());
        routes
            .streams
            .insert(stream_id.clone(), StreamState::new(Some(tx)));
        self.create_in_store(&stream_id);
        Ok((stream_id, rx))
    }

    /// The standalone stream: `Ok((id, rx))`, or `Err(())` when a connection is already
    /// attached to it (one at a time).
    pub(crate) fn open_standalone(&self) -> Result<(String, LiveRx), ()> {
        let mut routes = self.routes();
        let (tx, rx) = mpsc::unbounded_channel();
        if let Some(id) = routes.standalone.clone() {
            let st = routes.streams.get_mut(&id).ok_or(())?;
            if st.live.as_ref().is_some_and(|l| !l.is_closed()) {
                return Err(());
            }
            st.live = Some(tx);
            return Ok((id, rx));
        }
        let id = new_stream_id();
        routes.standalone = Some(id.clone());
        routes
            .streams
            .insert(id.clone(), StreamState::new(Some(tx)));
        self.create_in_store(&id);
        Ok((id, rx))
    }

    /// Attaches a resuming connection to `stream_id` after `after` (replacing any other
    /// connection on it).
    pub(crate) fn attach(&self, stream_id: &str, after: u64) -> Attach {
        let mut routes = self.routes();
        if routes.ended.contains(stream_id) {
            return Attach::Ended;
        }
        let Some(st) = routes.streams.get_mut(stream_id) else {
            return Attach::NotLocal;
        };
        if let Some(old) = st.live.take() {
            let _ = old.send(SseItem::Close);
        }
        let events: Vec<(u64, Arc<str>)> = st
            .tail
            .iter()
            .filter(|(seq, _)| *seq > after)
            .cloned()
            .collect();
        // The tail reaches back to the cursor unless older events were dropped from memory.
        let tail_start = st.tail.front().map_or(st.last_seq + 1, |(s, _)| *s);
        let from_store = (after + 1 < tail_start).then_some(after);
        let (tx, rx) = mpsc::unbounded_channel();
        st.live = Some(tx);
        Attach::Local {
            from_store,
            events,
            live: Some(rx),
        }
    }

    /// The request was cancelled: no response will follow, so its stream ends now (the
    /// client's connection closes instead of hanging open).
    pub(crate) fn end_request_stream(&self, req: &RequestId) {
        let mut routes = self.routes();
        let Some(stream_id) = routes.by_request.remove(req) else {
            return;
        };
        routes.end(&stream_id);
        self.batcher.write(EventWrite::Close {
            session_id: self.id.clone(),
            stream_id,
        });
    }

    /// Closes the session: cancels its requests, ends every connection.
    pub(crate) fn close(&self, reason: crate::registry::CancelReason) {
        self.session.close(reason);
        let mut routes = self.routes();
        for st in routes.streams.values_mut() {
            if let Some(l) = st.live.take() {
                let _ = l.send(SseItem::Close);
            }
        }
    }

    pub(crate) async fn drain(&self) -> bool {
        self.session.drain().await
    }

    /// Puts one message on its stream: next seq, memory tail, live connection, store queue.
    fn deliver(&self, msg: Outbound) {
        let mut routes = self.routes();
        let target = msg
            .related
            .as_ref()
            .and_then(|r| routes.by_request.get(r).cloned())
            .or_else(|| routes.standalone.clone());
        let Some(stream_id) = target else {
            tracing::debug!(session = %self.id, "no stream for a message; dropped");
            return;
        };
        let ends_stream = msg.kind == OutboundKind::Response
            && msg
                .related
                .as_ref()
                .is_some_and(|r| routes.by_request.get(r) == Some(&stream_id));
        let data: Arc<str> = Arc::from(String::from_utf8_lossy(&msg.bytes).as_ref());
        let Some(st) = routes.streams.get_mut(&stream_id) else {
            return;
        };
        st.last_seq += 1;
        let seq = st.last_seq;
        st.tail.push_back((seq, data.clone()));
        if st.tail.len() > self.tail_cap {
            st.tail.pop_front();
        }
        if let Some(live) = &st.live
            && live
                .send(SseItem::Event {
                    id: event_id(&stream_id, seq),
                    data: data.clone(),
                })
                .is_err()
        {
            st.live = None;
        }
        self.batcher.write(EventWrite::Append {
            session_id: self.id.clone(),
            stream_id: stream_id.clone(),
            payload: data.to_string(),
        });
        if ends_stream {
            // Dropping the stream's sender ends the connection after this event.
            routes.end(&stream_id);
            self.batcher.write(EventWrite::Close {
                session_id: self.id.clone(),
                stream_id,
            });
            if let Some(r) = &msg.related {
                routes.by_request.remove(r);
            }
        }
    }

    fn close_connection(&self, req: &RequestId) {
        let mut routes = self.routes();
        let Some(stream_id) = routes.by_request.get(req).cloned() else {
            return;
        };
        if let Some(st) = routes.streams.get_mut(&stream_id)
            && let Some(l) = st.live.take()
        {
            let _ = l.send(SseItem::Close);
        }
    }
}

pub(crate) struct ConnectionGuard(Arc<HttpSession>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// `"{stream}:{seq}"`: unique within the session, and it names its stream.
pub(crate) fn event_id(stream_id: &str, seq: u64) -> String {
    format!("{stream_id}:{seq}")
}

/// Splits an event id into stream and sequence number.
pub(crate) fn parse_event_id(id: &str) -> Option<(&str, u64)> {
    let (stream, seq) = id.rsplit_once(':')?;
    if stream.is_empty() {
        return None;
    }
    Some((stream, seq.parse().ok()?))
}

fn new_stream_id() -> String {
    random_hex(8)
}

/// `n` random bytes from the OS CSPRNG, as hex.
pub(crate) fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    if getrandom::fill(&mut buf).is_err() {
        // The OS RNG failing is not recoverable in any useful way for ids.
        panic!("the operating system's random number generator failed");
    }
    // A table, not `format!` per byte: this runs for every request's stream id.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(n * 2);
    for b in buf {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_round_trip() {
        assert_eq!(parse_event_id(&event_id("ab12", 7)), Some(("ab12", 7)));
        assert_eq!(parse_event_id("nocolon"), None);
        assert_eq!(parse_event_id(":5"), None);
        assert_eq!(parse_event_id("s:x"), None);
        assert_eq!(random_hex(16).len(), 32);
        assert_ne!(random_hex(16), random_hex(16));
    }
}
