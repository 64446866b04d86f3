//! POST, GET and DELETE on the MCP endpoint. Every failure is an HTTP status with a JSON-RPC
//! error body (id null) that says what to do.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use staunch_protocol::modern::has_modern_meta;
use staunch_protocol::{ErrorObject, Message, RequestId, codes, parse_message, version};
use staunch_store::{Replay, SessionRecord, now_ms};

use super::HttpState;
use super::auth::Identity;
use super::head::{Head, PeerAddr, SESSION_HEADER};
use super::session::{Attach, Durability, HttpSession, event_id, parse_event_id, random_hex};
use super::sse;
use super::{peer_share, stateless};
use crate::registry::CancelReason;

/// Events replayed per store round trip.
const REPLAY_PAGE: usize = 512;

/// The MCP endpoint as an axum handler (the router that tests and extra routes use).
pub(crate) async fn endpoint(State(state): State<Arc<HttpState>>, req: Request<Body>) -> Response {
    let peer = req.extensions().get::<PeerAddr>().map(|p| p.0);
    serve_endpoint(state, req, peer).await
}

/// The MCP endpoint: [`super::accept::serve`] calls it directly for the endpoint's path (no
/// router on the hot path), and [`endpoint`] for the router. The request is taken whole, so
/// its headers are moved, never copied.
/// `peer` is the connection's address (for the per-peer limits); the body is hyper's own
/// (not boxed into an axum body) on the direct path.
pub(crate) async fn serve_endpoint<B>(
    state: Arc<HttpState>,
    req: Request<B>,
    peer: Option<std::net::SocketAddr>,
) -> Response
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    // The rest of the head (uri, extensions) goes now, not after the request: an in-flight
    // stream holds nothing of it.
    let axum::http::request::Parts {
        method, headers, ..
    } = parts;
    let head = Head::read(&headers);
    if let Some(denied) = check_host_and_origin(&state, &head) {
        return denied;
    }
    // Auth (when on) before anything else: every request, in every era, carries its token.
    let identity = match &state.auth {
        Some(auth) => match auth.authenticate(&headers, &state.cfg.endpoint).await {
            Ok(id) => Some(id),
            Err(refusal) => return refusal,
        },
        None => None,
    };
    let principal = identity.as_ref().map(|i| i.principal.as_str());
    match method {
        Method::POST => {
            let body = match read_body(&state, body).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            let peer = peer.map(|a| a.ip());
            post(state, headers, head, body, identity.as_ref(), peer).await
        }
        Method::GET | Method::DELETE if head.stateless_client() => stateless::method_not_allowed(),
        Method::GET => get(state, head, principal).await,
        Method::DELETE => delete(state, head, principal).await,
        _ => {
            let mut r = error(
                StatusCode::METHOD_NOT_ALLOWED,
                codes::INVALID_REQUEST,
                "use POST, GET or DELETE",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            r
        }
    }
}

/// The request body, within the size limit and the body-read timeout (hyper has a timer for
/// the head only).
async fn read_body<B>(state: &HttpState, body: B) -> Result<Bytes, Response>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limit = state.cfg.max_body_bytes;
    let collect = async {
        http_body_util::BodyExt::collect(http_body_util::Limited::new(body, limit))
            .await
            .map(http_body_util::Collected::to_bytes)
    };
    let mut read = std::pin::pin!(collect);
    // A small body usually arrived with its head: take it without arming the timer (a timer
    // entry is a lock and a wheel insert and removal, ~1.6k instructions per request).
    let ready = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    let read = match ready {
        Poll::Ready(r) => Ok(r),
        Poll::Pending => tokio::time::timeout(state.cfg.body_read_timeout, read).await,
    };
    match read {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => {
            let e: &(dyn std::error::Error + 'static) = &*e;
            let too_large = std::iter::successors(Some(e), |e| e.source())
                .any(|e| e.is::<http_body_util::LengthLimitError>());
            if too_large {
                tracing::warn!(limit, "request refused: body too large");
                Err(error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    codes::INVALID_REQUEST,
                    &format!("request body larger than {limit} bytes (--max-message-bytes)"),
                ))
            } else {
                Err(error(
                    StatusCode::BAD_REQUEST,
                    codes::INVALID_REQUEST,
                    "the request body could not be read",
                ))
            }
        }
        Err(_) => {
            tracing::warn!("request refused: body not received in time");
            Err(error(
                StatusCode::REQUEST_TIMEOUT,
                codes::INVALID_REQUEST,
                &format!(
                    "request body not received within {} ms (--body-read-timeout-ms)",
                    state.cfg.body_read_timeout.as_millis()
                ),
            ))
        }
    }
}

