//! Why a request stopped: [`CancelReason`], recorded in the Registry before a request's token
//! fires and readable by its handler ([`WhyCell`]). A module of its own so that `context` can
//! read it without depending on the Registry.

use std::sync::{Arc, Mutex};

/// Why a request's token fired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CancelReason {
    /// The client sent `notifications/cancelled` (with its reason, if any).
    Client(Option<String>),
    /// The stateless era on HTTP: the client closed the request's response stream.
    StreamClosed,
    /// The request's session or connection ended: `session deleted`, `session expired`,
    /// `transport closed` (stdin EOF).
    SessionClosed(&'static str),
    /// The server is shutting down.
    Shutdown,
    /// The tool's own deadline passed.
    Deadline,
}

impl CancelReason {
    /// Whether the request still gets a response: only when its own deadline stopped it (the
    /// client is still listening and is told why). Everyone else gave up, or is going away.
    pub fn answers(&self) -> bool {
        matches!(self, CancelReason::Deadline)
    }

    /// Whether the client asked for the stop (a cancel, closing its request's stream, deleting
    /// its session), as opposed to losing it (expiry, EOF) or the server going away. Work that
    /// outlives its request — a durable job followed by a call — is cancelled only when the
    /// client asked.
    pub fn client_asked(&self) -> bool {
        match self {
            CancelReason::Client(_) | CancelReason::StreamClosed => true,
            CancelReason::SessionClosed(why) => *why == SESSION_DELETED,
            CancelReason::Shutdown | CancelReason::Deadline => false,
        }
    }

    /// The reason as the lifecycle log writes it.
    pub fn log_text(&self) -> Option<&str> {
        match self {
            CancelReason::Client(r) => r.as_deref(),
            CancelReason::StreamClosed => Some("stream closed"),
            CancelReason::SessionClosed(why) => Some(why),
            CancelReason::Shutdown => Some("server shutdown"),
            CancelReason::Deadline => Some("deadline"),
        }
    }
}

/// [`CancelReason::SessionClosed`]'s reason when the client deleted its session (HTTP DELETE).
pub const SESSION_DELETED: &str = "session deleted";

/// Where a request's handler can read why its token fired (set before the token fires).
pub(crate) type WhyCell = Arc<Mutex<Option<CancelReason>>>;
