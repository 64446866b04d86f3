//! POST, GET and DELETE on the MCP endpoint. Every failure is an HTTP status with a JSON-RPC
//! error body (id null) that says what to do.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use staunch_protocol::modern::has_modern_meta;
use staunch_protocol::{Message, RequestId, codes, parse_message, version};
use staunch_store::{Replay, SessionRecord, now_ms};

use super::HttpState;
use super::auth::Identity;
use super::session::{Attach, HttpSession, event_id, parse_event_id, random_hex};
use super::sse;
use super::stateless::{self, VERSION_HEADER};
use crate::registry::CancelReason;

const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";

/// Events replayed per store round trip.
const REPLAY_PAGE: usize = 512;

pub(crate) async fn endpoint(
    State(state): State<Arc<HttpState>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(denied) = check_host_and_origin(&state, &headers) {
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
        Method::POST => post(state, headers, body, identity.as_ref()).await,
        Method::GET | Method::DELETE if stateless_client(&headers) => {
            stateless::method_not_allowed()
        }
        Method::GET => get(state, headers, principal).await,
        Method::DELETE => delete(state, headers, principal).await,
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

fn error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn check_host_and_origin(state: &HttpState, headers: &HeaderMap) -> Option<Response> {
    let allow = &state.cfg.allow;
    let host_ok = header_str(headers, header::HOST.as_str()).is_some_and(|h| allow.host_ok(h));
    if !host_ok {
        tracing::warn!(host = ?headers.get(header::HOST), "request refused: Host not allowed");
        return Some(error(
            StatusCode::FORBIDDEN,
            codes::INVALID_REQUEST,
            "forbidden: Host not allowed",
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin.to_str().is_ok_and(|o| allow.origin_ok(o));
        if !ok {
            tracing::warn!(?origin, "request refused: Origin not allowed");
            return Some(error(
                StatusCode::FORBIDDEN,
                codes::INVALID_REQUEST,
                "forbidden: Origin not allowed",
            ));
        }
    }
    None
}

fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|part| {
            let t = part.split(';').next().unwrap_or("").trim();
            t == mime || t == "*/*"
        })
}

/// The RFC 9728 protected-resource metadata (served only with auth on).
pub(crate) async fn resource_metadata(
    State(state): State<Arc<HttpState>>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = check_host_and_origin(&state, &headers) {
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
    headers: &HeaderMap,
    principal: Option<&str>,
) -> Result<Arc<HttpSession>, Response> {
    let Some(id) = header_str(headers, SESSION_HEADER) else {
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
        Ok(Some(rec)) => Ok(adopt(state, rec)),
        Ok(None) => Err(unknown_session()),
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
        rec.principal.clone(),
    );
    let caps = serde_json::from_str(&rec.client_capabilities_json).unwrap_or_default();
    s.session().restore(&rec.protocol_version, caps);
    sessions.insert(rec.id, s.clone());
    s
}

/// A client of the stateless era: no session, and a protocol version header that names no
/// session-era revision.
fn stateless_client(headers: &HeaderMap) -> bool {
    headers.get(SESSION_HEADER).is_none()
        && header_str(headers, VERSION_HEADER).is_some_and(|v| !version::is_session_era(v.trim()))
}

async fn post(
    state: Arc<HttpState>,
    headers: HeaderMap,
    body: Bytes,
    identity: Option<&Identity>,
) -> Response {
    let json_ct = header_str(&headers, header::CONTENT_TYPE.as_str()).is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    });
    if !json_ct {
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
        Message::Request(r) => has_modern_meta(r.params.as_ref()) || stateless_client(&headers),
        _ => stateless_client(&headers),
    };
    if stateless {
        return match msg {
            Message::Request(req) => {
                let sse_ok = accepts(&headers, "text/event-stream");
                stateless::post(state, headers, req, sse_ok, principal).await
            }
            _ => stateless::not_a_request(),
        };
    }
    if let Some(v) = header_str(&headers, VERSION_HEADER)
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
        return initialize(state, msg, principal).await;
    }
    let session = match find_session(&state, &headers, principal.as_deref()).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let req_id = match &msg {
        Message::Request(r) => r.id.clone(),
        _ => {
            session.session().handle(msg);
            return StatusCode::ACCEPTED.into_response();
        }
    };
    if !accepts(&headers, "text/event-stream") {
        if accepts(&headers, "application/json") || headers.get(header::ACCEPT).is_none() {
            return json_answer(&session, msg, req_id).await;
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
    let Ok((stream_id, rx)) = session.open_request_stream(&req_id) else {
        return error(
            StatusCode::CONFLICT,
            codes::INVALID_REQUEST,
            &format!("request id {req_id} is already in flight in this session"),
        );
    };
    let guard = session.connection_guard();
    session.session().handle(msg);
    let first = vec![sse::priming(&event_id(&stream_id, 0), state.cfg.sse_retry)];
    sse::body(
        first,
        Some(rx),
        state.cfg.poll_after,
        state.cfg.keep_alive,
        guard,
        state.server.metrics().sse_stream_opened(),
    )
}

/// Answers a request with a single JSON response (client did not accept SSE). Messages sent
/// before the response are still stored on the request's stream.
async fn json_answer(session: &Arc<HttpSession>, msg: Message, req_id: RequestId) -> Response {
    let Ok((_stream_id, mut rx)) = session.open_request_stream(&req_id) else {
        return error(
            StatusCode::CONFLICT,
            codes::INVALID_REQUEST,
            &format!("request id {req_id} is already in flight in this session"),
        );
    };
    let _guard = session.connection_guard();
    session.session().handle(msg);
    let mut last = None;
    while let Some(item) = rx.recv().await {
        if let super::session::SseItem::Event { data, .. } = item {
            last = Some(data);
        }
    }
    match last {
        // The stream ends with the response; anything else means the request was cancelled
        // (no response is due).
        Some(data) if is_response(&data, &req_id) => (
            [(header::CONTENT_TYPE, "application/json")],
            data.to_string(),
        )
            .into_response(),
        _ => StatusCode::ACCEPTED.into_response(),
    }
}

fn is_response(data: &str, id: &RequestId) -> bool {
    serde_json::from_str::<serde_json::Value>(data)
        .is_ok_and(|v| v.get("method").is_none() && v.get("id") == Some(&id.to_value()))
}

async fn initialize(state: Arc<HttpState>, msg: Message, principal: Option<String>) -> Response {
    if state.session_count() >= state.cfg.max_sessions {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            codes::SERVER_BUSY,
            "too many sessions; try again later",
        );
    }
    let Message::Request(req) = &msg else {
        unreachable_response()
    };
    let req_id = req.id.clone();
    let params = req.params.clone().unwrap_or_default();
    // 128 bits from the OS CSPRNG: unguessable, visible ASCII.
    let id = random_hex(16);
    let session = HttpSession::start(
        &state.server,
        id.clone(),
        state.batcher.clone(),
        state.cfg.event_max_per_stream,
        principal.clone(),
    );
    state
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id.clone(), session.clone());
    let mut resp = json_answer(&session, msg, req_id).await;
    let version = session
        .session()
        .protocol_version()
        .unwrap_or_else(|| version::LATEST.into());
    let record = SessionRecord {
        id: id.clone(),
        protocol_version: version,
        client_info_json: params
            .get("clientInfo")
            .map(|v| v.to_string())
            .unwrap_or_default(),
        client_capabilities_json: params
            .get("capabilities")
            .map(|v| v.to_string())
            .unwrap_or_else(|| "{}".into()),
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

fn unreachable_response() -> ! {
    unreachable!("initialize() is only called with a request")
}

async fn get(state: Arc<HttpState>, headers: HeaderMap, principal: Option<&str>) -> Response {
    if !accepts(&headers, "text/event-stream") {
        return error(
            StatusCode::NOT_ACCEPTABLE,
            codes::INVALID_REQUEST,
            "GET needs Accept: text/event-stream",
        );
    }
    let session = match find_session(&state, &headers, principal).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    if session.open_connections() >= state.cfg.max_streams_per_session {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            codes::SERVER_BUSY,
            "too many open streams in this session",
        );
    }
    match header_str(&headers, LAST_EVENT_ID) {
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
    sse::body(first, Some(rx), None, state.cfg.keep_alive, guard, open)
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
    let stream_id = stream_id.to_string();
    let (follow, from_store, memory, live) = match session.attach(&stream_id, after) {
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
        first.push(sse::event(&event_id(&stream_id, seq), &data));
    }
    let live = match live {
        Some(rx) => Some(rx),
        None if follow && !ends_with_response(&first) => Some(follow_store(
            state.clone(),
            session.id().to_string(),
            stream_id.clone(),
            cursor,
        )),
        None => None,
    };
    let guard = session.connection_guard();
    state.server.metrics().sse_resume(false);
    sse::body(
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
                    out.push(sse::event(&event_id(stream_id, e.seq), &e.payload));
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
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
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
                        let frame = sse::event(&event_id(&stream_id, e.seq), &e.payload);
                        let done = is_response_event(&frame);
                        let item = super::session::SseItem::Event {
                            id: event_id(&stream_id, e.seq),
                            data: e.payload.into(),
                        };
                        if tx.send(item).is_err() || done {
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

async fn delete(state: Arc<HttpState>, headers: HeaderMap, principal: Option<&str>) -> Response {
    let Some(id) = header_str(&headers, SESSION_HEADER) else {
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
