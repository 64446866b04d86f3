//! `staunch-client`: an MCP client that does timeouts right.
//!
//! In MCP a client that gives up must say so (`notifications/cancelled`) and then ignore the
//! late answer; a client whose stream drops must *resume* (`Last-Event-ID`), not call the tool
//! again; a client retrying a side-effecting job must reuse its idempotency key. This crate does
//! all three by default. The main pieces:
//!
//! - [`Client`]: one connection over [`stdio`](Client::connect_stdio) (spawns a command) or
//!   [Streamable HTTP](Client::connect_http), in either protocol era ([`era`]): by default
//!   `server/discover` (2026-07-28, stateless) first and `initialize` (2025) when the server
//!   does not speak 2026; [`era::EraChoice`] forces one. It routes responses
//!   to their requests, progress to its request's callback, answers the server's `ping`, and
//!   records late responses (answers to requests it had already given up on) as evidence
//!   ([`Client::late_responses`]) instead of delivering them.
//! - 2026-07-28: every request carries its `_meta` (version, capabilities, client info) and,
//!   on HTTP, its `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` headers; each request is its
//!   own POST, and giving up on it closes its stream (the stateless cancel; stdio still sends
//!   `notifications/cancelled`). `resultType` is read on every result, and input-required
//!   rounds are answered through a callback ([`input`], [`Client::call_tool_with_input`]).
//! - [`CallOptions`]: per-request timeout that sends `notifications/cancelled` on expiry,
//!   reset on progress, and a hard ceiling ([`CallOptions::max_total`]) that always wins; an
//!   optional [`CancellationToken`](tokio_util::sync::CancellationToken) for Ctrl-C.
//! - [`PendingRequest`]: a request in flight. Dropping it unanswered cancels it on the wire.
//!   [`Client::start_tool_call`] starts a `tools/call` from a [`ToolCall`], its params written
//!   straight into the request (a forwarding server's arguments are not wrapped in a new value).
//! - [`transport::http`]: POST with `Accept: application/json, text/event-stream`, JSON or SSE
//!   answers, `Mcp-Session-Id` and `MCP-Protocol-Version` kept; a dropped SSE stream is resumed
//!   with `GET` + `Last-Event-ID` after the server's `retry` delay. [`HttpEndpoint`] is the raw
//!   layer underneath, public for black-box probes.
//! - [`sse`]: an incremental Server-Sent Events parser (ids, `retry`, CR/LF/CRLF).
//! - [`tasks`]: a tool call run as a task and followed to its end ([`Client::call_tool_task`]),
//!   in either era: 2025-11-25 tasks (create with `task: {ttl}`, poll `tasks/get` at the
//!   server's `pollInterval`, fetch `tasks/result`) or the 2026-07-28 tasks extension (the
//!   server decides whether a call becomes a task; `tasks/get` carries the outcome,
//!   `tasks/update` answers `input_required`); either way `tasks/cancel` gives up.
//! - [`jobs`]: the `start_x` / `get_x` / `cancel_x` tool face of durable jobs, with one
//!   idempotency key per logical call, reused across this client's own retries.
//!
//! Errors are one enum, [`ClientError`].

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

#[cfg(feature = "cli")]
pub mod cli;
mod client;
mod connect;
pub mod era;
mod error;
mod inbox;
pub mod input;
pub mod jobs;
mod options;
pub mod result;
mod router;
mod server_requests;
pub mod sse;
mod target;
pub mod tasks;
mod timeout;
mod tool_call;
pub mod transport;

pub use client::{Client, PendingRequest, ProgressStream};
pub use connect::DISCOVER;
pub use era::{EraChoice, ServerInfo};
pub use error::ClientError;
pub use options::{CallOptions, ConnectOptions};
pub use router::{Late, LateResponse, Observed, Progress};
pub use server_requests::{NotificationHandler, ServerRequest, ServerRequestHandler};
pub use staunch_protocol as protocol;
pub use target::Target;
pub use tool_call::ToolCall;
pub use transport::http::{HttpEndpoint, HttpOptions, RawResponse, parse_header};
pub use transport::stdio::{StderrMode, StdioCommand};
