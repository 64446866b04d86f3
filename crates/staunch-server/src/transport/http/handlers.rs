//! The MCP endpoint: reads each request, puts it through the admission checks of
//! [`super::admit`] in their order, then serves it — POST and DELETE here, GET in `get`,
//! `initialize` in its module, a request without a session in `stateless`. Every refusal is
//! an HTTP status with a JSON-RPC error body that says what to do.

use std::future::Future;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use staunch_protocol::stateless::has_stateless_meta;
use staunch_protocol::{Message, codes};

use super::HttpState;
use super::admit::{self, AnswerForm, Refusal};
use super::auth::Identity;
use super::get::get;
use super::head::{Head, PeerAddr};
use super::initialize::initialize;
use super::json_answer::json_answer;
use super::lookup::{adopt, find_session, owned_by, unknown_session};
use super::session::Durability;
use super::sse::{self, error};
use super::{peer_share, stateless};
use crate::registry::CancelReason;

/// The MCP endpoint as an axum handler (the router that tests and extra routes use); a plain
/// function for the reason [`serve_endpoint`] gives.
pub(crate) fn endpoint(
    State(state): State<Arc<HttpState>>,
    req: Request<Body>,
) -> impl Future<Output = Response> + Send + 'static {
    let peer = req.extensions().get::<PeerAddr>().map(|p| p.0);
    serve_endpoint(state, req, peer)
}

/// The MCP endpoint: [`super::accept::serve`] calls it directly for the endpoint's path (no
/// router on the hot path), and [`endpoint`] for the router. The request is taken whole, so
/// its headers are moved, never copied.
/// `peer` is the connection's address (for the per-peer limits); the body is hyper's own
/// (not boxed into an axum body) on the direct path.
///
/// A plain function returning the future, not an `async fn`: an `async fn` keeps each of its
/// arguments twice for as long as its future lives (as an argument and as a local), and this
/// future lives as long as the request, once per request in flight. Taking the request apart
/// here leaves the future only the parts it uses.
pub(crate) fn serve_endpoint<B>(
    state: Arc<HttpState>,
    req: Request<B>,
    peer: Option<std::net::SocketAddr>,
) -> impl Future<Output = Response> + Send + 'static
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    // The rest of the head (uri, extensions) goes now, not after the request: an in-flight
    // stream holds nothing of it (the uri is a slice of hyper's read buffer, which hyper could
    // then not reuse for its next read while a request waits here: about 8 KiB per call in
    // flight).
    let axum::http::request::Parts {
        method, headers, ..
    } = parts;
    async move {
        let head = Head::read(&headers);
        if let Some(denied) = admit::host_and_origin(&state, &head) {
            return denied;
        }
        // Auth (when on) before anything else: every request, in every era, carries its
        // token. Its future is boxed: inline, its size would be reserved in every request's
        // future, auth on or off.
        let identity = match &state.auth {
            Some(auth) => match Box::pin(auth.authenticate(&headers, &state.cfg.endpoint)).await {
                Ok(id) => Some(id),
                Err(refusal) => return refusal,
            },
            None => None,
        };
        match method {
            Method::POST => {
                let body = match admit::body(&state, body).await {
                    Ok(b) => b,
                    Err(r) => return r,
                };
                let peer = peer.map(|a| a.ip());
                match post(state, headers, head, body, identity, peer).await {
                    Ok(answer) => answer,
                    Err(refusal) => *refusal,
                }
            }
            Method::GET | Method::DELETE if stateless::is_client(&head) => {
                stateless::method_not_allowed()
            }
            Method::GET => get(state, head, principal_of(identity.as_ref())).await,
            Method::DELETE => delete(state, head, principal_of(identity.as_ref())).await,
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
}

fn principal_of(identity: Option<&Identity>) -> Option<&str> {
    identity.map(|i| i.principal.as_str())
}

/// The RFC 9728 protected-resource metadata (served only with auth on).
pub(crate) async fn resource_metadata(
    State(state): State<Arc<HttpState>>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = admit::host_and_origin(&state, &Head::read(&headers)) {
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

/// A POST through the checks of [`admit`] in their order, then served: `Err` is a refusal.
/// (A plain function returning the future, for the reason [`serve_endpoint`] gives; awaited
/// directly by it, not through a wrapper that unpacks the result, which would keep its own
/// copy of these arguments.)
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn would keep its arguments twice in the future"
)]
fn post(
    state: Arc<HttpState>,
    headers: HeaderMap,
    head: Head,
    body: Bytes,
    identity: Option<Identity>,
    peer: Option<std::net::IpAddr>,
) -> impl Future<Output = Result<Response, Refusal>> + Send {
    async move {
        admit::json_body(&head)?;
        let msg = admit::message(&body)?;
        admit::tool_permitted(&state, identity.as_ref(), &msg, &headers)?;
        let principal = identity.map(|i| i.principal);
        // The era, per request: the stateless era's `_meta` (whatever else the request
        // carries), or a stateless client's headers; everything else is session traffic.
        let stateless = match &msg {
            Message::Request(r) => {
                has_stateless_meta(r.params.as_ref()) || stateless::is_client(&head)
            }
            _ => stateless::is_client(&head),
        };
        if stateless {
            let Message::Request(req) = msg else {
                return Err(Box::new(stateless::not_a_request()));
            };
            admit::stream_accepted(&head, &req, stateless::answers_only_as_a_stream)?;
            // The peer's share of the in-flight slots (a session's is checked in the core).
            let slot = peer_share::admit(&state.server.inner, principal.as_deref(), peer, &req.id)?;
            let sse_ok = head.accept.sse;
            // Held for as long as the request runs: only what it needs.
            drop((head, body));
            return Ok(stateless::post(state, headers, req, sse_ok, principal, slot).await);
        }
        admit::protocol_version(&head)?;
        if let Message::Request(r) = &msg
            && r.method == "initialize"
        {
            // Boxed: once per session, and inline its size would be reserved in every
            // request's future.
            return Ok(Box::pin(initialize(state, msg, principal, peer)).await);
        }
        let session = find_session(&state, &head, principal.as_deref())
            .await
            .map_err(Box::new)?;
        if !matches!(&msg, Message::Notification(n) if n.method == "notifications/initialized") {
            session.mark_used();
        }
        let req_id = match &msg {
            Message::Request(r) => r.id.clone(),
            _ => {
                session.session().handle(msg);
                return Ok(StatusCode::ACCEPTED.into_response());
            }
        };
        state
            .batcher
            .admit()
            .await
            .map_err(|busy| Box::new(store_behind(busy)))?;
        let or_plain = match admit::answer_form(&head)? {
            AnswerForm::Json => return Ok(json_answer(&state, &session, msg, req_id).await),
            AnswerForm::Stream { or_plain } => or_plain,
        };
        admit::stream_room(&session, state.cfg.max_streams_per_session)?;
        if !state.cfg.always_sse
            && or_plain
            && matches!(&msg, Message::Request(r) if super::plain::answer_plainly(&state.server, r))
        {
            return Ok(super::plain::answer(&state, &session, msg, req_id).await);
        }
        let Ok((stream_id, rx)) = session.open_request_stream(&req_id, Durability::Stored) else {
            return Err(Box::new(sse::already_in_flight(&req_id)));
        };
        let guard = session.connection_guard();
        session.session().handle(msg);
        state.server.metrics().http_answer("stream");
        Ok(sse::request_stream(&state, stream_id, None, rx, guard))
    }
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
