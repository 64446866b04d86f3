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
//!
//! A live connection's queue is bounded (`--max-connection-backlog`): a client that stops
//! reading while its stream keeps producing falls behind, and once it is that many messages
//! behind its connection is closed after what is queued (counted, and logged). Nothing is
//! lost: the client resumes with `Last-Event-ID` from the tail or the store.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::body::Bytes;
use staunch_protocol::RequestId;
use staunch_store::{EventWrite, now_ms};

use super::batch::Batcher;
use super::live::{self, LiveTx, Refused};
pub(crate) use super::live::{LiveRx, SseItem};
use super::stream_id::{new_stream_id, own_stream_number};
use crate::fast_map::FastMap;
use crate::outbound::{Outbound, OutboundKind, Sink};
use crate::server::Server;
use crate::session::Session;

/// Hands `item` to a live connection; `false` when the connection is gone or is more than its
/// backlog behind (then it is to be detached: dropping the sender ends it after what is
/// queued, and the client resumes).
fn offer(live: &LiveTx, item: SseItem, stream_id: &str, batcher: &Batcher) -> bool {
    match live.try_send(item) {
        Ok(()) => true,
        Err(Refused::Closed) => false,
        Err(Refused::Full) => {
            batcher.connection_cut();
            tracing::warn!(
                stream = %stream_id,
                backlog = live.max_capacity(),
                "client stopped reading: connection closed after its backlog; it can resume with Last-Event-ID"
            );
            false
        }
    }
}

/// Events kept in memory per stream for resumption on this instance (at most; never more than
/// the store's retention per stream); older ones are read from the store.
const TAIL: usize = 1024;

/// Ended streams remembered per session (a resume of an older one that ran here is treated like
/// one that ran elsewhere: replayed from the store, then followed until its response).
const ENDED: usize = 4096;

struct StreamState {
    last_seq: u64,
    live: Option<LiveTx>,
    tail: VecDeque<(u64, Bytes)>,
    /// Whether its events go to the event store. A request answered with a plain JSON body
    /// ([`Durability::UntilFirstMessage`]) has no event id to resume from, so nothing of it
    /// is stored unless something other than its response comes first.
    stored: bool,
}

impl StreamState {
    fn new(live: Option<LiveTx>, stored: bool) -> Self {
        Self {
            last_seq: 0,
            live,
            tail: VecDeque::new(),
            stored,
        }
    }
}

/// Whether a request's stream is stored from the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Every event is stored (the client resumes with `Last-Event-ID`).
    Stored,
    /// The response alone is answered as a plain JSON body and never stored; the first
    /// message that is not the response makes the stream a stored one, from its first event.
    UntilFirstMessage,
}

#[derive(Default)]
struct Routes {
    /// In-flight client request → its stream.
    /// Stream ids are shared (`Arc<str>`): a stream's id is in two maps and in every message
    /// routed to it.
    by_request: FastMap<RequestId, Arc<str>>,
    streams: FastMap<Arc<str>, StreamState>,
    /// The standalone stream, once a GET opened it.
    standalone: Option<Arc<str>>,
    /// Streams that ended here (response written, or the request was cancelled), newest last:
    /// a resume is served from the store and then ends. Bounded by `ENDED`.
    ended: EndedStreams,
}

/// The streams that ended here, by their number in this process ([`own_stream_number`]):
/// two flat tables of integers that reach their size once, instead of two strings per stream
/// kept long after the request that made them (small long-lived allocations made amid a
/// burst's short-lived ones pin the burst's pages in the allocator after it is over).
#[derive(Default)]
struct EndedStreams {
    set: crate::fast_map::FastSet<u64>,
    order: VecDeque<u64>,
}

