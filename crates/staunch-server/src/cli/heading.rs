//! The headings `--help` groups staunch's flags under; the book's configuration page uses the
//! same groups. Shared by the flags defined here, the job runtime's and the binary's own.

/// The tools served.
pub const TOOLS: &str = "Tools";
/// Where and how MCP is served.
pub const TRANSPORT: &str = "Transport";
/// The durable store.
pub const STORE: &str = "Store";
/// The lifecycle log.
pub const LOG: &str = "Lifecycle log";
/// The request core.
pub const REQUESTS: &str = "Requests, deadlines and progress";
/// The job runtime.
pub const JOBS: &str = "Jobs";
/// Streamable HTTP sessions and streams.
pub const HTTP: &str = "HTTP streams and sessions";
/// Requests of the 2026-07-28 protocol.
pub const STATELESS: &str = "2026-07-28 requests";
/// Limits against a hostile client, and back-pressure.
pub const LIMITS: &str = "Limits and back-pressure";
/// Metrics, traces and the live page.
pub const OBSERVE: &str = "Metrics, traces and the live page";
/// Authentication of HTTP requests.
pub const AUTH: &str = "Authentication (HTTP)";
/// `staunch proxy`'s upstream.
pub const UPSTREAM: &str = "Upstream";
