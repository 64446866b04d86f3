//! `staunch check --config staunch.toml`: validates a command-tool configuration without
//! serving, printing every mistake as `file:line:column: field: message`.

use std::path::PathBuf;

use clap::Args;

use super::SettableFlags;
use crate::LoadError;
use crate::config::UpstreamTarget;

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

/// Runs the check against the flags the `[serve]` table may set; returns the exit code.
pub fn run(args: CheckArgs, flags: &SettableFlags) -> i32 {
    match crate::load(&args.config, flags) {
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
                    UpstreamTarget::Command { argv, .. } => argv.join(" "),
                    UpstreamTarget::Url { url, .. } => url.clone(),
                };
                println!(
                    "  upstream {} ({}, {} tool rule{}): {at}",
                    u.name,
                    u.default_shape.as_str(),
                    u.tools.len(),
                    if u.tools.len() == 1 { "" } else { "s" }
                );
            }
            0
        }
        Err(LoadError::Invalid(errors)) => {
            eprintln!("{errors}");
            eprintln!(
                "{}: {} mistake{}",
                args.config.display(),
                errors.errors.len(),
                if errors.errors.len() == 1 { "" } else { "s" }
            );
            1
        }
        Err(e) => {
            eprintln!("staunch check: {e}");
            2
        }
    }
}