impl EndedStreams {
    fn insert(&mut self, stream_id: &str) {
        let Some(n) = own_stream_number(stream_id) else {
            return;
        };
        if self.set.insert(n) {
            self.order.push_back(n);
            if self.order.len() > ENDED
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }

    fn contains(&self, stream_id: &str) -> bool {
        own_stream_number(stream_id).is_some_and(|n| self.set.contains(&n))
    }
}

impl Routes {
    /// Forgets a finished stream's state (its events are queued for the store) and remembers
    /// that it ended.
    fn end(&mut self, stream_id: &str) {
        let removed = self.streams.remove(stream_id);
        // A stream that was never stored gave its client no event id to resume from.
        if removed.is_some_and(|st| !st.stored) {
            return;
        }
        self.ended.insert(stream_id);
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
        events: Vec<(u64, Bytes)>,
        live: Option<LiveRx>,
    },
    /// The stream ended here: everything is in the store (after a flush); replay it and end.
    Ended,
    /// This instance does not know the stream: serve it from the store.
    NotLocal,
    /// The stream is here, but the cursor is past its last event: no such event id.
    PastEnd,
}

/// Opening a request stream failed because the id is already in flight.
pub(crate) struct DuplicateId;

pub(crate) struct HttpSession {
    /// Shared with every write of the session's streams to the store.
    id: Arc<str>,
    session: Session,
    batcher: Batcher,
    tail_cap: usize,
    /// Capacity of each live connection's queue.
    backlog: usize,
    routes: Mutex<Routes>,
    last_seen_ms: AtomicI64,
    open_connections: AtomicUsize,
    /// Whether the client sent anything after `initialize` but `notifications/initialized`.
    used: AtomicBool,
    created_ms: i64,
    /// The `last_seen` the session store was last told.
    synced_ms: AtomicI64,
}

impl HttpSession {
    /// `retained`: events the store keeps per stream (the memory tail keeps no more);
    /// `backlog`: messages a live connection may fall behind before it is closed.
    pub(crate) fn start(
        server: &Server,
        id: String,
        batcher: Batcher,
        retained: u64,
        peer: Option<IpAddr>,
        principal: Option<String>,
        backlog: usize,
    ) -> Arc<Self> {
        let now = now_ms();
        Arc::new_cyclic(|me| Self {
            session: server.session_for(
                id.clone(),
                Arc::new(HttpSink(me.clone())),
                principal,
                peer,
            ),
            id: id.into(),
            batcher,
            tail_cap: usize::try_from(retained).unwrap_or(TAIL).clamp(1, TAIL),
            backlog: backlog.max(1),
            routes: Mutex::new(Routes::default()),
            last_seen_ms: AtomicI64::new(now),
            open_connections: AtomicUsize::new(0),
            used: AtomicBool::new(false),
            created_ms: now,
            synced_ms: AtomicI64::new(now),
        })
    }

    /// The client used the session (anything after `initialize` but
    /// `notifications/initialized`): it no longer expires as unused.
    pub(crate) fn mark_used(&self) {
        self.used.store(true, Ordering::Relaxed);
    }

    pub(crate) fn used(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }

    pub(crate) fn created_ms(&self) -> i64 {
        self.created_ms
    }

