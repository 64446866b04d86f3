//! [`Origin`]: HTTP/1.1 connections to one origin (scheme, host and port), kept open between
//! requests — the pool of an MCP endpoint, which sends every request to the same URL.
//!
//! A general client's pool keys connections by origin, hashes that key on every checkout and
//! on every return, and spawns a task per request that puts the connection back once it can
//! take the next one; for a proxy in front of one upstream that was about a twentieth of what
//! a forwarded call cost. Here the origin is fixed, so the pool is a stack of idle
//! connections, and a connection goes back when its response body has been read to the end
//! (at once when it has none) or dropped; a checkout takes one that hyper's connection task
//! says can take a request now, and opens a new one rather than wait.
//!
//! What the general pool guaranteed holds here too:
//! - A request is sent again on another connection only when it was **not sent** at all (the
//!   idle connection turned out closed before it was written); once written it is never
//!   repeated — a `tools/call` must not run twice.
//! - A response body dropped before its end closes its connection (HTTP/1.1 cannot abandon
//!   one response and go on): in the 2026-07-28 era that is how the server learns of a cancel.
//! - An idle connection is used again only within [`IDLE_TIMEOUT`], and at most [`MAX_IDLE`]
//!   are kept; one the server closed is dropped when it is next looked at.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, Response, Uri};
use tower_service::Service;

use crate::client::{Connector, connector};

/// How long an idle connection is used again (the general client's default as well): longer
/// than most servers keep one, so the server usually closes it first.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Idle connections kept at most; more in flight at once are closed after their response.
pub const MAX_IDLE: usize = 64;

/// A request body: the whole message, as MCP's POSTs are.
type ReqBody = Full<Bytes>;

/// Why a request to the origin got no response.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    /// The TCP connection or the TLS handshake could not be made.
    #[error("could not connect")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The HTTP/1.1 exchange failed (the connection broke, the response was malformed, …).
    #[error("the HTTP exchange failed")]
    Exchange(#[source] hyper::Error),
}

/// Connections to one origin. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct Origin {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origin")
            .field("uri", &self.shared.uri)
            .field("idle", &lock(&self.shared.idle).len())
            .finish()
    }
}

struct Shared {
    /// Where to connect (any URL of the origin).
    uri: Uri,
    connector: Connector,
    /// Idle connections, the most recently used last.
    idle: Mutex<VecDeque<Idle>>,
}

struct Idle {
    sender: SendRequest<ReqBody>,
    since: Instant,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Origin {
    /// A pool for the origin of `uri` (its scheme decides whether TLS is used, as
    /// [`crate::client_for`] does).
    pub fn new(uri: &Uri) -> Self {
        Self {
            shared: Arc::new(Shared {
                uri: uri.clone(),
                connector: connector(uri.scheme_str() == Some("https")),
                idle: Mutex::new(VecDeque::new()),
            }),
        }
    }

    /// Sends `req` on an idle connection, or on a new one. The request's URI must be in
    /// origin form (`/path?query`) and it must carry its `Host` header: both are written as
    /// they are.
    pub async fn send(&self, req: Request<ReqBody>) -> Result<Response<PooledBody>, OriginError> {
        let mut req = req;
        loop {
            let (mut sender, reused) = match self.checkout() {
                Some(sender) => (sender, true),
                // Boxed: connecting is rare, and its future would make every request's larger.
                None => (Box::pin(self.connect()).await?, false),
            };
            match sender.try_send_request(req).await {
                Ok(resp) => {
                    let (parts, body) = resp.into_parts();
                    let back = (sender, Arc::downgrade(&self.shared));
                    let mut body = PooledBody {
                        body,
                        back: Some(back),
                    };
                    if body.body.is_end_stream() {
                        body.give_back();
                    }
                    return Ok(Response::from_parts(parts, body));
                }
                Err(mut e) => match e.take_message() {
                    // Not written: an idle connection closed under it. Another one, or a new
                    // one, takes it.
                    Some(unsent) if reused => req = unsent,
                    _ => return Err(OriginError::Exchange(e.into_error())),
                },
            }
        }
    }

    /// An idle connection that can take a request now. Closed and expired ones are dropped;
    /// one whose connection task has not yet said it is ready is kept for later but not
    /// waited on: a body dropped mid-read leaves that task asleep on its socket until the
    /// server sends more, which may take seconds (a cancel sent through it would wait as long).
    fn checkout(&self) -> Option<SendRequest<ReqBody>> {
        let mut idle = lock(&self.shared.idle);
        let mut not_yet = Vec::new();
        let mut found = None;
        while let Some(Idle { sender, since }) = idle.pop_back() {
            if sender.is_closed() || since.elapsed() >= IDLE_TIMEOUT {
                continue;
            }
            if sender.is_ready() {
                found = Some(sender);
                break;
            }
            not_yet.push(Idle { sender, since });
        }
        // Tried last next time, the oldest in front as before.
        for c in not_yet {
            idle.push_front(c);
        }
        found
    }

    async fn connect(&self) -> Result<SendRequest<ReqBody>, OriginError> {
        let mut connector = self.shared.connector.clone();
        poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(connect_error)?;
        let io = connector
            .call(self.shared.uri.clone())
            .await
            .map_err(connect_error)?;
        let (sender, conn) = http1::handshake(io).await.map_err(OriginError::Exchange)?;
        // The connection's own task: it ends when the server closes the connection, or when
        // the sender is dropped (closed by the pool, or with an unfinished body). Its error, if
        // any, is the one the request in flight on it gets.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Idle connections now (for tests and diagnostics).
    pub fn idle(&self) -> usize {
        lock(&self.shared.idle).len()
    }
}

/// The connector's error as ours (with TLS built in it is boxed already; without, it is not).
fn connect_error(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> OriginError {
    OriginError::Connect(e.into())
}

impl Shared {
    fn give_back(&self, sender: SendRequest<ReqBody>) {
        if sender.is_closed() {
            return;
        }
        let now = Instant::now();
        let mut idle = lock(&self.idle);
        // The oldest are in front: drop the ones too old to be used again, and one more when
        // the pool is full.
        while idle
            .front()
            .is_some_and(|c| now.duration_since(c.since) >= IDLE_TIMEOUT || c.sender.is_closed())
        {
            idle.pop_front();
        }
        if idle.len() >= MAX_IDLE {
            idle.pop_front();
        }
        idle.push_back(Idle { sender, since: now });
    }
}

/// A response body from an [`Origin`]: its connection goes back to the pool when the body has
/// been read to the end or dropped; dropped before the response ended, its connection is
/// closed (by hyper) and not used again.
#[derive(Debug)]
pub struct PooledBody {
    body: Incoming,
    back: Option<(SendRequest<ReqBody>, Weak<Shared>)>,
}

impl PooledBody {
    fn give_back(&mut self) {
        if let Some((sender, pool)) = self.back.take()
            && let Some(pool) = pool.upgrade()
        {
            pool.give_back(sender);
        }
    }
}

/// A body dropped unread goes back too: hyper's connection task knows whether its response
/// had ended on the wire (an SSE stream the server closed after the answer, which the reader
/// stopped at) — then the connection takes the next request — or not, and then it closes the
/// connection, which a checkout sees as closed (and until then as not ready).
impl Drop for PooledBody {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.give_back(),
            // A broken body leaves a connection no one should use again.
            Poll::Ready(Some(Err(_))) => self.back = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
