//! Command-line interface: `staunch serve | call | probe | audit`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// MCP servers whose tools stop when told, survive when they must, and never run twice by
/// accident.
#[derive(Debug, Parser)]
#[command(name = "staunch", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once at start-up: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an MCP server with the built-in example tools (stdio by default).
    // Boxed: serve has many more options than the other commands.
    Serve(Box<ServeArgs>),
    /// Call one tool on any MCP server (URL, or a command after `--`), with live progress, a
    /// timeout that cancels on the wire, and job tools and tasks followed to the end.
    Call(crate::call::CallArgs),
    /// Black-box checks of any MCP server: does a cancel stop the work, is the loop
    /// responsive during slow tools, does a dropped stream lose the result.
    Probe(crate::probe::ProbeArgs),
    /// Read a request-lifecycle log and report orphaned work, slow tools, retry clusters,
    /// unknown cancels and requests that never ended.
    Audit(crate::audit_cmd::AuditArgs),
    /// Operate on the job store `staunch serve` uses: list, show, cancel and purge jobs.
    Jobs(crate::jobs_cmd::JobsArgs),
    /// Validate a command-tool configuration (staunch.toml) without serving: every mistake
    /// with its line, column and field.
    Check(crate::check_cmd::CheckArgs),
    /// Put any MCP server (a command, or a URL) behind staunch's guarantees.
    Proxy(Box<crate::proxy_cmd::ProxyArgs>),
}