fn error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn check_host_and_origin(state: &HttpState, head: &Head) -> Option<Response> {
    state
        .cfg
        .allow
        .judge(
            head.hosts,
            head.host.as_ref(),
            head.origins,
            head.origin.as_ref(),
        )
        .err()
        .map(|refusal| refusal.answer(head.host.as_ref(), head.origin.as_ref()))
}

/// The RFC 9728 protected-resource metadata (served only with auth on).
pub(crate) async fn resource_metadata(
    State(state): State<Arc<HttpState>>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = check_host_and_origin(&state, &Head::read(&headers)) {
        return denied;
    }
    let Some(auth) = &state.auth else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if method != Method::GET && method != Method::HEAD {
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            codes::INVALID_REQUEST,
            "use GET",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return r;
    }
    let doc = auth.metadata(&state.server, &headers, &state.cfg.endpoint);
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            // Public by design (RFC 9728): browser-based clients read it cross-origin.
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        doc.to_string(),
    )
        .into_response()
}

/// Whether a session may be used by `principal`: with auth on, only by the one that created
/// it (any other gets the same answer as for an unknown id, so ids cannot be probed).
fn owned_by(state: &HttpState, owner: Option<&str>, principal: Option<&str>) -> bool {
    state.auth.is_none() || owner == principal
}

fn unknown_session() -> Response {
    error(
        StatusCode::NOT_FOUND,
        codes::INVALID_REQUEST,
        "unknown or expired session: initialize a new one",
    )
}

/// The session named by the request, adopting one another instance created (shared store).
async fn find_session(
    state: &HttpState,
    head: &Head,
    principal: Option<&str>,
) -> Result<Arc<HttpSession>, Response> {
    let Some(id) = head.session_id() else {
        return Err(error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST,
            "missing Mcp-Session-Id header: send initialize first",
        ));
    };
    if let Some(s) = state.session(id) {
        if !owned_by(state, s.session().principal(), principal) {
            tracing::warn!(principal = ?principal, "request refused: session of another principal");
            return Err(unknown_session());
        }
        s.touch();
        return Ok(s);
    }
    match state.sessions_store.get(id).await {
        Ok(Some(rec)) if !owned_by(state, rec.principal.as_deref(), principal) => {
            tracing::warn!(principal = ?principal, "request refused: session of another principal");
            Err(unknown_session())
        }
        Ok(Some(rec)) if !stored_session_expired(state, &rec).await => Ok(adopt(state, rec)),
        Ok(_) => Err(unknown_session()),
        Err(e) => {
            tracing::error!(error = %e, "session lookup failed");
            Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                codes::INTERNAL_ERROR,
                "session store unavailable",
            ))
        }
    }
}

/// Whether a stored session was idle for longer than the idle timeout (its instance stopped
/// without expiring it, or this one restarted): it is deleted and not adopted.
async fn stored_session_expired(state: &HttpState, rec: &SessionRecord) -> bool {
    let idle = i64::try_from(state.cfg.session_idle.as_millis()).unwrap_or(i64::MAX);
    if now_ms().saturating_sub(rec.last_seen_ms) <= idle {
        return false;
    }
    tracing::info!(session = %crate::session_hash(&rec.id), "stored session expired; not adopted");
    if let Err(e) = state.sessions_store.delete(&rec.id).await {
        tracing::warn!(error = %e, "could not delete an expired session record");
    }
    state.batcher.delete_session(rec.id.clone());
    true
}

/// Serves a session created by another instance (they share the session store).
fn adopt(state: &HttpState, rec: SessionRecord) -> Arc<HttpSession> {
    let mut sessions = state.sessions.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = sessions.get(&rec.id) {
        return s.clone();
    }
    let s = HttpSession::start(
        &state.server,
        rec.id.clone(),
        state.batcher.clone(),
        state.cfg.event_max_per_stream,
        None,
        rec.principal.clone(),
        state.cfg.connection_backlog,
    );
    // It was in use somewhere already.
    s.mark_used();
    let caps = serde_json::from_str(&rec.client_capabilities_json).unwrap_or_default();
    s.session().restore(&rec.protocol_version, caps);
    sessions.insert(rec.id, s.clone());
    s
}

