//! Streamable HTTP: one POST per message, answers as JSON or SSE, and resumption instead of
//! re-calling (2025-03-26 … 2025-11-25); per-request headers and close-to-cancel (2026-07-28).
//!
//! A POST carrying a request may be answered with an SSE stream. If that stream drops before
//! the answer arrives, the spec says this is *not* a cancellation: the server keeps working
//! and may replay what we missed. So we wait the `retry` the server asked for and send `GET`
//! with `Last-Event-ID`, and never re-send the `tools/call` (that would run the tool twice).
//! Only when the server cannot replay (no event id was ever seen, or it refuses the GET) does
//! the request fail, with [`ClientError::StreamLost`].
//!
//! In the stateless era (2026-07-28) there is no session and no resumption: each request's POST
//! carries `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`, its stream is its own, and
//! giving up on the request closes that stream at once, which is how the server learns of the
//! cancel. A stream that drops before the answer loses the request ([`ClientError::StreamLost`];
//! the spec says to re-issue it as a new request, which is the caller's decision).
//!
//! [`HttpEndpoint`] is the raw layer (send a POST/GET/DELETE with exact headers, read the
//! body as text or as SSE events); `staunch probe` uses it to test servers black-box.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::{HashMap, HashSet};
use staunch_protocol::mcp::methods;
use staunch_protocol::raw::Incoming;
use staunch_protocol::{RequestId, parse_incoming};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

mod endpoint;

use endpoint::{Headers, mcp_header};
pub use endpoint::{HttpEndpoint, RawResponse, SseStream};
use hyper::header::HeaderValue;

use super::Outgoing;
use crate::ClientError;
use crate::inbox::Inbox;
use crate::router::Inbound;

/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The negotiated-version header.
pub const VERSION_HEADER: &str = "mcp-protocol-version";
/// The resumption header.
pub const LAST_EVENT_ID: &str = "last-event-id";
/// 2026-07-28: the request's method.
pub const METHOD_HEADER: &str = "mcp-method";
/// 2026-07-28: the tool or prompt name, resource uri or task id the request names.
pub const NAME_HEADER: &str = "mcp-name";
/// What a POST accepts.
pub const POST_ACCEPT: &str = "application/json, text/event-stream";

/// A header as a command line or a configuration writes it, `Name: value`. Refused without its
/// text: a header is often a credential, and an error message is read and logged.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or("not a header: expected `Name: value` (the text given is not shown)")?;
    Ok((name.trim().to_string(), value.trim().to_string()))
}

/// How the HTTP transport behaves.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Resumption attempts in a row that bring no new event before the request fails.
    pub max_resumes: u32,
    /// Wait before resuming when the server sent no `retry`.
    pub default_retry: Duration,
    /// Upper bound on a server-requested `retry` wait.
    pub max_retry_wait: Duration,
    /// How long a cancelled request's stream stays open, so a late answer is still seen.
    pub linger_after_cancel: Duration,
    /// Extra headers on every request (e.g. `Authorization`).
    pub headers: Vec<(String, String)>,
    /// Largest JSON body read.
    pub max_body_bytes: usize,
    /// Open the session's standalone stream (GET) once `initialize` succeeds, so that what the
    /// server sends outside any request reaches the client: log messages, list changes, its
    /// own requests. Session era only; a server that offers none (405) is left alone.
    pub listen: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_resumes: 5,
            default_retry: Duration::from_secs(1),
            max_retry_wait: Duration::from_secs(30),
            linger_after_cancel: Duration::from_secs(1),
            headers: Vec::new(),
            max_body_bytes: 16 * 1024 * 1024,
            listen: false,
        }
    }
}

