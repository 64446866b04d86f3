//! Sending a request's response, written for the era it was made in.
//!
//! Handlers are era-blind, and so is this: the request's [`crate::codec::Peer`] writes the
//! answer (a stateless-era result gets the keys its era requires; see `codec/stateless.rs`).

use staunch_protocol::{ErrorObject, RequestId, error_response_bytes};

use super::{Answer, Origin};
use crate::outbound::{Outbound, OutboundKind};
use crate::shared::ServerInner;

/// Sends the response to request `id` on its connection.
pub(crate) fn respond(
    server: &ServerInner,
    origin: &Origin,
    id: &RequestId,
    method: &str,
    outcome: Result<Answer, ErrorObject>,
) {
    let peer = &origin.peer;
    let (bytes, error_code) = match outcome {
        // A tool's result is serialised as it is, straight into the response.
        Ok(Answer::Tool(r)) => (peer.tool_result_bytes(&server.answer_keys, id, &r), None),
        Ok(Answer::Json(r)) => (peer.json_result_bytes(&server.answer_keys, id, &r), None),
        Ok(a) => (
            peer.result_bytes(&server.answer_keys, id, method, a.into_value()),
            None,
        ),
        Err(e) => {
            let e = peer.error(e);
            (error_response_bytes(Some(id), &e), Some(e.code))
        }
    };
    origin.conn.send(Outbound {
        related: Some(id.clone()),
        kind: OutboundKind::Response,
        bytes,
        error_code,
    });
}
