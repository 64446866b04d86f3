//! `staunch`: serve MCP tools that stop when told; call, probe and audit MCP servers.

// Denied, not forbidden: one function calls glibc's `malloc_trim` (release_memory.rs, with
// its safety argument); everything else stays safe code.
#![deny(unsafe_code)]

mod args;
mod audit_cmd;
mod auth_args;
mod call;
mod call_view;
mod check_cmd;
mod cli;
mod command_tools;
mod jobs_cmd;
mod limits;
mod operate;
mod probe;
mod proxy_cmd;
mod release_memory;
mod serve;
mod state_dir;
mod tools;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    init_diagnostics();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(cli::run(cli))?;
    // Blocking-pool threads of aborted handlers must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    std::process::exit(code);
}

/// Diagnostics (not the lifecycle log) go to stderr as JSON lines at `warn` unless `RUST_LOG`
/// says otherwise; a panic in a handler is one line too, since the runtime answers it.
fn init_diagnostics() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(panic = %info, "panic");
    }));
}
