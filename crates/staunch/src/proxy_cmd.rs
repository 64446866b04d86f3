//! `staunch proxy`: any MCP server behind staunch's guarantees. The downstream side is
//! `staunch serve` (every flag of it applies: `--http`, `--store`, auth, limits, the log);
//! the tools are the upstreams' (crates/staunch-proxy).

use std::ffi::OsString;

use clap::Args;

use crate::serve_args::ServeArgs;

/// Examples and exit codes under `staunch proxy --help`.
pub const PROXY_AFTER_HELP: &str = "\
Examples:
  staunch proxy -- python server.py               a stdio server, served on stdio
  staunch proxy --tool export=job -- npx -y some-mcp-server
                                                  one of its tools as a durable job
  staunch proxy --upstream https://mcp.example/mcp --http 127.0.0.1:8080
                                                  an HTTP server, served over HTTP
  staunch proxy --mcp-servers claude_desktop_config.json
                                                  every server of a client's config

The upstream command goes after `--`; the proxy's own flags and every `serve` flag before it.

Exit status:
  0  shut down cleanly (stdin closed, SIGTERM, Ctrl-C)
  1  failed at start (upstream unreachable, bad value, store unreachable, port in use)
  2  usage error";

/// Options of `staunch proxy`.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// The upstreams.
    #[command(flatten)]
    pub upstream: staunch_proxy::cli::UpstreamArgs,
    #[command(flatten)]
    pub serve: ServeArgs,
    /// The upstream command and its arguments (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `proxy`; `commands` as for [`crate::serve::run`].
pub async fn run(
    args: ProxyArgs,
    commands: Option<staunch_command::CommandConfig>,
) -> anyhow::Result<i32> {
    let specs = args
        .upstream
        .specs(&args.command, args.serve.config.is_some())?;
    crate::serve::run_with(args.serve, specs, commands).await
}
