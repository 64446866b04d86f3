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

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an MCP server with the built-in example tools (stdio by default).
    Serve(ServeArgs),
}

/// Options of `staunch serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
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
    /// Largest accepted message, in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024, env = "STAUNCH_MAX_MESSAGE_BYTES")]
    pub max_message_bytes: usize,
}

/// Runs the command; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Serve(args) => crate::serve::run(args).await,
    }
}
