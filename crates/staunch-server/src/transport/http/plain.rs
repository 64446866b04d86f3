//! Plain JSON answers for 2025 session requests that lose nothing by not being resumable.
//!
//! A session request normally gets its own SSE stream: a priming event first, so that a client
//! whose connection drops holds an event id and resumes with `Last-Event-ID` — the response is
//! never lost. That costs a stream in the event store (three writes) and a streamed body for
//! every call. It buys something only when losing the answer would hurt: when the client
//! would have to call again and calling again is not harmless.
//!
//! So a request that carries no progress token and costs at most a short re-run — `ping`, the
//! list and read methods, a `quick` tool whose annotations say `readOnlyHint` or
//! `idempotentHint` — is answered with a single `application/json` body and nothing of it is
//! stored. If its handler sends anything before the response (a log message, an elicitation),
//! the answer becomes an SSE stream at that moment, priming event first, stored from that
//! message on: the session then holds state the client must not lose. `--always-sse` turns the
//! plain answers off.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use staunch_protocol::mcp::{ProgressToken, methods};
use staunch_protocol::{Message, Request, RequestId};

use super::HttpState;
use super::session::{Durability, HttpSession, SseItem};
use super::sse;
use crate::server::Server;

/// Methods whose repetition changes nothing (besides `tools/call` of a rerun-safe tool).
const RERUN_SAFE_METHODS: &[&str] = &[
    methods::PING,
    methods::TOOLS_LIST,
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

/// Whether `req` may be answered with a plain JSON body: no progress token, and running it
/// again after a lost answer is harmless and short.
pub(crate) fn answer_plainly(server: &Server, req: &Request) -> bool {
    if ProgressToken::from_params(req.params.as_ref()).is_some() {
        return false;
    }
    if req.method == methods::TOOLS_CALL {
        return req
            .params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(serde_json::Value::as_str)
            .is_some_and(|name| server.tool_quick_and_rerun_safe(name));
    }
    RERUN_SAFE_METHODS.contains(&req.method.as_str())
}

/// Handles `msg` (a request [`answer_plainly`] chose) and answers with its response as a
/// JSON body, or with an SSE stream if anything else comes first.
pub(crate) async fn answer(
    state: &HttpState,
    session: &Arc<HttpSession>,
    msg: Message,
    req_id: RequestId,
) -> Response {
    let Ok((stream_id, mut rx)) =
        session.open_request_stream(&req_id, Durability::UntilFirstMessage)
    else {
        return sse::already_in_flight(&req_id);
    };
    let guard = session.connection_guard();
    // This task only waits for the answer: the request's first step may run here, and an
    // answer made without waiting is then in `rx` before the first `recv`.
    match msg {
        Message::Request(req) => session.session().handle_request_eagerly(req),
        other => session.session().handle(other),
    }
    match rx.recv().await {
        Some(SseItem::Event {
            data, last: true, ..
        }) => {
            state.server.metrics().http_answer("plain");
            sse::json_body(StatusCode::OK, data)
        }
        Some(SseItem::Event { seq, data, .. }) => {
            state.server.metrics().http_answer("upgraded");
            let first = sse::event_at(&stream_id, seq, &data);
            sse::request_stream(state, stream_id, Some(first), rx, guard)
        }
        // Cancelled (or the session closed) before anything was sent: no response is due.
        Some(SseItem::Close) | None => StatusCode::ACCEPTED.into_response(),
    }
}