async fn post(
    state: Arc<HttpState>,
    headers: HeaderMap,
    head: Head,
    body: Bytes,
    identity: Option<&Identity>,
    peer: Option<std::net::IpAddr>,
) -> Response {
    if !head.json_body {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            codes::INVALID_REQUEST,
            "Content-Type must be application/json",
        );
    }
    let msg = match parse_message(&body) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "malformed POST body");
            let body = String::from_utf8_lossy(&e.to_response_bytes()).into_owned();
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response();
        }
    };
    if let (Some(auth), Some(identity), Message::Request(r)) = (&state.auth, identity, &msg)
        && r.method == "tools/call"
        && let Some(tool) = r
            .params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(serde_json::Value::as_str)
        && let Some(refusal) = auth.check_tool(
            &state.server,
            identity,
            tool,
            &r.id,
            &headers,
            &state.cfg.endpoint,
        )
    {
        return refusal;
    }
    let principal = identity.map(|i| i.principal.clone());
    // The era, per request: the stateless era's `_meta` (whatever else the request carries), or
    // a stateless client's headers; everything else is session traffic.
    let stateless = match &msg {
        Message::Request(r) => has_modern_meta(r.params.as_ref()) || head.stateless_client(),
        _ => head.stateless_client(),
    };
    if stateless {
        return match msg {
            Message::Request(req) => {
                // A request whose answer can only be a stream, from a client that does not
                // accept one: refused at once, before it takes a slot (it would otherwise wait,
                // silent, until the client gave up).
                if !head.accept.sse && stateless::answers_only_as_a_stream(&req.method) {
                    return sse::error_answer(
                        StatusCode::NOT_ACCEPTABLE,
                        Some(&req.id),
                        &ErrorObject::new(
                            codes::INVALID_REQUEST,
                            format!(
                                "{} answers with a stream: Accept must include text/event-stream",
                                req.method
                            ),
                        ),
                    );
                }
                // The peer's share of the in-flight slots (a session's is checked in the core).
                let slot = match peer_share::admit(
                    &state.server.inner,
                    principal.as_deref(),
                    peer,
                    &req.id,
                ) {
                    Ok(slot) => slot,
                    Err(refusal) => return *refusal,
                };
                let sse_ok = head.accept.sse;
                // Held for as long as the request runs: only what it needs.
                drop((head, body));
                stateless::post(state, headers, req, sse_ok, principal, slot).await
            }
            _ => stateless::not_a_request(),
        };
    }
    if let Some(v) = head.protocol_version()
        && !version::is_supported(v)
    {
        return error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST,
            &format!(
                "unsupported MCP-Protocol-Version {v:?}; supported: {} with a session, {} \
                 stateless",
                version::SUPPORTED.join(", "),
                version::MODERN_SUPPORTED.join(", ")
            ),
        );
    }
    if let Message::Request(r) = &msg
        && r.method == "initialize"
    {
        return initialize(state, msg, principal, peer).await;
    }
    let session = match find_session(&state, &head, principal.as_deref()).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    if !matches!(&msg, Message::Notification(n) if n.method == "notifications/initialized") {
        session.mark_used();
    }
    let req_id = match &msg {
        Message::Request(r) => r.id.clone(),
        _ => {
            session.session().handle(msg);
            return StatusCode::ACCEPTED.into_response();
        }
    };
    if let Err(busy) = state.batcher.admit().await {
        return store_behind(busy);
    }
    let accept = head.accept;
    if !accept.sse {
        if accept.json || accept.absent {
            return json_answer(&state, &session, msg, req_id).await;
        }
        return error(
            StatusCode::NOT_ACCEPTABLE,
            codes::INVALID_REQUEST,
            "Accept must include application/json and text/event-stream",
        );
    }
    if session.open_connections() >= state.cfg.max_streams_per_session {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            codes::SERVER_BUSY,
            &format!(
                "too many open streams in this session (limit {}); wait for calls to finish",
                state.cfg.max_streams_per_session
            ),
        );
    }
    if !state.cfg.always_sse
        && accept.json
        && matches!(&msg, Message::Request(r) if super::plain::answer_plainly(&state.server, r))
    {
        return super::plain::answer(&state, &session, msg, req_id).await;
    }
    let Ok((stream_id, rx)) = session.open_request_stream(&req_id, Durability::Stored) else {
        return sse::already_in_flight(&req_id);
    };
    let guard = session.connection_guard();
    session.session().handle(msg);
    state.server.metrics().http_answer("stream");
    sse::request_stream(&state, stream_id, None, rx, guard)
}

