//! The session era (2025-03-26 … 2025-11-25): what a session negotiated, and the error a
//! handler's unaskable question gets.

use std::sync::{Mutex, MutexGuard};

use serde_json::Value;
use staunch_protocol::RequestId;
use staunch_protocol::mcp::LoggingLevel;

use crate::error::ToolError;

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

/// The session era has no code for a missing client capability, and a protocol error tells
/// the model nothing: it gets a tool error it can read and pass on.
pub(super) fn missing_capability(cap: &str, method: &str) -> ToolError {
    ToolError::Tool(format!(
        "this tool needs to ask the user ({method}), but the client did not declare the \
         `{cap}` capability when it connected; use a client that supports {cap}, or do without \
         this tool"
    ))
}
