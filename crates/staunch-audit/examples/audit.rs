//! `cargo run -p staunch-audit --example audit -- LOG [--json]`: what `staunch audit` does,
//! without the CLI. Exits 1 when the log is not clean.

use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;

use staunch_audit::{AuditOptions, audit_reader};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: audit LOG [--json]");
        return ExitCode::from(2);
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match audit_reader(BufReader::new(file), &AuditOptions::default()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    if args.iter().any(|a| a == "--json") {
        println!("{}", report.to_json_pretty());
    } else {
        print!("{}", report.render_table());
    }
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
