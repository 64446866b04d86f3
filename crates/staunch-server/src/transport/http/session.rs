//! One HTTP session: its [`Session`], where each of its messages goes, and the writer that
//! stores every message before any connection sees it.
//!
//! Each client request gets its own SSE stream; messages related to that request go on it, the
//! others on the standalone (GET) stream. A stream outlives its connections: connections come
//! and go (drops, SEP-1699 polling, resumption), and at most one is attached at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use staunch_protocol::RequestId;
use staunch_store::{EventStore, now_ms};
use tokio::sync::mpsc;

use crate::outbound::{Outbound, OutboundKind, Sink};
use crate::server::Server;
use crate::session::Session;

/// What a live connection receives.
#[derive(Debug)]
pub(crate) enum SseItem {
    /// One stored message with its event id.
    Event { id: String, data: String },
    /// End this connection (the stream goes on; the client resumes with `Last-Event-ID`).
    Close,
}

pub(crate) type LiveTx = mpsc::UnboundedSender<SseItem>;
pub(crate) type LiveRx = mpsc::UnboundedReceiver<SseItem>;

struct StreamState {
    last_seq: u64,
    live: Option<LiveTx>,
    /// The response was written: nothing more will be appended.
    done: bool,
}

#[derive(Default)]
struct Routes {
    /// In-flight client request → its stream.
    by_request: HashMap<RequestId, String>,
    streams: HashMap<String, StreamState>,
    /// The standalone stream, once a GET opened it.
    standalone: Option<String>,
}

enum WriterItem {
    Msg(Outbound),
    CloseConnection(RequestId),
}

struct HttpSink(mpsc::UnboundedSender<WriterItem>);

impl Sink for HttpSink {
    fn send(&self, msg: Outbound) {
        let _ = self.0.send(WriterItem::Msg(msg));
    }

    fn close_connection(&self, related: &RequestId) {
        let _ = self.0.send(WriterItem::CloseConnection(related.clone()));
    }
}

/// Result of attaching a connection to an existing stream.
pub(crate) enum Attach {
    /// The stream is live here: replay up to `upto` from the store, then read `rx`.
    Live { upto: u64, rx: LiveRx },
    /// The stream ended here: replay everything after the cursor, then end.
    Done,
    /// This instance does not know the stream: replay what the store has, then end.
    NotLocal,
}

/// Opening a request stream failed because the id is already in flight.
pub(crate) struct DuplicateId;

pub(crate) struct HttpSession {
    id: String,
    session: Session,
    events: Arc<dyn EventStore>,
    routes: Mutex<Routes>,
    last_seen_ms: AtomicI64,
    open_connections: AtomicUsize,
}

impl HttpSession {
    /// Creates the session and its writer task.
    pub(crate) fn start(server: &Server, id: String, events: Arc<dyn EventStore>) -> Arc<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let session = server.session(id.clone(), Arc::new(HttpSink(tx)));
        let me = Arc::new(Self {
            id,
            session,
            events,
            routes: Mutex::new(Routes::default()),
            last_seen_ms: AtomicI64::new(now_ms()),
            open_connections: AtomicUsize::new(0),
        });
        tokio::spawn(writer(Arc::downgrade(&me), rx));
        me
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
    pub(crate) fn idle_for(&self, now: i64) -> std::time::Duration {
        if self.open_connections.load(Ordering::Relaxed) > 0 {
            return std::time::Duration::ZERO;
        }
        let idle = now - self.last_seen_ms.load(Ordering::Relaxed);
        std::time::Duration::from_millis(u64::try_from(idle).unwrap_or(0))
    }

    pub(crate) fn open_connections(&self) -> usize {
        self.open_connections.load(Ordering::Relaxed)
    }

