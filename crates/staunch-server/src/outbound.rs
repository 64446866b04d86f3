//! What a session sends, and where it goes.
//!
//! A session never writes to a socket or a pipe itself: it hands each serialised message to a
//! [`Sink`], tagged with the request it belongs to. stdio writes everything in order to stdout;
//! Streamable HTTP routes a message to its request's SSE stream (or the standalone stream).

use staunch_protocol::RequestId;

/// What kind of message this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutboundKind {
    /// The response to a client request: the last message related to that request.
    Response,
    /// A notification (progress, log message …).
    Notification,
    /// A request from the server to the client (sampling, elicitation …).
    Request,
}

/// One serialised message on its way out.
#[derive(Clone, Debug)]
pub struct Outbound {
    /// The client request this message belongs to, if any.
    pub related: Option<RequestId>,
    /// Response, notification or request.
    pub kind: OutboundKind,
    /// The JSON bytes, without a trailing newline.
    pub bytes: Vec<u8>,
    /// For an error response: its JSON-RPC code (a stateless HTTP response picks its status
    /// from it).
    pub error_code: Option<i64>,
}

impl Outbound {
    /// A notification related to request `related` (or to none).
    pub fn notification(related: Option<RequestId>, bytes: Vec<u8>) -> Self {
        Self {
            related,
            kind: OutboundKind::Notification,
            bytes,
            error_code: None,
        }
    }
}

/// Where a session's messages go. `send` must not block: it is called from request tasks and
/// from the message loop.
pub trait Sink: Send + Sync + 'static {
    /// Takes one message. Messages of one request must be delivered in the order given.
    fn send(&self, msg: Outbound);

    /// Asks the transport to close the connection carrying `related`'s stream without ending
    /// the stream (Streamable HTTP's SEP-1699 polling: the client resumes with
    /// `Last-Event-ID`). Transports without such connections ignore it.
    fn close_connection(&self, related: &RequestId) {
        let _ = related;
    }

    /// `related` was cancelled: no response will follow, so its stream can end now
    /// (Streamable HTTP closes the request's SSE stream). Transports without per-request
    /// streams ignore it.
    fn end_stream(&self, related: &RequestId) {
        let _ = related;
    }
}
