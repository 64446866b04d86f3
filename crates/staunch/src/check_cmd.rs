//! `staunch check --config staunch.toml`: validates a command-tool configuration without
//! serving, printing every mistake as `file:line:column: field: message`.

use std::path::PathBuf;

use clap::Args;
use staunch_command::LoadError;

const EXIT_CODES: &str = "\
Exit status:
  0  the file is valid (its tools are listed)
  1  the file has mistakes (each printed with its line, column and field)
  2  the file could not be read";

/// Options of `staunch check`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct CheckArgs {
    /// The configuration file.
    #[arg(long, default_value = "staunch.toml", env = "STAUNCH_CONFIG")]
    pub config: PathBuf,
}

/// Runs the check; returns the exit code.
pub fn run(args: CheckArgs) -> anyhow::Result<i32> {
    match staunch_command::load(&args.config, &crate::serve_table::SettableFlags::new()) {
        Ok(cfg) => {
            println!(
                "{}: ok, {} tool{}",
                args.config.display(),
                cfg.tools.len(),
                if cfg.tools.len() == 1 { "" } else { "s" }
            );
            for t in &cfg.tools {
                println!(
                    "  {} ({}): {}",
                    t.name,
                    t.shape.as_str(),
                    t.program.display()
                );
            }
            for u in &cfg.upstreams {
                let at = match &u.target {
                    staunch_command::config::UpstreamTarget::Command { argv, .. } => argv.join(" "),
                    staunch_command::config::UpstreamTarget::Url { url, .. } => url.clone(),
                };
                println!(
                    "  upstream {} ({}, {} tool rule{}): {at}",
                    u.name,
                    u.default_shape.as_str(),
                    u.tools.len(),
                    if u.tools.len() == 1 { "" } else { "s" }
                );
            }
            Ok(0)
        }
        Err(LoadError::Invalid(errors)) => {
            eprintln!("{errors}");
            eprintln!(
                "{}: {} mistake{}",
                args.config.display(),
                errors.errors.len(),
                if errors.errors.len() == 1 { "" } else { "s" }
            );
            Ok(1)
        }
        Err(e) => {
            eprintln!("staunch check: {e}");
            Ok(2)
        }
    }
}