    /// When the client was last heard from, if the session store should be told (at most
    /// once per `every`): now while a connection is open, else its last request.
    pub(crate) fn seen_to_sync(&self, now: i64, every: Duration) -> Option<i64> {
        let seen = if self.open_connections() > 0 {
            now
        } else {
            self.last_seen_ms.load(Ordering::Relaxed)
        };
        let every = i64::try_from(every.as_millis()).unwrap_or(i64::MAX);
        let synced = self.synced_ms.load(Ordering::Relaxed);
        (seen.saturating_sub(synced) >= every).then(|| {
            self.synced_ms.store(seen, Ordering::Relaxed);
            seen
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

    fn create_in_store(&self, stream_id: &Arc<str>) {
        self.batcher.write(EventWrite::Create {
            session_id: self.id.clone(),
            stream_id: stream_id.clone(),
        });
    }

    /// A new stream for client request `req`, with a live connection attached.
    pub(crate) fn open_request_stream(
        &self,
        req: &RequestId,
        durability: Durability,
    ) -> Result<(Arc<str>, LiveRx), DuplicateId> {
        let mut routes = self.routes();
        if routes.by_request.contains_key(req) {
            return Err(DuplicateId);
        }
        let stream_id = new_stream_id();
        let (tx, rx) = live::channel(self.backlog);
        let stored = durability == Durability::Stored;
        routes.by_request.insert(req.clone(), stream_id.clone());
        routes
            .streams
            .insert(stream_id.clone(), StreamState::new(Some(tx), stored));
        if stored {
            self.create_in_store(&stream_id);
        }
        Ok((stream_id, rx))
    }

    /// The standalone stream: `Ok((id, rx))`, or `Err(())` when a connection is already
    /// attached to it (one at a time).
    pub(crate) fn open_standalone(&self) -> Result<(Arc<str>, LiveRx), ()> {
        let mut routes = self.routes();
        let (tx, rx) = live::channel(self.backlog);
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
            .insert(id.clone(), StreamState::new(Some(tx), true));
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
        // A cursor past the stream's end names no event this server sent; it must not wrap
        // around (`after + 1`) into a full replay.
        if after > st.last_seq {
            return Attach::PastEnd;
        }
        if let Some(old) = st.live.take() {
            let _ = old.try_send(SseItem::Close);
        }
        let events: Vec<(u64, Bytes)> = st
            .tail
            .iter()
            .filter(|(seq, _)| *seq > after)
            .cloned()
            .collect();
        // The tail reaches back to the cursor unless older events were dropped from memory.
        let tail_start = st.tail.front().map_or(st.last_seq + 1, |(s, _)| *s);
        let from_store = (after.saturating_add(1) < tail_start).then_some(after);
        let (tx, rx) = live::channel(self.backlog);
        st.live = Some(tx);
        Attach::Local {
            from_store,
            events,
            live: Some(rx),
        }
    }

    /// Whether request `req` still has its stream here (no response yet, not cancelled).
    pub(crate) fn request_open(&self, req: &RequestId) -> bool {
        self.routes().by_request.contains_key(req)
    }

    /// The request was cancelled: no response will follow, so its stream ends now (the
    /// client's connection closes instead of hanging open).
    pub(crate) fn end_request_stream(&self, req: &RequestId) {
        let mut routes = self.routes();
        let Some(stream_id) = routes.by_request.remove(req) else {
            return;
        };
        let stored = routes.streams.get(&stream_id).is_none_or(|st| st.stored);
        routes.end(&stream_id);
        if stored {
            self.close_in_store(&stream_id);
        }
    }

    /// Closes the session: cancels its requests, ends every connection.
    pub(crate) fn close(&self, reason: crate::registry::CancelReason) {
        self.session.close(reason);
        let mut routes = self.routes();
        for st in routes.streams.values_mut() {
            if let Some(l) = st.live.take() {
                let _ = l.try_send(SseItem::Close);
            }
        }
    }

    pub(crate) async fn drain(&self) -> bool {
        self.session.drain().await
    }

    /// Puts one message on its stream: next seq, memory tail, live connection, store queue.
    fn deliver(&self, msg: Outbound) {
        let mut guard = self.routes();
        let routes = &mut *guard;
        // The related request's stream, or the standalone one; borrowed, not copied, from
        // the routes (this runs for every message).
        let own = msg.related.as_ref().and_then(|r| routes.by_request.get(r));
        let ends_stream = msg.kind == OutboundKind::Response && own.is_some();
        let Some(stream_id) = own.or(routes.standalone.as_ref()) else {
            tracing::debug!(session = %crate::session_hash(&self.id), "no stream for a message; dropped");
            return;
        };
        // The serialised message as it is: no copy, no re-validation (the store, which needs
        // text, converts what it keeps).
        let data = Bytes::from(msg.bytes);
        let Some(st) = routes.streams.get_mut(stream_id) else {
            return;
        };
        st.last_seq += 1;
        let seq = st.last_seq;
        if !st.stored && !ends_stream {
            // Something comes before the response: the answer becomes a resumable SSE stream
            // (the handler sees `last: false`), stored from this, its first event, on.
            st.stored = true;
            self.create_in_store(stream_id);
        }
        let stored = st.stored;
        // A stream that is not stored ends with this response and is forgotten at once: no
        // client can resume it, so its tail is not kept.
        if stored || !ends_stream {
            st.tail.push_back((seq, data.clone()));
            if st.tail.len() > self.tail_cap {
                st.tail.pop_front();
            }
        }
        if let Some(live) = &st.live
            && !offer(
                live,
                SseItem::Event {
                    seq,
                    data: data.clone(),
                    last: ends_stream,
                },
                stream_id,
                &self.batcher,
            )
        {
            st.live = None;
        }
        if stored {
            let append = self.append_write(stream_id, &data);
            if ends_stream {
                // The last event and the close, in one batch.
                self.batcher
                    .write_all(vec![append, self.close_write(stream_id)]);
            } else {
                self.batcher.write(append);
            }
        }
        if ends_stream {
            let stream_id = stream_id.clone();
            // Dropping the stream's sender ends the connection after this event.
            routes.end(&stream_id);
            if let Some(r) = &msg.related {
                routes.by_request.remove(r);
            }
        }
    }

    fn close_in_store(&self, stream_id: &Arc<str>) {
        self.batcher.write(self.close_write(stream_id));
    }

    fn close_write(&self, stream_id: &Arc<str>) -> EventWrite {
        EventWrite::Close {
            session_id: self.id.clone(),
            stream_id: stream_id.clone(),
        }
    }

    fn append_write(&self, stream_id: &Arc<str>, data: &[u8]) -> EventWrite {
        EventWrite::Append {
            session_id: self.id.clone(),
            stream_id: stream_id.clone(),
            // The server wrote these bytes as JSON, so they are UTF-8; checking that is far
            // cheaper than the lossy decoder.
            payload: std::str::from_utf8(data)
                .map(str::to_owned)
                .unwrap_or_else(|_| String::from_utf8_lossy(data).into_owned()),
        }
    }

    fn close_connection(&self, req: &RequestId) {
        let mut routes = self.routes();
        let Some(stream_id) = routes.by_request.get(req).cloned() else {
            return;
        };
        // A stream that is not stored answers with a JSON body the client cannot resume:
        // its connection stays until the response.
        if let Some(st) = routes.streams.get_mut(&stream_id)
            && st.stored
            && let Some(l) = st.live.take()
        {
            let _ = l.try_send(SseItem::Close);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_streams_are_remembered_up_to_the_bound_oldest_forgotten_first() {
        let mut ended = EndedStreams::default();
        let ids: Vec<Arc<str>> = (0..ENDED + 10).map(|_| new_stream_id()).collect();
        for id in &ids {
            ended.insert(id);
            ended.insert(id); // twice: remembered once
        }
        assert_eq!(ended.order.len(), ENDED);
        assert_eq!(ended.set.len(), ENDED);
        assert!(ids[..10].iter().all(|id| !ended.contains(id)));
        assert!(ids[10..].iter().all(|id| ended.contains(id)));
        // A foreign id is never "ended here".
        ended.insert("elsewhere-1");
        assert!(!ended.contains("elsewhere-1"));
    }
}