/// Per-connection state shared by the POST tasks.
struct Shared {
    ep: HttpEndpoint,
    opts: HttpOptions,
    inbound: Inbox,
    /// The session id and the protocol version, held as the header values every request
    /// sends (cloning one shares its bytes).
    session: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    /// The connection speaks the stateless era.
    stateless: AtomicBool,
    /// The POST/stream task of each request in flight, stopped on abandon: a send, or the
    /// sender dropped, ends it (a one-shot costs its task less to wait on than a cancellation
    /// token, which it polls every time the POST wakes).
    inflight: Mutex<HashMap<RequestId, oneshot::Sender<()>>>,
    abandoned: Mutex<HashSet<RequestId>>,
    resumes: AtomicU64,
    /// Stops the standalone stream's reader ([`HttpTransport::listen`]) when the client closes.
    listening: CancellationToken,
    handle: tokio::runtime::Handle,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn session_headers(&self, with_version: bool) -> Headers {
        let mut h = Headers::with_capacity(2);
        if let Some(s) = lock(&self.session).clone() {
            h.push((mcp_header(SESSION_HEADER), s));
        }
        if with_version && let Some(v) = lock(&self.version).clone() {
            h.push((mcp_header(VERSION_HEADER), v));
        }
        h
    }

    /// A GET in this session: the standalone stream, or with `last_event_id` the stream that
    /// event belongs to, from the event after it.
    async fn get_stream(&self, last_event_id: Option<&str>) -> Result<RawResponse, ClientError> {
        let mut headers = self.session_headers(true);
        if let Some(id) = last_event_id {
            let id = HeaderValue::try_from(id).map_err(|e| ClientError::Connect(e.to_string()))?;
            headers.push((mcp_header(LAST_EVENT_ID), id));
        }
        self.ep.get_with(&headers).await
    }

    fn fail(&self, id: Option<&RequestId>, error: ClientError) {
        match id {
            Some(id) => {
                self.inbound.deliver(Inbound::Failed {
                    id: id.clone(),
                    error,
                });
            }
            None => tracing::warn!("sending a notification over HTTP failed: {error}"),
        }
    }

    /// Hands a frame to the router; `stream_of` is the request whose response stream carried
    /// it (a server request on it was caused by that request).
    fn deliver(&self, frame: &[u8], stream_of: Option<&RequestId>) -> Delivered {
        match parse_incoming(frame) {
            Ok(m) => {
                let answers = matches!(&m, Incoming::Response(r) if Some(&r.id) == stream_of);
                self.inbound
                    .deliver(Inbound::Message(m, stream_of.cloned()));
                if answers {
                    Delivered::Answer
                } else {
                    Delivered::Other
                }
            }
            Err(e) => {
                tracing::warn!("server sent an unreadable message: {e}");
                Delivered::Unreadable
            }
        }
    }
}

/// What [`Shared::deliver`] handed on.
#[derive(PartialEq, Eq)]
enum Delivered {
    /// The response to the request whose stream carried it: that stream is done.
    Answer,
    Other,
    Unreadable,
}

/// The Streamable HTTP transport of a [`Client`](crate::Client).
pub(crate) struct HttpTransport {
    shared: Arc<Shared>,
}

impl HttpTransport {
    pub(crate) fn new(ep: HttpEndpoint, opts: HttpOptions, inbound: Inbox) -> Self {
        Self {
            shared: Arc::new(Shared {
                ep,
                opts,
                inbound,
                session: Mutex::new(None),
                version: Mutex::new(None),
                stateless: AtomicBool::new(false),
                inflight: Mutex::default(),
                abandoned: Mutex::default(),
                resumes: AtomicU64::new(0),
                listening: CancellationToken::new(),
                handle: tokio::runtime::Handle::current(),
            }),
        }
    }

    pub(crate) fn endpoint(&self) -> &HttpEndpoint {
        &self.shared.ep
    }

    pub(crate) fn session_id(&self) -> Option<String> {
        let session = lock(&self.shared.session);
        session
            .as_ref()
            .and_then(|s| s.to_str().ok())
            .map(str::to_string)
    }

    pub(crate) fn resumes(&self) -> u64 {
        self.shared.resumes.load(Ordering::Relaxed)
    }

    pub(crate) fn set_protocol_version(&self, v: Option<&str>, stateless: bool) {
        *lock(&self.shared.version) = v.and_then(|v| HeaderValue::try_from(v).ok());
        self.shared.stateless.store(stateless, Ordering::Relaxed);
    }

    pub(crate) fn requests_stand_alone(&self) -> bool {
        self.shared.stateless.load(Ordering::Relaxed)
    }

