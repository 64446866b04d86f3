//! The flags of `staunch serve` (and `staunch proxy`'s downstream side) under the headings
//! `--help` shows. The server's and the job runtime's own flags are defined with their libraries
//! (`staunch_server::cli`, `staunch_jobs::cli`); the ones here choose the tools, the transport,
//! the store, the log, what is observed and who may call.

use std::path::PathBuf;

use clap::Args;

use staunch_server::cli::heading;

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
        value_parser = staunch_server::cli::parse_listen_addr,
        help_heading = heading::TRANSPORT
    )]
    pub http: Option<std::net::SocketAddr>,
    /// Where durable state lives: a SQLite file, `:memory:`, or a postgres:// URL.
    ///
    /// By default a file in the user's state directory (`$XDG_STATE_HOME/staunch/`, else
    /// `~/.local/state/staunch/`), created 0700 — not the working directory, which for a server
    /// an MCP client starts is wherever the client runs.
    #[arg(
        long,
        default_value = staunch_store::location::DEFAULT_STORE,
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
    /// Write the lifecycle log (JSON lines) to this file instead of stderr.
    #[arg(long, env = "STAUNCH_LOG_FILE", value_name = "FILE", help_heading = heading::LOG)]
    pub log_file: Option<PathBuf>,
    /// Do not write the lifecycle log at all.
    #[arg(long, conflicts_with = "log_file", help_heading = heading::LOG)]
    pub no_log: bool,

    /// The request core, the HTTP transport and the limits.
    #[command(flatten)]
    pub server: staunch_server::cli::ServerArgs,
    /// The job runtime.
    #[command(flatten)]
    pub jobs: staunch_jobs::cli::JobArgs,

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

    /// Serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9464.
    ///
    /// OpenMetrics text. Off when absent.
    #[arg(
        long,
        env = "STAUNCH_METRICS",
        value_name = "ADDR",
        value_parser = staunch_server::cli::parse_listen_addr,
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
    pub auth: staunch_server::cli::AuthArgs,
}

/// The flags of `serve` (and `proxy`'s downstream side) that the `[serve]` table may set.
pub fn settable_flags() -> staunch_command::cli::SettableFlags {
    staunch_command::cli::SettableFlags::of::<ServeArgs>()
}