    /// Counts an open SSE connection until the guard drops.
    pub(crate) fn connection_guard(self: &Arc<Self>) -> ConnectionGuard {
        self.open_connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.clone())
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
        routes.streams.insert(
            stream_id.clone(),
            StreamState {
                last_seq: 0,
                live: Some(tx),
                done: false,
            },
        );
        Ok((stream_id, rx))
    }

    /// Forgets a request stream that never got its request dispatched.
    pub(crate) fn abandon_request_stream(&self, req: &RequestId) {
        let mut routes = self.routes();
        if let Some(s) = routes.by_request.remove(req) {
            routes.streams.remove(&s);
        }
    }

    /// The standalone stream: `Ok((id, rx, created))`, or `Err(())` when a connection is
    /// already attached to it (one at a time).
    pub(crate) fn open_standalone(&self) -> Result<(String, LiveRx, bool), ()> {
        let mut routes = self.routes();
        let (tx, rx) = mpsc::unbounded_channel();
        if let Some(id) = routes.standalone.clone() {
            let st = routes.streams.get_mut(&id).ok_or(())?;
            if st.live.as_ref().is_some_and(|l| !l.is_closed()) {
                return Err(());
            }
            st.live = Some(tx);
            return Ok((id, rx, false));
        }
        let id = new_stream_id();
        routes.standalone = Some(id.clone());
        routes.streams.insert(
            id.clone(),
            StreamState {
                last_seq: 0,
                live: Some(tx),
                done: false,
            },
        );
        Ok((id, rx, true))
    }

    /// Attaches a resuming connection to `stream_id` (replacing any other connection on it).
    pub(crate) fn attach(&self, stream_id: &str) -> Attach {
        let mut routes = self.routes();
        let Some(st) = routes.streams.get_mut(stream_id) else {
            return Attach::NotLocal;
        };
        if let Some(old) = st.live.take() {
            let _ = old.send(SseItem::Close);
        }
        if st.done {
            return Attach::Done;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        st.live = Some(tx);
        Attach::Live {
            upto: st.last_seq,
            rx,
        }
    }

    /// Closes the session: cancels its requests, ends every connection.
    pub(crate) fn close(&self, reason: &str) {
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

    /// Stores one message, then hands it to the live connection of its stream.
    async fn write(&self, msg: Outbound) {
        let target = {
            let routes = self.routes();
            match &msg.related {
                Some(r) => routes.by_request.get(r).cloned(),
                None => None,
            }
            .or_else(|| routes.standalone.clone())
        };
        let Some(stream_id) = target else {
            tracing::debug!(session = %self.id, "no stream for a message; dropped");
            return;
        };
        let data = String::from_utf8_lossy(&msg.bytes).into_owned();
        let seq = match self
            .events
            .append(&self.id, &stream_id, data.clone(), now_ms())
            .await
        {
            Ok(seq) => Some(seq),
            Err(e) => {
                // Still deliver it live; it just cannot be replayed.
                tracing::warn!(session = %self.id, stream = %stream_id, error = %e, "event not stored");
                None
            }
        };
        let ends_stream = msg.kind == OutboundKind::Response
            && msg
                .related
                .as_ref()
                .is_some_and(|r| self.routes().by_request.get(r) == Some(&stream_id));
        {
            let mut routes = self.routes();
            if let Some(st) = routes.streams.get_mut(&stream_id) {
                if let Some(seq) = seq {
                    st.last_seq = seq;
                }
                let id = seq.map(|s| event_id(&stream_id, s)).unwrap_or_default();
                if let Some(live) = &st.live
                    && live.send(SseItem::Event { id, data }).is_err()
                {
                    st.live = None;
                }
                if ends_stream {
                    st.done = true;
                    // Dropping the sender ends the connection after this event.
                    st.live = None;
                }
            }
            if ends_stream && let Some(r) = &msg.related {
                routes.by_request.remove(r);
            }
        }
        if ends_stream
            && let Err(e) = self
                .events
                .mark_closed(&self.id, &stream_id, now_ms())
                .await
        {
            tracing::warn!(session = %self.id, error = %e, "could not mark stream closed");
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

    /// Drops finished streams from memory (their events stay in the store for replay; a later
    /// resume is served from there).
    pub(crate) fn forget_done_streams(&self) {
        self.routes()
            .streams
            .retain(|_, s| !s.done || s.live.is_some());
    }
}

pub(crate) struct ConnectionGuard(Arc<HttpSession>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

async fn writer(session: Weak<HttpSession>, mut rx: mpsc::UnboundedReceiver<WriterItem>) {
    while let Some(item) = rx.recv().await {
        let Some(s) = session.upgrade() else { return };
        match item {
            WriterItem::Msg(m) => s.write(m).await,
            WriterItem::CloseConnection(r) => s.close_connection(&r),
        }
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
    buf.iter().map(|b| format!("{b:02x}")).collect()
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
