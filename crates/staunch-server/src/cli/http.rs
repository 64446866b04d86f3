//! The Streamable HTTP transport's flags: the endpoint, its streams and sessions, and how a
//! 2026-07-28 request's silent answer is kept alive.

use std::time::Duration;

use clap::Args;

use super::heading::{HTTP, STATELESS, TRANSPORT};
use super::parse::{millis, parse_millis, parse_secs, secs};
use crate::Config;
use crate::transport::http::{Allow, HttpConfig};

/// Flags of the HTTP transport ([`HttpConfig`]), and the list lifetime it announces.
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// HTTP path of the MCP endpoint.
    #[arg(
        long,
        default_value_t = HttpConfig::default().endpoint,
        env = "STAUNCH_ENDPOINT",
        value_name = "PATH",
        help_heading = TRANSPORT
    )]
    pub endpoint: String,
    /// Extra host names accepted in Host and Origin (localhost, 127.0.0.1 and `[::1]` always are).
    #[arg(
        long = "allow-host",
        env = "STAUNCH_ALLOW_HOSTS",
        value_delimiter = ',',
        value_name = "HOST",
        help_heading = TRANSPORT
    )]
    pub allow_hosts: Vec<String>,
    /// HTTP: serve connections on N single-threaded runtimes of their own (0: the shared one).
    ///
    /// A request's task and its connection then stay on one thread: more throughput with many
    /// connections, a little more latency for one, no work stealing between them.
    #[arg(
        long,
        default_value_t = HttpConfig::default().conn_workers,
        env = "STAUNCH_HTTP_WORKERS",
        value_name = "N",
        hide_short_help = true,
        help_heading = TRANSPORT
    )]
    pub http_workers: usize,

    /// The `retry` (ms) sent with the priming event of every SSE stream.
    #[arg(
        long,
        default_value_t = millis(HttpConfig::default().sse_retry),
        env = "STAUNCH_SSE_RETRY_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = HTTP,
        value_parser = parse_millis
    )]
    pub sse_retry_ms: u64,
    /// SEP-1699 polling: close a running call's SSE connection after this many ms.
    ///
    /// The client resumes with Last-Event-ID. Off when absent.
    #[arg(
        long,
        env = "STAUNCH_POLL_AFTER_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = HTTP,
        value_parser = parse_millis
    )]
    pub poll_after_ms: Option<u64>,
    /// Seconds without activity after which an HTTP session expires (its requests cancelled).
    #[arg(
        long,
        default_value_t = secs(HttpConfig::default().session_idle),
        env = "STAUNCH_SESSION_IDLE_SECS",
        value_name = "SECS",
        help_heading = HTTP,
        value_parser = parse_secs
    )]
    pub session_idle_secs: u64,
    /// Open SSE connections per HTTP session.
    #[arg(
        long,
        default_value_t = HttpConfig::default().max_streams_per_session,
        env = "STAUNCH_MAX_STREAMS_PER_SESSION",
        value_name = "N",
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub max_streams_per_session: usize,
    /// Events kept per SSE stream for replay.
    #[arg(
        long,
        default_value_t = HttpConfig::default().event_max_per_stream,
        env = "STAUNCH_EVENT_MAX_PER_STREAM",
        value_name = "N",
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub event_max_per_stream: u64,
    /// Seconds SSE events are kept for replay.
    #[arg(
        long,
        default_value_t = secs(HttpConfig::default().event_max_age),
        env = "STAUNCH_EVENT_MAX_AGE_SECS",
        value_name = "SECS",
        hide_short_help = true,
        help_heading = HTTP,
        value_parser = parse_secs
    )]
    pub event_max_age_secs: u64,
    /// Keep-alive interval on open 2025-era SSE streams (a call's, the GET stream), in ms.
    ///
    /// Keeps proxies from closing a silent stream, and notices a client that vanished at the
    /// latest on the second write after it left, which frees what its stream held.
    #[arg(
        long,
        default_value_t = millis(HttpConfig::default().keep_alive),
        env = "STAUNCH_KEEP_ALIVE_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = HTTP,
        value_parser = parse_millis
    )]
    pub keep_alive_ms: u64,
    /// Answer every 2025 session request with a resumable SSE stream.
    ///
    /// Also those without a progress token that are safe to run again (read-only or idempotent
    /// tools, lists, reads, ping), which otherwise get a plain JSON body and store nothing.
    #[arg(
        long,
        env = "STAUNCH_ALWAYS_SSE",
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub always_sse: bool,

    /// How long clients may cache list results and `server/discover` (`ttlMs`), in ms.
    ///
    /// Listening clients (`subscriptions/listen`) hear of changes at once anyway.
    #[arg(
        long,
        default_value_t = Config::default().list_ttl_ms,
        env = "STAUNCH_LIST_TTL_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = STATELESS,
        value_parser = parse_millis
    )]
    pub list_ttl_ms: u64,
    /// How long a silent call's answer waits before it becomes a kept-alive SSE stream, in ms.
    ///
    /// The stream's keep-alives notice a client that left (closing the stream is the 2026
    /// cancel).
    #[arg(
        long,
        default_value_t = millis(HttpConfig::default().stateless_hold),
        env = "STAUNCH_STATELESS_HOLD_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = STATELESS,
        value_parser = parse_millis
    )]
    pub stateless_hold_ms: u64,
    /// Keep-alive interval on a silent call's stream, in ms.
    ///
    /// A closed stream (the 2026 cancel) is noticed at the latest one or two intervals after
    /// the close.
    #[arg(
        long,
        default_value_t = millis(HttpConfig::default().keep_alive_stateless),
        env = "STAUNCH_STATELESS_KEEP_ALIVE_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = STATELESS,
        value_parser = parse_millis
    )]
    pub stateless_keep_alive_ms: u64,
}

impl HttpArgs {
    /// Sets the transport's part of `cfg`.
    pub fn apply(&self, cfg: &mut HttpConfig) {
        let mut allow = Allow::loopback();
        for h in &self.allow_hosts {
            allow = allow.with_host(h.clone());
        }
        cfg.endpoint = self.endpoint.clone();
        cfg.allow = allow;
        cfg.conn_workers = self.http_workers;
        cfg.sse_retry = Duration::from_millis(self.sse_retry_ms);
        cfg.poll_after = self.poll_after_ms.map(Duration::from_millis);
        cfg.session_idle = Duration::from_secs(self.session_idle_secs);
        cfg.max_streams_per_session = self.max_streams_per_session;
        cfg.event_max_per_stream = self.event_max_per_stream;
        cfg.event_max_age = Duration::from_secs(self.event_max_age_secs);
        // A keep-alive every few milliseconds would be a flood, not a keep-alive.
        cfg.keep_alive = Duration::from_millis(self.keep_alive_ms.max(10));
        cfg.always_sse = self.always_sse;
        cfg.stateless_hold = Duration::from_millis(self.stateless_hold_ms);
        cfg.keep_alive_stateless = Duration::from_millis(self.stateless_keep_alive_ms.max(10));
    }
}
