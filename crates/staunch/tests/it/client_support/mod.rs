//! Shared by the client-side tests (`probe`, `call`, `audit`): the real binary, `staunch serve`
//! over HTTP, and the kit's SDK peers and stream-cutting proxy (`staunch_testkit::peers`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
pub use staunch_testkit::peers::{Peers, Process, free_port, wait_listening};
use tokio::process::Command;

pub const BIN: &str = env!("CARGO_BIN_EXE_staunch");

pub fn root() -> PathBuf {
    staunch_testkit::peers::workspace_root()
}

/// A server process on a loopback port: an SDK peer, or `staunch serve`.
pub type Server = Process;

/// `staunch serve --http 127.0.0.1:0` (a SQLite store and the lifecycle log in a directory of
/// its own).
pub async fn staunch(extra: &[&str]) -> Server {
    Process::staunch(Path::new(BIN), extra).await
}

/// Runs `staunch probe --json ARGS…`; returns the exit code and the report.
pub async fn probe(args: &[&str]) -> (i32, Value) {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        Command::new(BIN)
            .arg("probe")
            .arg("--json")
            .args(args)
            .output(),
    )
    .await
    .expect("probe finishes")
    .expect("run probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "probe printed no JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    eprintln!("{}", table(&report));
    (out.status.code().unwrap_or(-1), report)
}

/// One check of a probe report.
pub fn check<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {report:#}"))
}

pub fn status<'a>(report: &'a Value, id: &str) -> &'a str {
    check(report, id)["status"].as_str().unwrap()
}

fn table(report: &Value) -> String {
    let mut s = format!("probe {}:\n", report["target"]);
    for c in report["checks"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "  {:22} {:5} {}\n",
            c["id"].as_str().unwrap_or(""),
            c["status"].as_str().unwrap_or(""),
            c["evidence"].as_str().unwrap_or("")
        ));
    }
    s
}