    pub(crate) fn send(&self, out: Outgoing) {
        // Only a request can be abandoned: a notification's or a reply's POST runs to its end.
        let stop = out.request.as_ref().map(|id| {
            let (stop, stopped) = oneshot::channel();
            lock(&self.shared.inflight).insert(id.clone(), stop);
            stopped
        });
        let shared = self.shared.clone();
        // On the runtime of the caller when there is one (a server serving connections on
        // threads of their own calls from its request's thread: the POST and its answer stay
        // there), else on the one the client was made on (a send from a `Drop`, say).
        let rt =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| self.shared.handle.clone());
        // Boxed first, so the task's cell holds a pointer rather than the POST's whole future
        // (tokio copies what the cell holds as it spawns the task and as it ends).
        rt.spawn(Box::pin(async move {
            let id = out.request.clone();
            match stop {
                Some(stopped) => tokio::select! {
                    _ = post_message(&shared, out) => {}
                    _ = stopped => {}
                },
                None => post_message(&shared, out).await,
            }
            if let Some(id) = id {
                lock(&shared.inflight).remove(&id);
            }
        }));
    }

    pub(crate) fn abandoned(&self, id: &RequestId) {
        if self.requests_stand_alone() {
            // Closing the stream is the cancel: no linger, the server must see it now.
            if let Some(stop) = lock(&self.shared.inflight).remove(id) {
                let _ = stop.send(());
            }
            return;
        }
        lock(&self.shared.abandoned).insert(id.clone());
        let shared = self.shared.clone();
        let id = id.clone();
        self.shared.handle.spawn(async move {
            tokio::time::sleep(shared.opts.linger_after_cancel).await;
            if let Some(stop) = lock(&shared.inflight).remove(&id) {
                let _ = stop.send(());
            }
            lock(&shared.abandoned).remove(&id);
        });
    }

    /// Opens the session's standalone stream when [`HttpOptions::listen`] asks for it (see
    /// there); its reader runs until the client closes.
    pub(crate) fn listen(&self) {
        if !self.shared.opts.listen || self.requests_stand_alone() {
            return;
        }
        let shared = self.shared.clone();
        self.shared.handle.spawn(async move {
            let stop = shared.listening.clone();
            tokio::select! {
                _ = read_standalone(&shared) => {}
                _ = stop.cancelled() => {}
            }
        });
    }

    pub(crate) async fn close(&self) {
        self.shared.listening.cancel();
        let stops: Vec<_> = lock(&self.shared.inflight)
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in stops {
            let _ = s.send(());
        }
        if self.requests_stand_alone() {
            return; // no session to end; DELETE is 405 in this era
        }
        let headers = self.shared.session_headers(true);
        if !headers.is_empty() {
            // Best effort: the spec says SHOULD, and a server may answer 405.
            let delete = self.shared.ep.delete_with(&headers);
            let _ = tokio::time::timeout(Duration::from_secs(2), delete).await;
        }
    }
}

/// A client dropped without `close` stops reading its standalone stream: the reader would
/// otherwise hold that connection for as long as the server keeps the session.
impl Drop for HttpTransport {
    fn drop(&mut self) {
        self.shared.listening.cancel();
    }
}

/// The headers of a stateless request: its version, method and name (never a session).
fn stateless_headers(shared: &Shared, out: &Outgoing) -> Headers {
    let mut h = Headers::with_capacity(3);
    if let Some(v) = lock(&shared.version).clone() {
        h.push((mcp_header(VERSION_HEADER), v));
    }
    // `header_value` writes only what a header value may hold.
    let value = |s: &str| HeaderValue::try_from(crate::era::header_value(s)).ok();
    if let Some(m) = out.method.as_deref().and_then(value) {
        h.push((mcp_header(METHOD_HEADER), m));
    }
    if let Some(n) = out.name.as_deref().and_then(value) {
        h.push((mcp_header(NAME_HEADER), n));
    }
    h
}

