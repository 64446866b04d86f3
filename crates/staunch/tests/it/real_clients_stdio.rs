//! `staunch serve` over stdio driven by MCP clients nobody here wrote: the Python `mcp`
//! package's `stdio_client` + `ClientSession`.

use crate::common;

use std::process::Command;

use common::external;
use serde_json::Value;

fn run_py(args: &[&str]) -> Option<Value> {
    let py = external::python()?;
    let out = Command::new(py)
        .arg(external::root().join("tests-external/py_stdio_client.py"))
        .args(args)
        .arg("--")
        .arg(common::BIN)
        .args(["serve", "--no-log", "--store", ":memory:"])
        .output()
        .expect("run python client");
    assert!(
        out.status.success(),
        "python client failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    Some(serde_json::from_slice(&out.stdout).expect("one JSON object"))
}

#[test]
fn python_sdk_client_calls_tools_with_progress_over_stdio() {
    let Some(v) = run_py(&[]) else { return };
    assert_eq!(v["serverInfo"]["name"], "staunch", "{v}");
    assert_eq!(v["protocolVersion"], "2025-11-25");
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"slow_count"),
        "{tools:?}"
    );
    assert_eq!(v["echo"], "hi");
    assert_eq!(v["progress"], serde_json::json!([1, 2, 3, 4, 5]));
    assert_eq!(v["slow_result"], "counted 5");
}

#[test]
fn python_sdk_client_timeout_cancel_stops_the_work() {
    // mcp 1.x sends no cancel on timeout; the driver sends the notification itself, as a
    // well-behaved client does, and then watches for progress and late responses.
    let Some(v) = run_py(&["--cancel", "--timeout", "0.5", "--send-cancel"]) else {
        return;
    };
    assert_eq!(v["error"], true, "{v}");
    // Counted from 50 ms after the client's timeout; the cancel is sent after it, so on a
    // loaded machine one step can still be in the pipe. A server that kept working would send
    // dozens in the listening window.
    let after = v["progress_after_cancel"].as_u64().unwrap();
    assert!(after <= 2, "work continued after the cancel: {v}");
    assert_eq!(v["echo_after"], "still alive");
    let late = v["late_messages"].as_array().map(|a| a.len()).unwrap_or(0);
    assert_eq!(late, 0, "a cancelled request was answered: {v}");
}
