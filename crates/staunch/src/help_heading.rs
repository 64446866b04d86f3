//! The headings `staunch serve --help` (and `staunch proxy --help`) groups its flags under;
//! the book's configuration page uses the same groups. Kept apart from the flags so that the
//! flag groups defined in other modules (limits, authentication) can name them.

pub const TOOLS: &str = "Tools";
pub const TRANSPORT: &str = "Transport";
pub const STORE: &str = "Store";
pub const LOG: &str = "Lifecycle log";
pub const REQUESTS: &str = "Requests, deadlines and progress";
pub const JOBS: &str = "Jobs";
pub const HTTP: &str = "HTTP streams and sessions";
pub const STATELESS: &str = "2026-07-28 requests";
pub const LIMITS: &str = "Limits and back-pressure";
pub const OBSERVE: &str = "Metrics, traces and the live page";
pub const AUTH: &str = "Authentication (HTTP)";
pub const UPSTREAM: &str = "Upstream";