async fn post_message(shared: &Shared, out: Outgoing) {
    let id = out.request.as_ref();
    let stateless = shared.stateless.load(Ordering::Relaxed);
    let is_init = out.method.as_deref() == Some(methods::INITIALIZE);
    let headers = if stateless {
        stateless_headers(shared, &out)
    } else {
        shared.session_headers(!is_init)
    };
    let had_session = headers.iter().any(|(k, _)| k == SESSION_HEADER);
    let resp = match shared.ep.post_with(out.bytes, &headers).await {
        Ok(r) => r,
        Err(e) => return shared.fail(id, e),
    };
    if is_init && let Some(sid) = resp.header(SESSION_HEADER) {
        *lock(&shared.session) = HeaderValue::try_from(sid).ok();
    }
    let status = resp.status();
    if status == 404 && had_session {
        return shared.fail(id, ClientError::SessionExpired);
    }
    if !(200..300).contains(&status) {
        let body = resp.text(64 * 1024).await.unwrap_or_default();
        // A 4xx may carry a JSON-RPC error for our id; prefer it to a bare status.
        if let Ok(Incoming::Response(r)) = parse_incoming(body.as_bytes())
            && Some(&r.id) == id
        {
            shared
                .inbound
                .deliver(Inbound::Message(Incoming::Response(r), id.cloned()));
            return;
        }
        let body: String = body.chars().take(500).collect();
        return shared.fail(id, ClientError::Http { status, body });
    }
    if resp.is_sse() {
        if stateless {
            return read_stateless_stream(shared, resp.into_sse(), id).await;
        }
        return read_stream(shared, resp.into_sse(), id).await;
    }
    if status == 202 || status == 204 {
        if id.is_some() {
            shared.fail(
                id,
                ClientError::Protocol(format!("HTTP {status} with no answer to a request")),
            );
        }
        return;
    }
    match resp.text(shared.opts.max_body_bytes).await {
        Ok(body) if body.trim().is_empty() && id.is_none() => {}
        Ok(body) => {
            if shared.deliver(body.as_bytes(), id) == Delivered::Unreadable {
                shared.fail(id, ClientError::Protocol("unreadable JSON answer".into()));
            }
        }
        Err(e) => shared.fail(id, e),
    }
}

/// Reads a stateless request's SSE stream until its answer; there is nothing to resume.
async fn read_stateless_stream(shared: &Shared, mut stream: SseStream, id: Option<&RequestId>) {
    loop {
        match stream.next_event().await {
            Ok(Some(ev)) => {
                if ev.data.is_empty() {
                    continue;
                }
                if shared.deliver(ev.data.as_bytes(), id) == Delivered::Answer {
                    return read_to_end(shared, stream, id).await;
                }
            }
            Ok(None) | Err(_) => {
                return shared.fail(
                    id,
                    ClientError::StreamLost(
                        "the 2026-07-28 response stream closed before the answer; this \
                         protocol has no resumption and the server treats a closed stream as \
                         a cancel, so the request is lost (it was not sent again)"
                            .into(),
                    ),
                );
            }
        }
    }
}

/// How long a response stream is read for its end once its answer is in.
const END_AFTER_ANSWER: Duration = Duration::from_millis(50);

/// Reads on to its end, for at most [`END_AFTER_ANSWER`], a response stream whose answer is
/// in (what else it carries still goes to the router). A server ends the stream right after
/// the answer; a stream read to its end gives its connection back for the next request, where
/// one dropped before the end closes it, and the next request must connect again. Usually the
/// end came with the answer and is read at once, without a timer.
async fn read_to_end(shared: &Shared, mut stream: SseStream, id: Option<&RequestId>) {
    let rest = async {
        while let Ok(Some(ev)) = stream.next_event().await {
            if !ev.data.is_empty() {
                shared.deliver(ev.data.as_bytes(), id);
            }
        }
    };
    let _ = tokio::time::timeout(END_AFTER_ANSWER, rest).await;
}