/// The event store is too far behind to take a new request (see [`super::batch`]).
fn store_behind(busy: super::batch::StoreBehind) -> Response {
    tracing::warn!(
        queued = busy.queued,
        "request refused: the event store is behind"
    );
    let mut r = error(
        StatusCode::SERVICE_UNAVAILABLE,
        codes::SERVER_BUSY,
        &format!(
            "server busy: the event store is {} writes behind; retry shortly",
            busy.queued
        ),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// Answers a request with a single JSON response (client did not accept SSE). Messages sent
/// before the response are still stored on the request's stream.
async fn json_answer(
    state: &HttpState,
    session: &Arc<HttpSession>,
    msg: Message,
    req_id: RequestId,
) -> Response {
    let Ok((stream_id, mut rx)) = session.open_request_stream(&req_id, Durability::Stored) else {
        return sse::already_in_flight(&req_id);
    };
    let _guard = session.connection_guard();
    session.session().handle(msg);
    let mut last = None;
    while let Some(item) = rx.recv().await {
        if let super::session::SseItem::Event { data, .. } = item {
            last = Some(data);
        }
    }
    if !last.as_ref().is_some_and(|d| is_response(d, &req_id)) && session.request_open(&req_id) {
        // The connection fell its backlog behind and was detached while the request runs on:
        // wait for the request's end and read its response from the store.
        last = response_from_store(state, session, &stream_id, &req_id).await;
    }
    match last {
        // The stream ends with the response; anything else means the request was cancelled
        // (no response is due).
        Some(data) if is_response(&data, &req_id) => sse::json_body(StatusCode::OK, data),
        _ => StatusCode::ACCEPTED.into_response(),
    }
}

/// Waits until `req` is answered or cancelled, then reads its stream's last event back.
async fn response_from_store(
    state: &HttpState,
    session: &HttpSession,
    stream_id: &str,
    req: &RequestId,
) -> Option<Bytes> {
    while session.request_open(req) {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    state.batcher.flush().await;
    let mut cursor = 0;
    let mut last = None;
    loop {
        match state
            .events
            .replay_after(session.id(), stream_id, cursor, REPLAY_PAGE)
            .await
        {
            Ok(Replay::Events(evs)) if !evs.is_empty() => {
                for e in evs {
                    cursor = e.seq;
                    last = Some(Bytes::from(e.payload));
                }
            }
            _ => return last,
        }
    }
}

fn is_response(data: &[u8], id: &RequestId) -> bool {
    serde_json::from_slice::<serde_json::Value>(data)
        .is_ok_and(|v| v.get("method").is_none() && v.get("id") == Some(&id.to_value()))
}

async fn initialize(
    state: Arc<HttpState>,
    msg: Message,
    principal: Option<String>,
    peer: Option<std::net::IpAddr>,
) -> Response {
    let Message::Request(req) = &msg else {
        unreachable_response()
    };
    let req_id = req.id.clone();
    let params = req.params.clone().unwrap_or_default();
    let (client_info_json, client_capabilities_json) =
        match client_facts(&params, state.cfg.max_client_info_bytes) {
            Ok(facts) => facts,
            Err(r) => return r,
        };
    let key = crate::fair::PeerKey::of(principal.as_deref(), peer);
    if let Err(r) = make_room(&state, key.as_ref()).await {
        return r;
    }
    // 128 bits from the OS CSPRNG: unguessable, visible ASCII.
    let id = random_hex(16);
    let session = HttpSession::start(
        &state.server,
        id.clone(),
        state.batcher.clone(),
        state.cfg.event_max_per_stream,
        peer,
        principal.clone(),
        state.cfg.connection_backlog,
    );
    state
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id.clone(), session.clone());
    let mut resp = json_answer(&state, &session, msg, req_id).await;
    let version = session
        .session()
        .protocol_version()
        .unwrap_or_else(|| version::LATEST.into());
    let record = SessionRecord {
        id: id.clone(),
        protocol_version: version,
        client_info_json,
        client_capabilities_json,
        principal,
        log_level: None,
        created_ms: now_ms(),
        last_seen_ms: now_ms(),
    };
    if let Err(e) = state.sessions_store.create(record).await {
        tracing::error!(error = %e, "could not store session");
        state
            .end_session(
                &id,
                CancelReason::SessionClosed("session store unavailable"),
            )
            .await;
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            codes::INTERNAL_ERROR,
            "session store unavailable",
        );
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(SESSION_HEADER, v);
    }
    resp
}

/// What a session keeps of its client — `clientInfo` and `capabilities` as JSON — if both are
/// objects (or absent) and together fit `max` bytes; otherwise the refusal (413, -32602), and
/// nothing is kept.
#[allow(clippy::result_large_err)]
fn client_facts(params: &serde_json::Value, max: usize) -> Result<(String, String), Response> {
    let shape_error = |field: &str| {
        error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_PARAMS,
            &format!("initialize: {field} must be an object"),
        )
    };
    let info = match params.get("clientInfo") {
        None => String::new(),
        Some(v @ serde_json::Value::Object(_)) => v.to_string(),
        Some(_) => return Err(shape_error("clientInfo")),
    };
    let caps = match params.get("capabilities") {
        None => "{}".to_string(),
        Some(v @ serde_json::Value::Object(_)) => v.to_string(),
        Some(_) => return Err(shape_error("capabilities")),
    };
    let size = info.len() + caps.len();
    if size > max {
        tracing::warn!(size, max, "initialize refused: client facts too large");
        return Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            codes::INVALID_PARAMS,
            &format!(
                "initialize: capabilities and clientInfo take {size} bytes; the limit is {max} \
                 (--max-client-info-bytes). Nothing was kept; send a smaller initialize."
            ),
        ));
    }
    Ok((info, caps))
}

