//! The command line: `staunch serve | proxy | tools | call | probe | audit | jobs | check`, each
//! command's flags in its own module (`serve`'s in `serve_args`).

use clap::{Parser, Subcommand};

use crate::serve_args::{SERVE_AFTER_HELP, ServeArgs};

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
    /// Run an MCP server: the example tools, or your own from staunch.toml (stdio by default).
    // Boxed: serve has many more options than the other commands.
    #[command(after_help = SERVE_AFTER_HELP)]
    Serve(Box<ServeArgs>),
    /// Call one tool on any MCP server (URL, or a command after `--`), with live progress, a
    /// timeout that cancels on the wire, and job tools and tasks followed to the end.
    Call(crate::call::CallArgs),
    /// List any MCP server's tools (a URL, or a command after `--`), in either protocol era.
    Tools(crate::tools_cmd::ToolsArgs),
    /// Black-box checks of any MCP server: does a cancel stop the work, is the loop
    /// responsive during slow tools, does a dropped stream lose the result.
    Probe(crate::probe_cmd::ProbeArgs),
    /// Read a request-lifecycle log and report orphaned work, slow tools, retry clusters,
    /// unknown cancels and requests that never ended.
    Audit(crate::audit_cmd::AuditArgs),
    /// Operate on the job store `staunch serve` uses: list, show, cancel and purge jobs.
    Jobs(crate::jobs_cmd::JobsArgs),
    /// Validate a command-tool configuration (staunch.toml) without serving: every mistake
    /// with its line, column and field.
    Check(crate::check_cmd::CheckArgs),
    /// Put any MCP server (a command, or a URL) behind staunch's guarantees.
    #[command(after_help = crate::proxy_cmd::PROXY_AFTER_HELP)]
    Proxy(Box<crate::proxy_cmd::ProxyArgs>),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(crate::generate::CompletionsArgs),
    /// Write man pages for every command into a directory (for packagers).
    #[command(hide = true)]
    Man(crate::generate::ManArgs),
}

/// Runs the command; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    let (cli, commands) = crate::serve_table::apply(cli)?;
    match cli.command {
        Command::Serve(args) => crate::serve::run(*args, commands).await,
        Command::Call(args) => crate::call::run(args).await,
        Command::Tools(args) => crate::tools_cmd::run(args).await,
        Command::Probe(args) => crate::probe_cmd::run(args).await,
        Command::Audit(args) => crate::audit_cmd::run(args),
        Command::Jobs(args) => crate::jobs_cmd::run(args).await,
        Command::Check(args) => crate::check_cmd::run(args),
        Command::Proxy(args) => crate::proxy_cmd::run(*args, commands).await,
        Command::Completions(args) => crate::generate::completions(args),
        Command::Man(args) => crate::generate::man(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::help_heading as heading;
    use clap::CommandFactory;

    fn sub(name: &str) -> clap::Command {
        Cli::command()
            .find_subcommand(name)
            .unwrap_or_else(|| panic!("no command {name}"))
            .clone()
    }

    #[test]
    fn every_command_lists_its_exit_codes_and_the_big_ones_show_examples() {
        for cmd in Cli::command().get_subcommands() {
            let name = cmd.get_name();
            if name == "help" {
                continue;
            }
            let help = cmd.clone().render_long_help().to_string();
            assert!(help.contains("Exit status:"), "{name} --help: {help}");
        }
        for name in ["serve", "proxy", "call", "tools", "probe"] {
            let help = sub(name).render_help().to_string();
            assert!(help.contains("Examples:"), "{name} -h shows examples");
        }
    }

    #[test]
    fn every_serve_and_proxy_flag_sits_under_a_heading() {
        for name in ["serve", "proxy"] {
            for arg in sub(name).get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_positional() || matches!(id, "help" | "version") {
                    continue;
                }
                assert!(
                    arg.get_help_heading().is_some(),
                    "{name} --{id} is under no heading"
                );
            }
        }
    }

    #[test]
    fn unit_flags_take_durations() {
        let cli = Cli::try_parse_from([
            "staunch",
            "serve",
            "--cancel-grace-ms",
            "1.5s",
            "--job-ttl-secs",
            "7d",
            "--header-read-timeout-ms",
            "250",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve")
        };
        assert_eq!(args.cancel_grace_ms, 1500);
        assert_eq!(args.job_ttl_secs, 7 * 86_400);
        assert_eq!(args.limits.header_read_timeout_ms, 250);
        assert_eq!(args.job_lease_ms, 30_000, "defaults still parse");
    }

    #[test]
    fn serve_short_help_keeps_the_common_flags_and_long_help_has_them_all() {
        let short = sub("serve").render_help().to_string();
        let long = sub("serve").render_long_help().to_string();
        for common in ["--http", "--store", "--config", "--auth", "--max-in-flight"] {
            assert!(short.contains(common), "-h shows {common}");
        }
        for expert in ["--jwks-max-age-secs", "--event-queue-max", "--sse-retry-ms"] {
            assert!(!short.contains(expert), "-h leaves {expert} to --help");
            assert!(long.contains(expert), "--help shows {expert}");
        }
        for h in [heading::TOOLS, heading::STORE, heading::JOBS, heading::AUTH] {
            assert!(short.contains(&format!("{h}:")), "-h groups under {h}");
        }
    }
}
