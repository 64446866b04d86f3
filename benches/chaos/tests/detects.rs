//! The chaos driver's checks can fail: each defect that `STAUNCH_INJECT_FAULT` injects into a
//! debug `staunch` (a doubled keyed start, a dropped import unit, an answer after a cancel) is
//! reported by a short SQLite run, with its kind of violation and a non-zero exit; the same
//! run without an injected defect reports none.

use std::path::PathBuf;
use std::process::Command;

/// The debug `staunch` binary next to this driver (the same target directory and profile;
/// the workspace's test build makes both). `STAUNCH_BIN` overrides it.
fn staunch_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("STAUNCH_BIN") {
        return PathBuf::from(p);
    }
    let driver = PathBuf::from(env!("CARGO_BIN_EXE_staunch-chaos"));
    let bin = driver.with_file_name(format!("staunch{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "no staunch binary at {} (build it: cargo build -p staunch)",
        bin.display()
    );
    bin
}

/// Runs the driver for 5 s on SQLite, one instance, with `fault` injected; (exit code, output).
fn chaos(fault: Option<&str>) -> (i32, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_staunch-chaos"));
    c.arg("--bin")
        .arg(staunch_bin())
        .args(["--runs", "1", "--seconds", "5"])
        .env_remove("STAUNCH_INJECT_FAULT");
    if let Some(f) = fault {
        // Inherited by the instances the driver starts.
        c.env("STAUNCH_INJECT_FAULT", f);
    }
    let out = c.output().expect("running staunch-chaos");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for line in text
        .lines()
        .filter(|l| l.starts_with("run ") || l.starts_with("  violation"))
        .take(4)
    {
        println!("{}: {line}", fault.unwrap_or("none"));
    }
    (out.status.code().unwrap_or(-1), text)
}

fn reports(fault: &str, kind: &str) {
    let (code, text) = chaos(Some(fault));
    assert_eq!(code, 1, "{fault}: the driver must fail the run:\n{text}");
    assert!(
        text.contains(&format!("violation(s) of kind \"{kind}\"")),
        "{fault}: no violation of kind {kind:?} reported:\n{text}"
    );
}

#[test]
fn a_doubled_start_is_reported() {
    reports("double_start", "one key, several jobs");
}

#[test]
fn a_dropped_unit_is_reported() {
    reports("drop_unit", "unit missing");
}

#[test]
fn an_answer_after_a_cancel_is_reported() {
    reports(
        "answer_after_cancel",
        "response after a cancel (on the wire)",
    );
}

#[test]
fn the_real_build_has_no_violation() {
    let (code, text) = chaos(None);
    assert_eq!(code, 0, "violations without an injected defect:\n{text}");
}