/// Room for one more session: under the global and the per-peer limits (a peer is its
/// principal when authenticated, else its address: behind a reverse proxy every principal
/// shares one address), making way if need be by ending the oldest session that was never
/// used (a flood of bare `initialize`s cannot lock real clients out); 503 or 429 when every
/// session counts.
#[allow(clippy::result_large_err)]
async fn make_room(state: &HttpState, peer: Option<&crate::fair::PeerKey>) -> Result<(), Response> {
    let (victim, refusal) = {
        let sessions = state.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let of_peer = |s: &HttpSession| peer.is_some() && s.session().peer_key() == peer;
        let oldest_unused = |from_peer: bool| {
            sessions
                .values()
                .filter(|s| !s.used() && (!from_peer || of_peer(s)))
                .min_by_key(|s| s.created_ms())
                .map(|s| s.id().to_string())
        };
        let held = sessions.values().filter(|s| of_peer(s)).count();
        if let Some(key) = peer
            && held >= state.cfg.max_sessions_per_peer
        {
            let refusal = error(
                StatusCode::TOO_MANY_REQUESTS,
                codes::SERVER_BUSY,
                &format!(
                    "too many sessions from this client (limit {}, --max-sessions-per-peer, \
                     counted by {}); end one with DELETE or let it expire",
                    state.cfg.max_sessions_per_peer,
                    key.counted_by()
                ),
            );
            (oldest_unused(true), Some(refusal))
        } else if sessions.len() >= state.cfg.max_sessions {
            let refusal = error(
                StatusCode::SERVICE_UNAVAILABLE,
                codes::SERVER_BUSY,
                &format!(
                    "too many sessions (limit {}, --max-sessions); try again later",
                    state.cfg.max_sessions
                ),
            );
            (oldest_unused(false), Some(refusal))
        } else {
            (None, None)
        }
    };
    match (victim, refusal) {
        (_, None) => Ok(()),
        (Some(id), Some(_)) => {
            tracing::info!(session = %crate::session_hash(&id), "unused session ended to make room");
            state
                .end_session(
                    &id,
                    CancelReason::SessionClosed("session ended: never used"),
                )
                .await;
            Ok(())
        }
        (None, Some(r)) => Err(r),
    }
}

fn unreachable_response() -> ! {
    unreachable!("initialize() is only called with a request")
}

