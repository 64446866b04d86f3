//! `staunch proxy`: an existing MCP server — a stdio command in any language, or a Streamable
//! HTTP URL — served behind staunch's guarantees, without touching its code.
//!
//! The downstream side is an ordinary staunch [`Server`](staunch_server::Server): both
//! protocol eras, sessions and resumable SSE on the durable event store, Host/Origin checks,
//! limits, auth, the lifecycle log. Each upstream tool becomes a staunch tool whose handler
//! forwards the call ([`forward`]), so the request core applies its rules to the upstream's
//! work: the cancel (a `notifications/cancelled`, a closed 2026 stream, a session's end, the
//! tool's deadline) drops the upstream request, which the client turns into a
//! `notifications/cancelled` for exactly that upstream id; whatever the upstream sends after
//! that is dropped and logged (`upstream.late`); progress passes through staunch's progress
//! rules (token, strictly increasing, rate-limited).
//!
//! - [`UpstreamSpec`] / [`Target`] / [`ToolRule`]: what to front and how each tool is shaped.
//! - [`Upstream`]: one supervised connection — its own request ids, restart with back-off after
//!   a crash, server-to-client requests routed to the call that caused them ([`route`]).
//! - [`Pool`]: an upstream's connections: one shared, or one per downstream session
//!   (`--isolate`); under the stop policy one per call, or the session's own retired after a
//!   cancel.
//! - `stop`: the stop policy's end of a call's own process after a cancel (grace, then its
//!   group killed), counted and put on the ledger.
//! - [`child`]: the stdio upstream in its own process group with a parent-death signal, ended
//!   the spec's way (stdin closed, SIGTERM, SIGKILL).
//! - [`register`](mod@register): the upstreams' tools (and resources, prompts, completions) on a
//!   `ServerBuilder`, with name prefixes and collisions refused; `job`-shaped tools run as
//!   durable jobs of staunch-jobs ([`forward::UpstreamJob`]).
//! - [`follow`]: an upstream's `tools/list_changed` (or a restart) re-lists its tools and
//!   updates the served set at run time.
//! - `ask`: a 2026-07-28 upstream's questions (`inputRequests`) put to the client that caused
//!   them. `park`: a 2025 upstream's question in the middle of a 2026-07-28 client's call, put
//!   to the client in a round of its own while the upstream call waits, parked.
//! - `subscriptions`: `resources/subscribe` and listen streams' `resourceSubscriptions`
//!   made at the upstream that serves the resource, its updates passed on unchanged.
//! - `tasks`: an upstream's own tasks offered to clients of either era (bridged where the eras
//!   differ) under ids of the proxy's, each bound to its caller; `tasks/get`, `tasks/result`,
//!   `tasks/cancel` and `tasks/update` reach exactly that upstream task.
//! - `tool_result`: an upstream's tool result sent on as JSON, every field it carried kept
//!   but its hop's own (`resultType`, the protocol's `_meta` keys).
//! - [`Ledger`]: the recent calls whose upstream kept working after their cancel, for the
//!   live page.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod ask;
pub mod child;
#[cfg(feature = "cli")]
pub mod cli;
mod error;
pub mod follow;
pub mod forward;
mod import;
mod ledger;
mod methods;
mod owners;
mod park;
mod pool;
pub mod register;
pub mod route;
mod spec;
mod stop;
mod subscriptions;
mod tasks;
mod tool_result;
mod upstream;

pub use error::ProxyError;
pub use follow::follow_tool_changes;
pub use import::import_mcp_servers;
pub use ledger::{CallKey, LateWork, Ledger, Sent};
pub use pool::Pool;
pub use register::{Registered, ServedTool, connect_options, register};
pub use spec::{QUESTION_WAIT, Target, ToolRule, UpstreamSpec};
pub use upstream::Upstream;