/// Reads the session's standalone stream: every event goes to the router as a message that no
/// request's stream carried. When the connection drops it comes back with `Last-Event-ID` (the
/// server replays what was missed), waiting the `retry` the server asked for; it gives up after
/// [`HttpOptions::max_resumes`] attempts in a row that bring no event, and at once when the
/// server says it offers no such stream (405) or knows no such session (404).
async fn read_standalone(shared: &Shared) {
    let mut last: Option<String> = None;
    let mut retry = shared.opts.default_retry;
    let mut attempts: u32 = 0;
    loop {
        match shared.get_stream(last.as_deref()).await {
            Ok(r) if (200..300).contains(&r.status()) && r.is_sse() => {
                let mut stream = r.into_sse();
                while let Ok(Some(ev)) = stream.next_event().await {
                    attempts = 0;
                    if !ev.data.is_empty()
                        && shared.deliver(ev.data.as_bytes(), None) == Delivered::Unreadable
                    {
                        tracing::debug!("unreadable event on the standalone stream");
                    }
                }
                if let Some(id) = stream.last_event_id() {
                    last = Some(id.to_string());
                }
                if let Some(wait) = stream.retry() {
                    retry = wait;
                }
            }
            Ok(r) if matches!(r.status(), 404 | 405) => {
                tracing::debug!(status = r.status(), "no standalone stream on this server");
                return;
            }
            Ok(r) => tracing::debug!(status = r.status(), "standalone stream GET failed"),
            Err(e) => tracing::debug!("standalone stream GET failed: {e}"),
        }
        attempts += 1;
        if attempts > shared.opts.max_resumes {
            tracing::debug!(attempts, "standalone stream given up");
            return;
        }
        tokio::time::sleep(retry.min(shared.opts.max_retry_wait)).await;
    }
}

/// Reads a POST's SSE stream until the answer to `id` arrives, resuming with `Last-Event-ID`
/// when the connection drops first.
async fn read_stream(shared: &Shared, mut stream: SseStream, id: Option<&RequestId>) {
    let mut attempts: u32 = 0;
    loop {
        match stream.next_event().await {
            Ok(Some(ev)) => {
                if ev.id.is_some() {
                    attempts = 0; // the server is making progress: resumption works
                }
                if ev.data.is_empty() {
                    continue; // priming event or bare retry
                }
                if shared.deliver(ev.data.as_bytes(), id) == Delivered::Answer {
                    return read_to_end(shared, stream, id).await;
                }
            }
            Ok(None) | Err(_) => {
                let Some(id) = id else { return };
                if lock(&shared.abandoned).contains(id) {
                    return; // we gave up on it; do not bring it back
                }
                let Some(last) = stream.last_event_id().map(str::to_string) else {
                    return shared.fail(
                        Some(id),
                        ClientError::StreamLost(
                            "the stream dropped before the server sent any event id, so it \
                             cannot be resumed; the tool was not called again"
                                .into(),
                        ),
                    );
                };
                if attempts >= shared.opts.max_resumes {
                    return shared.fail(
                        Some(id),
                        ClientError::StreamLost(format!(
                            "{attempts} attempts to resume after event {last} brought nothing"
                        )),
                    );
                }
                attempts += 1;
                let wait = stream
                    .retry()
                    .unwrap_or(shared.opts.default_retry)
                    .min(shared.opts.max_retry_wait);
                tokio::time::sleep(wait).await;
                match shared.get_stream(Some(&last)).await {
                    Ok(r) if (200..300).contains(&r.status()) && r.is_sse() => {
                        shared.resumes.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%id, last_event_id = %last, "resumed a dropped stream");
                        stream.resume_with(r);
                    }
                    Ok(r) if matches!(r.status(), 400 | 404 | 405 | 409) => {
                        return shared.fail(
                            Some(id),
                            ClientError::StreamLost(format!(
                                "the server refused to resume after event {last} (HTTP {}); \
                                 the tool was not called again",
                                r.status()
                            )),
                        );
                    }
                    Ok(r) => tracing::debug!(status = r.status(), "resumption GET failed"),
                    Err(e) => tracing::debug!("resumption GET failed: {e}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod header_tests {
    use super::parse_header;

    #[test]
    fn a_header_is_name_and_value_and_a_refusal_does_not_echo_it() {
        assert_eq!(
            parse_header(" Authorization :  Bearer abc "),
            Ok(("Authorization".into(), "Bearer abc".into()))
        );
        let refused = parse_header("Bearer-secret-token").unwrap_err();
        assert!(!refused.contains("secret"), "{refused}");
        assert!(refused.contains("Name: value"), "{refused}");
    }
}