async fn get(state: Arc<HttpState>, head: Head, principal: Option<&str>) -> Response {
    if !head.accept.sse {
        return error(
            StatusCode::NOT_ACCEPTABLE,
            codes::INVALID_REQUEST,
            "GET needs Accept: text/event-stream",
        );
    }
    let session = match find_session(&state, &head, principal).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    session.mark_used();
    if session.open_connections() >= state.cfg.max_streams_per_session {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            codes::SERVER_BUSY,
            "too many open streams in this session",
        );
    }
    match head.last_event_id() {
        Some(last) => resume(state, session, last).await,
        None => standalone(state, session).await,
    }
}

async fn standalone(state: Arc<HttpState>, session: Arc<HttpSession>) -> Response {
    let Ok((stream_id, rx)) = session.open_standalone() else {
        return error(
            StatusCode::CONFLICT,
            codes::INVALID_REQUEST,
            "a standalone stream is already open for this session",
        );
    };
    let guard = session.connection_guard();
    let first = vec![sse::priming(&event_id(&stream_id, 0), state.cfg.sse_retry)];
    let open = state.server.metrics().sse_stream_opened();
    sse::body(
        stream_id,
        first,
        Some(rx),
        None,
        state.cfg.keep_alive,
        guard,
        open,
    )
}

/// Resumes a stream after `last` (`"{stream}:{seq}"`): missed events first (from memory, or the
/// store when they are older or the stream ran elsewhere), then the live connection, with no
/// gap and no duplicate.
async fn resume(state: Arc<HttpState>, session: Arc<HttpSession>, last: &str) -> Response {
    let Some((stream_id, after)) = parse_event_id(last) else {
        return error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST,
            "malformed Last-Event-ID",
        );
    };
    let unknown = || {
        error(
            StatusCode::NOT_FOUND,
            codes::INVALID_REQUEST,
            "unknown Last-Event-ID for this session",
        )
    };
    // Sequence numbers are stored as signed 64-bit integers: a larger one was never sent.
    if i64::try_from(after).is_err() {
        return unknown();
    }
    let stream_id: Arc<str> = Arc::from(stream_id);
    let (follow, from_store, memory, live) = match session.attach(&stream_id, after) {
        Attach::PastEnd => return unknown(),
        Attach::Local {
            from_store,
            events,
            live,
        } => (false, from_store.is_some(), events, live),
        Attach::Ended => (false, true, Vec::new(), None),
        // Another instance runs this stream's request (or ran it before this one forgot the
        // stream): follow the store until the response has been delivered.
        Attach::NotLocal => (true, true, Vec::new(), None),
    };
    if from_store {
        // What this instance queued for the store must be there before it is read back.
        state.batcher.flush().await;
    }
    // From the store: everything before the first event still in memory.
    let upto = memory.first().map_or(u64::MAX, |(s, _)| s - 1);
    let mut first = Vec::new();
    let mut cursor = after;
    if from_store {
        match replay_range(&state, session.id(), &stream_id, after, upto, &mut first).await {
            Ok(c) => cursor = c,
            Err(r) => {
                if r.status() == StatusCode::GONE {
                    state.server.metrics().sse_resume(true);
                }
                return r;
            }
        }
    }
    for (seq, data) in memory {
        cursor = seq;
        first.push(sse::event_at(&stream_id, seq, &data));
    }
    let live = match live {
        Some(rx) => Some(rx),
        None if follow && !ends_with_response(&first) => Some(follow_store(
            state.clone(),
            session.id().to_string(),
            stream_id.to_string(),
            cursor,
        )),
        None => None,
    };
    let guard = session.connection_guard();
    state.server.metrics().sse_resume(false);
    sse::body(
        stream_id,
        first,
        live,
        state.cfg.poll_after,
        state.cfg.keep_alive,
        guard,
        state.server.metrics().sse_stream_opened(),
    )
}

