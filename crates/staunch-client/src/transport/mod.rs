//! The two ways to reach a server. Both hand what they read to the client's router (as
//! `Inbound` items: a message, a failed request, a closed connection) and take outgoing frames
//! without blocking, so a cancel can be sent from anywhere, even from a `Drop`.

pub mod http;
pub mod stdio;

use staunch_protocol::RequestId;

/// One frame to send.
#[derive(Debug)]
pub(crate) struct Outgoing {
    /// The serialised JSON-RPC message.
    pub bytes: Vec<u8>,
    /// Its id when it is a request (HTTP routes failures to it).
    pub request: Option<RequestId>,
    /// Its method when it is a request or notification.
    pub method: Option<String>,
    /// What the stateless era's `Mcp-Name` header carries for it (tool or prompt name,
    /// resource uri, task id), when the method has one.
    pub name: Option<String>,
}

/// A connected transport.
pub(crate) enum Transport {
    Stdio(Box<stdio::StdioTransport>),
    Http(http::HttpTransport),
}

impl Transport {
    /// Sends a frame; never blocks. Failures surface as `Inbound::Failed` / `Closed`.
    pub(crate) fn send(&self, out: Outgoing) {
        match self {
            Self::Stdio(t) => t.send(out.bytes),
            Self::Http(t) => t.send(out),
        }
    }

    /// The client gave up on `id`: HTTP stops resuming it and closes its stream after a
    /// short linger (so a late answer can still be seen as evidence).
    pub(crate) fn abandoned(&self, id: &RequestId) {
        if let Self::Http(t) = self {
            t.abandoned(id);
        }
    }

    /// The negotiated version, sent as `MCP-Protocol-Version` on HTTP, and whether requests
    /// stand alone (the stateless era: per-request headers, no session, a closed stream is the
    /// cancel).
    pub(crate) fn set_protocol_version(&self, v: Option<&str>, stand_alone: bool) {
        if let Self::Http(t) = self {
            t.set_protocol_version(v, stand_alone);
        }
    }

    /// Whether a cancel goes on the wire as `notifications/cancelled` (everywhere but a
    /// stateless HTTP connection, where closing the request's stream is the cancel).
    pub(crate) fn cancels_by_notification(&self) -> bool {
        match self {
            Self::Stdio(_) => true,
            Self::Http(t) => !t.requests_stand_alone(),
        }
    }

    /// A session began: over HTTP, open its standalone stream if the options ask for it.
    pub(crate) fn session_started(&self) {
        if let Self::Http(t) = self {
            t.listen();
        }
    }

    /// Ends the connection: stdin EOF and a bounded wait for the process, or HTTP DELETE.
    pub(crate) async fn close(&self) {
        match self {
            Self::Stdio(t) => t.close().await,
            Self::Http(t) => t.close().await,
        }
    }
}
