//! JSON-RPC 2.0 framing and the MCP message types staunch serves.
//!
//! Pure data: no I/O, no async runtime. The main pieces:
//!
//! - [`Message`] with [`Request`], [`Notification`] and [`Response`], parsed from one frame by
//!   [`parse_message`]; anything malformed becomes a [`FrameError`] that knows the JSON-RPC error
//!   to answer with (never a panic).
//! - [`parse_incoming`] and [`raw`]: a response's result kept as the text it arrived as, for a
//!   reader that passes it on (a proxy) with every key and number as its sender wrote them.
//! - [`RequestId`], a string or an integer, compared exactly as the client sent it.
//! - [`ErrorObject`] and the error [`codes`].
//! - [`mcp`]: the MCP payloads (initialize, tools, progress, cancellation, logging) and
//!   [`version`] negotiation.
//! - [`stateless`]: the stateless era (2026-07-28): per-request `_meta`, header rules, error codes.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod codes;
mod frame;
mod jsonrpc;
pub mod mcp;
pub mod raw;
mod request_id;
pub mod stateless;
pub mod version;

pub use jsonrpc::{
    ErrorObject, FrameError, Message, Notification, Request, RequestId, Response, echo_name,
    error_response_bytes, method_label, notification_bytes, parse_incoming, parse_message,
    request_bytes, request_bytes_with, result_response_bytes,
};