/// Replays `(after, upto]` of a stream from the store into `out`; returns the last seq read.
async fn replay_range(
    state: &HttpState,
    session: &str,
    stream_id: &str,
    after: u64,
    upto: u64,
    out: &mut Vec<Bytes>,
) -> Result<u64, Response> {
    let mut cursor = after;
    while cursor < upto {
        match state
            .events
            .replay_after(session, stream_id, cursor, REPLAY_PAGE)
            .await
        {
            Ok(Replay::Events(evs)) => {
                let n = evs.len();
                for e in evs {
                    if e.seq > upto {
                        return Ok(cursor);
                    }
                    cursor = e.seq;
                    out.push(sse::event(
                        &event_id(stream_id, e.seq),
                        e.payload.as_bytes(),
                    ));
                }
                if n < REPLAY_PAGE {
                    break;
                }
            }
            Ok(Replay::Gone { oldest_retained }) => {
                return Err(error(
                    StatusCode::GONE,
                    codes::INVALID_REQUEST,
                    &format!(
                        "events after {} are no longer retained (oldest kept: {}); the stream \
                         cannot be resumed without a gap",
                        event_id(stream_id, after),
                        event_id(stream_id, oldest_retained)
                    ),
                ));
            }
            Ok(Replay::UnknownStream) => {
                return Err(error(
                    StatusCode::NOT_FOUND,
                    codes::INVALID_REQUEST,
                    "unknown Last-Event-ID for this session",
                ));
            }
            Err(e) => {
                tracing::error!(error = %e, "replay failed");
                return Err(error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    codes::INTERNAL_ERROR,
                    "event store unavailable",
                ));
            }
        }
    }
    Ok(cursor)
}

/// Whether the replayed events end with a response (a request stream's last message).
fn ends_with_response(events: &[Bytes]) -> bool {
    events.last().is_some_and(|e| is_response_event(e))
}

fn is_response_event(frame: &[u8]) -> bool {
    let text = String::from_utf8_lossy(frame);
    let data: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str::<serde_json::Value>(&data).is_ok_and(|v| {
        v.get("method").is_none() && (v.get("result").is_some() || v.get("error").is_some())
    })
}

/// Polls the store for events a request running on another instance appends to `stream_id`,
/// until its response is delivered or the client goes away.
fn follow_store(
    state: Arc<HttpState>,
    session: String,
    stream_id: String,
    mut cursor: u64,
) -> super::session::LiveRx {
    // Bounded: a client that stops reading stops the polling (backpressure), not memory.
    let (tx, rx) = tokio::sync::mpsc::channel(state.cfg.connection_backlog.max(1));
    tokio::spawn(async move {
        let mut wait = std::time::Duration::from_millis(20);
        while !tx.is_closed() {
            match state
                .events
                .replay_after(&session, &stream_id, cursor, REPLAY_PAGE)
                .await
            {
                Ok(Replay::Events(evs)) if !evs.is_empty() => {
                    wait = std::time::Duration::from_millis(20);
                    for e in evs {
                        cursor = e.seq;
                        let frame = sse::event(&event_id(&stream_id, e.seq), e.payload.as_bytes());
                        let done = is_response_event(&frame);
                        let item = super::session::SseItem::Event {
                            seq: e.seq,
                            data: e.payload.into(),
                            last: done,
                        };
                        if tx.send(item).await.is_err() || done {
                            return;
                        }
                    }
                }
                Ok(Replay::Events(_)) => {
                    // Back off while nothing happens, up to half a second.
                    wait = (wait * 2).min(std::time::Duration::from_millis(500));
                }
                Ok(Replay::Gone { .. } | Replay::UnknownStream) | Err(_) => return,
            }
            tokio::time::sleep(wait).await;
        }
    });
    rx
}

async fn delete(state: Arc<HttpState>, head: Head, principal: Option<&str>) -> Response {
    let Some(id) = head.session_id() else {
        return error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST,
            "missing Mcp-Session-Id header",
        );
    };
    if let Some(s) = state.session(id) {
        if !owned_by(&state, s.session().principal(), principal) {
            tracing::warn!(principal = ?principal, "DELETE refused: session of another principal");
            return unknown_session();
        }
    } else {
        // Another instance may hold it; the store decides whether it exists.
        match state.sessions_store.get(id).await {
            Ok(Some(rec)) if owned_by(&state, rec.principal.as_deref(), principal) => {
                adopt(&state, rec);
            }
            _ => {
                return error(
                    StatusCode::NOT_FOUND,
                    codes::INVALID_REQUEST,
                    "unknown or expired session",
                );
            }
        }
    }
    state
        .end_session(
            id,
            CancelReason::SessionClosed(crate::registry::SESSION_DELETED),
        )
        .await;
    StatusCode::OK.into_response()
}