/// Options of `staunch serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve the command tools declared in this file (staunch.toml); refuses to start if it is
    /// invalid, reloads it on SIGHUP. Its `[serve]` table sets defaults for these flags.
    #[arg(long, env = "STAUNCH_CONFIG")]
    pub config: Option<PathBuf>,
    /// With --config: serve the demo tools (--profile) next to the command tools.
    #[arg(long, env = "STAUNCH_DEMO_TOOLS")]
    pub demo_tools: bool,
    /// Which tool set to serve: `demo` (example tools of every shape) or `conformance` (what
    /// the official conformance suite calls).
    #[arg(long, default_value = "demo", env = "STAUNCH_PROFILE")]
    pub profile: String,
    /// Write the lifecycle log (JSON lines) to this file instead of stderr.
    #[arg(long, env = "STAUNCH_LOG_FILE")]
    pub log_file: Option<PathBuf>,
    /// Do not write the lifecycle log at all.
    #[arg(long, conflicts_with = "log_file")]
    pub no_log: bool,
    /// Requests in flight across all sessions before new ones get "server busy".
    #[arg(long, default_value_t = 1024, env = "STAUNCH_MAX_IN_FLIGHT")]
    pub max_in_flight: usize,
    /// Milliseconds a handler may run after its cancel before it is aborted.
    #[arg(long, default_value_t = 2000, env = "STAUNCH_CANCEL_GRACE_MS")]
    pub cancel_grace_ms: u64,
    /// Milliseconds in-flight requests get to wind down when the session closes.
    #[arg(long, default_value_t = 5000, env = "STAUNCH_DRAIN_TIMEOUT_MS")]
    pub drain_timeout_ms: u64,
    /// Deadline of `quick` tools, in milliseconds.
    #[arg(long, default_value_t = 50_000, env = "STAUNCH_QUICK_DEADLINE_MS")]
    pub quick_deadline_ms: u64,
    /// Deadline of `streaming` tools, in milliseconds.
    #[arg(long, default_value_t = 300_000, env = "STAUNCH_STREAMING_DEADLINE_MS")]
    pub streaming_deadline_ms: u64,
    /// Progress notifications that may go out back to back per request.
    #[arg(long, default_value_t = 20, env = "STAUNCH_PROGRESS_BURST")]
    pub progress_burst: u32,
    /// Sustained progress notifications per second per request (a flood is coalesced).
    #[arg(long, default_value_t = 20.0, env = "STAUNCH_PROGRESS_RATE")]
    pub progress_rate: f64,
    /// Largest accepted message (stdio line or HTTP body), in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024, env = "STAUNCH_MAX_MESSAGE_BYTES")]
    pub max_message_bytes: usize,
    /// stdio: bytes of answers queued for stdout at which the server stops reading stdin
    /// until the client reads them (a client that does not read gets no more work).
    #[arg(long, default_value_t = 16 * 1024 * 1024, env = "STAUNCH_STDOUT_QUEUE_MAX")]
    pub stdout_queue_max: usize,
    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8080 or localhost:8080) instead
    /// of stdio. Bind a non-loopback address only if you mean it, and add its name with
    /// --allow-host.
    #[arg(long, env = "STAUNCH_HTTP", value_parser = crate::args::parse_listen_addr)]
    pub http: Option<std::net::SocketAddr>,
    /// Where durable state lives: a SQLite file, `:memory:`, or a postgres:// URL. By default
    /// a file in the user's state directory (else `~/.local/state/staunch/`), created 0700 —
    /// not the working directory, which for a server an MCP client starts is wherever the
    /// client runs.
    #[arg(long, default_value = crate::state_dir::DEFAULT_STORE, env = "STAUNCH_STORE")]
    pub store: String,
    /// With a postgres:// store: keep staunch's tables in this schema (created if missing), so
    /// several deployments or test runs can share one database.
    #[arg(long, env = "STAUNCH_STORE_SCHEMA")]
    pub store_schema: Option<String>,
    /// Stable name of this instance (e.g. the host name). With it, a restart at once ends the
    /// jobs its previous run left running (side-effecting ones as failed(lease_lost),
    /// retry-safe ones re-queued); without it they end when their lease expires. Must be unique
    /// among running instances that share a store.
    #[arg(long, env = "STAUNCH_INSTANCE_NAME")]
    pub instance_name: Option<String>,
    /// How long a job's claim holds without a heartbeat, in ms: a job whose process died is
    /// resolved about this long (plus one reaper interval) later.
    #[arg(long, default_value_t = 30_000, env = "STAUNCH_JOB_LEASE_MS")]
    pub job_lease_ms: u64,
    /// How often a running job renews its lease and learns about cancels, in ms (default: a
    /// third of the lease).
    #[arg(long, env = "STAUNCH_JOB_HEARTBEAT_MS")]
    pub job_heartbeat_ms: Option<u64>,
    /// How often the reaper ends jobs with expired leases and purges old jobs, in ms.
    #[arg(long, default_value_t = 10_000, env = "STAUNCH_JOB_REAP_MS")]
    pub job_reap_ms: u64,
    /// How often idle workers look for queued jobs, in ms (wake-up signals make it faster;
    /// this is the backstop).
    #[arg(long, default_value_t = 1000, env = "STAUNCH_JOB_CLAIM_POLL_MS")]
    pub job_claim_poll_ms: u64,
    /// The polling interval suggested to clients (`poll_after_ms`, task `pollInterval`), in ms.
    #[arg(long, default_value_t = 1000, env = "STAUNCH_JOB_POLL_AFTER_MS")]
    pub job_poll_after_ms: u64,
    /// How long a job body may run after its cancel before it is aborted, in ms.
    #[arg(long, default_value_t = 5000, env = "STAUNCH_JOB_CANCEL_GRACE_MS")]
    pub job_cancel_grace_ms: u64,
    /// Longest a job may run per attempt, in seconds.
    #[arg(long, default_value_t = 3600, env = "STAUNCH_JOB_MAX_RUNTIME_SECS")]
    pub job_max_runtime_secs: u64,
    /// Job bodies this instance runs at once.
    #[arg(long, default_value_t = 8, env = "STAUNCH_JOB_WORKERS")]
    pub job_workers: usize,
    /// How long finished jobs are kept (and answered by get_x / tasks/get), in seconds.
    #[arg(long, default_value_t = 86_400, env = "STAUNCH_JOB_TTL_SECS")]
    pub job_ttl_secs: u64,
    /// How long idempotency keys are honoured, in seconds.
    #[arg(long, default_value_t = 86_400, env = "STAUNCH_IDEMPOTENCY_TTL_SECS")]
    pub idempotency_ttl_secs: u64,
    /// Join an identical call of a side-effecting job tool that is still running when the
    /// call carries no idempotency key (agents re-call after a dropped stream).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "STAUNCH_DEDUPE_INFLIGHT")]
    pub dedupe_inflight: bool,
    /// The SQLite file `import_rows` writes its rows to (default: the store's own file; for a
    /// PostgreSQL store, staunch-import.db in the state directory; for :memory:, memory).
    #[arg(long, env = "STAUNCH_IMPORT_DB")]
    pub import_db: Option<PathBuf>,
    /// HTTP path of the MCP endpoint.
    #[arg(long, default_value = "/mcp", env = "STAUNCH_ENDPOINT")]
    pub endpoint: String,
    /// Extra host names accepted in Host and Origin (localhost, 127.0.0.1 and [::1] always are).
    #[arg(
        long = "allow-host",
        env = "STAUNCH_ALLOW_HOSTS",
        value_delimiter = ','
    )]
    pub allow_hosts: Vec<String>,
    /// The `retry` (ms) sent with the priming event of every SSE stream.
    #[arg(long, default_value_t = 1000, env = "STAUNCH_SSE_RETRY_MS")]
    pub sse_retry_ms: u64,
    /// SEP-1699 polling: close a call's SSE connection after this many ms while it runs; the
    /// client resumes with Last-Event-ID. Off when absent.
    #[arg(long, env = "STAUNCH_POLL_AFTER_MS")]
    pub poll_after_ms: Option<u64>,
    /// Seconds without activity after which an HTTP session expires (its requests are
    /// cancelled).
    #[arg(long, default_value_t = 1800, env = "STAUNCH_SESSION_IDLE_SECS")]
    pub session_idle_secs: u64,
    /// Open SSE connections per HTTP session.
    #[arg(long, default_value_t = 256, env = "STAUNCH_MAX_STREAMS_PER_SESSION")]
    pub max_streams_per_session: usize,
    /// Events kept per SSE stream for replay.
    #[arg(long, default_value_t = 10_000, env = "STAUNCH_EVENT_MAX_PER_STREAM")]
    pub event_max_per_stream: u64,
    /// Seconds SSE events are kept for replay.
    #[arg(long, default_value_t = 900, env = "STAUNCH_EVENT_MAX_AGE_SECS")]
    pub event_max_age_secs: u64,
    /// 2026-07-28: how long clients may cache list results and `server/discover` (`ttlMs`), in
    /// ms. Listening clients (`subscriptions/listen`) hear of changes at once anyway.
    #[arg(long, default_value_t = 60_000, env = "STAUNCH_LIST_TTL_MS")]
    pub list_ttl_ms: u64,
    /// 2026-07-28 over HTTP: how long a silent call's answer waits before it becomes an SSE
    /// stream whose keep-alives notice a client that left, in ms.
    #[arg(long, default_value_t = 250, env = "STAUNCH_STATELESS_HOLD_MS")]
    pub stateless_hold_ms: u64,
    /// 2026-07-28 over HTTP: keep-alive interval on a silent call's stream, in ms. A closed
    /// stream (the 2026 cancel) is noticed at the latest one or two intervals after the close.
    #[arg(long, default_value_t = 500, env = "STAUNCH_STATELESS_KEEP_ALIVE_MS")]
    pub stateless_keep_alive_ms: u64,
    /// 2025 revisions over HTTP: keep-alive interval on open SSE streams (a call's stream, the
    /// GET stream), in ms. Keeps proxies from closing a silent stream, and notices a client that
    /// vanished at the latest on the second write after it left, which frees what its stream
    /// held.
    #[arg(long, default_value_t = 15_000, env = "STAUNCH_KEEP_ALIVE_MS")]
    pub keep_alive_ms: u64,
    /// Limits against a hostile client (sessions, connections, timeouts, jobs per owner).
    #[command(flatten)]
    pub limits: crate::limits::LimitArgs,
    /// Serve Prometheus metrics (OpenMetrics text) at http://ADDR/metrics, e.g.
    /// 127.0.0.1:9464. Off when absent.
    #[arg(long, env = "STAUNCH_METRICS", value_parser = crate::args::parse_listen_addr)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Export OpenTelemetry traces (a span per request and per job attempt) over OTLP/HTTP
    /// protobuf to this collector, e.g. http://127.0.0.1:4318 or https://collector:4318
    /// (spans go to its /v1/traces).
    /// Off when absent; OTEL_EXPORTER_OTLP_ENDPOINT is honoured too.
    #[arg(long, env = "STAUNCH_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// With --http: serve the live page (requests in flight, jobs, a cancel button) at this
    /// path, e.g. /staunch. Without --auth only on a loopback --http address; with --auth
    /// every page route asks for a token with --live-page-scope.
    #[arg(long, env = "STAUNCH_LIVE_PAGE", requires = "http")]
    pub live_page: Option<String>,
    /// With --live-page and --auth: the scope a token needs to see the page and cancel jobs.
    #[arg(
        long,
        env = "STAUNCH_LIVE_PAGE_SCOPE",
        default_value = crate::operate::live_page::OPERATOR_SCOPE
    )]
    pub live_page_scope: String,
    /// With --live-page: live update streams open at once, at most (one more gets 503).
    #[arg(
        long,
        env = "STAUNCH_LIVE_PAGE_MAX_STREAMS",
        default_value_t = 16,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub live_page_max_streams: u32,
    /// Authentication (HTTP): --auth, --auth-tokens, --issuer, --audience, --jwks-url, …
    #[command(flatten)]
    pub auth: crate::auth_args::AuthArgs,
    /// HTTP: event-store writes queued (not yet committed) at which a new request waits for
    /// the store, and after 2 s is refused with 503 "server busy".
    #[arg(long, default_value_t = 65_536, env = "STAUNCH_EVENT_QUEUE_MAX")]
    pub event_queue_max: usize,
    /// HTTP: messages a connection may fall behind before it is closed (its client resumes
    /// with Last-Event-ID and loses nothing).
    #[arg(long, default_value_t = 1024, env = "STAUNCH_MAX_CONNECTION_BACKLOG")]
    pub max_connection_backlog: usize,
    /// HTTP: answer every 2025 session request with a resumable SSE stream, also those without
    /// a progress token that are safe to run again (read-only or idempotent tools, lists,
    /// reads, ping), which otherwise get a plain JSON body and store nothing.
    #[arg(long, env = "STAUNCH_ALWAYS_SSE")]
    pub always_sse: bool,
    /// HTTP: serve connections on N threads of their own, each a single-threaded runtime, so
    /// that a request's task and its connection stay on one thread (more throughput with many
    /// connections, a little more latency for one; no work stealing between them). 0, the
    /// default: on the multi-threaded runtime.
    #[arg(long, default_value_t = 0, env = "STAUNCH_HTTP_WORKERS")]
    pub http_workers: usize,
}

/// Runs the command; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Serve(args) => crate::serve::run(*args).await,
        Command::Call(args) => crate::call::run(args).await,
        Command::Probe(args) => crate::probe::run(args).await,
        Command::Audit(args) => crate::audit_cmd::run(args),
        Command::Jobs(args) => crate::jobs_cmd::run(args).await,
        Command::Check(args) => crate::check_cmd::run(args),
        Command::Proxy(args) => crate::proxy_cmd::run(*args).await,
    }
}
