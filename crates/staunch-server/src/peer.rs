//! What a request knows about the client that sent it: the era it speaks, its protocol
//! version, the capabilities it declared and the log level it wants.
//!
//! In the session era those facts were negotiated once, at `initialize`, and live in the
//! session ([`SessionFacts`]; `logging/setLevel` changes the level later). In the stateless era
//! every request carries its own ([`RequestMeta`]). A request holds a [`Peer`] either way, so
//! nothing below the dispatcher has to ask which era it is in.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use staunch_protocol::mcp::LoggingLevel;
use staunch_protocol::stateless::RequestMeta;
use staunch_protocol::{RequestId, version};

/// What a session-era session negotiated.
#[derive(Debug)]
pub(crate) struct SessionState {
    pub(crate) protocol_version: Option<String>,
    pub(crate) client_capabilities: Value,
    pub(crate) log_level: LoggingLevel,
    /// The id of the session's `initialize`, which may not be cancelled.
    pub(crate) initialize_id: Option<RequestId>,
    /// No new requests once closed.
    pub(crate) closed: bool,
}

/// A session's negotiated facts, shared by the session and its requests.
#[derive(Debug)]
pub(crate) struct SessionFacts {
    state: Mutex<SessionState>,
}

impl SessionFacts {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(SessionState {
                protocol_version: None,
                client_capabilities: Value::Null,
                log_level: LoggingLevel::Info,
                initialize_id: None,
                closed: false,
            }),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The client of one request.
#[derive(Clone, Debug)]
pub(crate) enum Peer {
    /// A session-era session (stdio without per-request `_meta`, or an HTTP session).
    Session(Arc<SessionFacts>),
    /// A stateless-era request: everything it needs is in its own `_meta`.
    Stateless(Arc<RequestMeta>),
}

impl Peer {
    /// Whether the request was made in the stateless era.
    pub(crate) fn is_stateless(&self) -> bool {
        matches!(self, Peer::Stateless(_))
    }

    /// The lowest level of `notifications/message` the client wants; `None` means none at all
    /// (a stateless request that did not set `logLevel`).
    pub(crate) fn log_level(&self) -> Option<LoggingLevel> {
        match self {
            Peer::Session(s) => Some(s.lock().log_level),
            Peer::Stateless(m) => m.log_level,
        }
    }

    /// The capabilities the client declared.
    pub(crate) fn client_capabilities(&self) -> Value {
        match self {
            Peer::Session(s) => s.lock().client_capabilities.clone(),
            Peer::Stateless(m) => m.client_capabilities.clone(),
        }
    }

    /// Whether the client declared capability `name` (e.g. `sampling`).
    pub(crate) fn has_capability(&self, name: &str) -> bool {
        match self {
            Peer::Session(s) => s.lock().client_capabilities.get(name).is_some(),
            Peer::Stateless(m) => m.client_capabilities.get(name).is_some(),
        }
    }

    /// The protocol version the request is served in (borrowed from the list of versions
    /// served when it is one of them, as it always is once validated: no copy per request).
    pub(crate) fn protocol_version(&self) -> Option<Cow<'static, str>> {
        let version = |v: &str| match version::known(v) {
            Some(known) => Cow::Borrowed(known),
            None => Cow::Owned(v.to_owned()),
        };
        match self {
            Peer::Session(s) => s.lock().protocol_version.as_deref().map(version),
            Peer::Stateless(m) => Some(m.protocol_version.clone()),
        }
    }
}
