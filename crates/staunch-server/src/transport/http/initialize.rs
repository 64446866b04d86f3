//! `initialize` over HTTP: what a new session keeps of its client, room for it under the
//! session limits, and its record in the store.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use staunch_protocol::{Message, codes, version};
use staunch_store::{SessionRecord, now_ms};

use super::HttpState;
use super::head::SESSION_HEADER;
use super::json_answer::json_answer;
use super::session::HttpSession;
use super::sse::error;
use super::stream_id::random_hex;
use crate::registry::CancelReason;

pub(super) async fn initialize(
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
    session
        .session()
        .relay_answers(state.sessions_store.clone());
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
