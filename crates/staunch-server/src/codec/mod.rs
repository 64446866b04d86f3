//! The protocol eras, decided once per request where it comes in, and nowhere else.
//!
//! A request reaches the dispatcher with a [`Peer`]: what it knows about the client that sent
//! it, in whichever era it was made. The session era (2025-03-26 … 2025-11-25) negotiated those
//! facts at `initialize`, and they live in the session ([`SessionFacts`]; `logging/setLevel`
//! changes the level later). The stateless era (2026-07-28) carries them in each request's
//! `_meta` ([`RequestMeta`]). Everything that differs between the two is a question to the
//! peer, answered by the era's own module (`session.rs`, `stateless.rs`):
//!
//! - which methods exist ([`Peer::admits`]);
//! - how an answer is written ([`Peer::tool_result_bytes`], [`Peer::result_bytes`],
//!   [`Peer::error`]);
//! - whether there is a session ([`Peer::has_session`]: session-scoped logging and 2025 tasks)
//!   and how a handler's questions reach the client ([`Peer::asks_in_rounds`]), with the error
//!   each era gives a question it cannot put ([`Peer::missing_capability`]);
//! - the label metrics and traces give the request ([`Peer::era_label`]).
//!
//! The stateless era's tasks extension is declared per request; whether a request declared it
//! and the error for one that did not are here too (`declares_tasks`,
//! `missing_tasks_extension`, re-exported at the crate's root).
//!
//! The dispatcher, the request core, `Context` and the metrics ask these questions; none of
//! them names an era.

mod session;
mod stateless;

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use staunch_protocol::mcp::{CallToolResult, LoggingLevel};
pub(crate) use staunch_protocol::stateless::RequestMeta;
use staunch_protocol::{ErrorObject, Request, RequestId, version};

pub(crate) use session::SessionFacts;
pub use stateless::{TASKS_EXTENSION, declares_tasks, missing_tasks_extension};
pub(crate) use stateless::{discover, input_required, tag_subscription};

use crate::error::ToolError;
use crate::json_result::JsonToolResult;

/// The protocol versions served, each era's named, for an error that lists them.
pub(crate) fn versions_served() -> String {
    format!(
        "{} with a session, {} stateless",
        version::SUPPORTED.join(", "),
        version::STATELESS_SUPPORTED.join(", ")
    )
}

/// What the server writes into the answers of an era that asks for it: its identity (as a
/// value and serialised once) and the default caching hint of its lists. Made once, when the
/// server is built.
#[derive(Debug)]
pub(crate) struct AnswerKeys {
    /// `serverInfo` as JSON.
    pub(crate) server_info: Value,
    /// The same, serialised (tool results write it as it is).
    pub(crate) server_info_json: Box<RawValue>,
    /// `ttlMs` of list results.
    pub(crate) list_ttl_ms: u64,
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
    /// The peer of a request on a connection that speaks both eras (stdio, and the requests
    /// of an HTTP session): a request whose `_meta` names a protocol version stands alone
    /// (its `_meta` is read and taken out of its params); any other is the session's.
    pub(crate) fn of_request(
        req: &mut Request,
        session: &Arc<SessionFacts>,
    ) -> Result<Peer, ErrorObject> {
        match stateless::read_meta(req)? {
            Some(meta) => Ok(Peer::Stateless(Arc::new(meta))),
            None => Ok(Peer::Session(session.clone())),
        }
    }

    /// The peer of a request that stands alone, its `_meta` already read by the transport.
    pub(crate) fn standalone(meta: RequestMeta) -> Peer {
        Peer::Stateless(Arc::new(meta))
    }

    /// Whether the request belongs to a session: session-scoped log messages reach it, and
    /// tasks are negotiated with the session rather than declared per request.
    pub(crate) fn has_session(&self) -> bool {
        matches!(self, Peer::Session(_))
    }

    /// Whether a handler's questions to the client (elicitation, sampling, roots) go out as
    /// input-required rounds — the client answers in a new request — rather than as requests
    /// of the server's own on the connection.
    pub(crate) fn asks_in_rounds(&self) -> bool {
        matches!(self, Peer::Stateless(_))
    }

    /// The request's era as metrics and traces label it: `2025` or `2026`.
    pub(crate) fn era_label(&self) -> &'static str {
        match self {
            Peer::Session(_) => "2025",
            Peer::Stateless(_) => "2026",
        }
    }

    /// Refuses a method the request's era does not have (the JSON-RPC error to answer with).
    pub(crate) fn admits(&self, method: &str) -> Result<(), ErrorObject> {
        match self {
            Peer::Session(_) => stateless::admits_in_a_session(method),
            Peer::Stateless(_) => stateless::admits(method),
        }
    }

    /// The response to request `id` with a tool's result, written for the era.
    pub(crate) fn tool_result_bytes(
        &self,
        keys: &AnswerKeys,
        id: &RequestId,
        result: &CallToolResult,
    ) -> Vec<u8> {
        match self {
            Peer::Session(_) => staunch_protocol::result_response_bytes(id, result),
            Peer::Stateless(_) => stateless::tool_result_bytes(keys, id, result),
        }
    }

    /// The response to request `id` with the tool result `result` held as JSON text, written
    /// as it is (the stateless era adds the keys it needs at the top level and in `_meta`).
    pub(crate) fn json_result_bytes(
        &self,
        keys: &AnswerKeys,
        id: &RequestId,
        result: &JsonToolResult,
    ) -> Vec<u8> {
        match self {
            Peer::Session(_) => staunch_protocol::result_response_bytes(id, result.as_raw()),
            Peer::Stateless(_) => staunch_protocol::result_response_bytes(
                id,
                &*stateless::finish_json_result(&keys.server_info_json, result),
            ),
        }
    }

    /// The response to request `id` (method `method`) with `result`, finished for the era.
    pub(crate) fn result_bytes(
        &self,
        keys: &AnswerKeys,
        id: &RequestId,
        method: &str,
        mut result: Value,
    ) -> Vec<u8> {
        if let Peer::Stateless(_) = self {
            stateless::finish_result(keys, method, &mut result);
        }
        staunch_protocol::result_response_bytes(id, &result)
    }

    /// An error answer in the era's codes.
    pub(crate) fn error(&self, e: ErrorObject) -> ErrorObject {
        match self {
            Peer::Session(_) => e,
            Peer::Stateless(_) => stateless::error(e),
        }
    }

    /// What a handler gets when it would ask the client `method` (which needs capability
    /// `cap`) and the client did not declare `cap`.
    pub(crate) fn missing_capability(&self, cap: &str, method: &str) -> ToolError {
        match self {
            Peer::Session(_) => session::missing_capability(cap, method),
            Peer::Stateless(_) => stateless::missing_capability(cap, method),
        }
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
