//! `staunch audit <log>`: the `staunch-audit` library behind a command line.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use staunch_audit::{AuditOptions, audit_reader};

const EXIT_CODES: &str = "\
Exit status:
  0  the log is clean: nothing orphaned, slow to stop, retried while running, cancelled
     unknown, or never ended (slow tools and malformed lines alone do not count)
  1  findings
  2  the log could not be read

The log format is documented in docs/lifecycle-log.md; any server can emit its minimal subset.";

/// Options of `staunch audit`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct AuditArgs {
    /// The lifecycle log (JSON lines), or `-` for stdin.
    pub log: String,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Starts of the same tool with the same arguments this close together form a retry
    /// cluster; set it a little above your clients' request timeout.
    #[arg(long, default_value = "90s", value_parser = crate::args::parse_duration)]
    pub retry_window: Duration,
    /// A cancelled request that took longer than this to stop is reported as slow to stop.
    #[arg(long, default_value = "100ms", value_parser = crate::args::parse_duration)]
    pub slow_stop: Duration,
    /// Examples listed per finding.
    #[arg(long, default_value_t = 5)]
    pub examples: usize,
}

/// Runs the audit; returns the exit code.
pub fn run(args: AuditArgs) -> anyhow::Result<i32> {
    let opts = AuditOptions {
        retry_window: args.retry_window,
        slow_stop_threshold: args.slow_stop,
        examples: args.examples,
    };
    let reader: Box<dyn BufRead> = if args.log == "-" {
        Box::new(BufReader::new(std::io::stdin().lock()))
    } else {
        match File::open(&args.log).with_context(|| format!("opening {}", args.log)) {
            Ok(f) => Box::new(BufReader::new(f)),
            Err(e) => {
                eprintln!("staunch audit: {e:#}");
                return Ok(2);
            }
        }
    };
    let report = match audit_reader(reader, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("staunch audit: {}: {e}", args.log);
            return Ok(2);
        }
    };
    if args.json {
        println!("{}", report.to_json_pretty());
    } else {
        print!("{}", report.render_table());
    }
    Ok(if report.is_clean() { 0 } else { 1 })
}
