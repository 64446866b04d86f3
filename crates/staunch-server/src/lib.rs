//! The staunch runtime: MCP tools that stop when told.
//!
//! - [`Server`] / [`ServerBuilder`]: the tools, their [`Shape`]s and the limits ([`Config`]).
//! - [`Session`]: one client connection (stdio, or an HTTP session); parses frames and hands
//!   each request — session-era or stateless-era, decided per request — to the request core,
//!   which runs it in its own task, routes `notifications/cancelled` to its token and never
//!   answers a cancelled request. [`Server::serve_standalone`] serves one stateless HTTP request.
//!   (The built-in HTTP transport lets a request whose POST only waits for its answer take its
//!   first step on that POST's task, and spawns it when it first waits: `request/eager.rs`.)
//! - [`supervise`]: how a handler (or a job body) ends — grace, abort, panic, deadline.
//! - [`input`]: input-required rounds (the stateless era's elicitation, sampling and roots).
//! - [`listen`]: `subscriptions/listen` streams, fed by the [`ListenHub`].
//! - [`Context`]: what a handler receives — cancellation, deadline, `run`, `blocking`,
//!   rate-limited progress, shielded `cleanup`, client-visible logging, requests to the client.
//! - [`LifecycleLog`]: one JSON line per step of every request (`docs/lifecycle-log.md`).
//! - [`metrics`]: Prometheus metrics, a no-op unless enabled.
//! - [`trace`]: span hooks per request and job attempt (OpenTelemetry lives in `staunch-otel`),
//!   a no-op unless enabled.
//! - [`transport::stdio`]: newline-delimited JSON-RPC on stdin/stdout.
//! - `cli` (feature `cli`): the settings as command-line flags; [`units`]: the duration grammar
//!   of flags and `staunch.toml`.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod answer_relay;
mod changes;
#[cfg(feature = "cli")]
pub mod cli;
mod codec;
mod config;
mod conn;
mod context;
mod dispatch;
mod error;
mod fair;
mod fast_map;
mod fingerprint;
pub mod input;
mod json_result;
mod lifecycle;
pub mod listen;
pub mod metrics;
mod outbound;
mod progress;
mod reason;
mod redact;
mod registry;
mod request;
mod server;
mod session;
mod shared;
pub mod supervise;
mod tool;
mod toolset;
pub mod trace;
pub mod transport;
pub mod units;

pub use changes::{Change, ListenHub};
pub use codec::{TASKS_EXTENSION, declares_tasks, missing_tasks_extension};
pub use config::{Config, ProgressRate};
pub use context::{BlockingUnit, Context, Notifier};
pub use error::ToolError;
pub use input::StateKey;
pub use json_result::JsonToolResult;
pub use lifecycle::LifecycleLog;
pub use metrics::Metrics;
pub use outbound::{Outbound, OutboundKind, Sink};
pub use reason::{CancelReason, SESSION_DELETED};
pub use redact::{owner_key, session_hash};
pub use registry::{InFlight, InFlightCancel};
pub use server::{Server, ServerBuilder, StandaloneRequest};
pub use session::Session;
pub use staunch_lifecycle::{Event as LifecycleEvent, UpstreamStep};
pub use staunch_protocol as protocol;
pub use staunch_protocol::mcp::{CallToolResult, Content, LoggingLevel};
pub use tool::{MethodHandler, Shape, ToolHandler, ToolSpec, decode_args, schema_of};
pub use toolset::{ToolUpdate, ToolsChanged};
pub use trace::Traces;

/// Whether the defect named `name` is to be injected (`STAUNCH_INJECT_FAULT=name`, read once).
///
/// Debug builds only: the function and every call of it are compiled out of release builds, so
/// a shipped binary cannot be made to misbehave by its environment. The faults exist to prove
/// that the chaos driver's checks can fail (`benches/chaos/tests/detects.rs`): `double_start`
/// (a keyed job start records a second job for its key, `staunch-jobs`), `drop_unit`
/// (`import_rows` skips one unit's write and still succeeds, the `staunch` demo tools) and
/// `answer_after_cancel` (the request core answers a request after its cancel).
#[cfg(debug_assertions)]
#[doc(hidden)]
pub fn fault_injected(name: &str) -> bool {
    static FAULT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    FAULT
        .get_or_init(|| std::env::var("STAUNCH_INJECT_FAULT").ok())
        .as_deref()
        == Some(name)
}
