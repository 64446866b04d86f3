//! The session a request names: held here, or adopted from the shared store when another
//! instance created it — and only for the principal that created it.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use staunch_protocol::codes;
use staunch_store::{SessionRecord, now_ms};

use super::HttpState;
use super::head::Head;
use super::session::HttpSession;
use super::sse::error;

/// Whether a session may be used by `principal`: with auth on, only by the one that created
/// it (any other gets the same answer as for an unknown id, so ids cannot be probed).
pub(super) fn owned_by(state: &HttpState, owner: Option<&str>, principal: Option<&str>) -> bool {
    state.auth.is_none() || owner == principal
}

pub(super) fn unknown_session() -> Response {
    error(
        StatusCode::NOT_FOUND,
        codes::INVALID_REQUEST,
        "unknown or expired session: initialize a new one",
    )
}

/// The session named by the request, adopting one another instance created (shared store).
pub(super) async fn find_session(
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
pub(super) fn adopt(state: &HttpState, rec: SessionRecord) -> Arc<HttpSession> {
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
    s.session().relay_answers(state.sessions_store.clone());
    // It was in use somewhere already.
    s.mark_used();
    let caps = serde_json::from_str(&rec.client_capabilities_json).unwrap_or_default();
    s.session().restore(&rec.protocol_version, caps);
    sessions.insert(rec.id, s.clone());
    s
}
