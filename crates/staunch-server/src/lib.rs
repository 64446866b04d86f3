//! The staunch runtime: MCP tools that stop when told.
//!
//! - [`Server`] / [`ServerBuilder`]: the tools, their [`Shape`]s and the limits ([`Config`]).
//! - [`Session`]: one client connection; parses frames, routes each request to its own task
//!   through the request Registry, routes `notifications/cancelled` to the request's token and
//!   never answers a cancelled request.
//! - [`Context`]: what a handler receives — cancellation, deadline, `run`, `blocking`,
//!   rate-limited progress, shielded `cleanup`, client-visible logging, requests to the client.
//! - [`LifecycleLog`]: one JSON line per step of every request (`docs/lifecycle-log.md`).
//! - [`transport::stdio`]: newline-delimited JSON-RPC on stdin/stdout.

#![forbid(unsafe_code)]

mod config;
mod context;
mod error;
mod lifecycle;
mod outbound;
mod progress;
mod registry;
mod server;
mod session;
mod tool;
pub mod transport;

pub use config::{Config, ProgressRate};
pub use context::{BlockingUnit, Context, Notifier};
pub use error::ToolError;
pub use lifecycle::LifecycleLog;
pub use outbound::{Outbound, OutboundKind, Sink};
pub use server::{MethodHandler, Server, ServerBuilder};
pub use session::Session;
pub use staunch_protocol as protocol;
pub use staunch_protocol::mcp::{CallToolResult, Content, LoggingLevel};
pub use tool::{Shape, ToolHandler, ToolSpec, decode_args, schema_of};
