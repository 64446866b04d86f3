//! The command line: `staunch serve | proxy | tools | call | probe | audit | jobs | check`, each
//! command's flags in its own module (`serve`'s in `serve_args`).

use std::ffi::OsString;

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
    Jobs(staunch_jobs::cli::JobsArgs),
    /// Validate a command-tool configuration (staunch.toml) without serving: every mistake
    /// with its line, column and field.
    Check(staunch_command::cli::check::CheckArgs),
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
    let (cli, commands) = with_config_file(cli)?;
    match cli.command {
        Command::Serve(args) => crate::serve::run(*args, commands).await,
        Command::Call(args) => crate::call::run(args).await,
        Command::Tools(args) => crate::tools_cmd::run(args).await,
        Command::Probe(args) => crate::probe_cmd::run(args).await,
        Command::Audit(args) => crate::audit_cmd::run(args),
        Command::Jobs(args) => Ok(staunch_jobs::cli::run(args).await),
        Command::Check(args) => Ok(staunch_command::cli::check::run(
            args,
            &crate::serve_args::settable_flags(),
        )),
        Command::Proxy(args) => crate::proxy_cmd::run(*args, commands).await,
        Command::Completions(args) => crate::generate::completions(args),
        Command::Man(args) => crate::generate::man(args),
    }
}

/// For `serve` and `proxy` with `--config`: loads the file (refusing an invalid one) and
/// returns the command line with its `[serve]` table applied to the flags not given on the
/// command line or in the environment, and the loaded file. Other commands pass through.
fn with_config_file(cli: Cli) -> anyhow::Result<(Cli, Option<staunch_command::CommandConfig>)> {
    let path = match &cli.command {
        Command::Serve(args) => args.config.clone(),
        Command::Proxy(args) => args.serve.config.clone(),
        _ => None,
    };
    let Some(path) = path else {
        return Ok((cli, None));
    };
    let flags = crate::serve_args::settable_flags();
    let config = staunch_command::load(&path, &flags).map_err(|e| {
        anyhow::anyhow!("{e}\nstaunch serve: refusing to start with an invalid configuration")
    })?;
    let argv: Vec<OsString> = std::env::args_os().collect();
    let cli = staunch_command::cli::with_settings(cli, argv, &config.serve.settings, &flags)
        .map_err(|e| anyhow::anyhow!("the [serve] table of {}: {e}", path.display()))?;
    Ok((cli, Some(config)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use staunch_server::cli::heading;

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

    use staunch_command::config::{FlagArity, ServeFlags as _, ServeSetting};

    /// Command-line words.
    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    /// `words` parsed, then `settings` applied as from a file.
    fn with_file(words: &[&str], settings: &[ServeSetting]) -> Result<Cli, String> {
        let words = argv(words);
        let cli = Cli::try_parse_from(&words).unwrap();
        staunch_command::cli::with_settings(
            cli,
            words,
            settings,
            &crate::serve_args::settable_flags(),
        )
    }

    /// One definition per setting: every flag of `serve` but `--config` is a key, shaped as
    /// its clap argument says.
    #[test]
    fn every_serve_flag_but_config_is_a_key_of_its_shape() {
        let flags = crate::serve_args::settable_flags();
        let keys = flags.keys();
        let serve = Cli::command().find_subcommand("serve").unwrap().clone();
        for arg in serve.get_arguments().filter(|a| a.get_long().is_some()) {
            let id = arg.get_id().as_str();
            assert_eq!(
                keys.iter().any(|k| k == id),
                !matches!(id, "config" | "help" | "version"),
                "{id}"
            );
        }
        assert!(keys.len() > 60, "{keys:?}");
        let shape = |k: &str| flags.shape(k).unwrap();
        assert_eq!(shape("no_log").arity, FlagArity::Switch);
        assert_eq!(shape("allow_hosts").arity, FlagArity::Many);
        assert_eq!(shape("max_in_flight").arity, FlagArity::One);
        assert!(shape("store").path && shape("log_file").path);
        assert!(!shape("endpoint").path);
        assert!(flags.shape("config").is_none());
        assert!(flags.shape("max_inflight").is_none());
    }

    /// A value goes through its flag's own parser: what the flag refuses, the file does too,
    /// in the flag's words.
    #[test]
    fn a_value_is_checked_by_its_flags_parser() {
        let flags = crate::serve_args::settable_flags();
        assert_eq!(flags.check("cancel_grace_ms", &["1.5s".into()]), Ok(()));
        assert_eq!(flags.check("max_in_flight", &["64".into()]), Ok(()));
        let refused = flags.check("max_in_flight", &["0".into()]).unwrap_err();
        assert!(refused.contains("--max-in-flight"), "{refused}");
        let refused = flags.check("http", &["nowhere".into()]).unwrap_err();
        assert!(refused.contains("--http"), "{refused}");
        assert_eq!(
            flags.words(&ServeSetting::new("allow_hosts", &["a", "b"])),
            argv(&["--allow-host=a", "--allow-host=b"])
        );
        assert_eq!(
            flags.words(&ServeSetting::new("no_log", &[])),
            argv(&["--no-log"])
        );
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
        assert_eq!(args.server.request.cancel_grace_ms, 1500);
        assert_eq!(args.jobs.job_ttl_secs, 7 * 86_400);
        assert_eq!(args.server.limits.header_read_timeout_ms, 250);
        assert_eq!(args.jobs.job_lease_ms, 30_000, "defaults still parse");
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

    /// The command line wins over the file; the file fills in the rest.
    #[test]
    fn the_command_line_wins_over_the_file() {
        let settings = [
            ServeSetting::new("max_in_flight", &["64"]),
            ServeSetting::new("cancel_grace_ms", &["2s"]),
            ServeSetting::new("allow_hosts", &["mcp.example", "mcp.internal"]),
            ServeSetting::new("no_log", &[]),
        ];
        let cli = with_file(
            &["staunch", "serve", "--max-in-flight", "7", "--no-log"],
            &settings,
        )
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve")
        };
        assert_eq!(args.server.request.max_in_flight, 7);
        assert_eq!(args.server.request.cancel_grace_ms, 2000);
        assert_eq!(
            args.server.http.allow_hosts,
            ["mcp.example", "mcp.internal"]
        );
        assert!(args.no_log);
    }

    /// `proxy` takes the same table for its downstream side; its command after `--` is kept.
    #[test]
    fn the_proxy_takes_the_table_and_keeps_its_command() {
        let settings = [ServeSetting::new("max_in_flight", &["9"])];
        let cli = with_file(
            &["staunch", "proxy", "--", "python3", "server.py"],
            &settings,
        )
        .unwrap();
        let Command::Proxy(args) = cli.command else {
            panic!("proxy")
        };
        assert_eq!(args.serve.server.request.max_in_flight, 9);
        assert_eq!(args.command, argv(&["python3", "server.py"]));
    }

    /// A setting that conflicts with a flag given on the command line is refused in clap's
    /// words, not silently dropped.
    #[test]
    fn a_setting_that_conflicts_with_a_given_flag_is_refused() {
        let err = with_file(
            &["staunch", "serve", "--log-file", "/tmp/x.jsonl"],
            &[ServeSetting::new("no_log", &[])],
        )
        .expect_err("a conflict");
        assert!(
            err.contains("--no-log") && err.contains("--log-file"),
            "{err}"
        );
    }
}
