//! The hardening flags of `staunch serve` (the README's "Security → Limits" table): what one
//! client may hold — sessions, what a session keeps, requests in flight, connections, jobs — and
//! how long a slow client may take. Every limit answers with a clear error when it is reached.

use std::time::Duration;

use clap::Args;
use staunch_jobs::JobConfig;
use staunch_server::Config;
use staunch_server::transport::http::HttpConfig;

use crate::help_heading::LIMITS;

/// Limits against a hostile or broken client.
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// HTTP sessions at once; past it `initialize` ends the oldest unused session, or gets 503.
    #[arg(
        long,
        default_value_t = 10_000,
        env = "STAUNCH_MAX_SESSIONS",
        value_name = "N",
        help_heading = LIMITS
    )]
    pub max_sessions: usize,
    /// HTTP sessions one client (principal with --auth, else IP address) may hold.
    ///
    /// Past it an `initialize` ends that client's oldest unused session, or gets 429.
    #[arg(
        long,
        default_value_t = 1024,
        env = "STAUNCH_MAX_SESSIONS_PER_PEER",
        value_name = "N",
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub max_sessions_per_peer: usize,
    /// Seconds after which a session that sent nothing after `initialize` expires.
    ///
    /// `notifications/initialized` does not count as something.
    #[arg(
        long,
        default_value_t = 60,
        env = "STAUNCH_SESSION_UNUSED_SECS",
        value_name = "SECS",
        hide_short_help = true,
        help_heading = LIMITS,
        value_parser = crate::args::parse_secs
    )]
    pub session_unused_secs: u64,
    /// Largest `capabilities` + `clientInfo` (JSON bytes) a session keeps from `initialize`.
    ///
    /// A larger one gets 413 with -32602 and nothing is kept.
    #[arg(
        long,
        default_value_t = 64 * 1024,
        env = "STAUNCH_MAX_CLIENT_INFO_BYTES",
        value_name = "BYTES",
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub max_client_info_bytes: usize,
    /// Requests in flight in one HTTP session (JSON and SSE alike).
    #[arg(
        long,
        default_value_t = 256,
        env = "STAUNCH_MAX_IN_FLIGHT_PER_SESSION",
        value_name = "N",
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub max_in_flight_per_session: usize,
    /// Requests in flight from one HTTP client (principal with --auth, else IP address).
    ///
    /// Counted over all its sessions and stateless requests together; one more gets "server
    /// busy" (429 with Retry-After for a stateless request). Once a quarter of --max-in-flight
    /// or less is free, a busy client is held to an equal share of the other three quarters:
    /// the last quarter is kept for clients with nothing in flight.
    #[arg(
        long,
        default_value_t = 256,
        env = "STAUNCH_MAX_IN_FLIGHT_PER_PEER",
        value_name = "N",
        help_heading = LIMITS
    )]
    pub max_in_flight_per_peer: usize,
    /// Open TCP connections on each listener (the MCP endpoint, --metrics).
    ///
    /// One more is answered 503 and closed.
    #[arg(
        long,
        default_value_t = 4096,
        env = "STAUNCH_MAX_CONNECTIONS",
        value_name = "N",
        help_heading = LIMITS
    )]
    pub max_connections: usize,
    /// Milliseconds a connection to any listener has to send a whole request head.
    ///
    /// hyper's header-read timeout, on the MCP endpoint and --metrics alike; it also closes
    /// idle keep-alive connections.
    #[arg(
        long,
        default_value_t = 10_000,
        env = "STAUNCH_HEADER_READ_TIMEOUT_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = LIMITS,
        value_parser = crate::args::parse_millis
    )]
    pub header_read_timeout_ms: u64,
    /// Milliseconds a request body may take to arrive after its head; slower gets 408.
    #[arg(
        long,
        default_value_t = 30_000,
        env = "STAUNCH_BODY_READ_TIMEOUT_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = LIMITS,
        value_parser = crate::args::parse_millis
    )]
    pub body_read_timeout_ms: u64,
    /// Jobs one owner may have queued or running (0: no limit).
    ///
    /// The owner is the principal, the session, or the id holders; one more start is refused
    /// with a message saying so.
    #[arg(
        long,
        default_value_t = 1000,
        env = "STAUNCH_JOB_MAX_ACTIVE_PER_OWNER",
        value_name = "N",
        help_heading = LIMITS
    )]
    pub job_max_active_per_owner: u64,
    /// Jobs one owner may have running at once, across instances sharing the store.
    ///
    /// Its next job waits while other owners' jobs run. 0: three quarters of --job-workers (at
    /// least one), so one owner's long jobs always leave a worker for others.
    #[arg(
        long,
        default_value_t = 0,
        env = "STAUNCH_JOB_MAX_RUNNING_PER_OWNER",
        value_name = "N",
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub job_max_running_per_owner: u64,
}

impl LimitArgs {
    /// The server-wide part.
    pub fn apply_server(&self, config: &mut Config) {
        config.max_in_flight_per_session = self.max_in_flight_per_session.max(1);
        config.max_in_flight_per_peer = self.max_in_flight_per_peer.max(1);
    }

    /// The HTTP transport's part.
    pub fn apply_http(&self, cfg: &mut HttpConfig) {
        cfg.max_sessions = self.max_sessions.max(1);
        cfg.max_sessions_per_peer = self.max_sessions_per_peer.max(1);
        cfg.session_unused = Duration::from_secs(self.session_unused_secs);
        cfg.max_client_info_bytes = self.max_client_info_bytes;
        cfg.max_connections = self.max_connections.max(1);
        cfg.header_read_timeout = Duration::from_millis(self.header_read_timeout_ms.max(1));
        cfg.body_read_timeout = Duration::from_millis(self.body_read_timeout_ms.max(1));
    }

    /// The job runtime's part.
    pub fn apply_jobs(&self, config: &mut JobConfig) {
        config.max_active_per_owner =
            (self.job_max_active_per_owner > 0).then_some(self.job_max_active_per_owner);
        config.max_running_per_owner =
            (self.job_max_running_per_owner > 0).then_some(self.job_max_running_per_owner);
    }
}
