//! The answer for a client that does not accept SSE: one JSON body, though everything the
//! request sends on the way is still stored on its stream.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use staunch_protocol::{Message, RequestId};
use staunch_store::Replay;

use super::HttpState;
use super::get::REPLAY_PAGE;
use super::session::{Durability, HttpSession};
use super::sse::{self};

/// Answers a request with a single JSON response (client did not accept SSE). Messages sent
/// before the response are still stored on the request's stream.
pub(super) async fn json_answer(
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
