//! The flags of `staunch serve` (and `staunch proxy`'s downstream side) under the headings
//! `--help` shows: each one's flag, variable, default and meaning, defined here once.

use std::path::PathBuf;

use clap::Args;

use crate::help_heading as heading;

/// Examples and exit codes under `staunch serve --help`.
pub const SERVE_AFTER_HELP: &str = "\
Examples:
  staunch serve                                   stdio, for an MCP client to start
  staunch serve --http 127.0.0.1:8080             Streamable HTTP (both protocol eras)
  staunch serve --config staunch.toml             your own programs as tools
  staunch serve --http 127.0.0.1:8080 --store postgres://db/staunch --instance-name a
                                                  one of several instances on one store

Every flag has an environment variable (shown); a flag wins over its variable, which wins
over the [serve] table of --config. A flag in MS or SECS takes a bare number in that unit or
a duration (1.5s, 10m, 1h30m, 7d). `-h` shows the common flags, `--help` all of them.

Exit status:
  0  shut down cleanly (stdin closed, SIGTERM, Ctrl-C)
  1  failed at start (bad value, invalid --config, store unreachable, port in use)
  2  usage error";

/// Options of `staunch serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve the command tools declared in this file (staunch.toml).
    ///
    /// Refuses to start if it is invalid, reloads it on SIGHUP. Its `[serve]` table sets
    /// defaults for these flags.
    #[arg(long, env = "STAUNCH_CONFIG", value_name = "FILE", help_heading = heading::TOOLS)]
    pub config: Option<PathBuf>,
    /// With --config: serve the demo tools (--profile) next to the command tools.
    #[arg(long, env = "STAUNCH_DEMO_TOOLS", help_heading = heading::TOOLS)]
    pub demo_tools: bool,
    /// The built-in tool set: `demo` (example tools of every shape) or `conformance`.
    ///
    /// `conformance` serves what the official MCP conformance suite calls.
    #[arg(
        long,
        default_value = "demo",
        env = "STAUNCH_PROFILE",
        value_name = "NAME",
        help_heading = heading::TOOLS
    )]
    pub profile: String,

    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8080) instead of stdio.
    ///
    /// A host name is accepted (localhost:8080). Bind a non-loopback address only if you mean
    /// it, and add its name with --allow-host.
    #[arg(
        long,
        env = "STAUNCH_HTTP",
        value_name = "ADDR",
        value_parser = crate::args::parse_listen_addr,
        help_heading = heading::TRANSPORT
    )]
    pub http: Option<std::net::SocketAddr>,
    /// HTTP path of the MCP endpoint.
    #[arg(
        long,
        default_value = "/mcp",
        env = "STAUNCH_ENDPOINT",
        value_name = "PATH",
        help_heading = heading::TRANSPORT
    )]
    pub endpoint: String,
    /// Extra host names accepted in Host and Origin (localhost, 127.0.0.1 and `[::1]` always are).
    #[arg(
        long = "allow-host",
        env = "STAUNCH_ALLOW_HOSTS",
        value_delimiter = ',',
        value_name = "HOST",
        help_heading = heading::TRANSPORT
    )]
    pub allow_hosts: Vec<String>,
    /// HTTP: serve connections on N single-threaded runtimes of their own (0: the shared one).
    ///
    /// A request's task and its connection then stay on one thread: more throughput with many
    /// connections, a little more latency for one, no work stealing between them.
    #[arg(
        long,
        default_value_t = 0,
        env = "STAUNCH_HTTP_WORKERS",
        value_name = "N",
        hide_short_help = true,
        help_heading = heading::TRANSPORT
    )]
    pub http_workers: usize,

    /// Where durable state lives: a SQLite file, `:memory:`, or a postgres:// URL.
    ///
    /// By default a file in the user's state directory (`$XDG_STATE_HOME/staunch/`, else
    /// `~/.local/state/staunch/`), created 0700 — not the working directory, which for a server
    /// an MCP client starts is wherever the client runs.
    #[arg(
        long,
        default_value = crate::state_dir::DEFAULT_STORE,
        env = "STAUNCH_STORE",
        value_name = "STORE",
        // A file, unless `:memory:` or a URL: relative to staunch.toml when set there.
        value_hint = clap::ValueHint::FilePath,
        help_heading = heading::STORE
    )]
    pub store: String,
    /// With a postgres:// store: keep staunch's tables in this schema (created if missing).
    ///
    /// Several deployments or test runs can then share one database.
    #[arg(
        long,
        env = "STAUNCH_STORE_SCHEMA",
        value_name = "NAME",
        hide_short_help = true,
        help_heading = heading::STORE
    )]
    pub store_schema: Option<String>,
    /// Stable name of this instance (e.g. the host name), unique among those sharing a store.
    ///
    /// With it, a restart at once ends the jobs its previous run left running (side-effecting
    /// ones as failed(lease_lost), retry-safe ones re-queued); without it they end when their
    /// lease expires.
    #[arg(
        long,
        env = "STAUNCH_INSTANCE_NAME",
        value_name = "NAME",
        help_heading = heading::STORE
    )]
    pub instance_name: Option<String>,

    /// Write the lifecycle log (JSON lines) to this file instead of stderr.
    #[arg(long, env = "STAUNCH_LOG_FILE", value_name = "FILE", help_heading = heading::LOG)]
    pub log_file: Option<PathBuf>,
    /// Do not write the lifecycle log at all.
    #[arg(long, conflicts_with = "log_file", help_heading = heading::LOG)]
    pub no_log: bool,

    /// Requests in flight across all sessions before new ones get "server busy".
    #[arg(
        long,
        default_value_t = 1024,
        env = "STAUNCH_MAX_IN_FLIGHT",
        value_name = "N",
        value_parser = crate::args::parse_at_least_one,
        help_heading = heading::REQUESTS
    )]
    pub max_in_flight: usize,
    /// Milliseconds a handler may run after its cancel before it is aborted.
    #[arg(
        long,
        default_value_t = 2000,
        env = "STAUNCH_CANCEL_GRACE_MS",
        value_name = "MS",
        help_heading = heading::REQUESTS,
        value_parser = crate::args::parse_millis
    )]
    pub cancel_grace_ms: u64,
    /// Milliseconds in-flight requests get to wind down when the session closes.
    #[arg(
        long,
        default_value_t = 5000,
        env = "STAUNCH_DRAIN_TIMEOUT_MS",
        value_name = "MS",
        help_heading = heading::REQUESTS,
        value_parser = crate::args::parse_millis
    )]
    pub drain_timeout_ms: u64,
    /// Deadline of `quick` tools, in milliseconds (under a client's usual 60 s timeout).
    #[arg(
        long,
        default_value_t = 50_000,
        env = "STAUNCH_QUICK_DEADLINE_MS",
        value_name = "MS",
        help_heading = heading::REQUESTS,
        value_parser = crate::args::parse_millis
    )]
    pub quick_deadline_ms: u64,
    /// Deadline of `streaming` tools, in milliseconds.
    #[arg(
        long,
        default_value_t = 300_000,
        env = "STAUNCH_STREAMING_DEADLINE_MS",
        value_name = "MS",
        help_heading = heading::REQUESTS,
        value_parser = crate::args::parse_millis
    )]
    pub streaming_deadline_ms: u64,
    /// Progress notifications that may go out back to back per request.
    #[arg(
        long,
        default_value_t = 20,
        env = "STAUNCH_PROGRESS_BURST",
        value_name = "N",
        hide_short_help = true,
        help_heading = heading::REQUESTS
    )]
    pub progress_burst: u32,
    /// Sustained progress notifications per second per request (a flood is coalesced).
    #[arg(
        long,
        default_value_t = 20.0,
        env = "STAUNCH_PROGRESS_RATE",
        value_name = "PER_SEC",
        hide_short_help = true,
        help_heading = heading::REQUESTS
    )]
    pub progress_rate: f64,
    /// Largest accepted message (stdio line or HTTP body), in bytes.
    #[arg(
        long,
        default_value_t = 4 * 1024 * 1024,
        env = "STAUNCH_MAX_MESSAGE_BYTES",
        value_name = "BYTES",
        help_heading = heading::REQUESTS
    )]
    pub max_message_bytes: usize,

    /// How long a job's claim holds without a heartbeat, in ms.
    ///
    /// A job whose process died is resolved about this long (plus one reaper interval) later.
    #[arg(
        long,
        default_value_t = 30_000,
        env = "STAUNCH_JOB_LEASE_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::JOBS,
        value_parser = crate::args::parse_millis
    )]
    pub job_lease_ms: u64,
    /// How often a running job renews its lease and learns about cancels, in ms.
    ///
    /// Default: a third of the lease.
    #[arg(
        long,
        env = "STAUNCH_JOB_HEARTBEAT_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::JOBS,
        value_parser = crate::args::parse_millis
    )]
    pub job_heartbeat_ms: Option<u64>,
    /// How often the reaper ends jobs with expired leases and purges old jobs, in ms.
    #[arg(
        long,
        default_value_t = 10_000,
        env = "STAUNCH_JOB_REAP_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::JOBS,
        value_parser = crate::args::parse_millis
    )]
    pub job_reap_ms: u64,
    /// How often idle workers look for queued jobs, in ms.
    ///
    /// Wake-up signals make it faster; this is the backstop.
    #[arg(
        long,
        default_value_t = 1000,
        env = "STAUNCH_JOB_CLAIM_POLL_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::JOBS,
        value_parser = crate::args::parse_millis
    )]
    pub job_claim_poll_ms: u64,
    /// The polling interval suggested to clients (`poll_after_ms`, task `pollInterval`), in ms.
    #[arg(
        long,
        default_value_t = 1000,
        env = "STAUNCH_JOB_POLL_AFTER_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::JOBS,
        value_parser = crate::args::parse_millis
    )]
    pub job_poll_after_ms: u64,
    /// How long a job body may run after its cancel before it is aborted, in ms.
    #[arg(
        long,
        default_value_t = 5000,
        env = "STAUNCH_JOB_CANCEL_GRACE_MS",
        value_name = "MS",
        help_heading = heading::JOBS,
        value_parser = crate::args::parse_millis
    )]
    pub job_cancel_grace_ms: u64,
    /// Longest a job may run per attempt, in seconds.
    #[arg(
        long,
        default_value_t = 3600,
        env = "STAUNCH_JOB_MAX_RUNTIME_SECS",
        value_name = "SECS",
        help_heading = heading::JOBS,
        value_parser = crate::args::parse_secs
    )]
    pub job_max_runtime_secs: u64,
    /// Job bodies this instance runs at once.
    #[arg(
        long,
        default_value_t = 8,
        env = "STAUNCH_JOB_WORKERS",
        value_name = "N",
        value_parser = crate::args::parse_at_least_one,
        help_heading = heading::JOBS
    )]
    pub job_workers: usize,
    /// How long finished jobs are kept (and answered by get_x / tasks/get), in seconds.
    #[arg(
        long,
        default_value_t = 86_400,
        env = "STAUNCH_JOB_TTL_SECS",
        value_name = "SECS",
        help_heading = heading::JOBS,
        value_parser = crate::args::parse_secs
    )]
    pub job_ttl_secs: u64,
    /// How long idempotency keys are honoured, in seconds.
    #[arg(
        long,
        default_value_t = 86_400,
        env = "STAUNCH_IDEMPOTENCY_TTL_SECS",
        value_name = "SECS",
        help_heading = heading::JOBS,
        value_parser = crate::args::parse_secs
    )]
    pub idempotency_ttl_secs: u64,
    /// Join an identical running call of a side-effecting job tool that carries no key.
    ///
    /// Agents re-call after a dropped stream; with this on, the re-call joins the job that is
    /// still running instead of starting a second one.
    #[arg(
        long,
        default_value_t = true,
        action = clap::ArgAction::Set,
        env = "STAUNCH_DEDUPE_INFLIGHT",
        value_name = "BOOL",
        hide_short_help = true,
        help_heading = heading::JOBS
    )]
    pub dedupe_inflight: bool,
    /// The SQLite file the demo tool `import_rows` writes its rows to.
    ///
    /// Default: the store's own file; for a PostgreSQL store, staunch-import.db in the state
    /// directory; for :memory:, memory.
    #[arg(
        long,
        env = "STAUNCH_IMPORT_DB",
        value_name = "FILE",
        hide_short_help = true,
        help_heading = heading::JOBS
    )]
    pub import_db: Option<PathBuf>,

    /// The `retry` (ms) sent with the priming event of every SSE stream.
    #[arg(
        long,
        default_value_t = 1000,
        env = "STAUNCH_SSE_RETRY_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::HTTP,
        value_parser = crate::args::parse_millis
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
        help_heading = heading::HTTP,
        value_parser = crate::args::parse_millis
    )]
    pub poll_after_ms: Option<u64>,
    /// Seconds without activity after which an HTTP session expires (its requests cancelled).
    #[arg(
        long,
        default_value_t = 1800,
        env = "STAUNCH_SESSION_IDLE_SECS",
        value_name = "SECS",
        help_heading = heading::HTTP,
        value_parser = crate::args::parse_secs
    )]
    pub session_idle_secs: u64,
    /// Open SSE connections per HTTP session.
    #[arg(
        long,
        default_value_t = 256,
        env = "STAUNCH_MAX_STREAMS_PER_SESSION",
        value_name = "N",
        hide_short_help = true,
        help_heading = heading::HTTP
    )]
    pub max_streams_per_session: usize,
    /// Events kept per SSE stream for replay.
    #[arg(
        long,
        default_value_t = 10_000,
        env = "STAUNCH_EVENT_MAX_PER_STREAM",
        value_name = "N",
        hide_short_help = true,
        help_heading = heading::HTTP
    )]
    pub event_max_per_stream: u64,
    /// Seconds SSE events are kept for replay.
    #[arg(
        long,
        default_value_t = 900,
        env = "STAUNCH_EVENT_MAX_AGE_SECS",
        value_name = "SECS",
        hide_short_help = true,
        help_heading = heading::HTTP,
        value_parser = crate::args::parse_secs
    )]
    pub event_max_age_secs: u64,
    /// Keep-alive interval on open 2025-era SSE streams (a call's, the GET stream), in ms.
    ///
    /// Keeps proxies from closing a silent stream, and notices a client that vanished at the
    /// latest on the second write after it left, which frees what its stream held.
    #[arg(
        long,
        default_value_t = 15_000,
        env = "STAUNCH_KEEP_ALIVE_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::HTTP,
        value_parser = crate::args::parse_millis
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
        help_heading = heading::HTTP
    )]
    pub always_sse: bool,

    /// How long clients may cache list results and `server/discover` (`ttlMs`), in ms.
    ///
    /// Listening clients (`subscriptions/listen`) hear of changes at once anyway.
    #[arg(
        long,
        default_value_t = 60_000,
        env = "STAUNCH_LIST_TTL_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::STATELESS,
        value_parser = crate::args::parse_millis
    )]
    pub list_ttl_ms: u64,
    /// How long a silent call's answer waits before it becomes a kept-alive SSE stream, in ms.
    ///
    /// The stream's keep-alives notice a client that left (closing the stream is the 2026
    /// cancel).
    #[arg(
        long,
        default_value_t = 250,
        env = "STAUNCH_STATELESS_HOLD_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::STATELESS,
        value_parser = crate::args::parse_millis
    )]
    pub stateless_hold_ms: u64,
    /// Keep-alive interval on a silent call's stream, in ms.
    ///
    /// A closed stream (the 2026 cancel) is noticed at the latest one or two intervals after
    /// the close.
    #[arg(
        long,
        default_value_t = 500,
        env = "STAUNCH_STATELESS_KEEP_ALIVE_MS",
        value_name = "MS",
        hide_short_help = true,
        help_heading = heading::STATELESS,
        value_parser = crate::args::parse_millis
    )]
    pub stateless_keep_alive_ms: u64,

    /// Limits against a hostile client (sessions, connections, timeouts, jobs per owner).
    #[command(flatten)]
    pub limits: crate::limits::LimitArgs,
    /// stdio: bytes of answers queued for stdout at which the server stops reading stdin.
    ///
    /// A client that does not read its answers gets no more work until it does.
    #[arg(
        long,
        default_value_t = 16 * 1024 * 1024,
        env = "STAUNCH_STDOUT_QUEUE_MAX",
        value_name = "BYTES",
        hide_short_help = true,
        help_heading = heading::LIMITS
    )]
    pub stdout_queue_max: usize,
    /// HTTP: event-store writes queued at which a new request waits for the store.
    ///
    /// After 2 s of waiting it is refused with 503 "server busy".
    #[arg(
        long,
        default_value_t = 65_536,
        env = "STAUNCH_EVENT_QUEUE_MAX",
        value_name = "N",
        hide_short_help = true,
        help_heading = heading::LIMITS
    )]
    pub event_queue_max: usize,
    /// HTTP: messages a connection may fall behind before it is closed.
    ///
    /// Its client resumes with Last-Event-ID and loses nothing.
    #[arg(
        long,
        default_value_t = 1024,
        env = "STAUNCH_MAX_CONNECTION_BACKLOG",
        value_name = "N",
        hide_short_help = true,
        help_heading = heading::LIMITS
    )]
    pub max_connection_backlog: usize,

    /// Serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9464.
    ///
    /// OpenMetrics text. Off when absent.
    #[arg(
        long,
        env = "STAUNCH_METRICS",
        value_name = "ADDR",
        value_parser = crate::args::parse_listen_addr,
        help_heading = heading::OBSERVE
    )]
    pub metrics: Option<std::net::SocketAddr>,
    /// Export OpenTelemetry traces over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318.
    ///
    /// A span per request and per job attempt, protobuf, to the collector's /v1/traces
    /// (https:// works too). Off when absent; OTEL_EXPORTER_OTLP_ENDPOINT is honoured too.
    #[arg(
        long,
        env = "STAUNCH_OTLP_ENDPOINT",
        value_name = "URL",
        help_heading = heading::OBSERVE
    )]
    pub otlp_endpoint: Option<String>,
    /// With --http: serve the live page (requests, jobs, a cancel button) at this path.
    ///
    /// E.g. /staunch. Without --auth only on a loopback --http address; with --auth every page
    /// route asks for a token with --live-page-scope.
    #[arg(
        long,
        env = "STAUNCH_LIVE_PAGE",
        requires = "http",
        value_name = "PATH",
        help_heading = heading::OBSERVE
    )]
    pub live_page: Option<String>,
    /// With --live-page and --auth: the scope a token needs to see the page and cancel jobs.
    #[arg(
        long,
        env = "STAUNCH_LIVE_PAGE_SCOPE",
        default_value = staunch_live::OPERATOR_SCOPE,
        value_name = "SCOPE",
        hide_short_help = true,
        help_heading = heading::OBSERVE
    )]
    pub live_page_scope: String,
    /// With --live-page: live update streams open at once, at most (one more gets 503).
    #[arg(
        long,
        env = "STAUNCH_LIVE_PAGE_MAX_STREAMS",
        default_value_t = 16,
        value_parser = clap::value_parser!(u32).range(1..),
        value_name = "N",
        hide_short_help = true,
        help_heading = heading::OBSERVE
    )]
    pub live_page_max_streams: u32,

    /// Authentication (HTTP): --auth, --auth-tokens, --issuer, --audience, --jwks-url, …
    #[command(flatten)]
    pub auth: crate::auth_args::AuthArgs,
}
