//! The hardening flags (the README's "Security → Limits" table): what one client may hold —
//! sessions, what a session keeps, requests in flight, connections — how long a slow client
//! may take, and where back-pressure starts. Every limit answers with a clear error when it is
//! reached.

use std::time::Duration;

use clap::Args;

use super::heading::LIMITS;
use super::parse::{millis, parse_millis, parse_secs, secs};
use crate::Config;
use crate::transport::http::{Allow, HttpConfig, ListenerConfig};

/// Limits against a hostile or broken client, and the queues whose length means back-pressure.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// HTTP sessions at once; past it `initialize` ends the oldest unused session, or gets 503.
    #[arg(
        long,
        default_value_t = HttpConfig::default().max_sessions,
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
        default_value_t = HttpConfig::default().max_sessions_per_peer,
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
        default_value_t = secs(HttpConfig::default().session_unused),
        env = "STAUNCH_SESSION_UNUSED_SECS",
        value_name = "SECS",
        hide_short_help = true,
        help_heading = LIMITS,
        value_parser = parse_secs
    )]
    pub session_unused_secs: u64,
    /// Largest `capabilities` + `clientInfo` (JSON bytes) a session keeps from `initialize`.
    ///
    /// A larger one gets 413 with -32602 and nothing is kept.
    #[arg(
        long,
        default_value_t = HttpConfig::default().max_client_info_bytes,
        env = "STAUNCH_MAX_CLIENT_INFO_BYTES",
        value_name = "BYTES",
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub max_client_info_bytes: usize,
    /// Requests in flight in one HTTP session (JSON and SSE alike).
    #[arg(
        long,
        default_value_t = Config::default().max_in_flight_per_session,
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
        default_value_t = Config::default().max_in_flight_per_peer,
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
        default_value_t = HttpConfig::default().max_connections,
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
        default_value_t = millis(HttpConfig::default().header_read_timeout),
        env = "STAUNCH_HEADER_READ_TIMEOUT_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = LIMITS,
        value_parser = parse_millis
    )]
    pub header_read_timeout_ms: u64,
    /// Milliseconds a request body may take to arrive after its head; slower gets 408.
    #[arg(
        long,
        default_value_t = millis(HttpConfig::default().body_read_timeout),
        env = "STAUNCH_BODY_READ_TIMEOUT_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = LIMITS,
        value_parser = parse_millis
    )]
    pub body_read_timeout_ms: u64,
    /// stdio: bytes of answers queued for stdout at which the server stops reading stdin.
    ///
    /// A client that does not read its answers gets no more work until it does.
    #[arg(
        long,
        default_value_t = Config::default().stdout_queue_max,
        env = "STAUNCH_STDOUT_QUEUE_MAX",
        value_name = "BYTES",
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub stdout_queue_max: usize,
    /// HTTP: event-store writes queued at which a new request waits for the store.
    ///
    /// After 2 s of waiting it is refused with 503 "server busy".
    #[arg(
        long,
        default_value_t = HttpConfig::default().event_queue_max,
        env = "STAUNCH_EVENT_QUEUE_MAX",
        value_name = "N",
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub event_queue_max: usize,
    /// HTTP: messages a connection may fall behind before it is closed.
    ///
    /// Its client resumes with Last-Event-ID and loses nothing.
    #[arg(
        long,
        default_value_t = HttpConfig::default().connection_backlog,
        env = "STAUNCH_MAX_CONNECTION_BACKLOG",
        value_name = "N",
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub max_connection_backlog: usize,
}

impl LimitArgs {
    /// Sets the request core's part of `config`.
    pub fn apply_server(&self, config: &mut Config) {
        config.max_in_flight_per_session = self.max_in_flight_per_session.max(1);
        config.max_in_flight_per_peer = self.max_in_flight_per_peer.max(1);
        config.stdout_queue_max = self.stdout_queue_max;
    }

    /// Sets the HTTP transport's part of `cfg`.
    pub fn apply_http(&self, cfg: &mut HttpConfig) {
        cfg.max_sessions = self.max_sessions.max(1);
        cfg.max_sessions_per_peer = self.max_sessions_per_peer.max(1);
        cfg.session_unused = Duration::from_secs(self.session_unused_secs);
        cfg.max_client_info_bytes = self.max_client_info_bytes;
        cfg.max_connections = self.max_connections.max(1);
        cfg.header_read_timeout = Duration::from_millis(self.header_read_timeout_ms.max(1));
        cfg.body_read_timeout = Duration::from_millis(self.body_read_timeout_ms.max(1));
        cfg.event_queue_max = self.event_queue_max;
        cfg.connection_backlog = self.max_connection_backlog;
    }

    /// The limits of a listener beside the MCP endpoint (`--metrics`): the same connection
    /// cap and header timeout.
    pub fn listener(&self, allow: Allow) -> ListenerConfig {
        ListenerConfig {
            allow,
            max_connections: self.max_connections.max(1),
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms.max(1)),
        }
    }
}
