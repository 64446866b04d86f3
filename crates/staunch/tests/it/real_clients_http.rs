//! `staunch serve --http` driven by clients nobody here wrote: the TypeScript SDK's
//! `StreamableHTTPClientTransport` and the Python `mcp` streamable-HTTP client.

use crate::common;

use std::process::Command;

use common::external;
use common::http::HttpServer;
use serde_json::{Value, json};

fn run(program: std::path::PathBuf, script: &str, args: &[&str]) -> Value {
    let out = Command::new(program)
        .arg(external::root().join(script))
        .args(args)
        .output()
        .expect("run client");
    assert!(
        out.status.success(),
        "{script} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[tokio::test]
async fn typescript_sdk_client_calls_slow_count_with_progress_over_http() {
    let Some(node) = external::node() else { return };
    let s = HttpServer::start(&[]).await;
    let url = s.url();
    let v = tokio::task::spawn_blocking(move || {
        run(node, "tests-external/ts_http_client.mjs", &[&url])
    })
    .await
    .unwrap();
    assert_eq!(v["serverInfo"]["name"], "staunch", "{v}");
    assert_eq!(v["protocolVersion"], "2025-11-25");
    assert!(v["sessionId"].as_str().is_some_and(|s| s.len() == 32));
    assert_eq!(v["progress"], json!([1, 2, 3, 4, 5]));
    assert_eq!(v["slow_result"], "counted 5");
    assert_eq!(v["echo"], "hi");
}

#[tokio::test]
async fn typescript_sdk_timeout_sends_a_cancel_that_stops_the_work() {
    let Some(node) = external::node() else { return };
    let s = HttpServer::start(&[]).await;
    let url = s.url();
    let v = tokio::task::spawn_blocking(move || {
        run(
            node,
            "tests-external/ts_http_client.mjs",
            &[&url, "--timeout"],
        )
    })
    .await
    .unwrap();
    assert_eq!(v["error_code"], -32001, "{v}");
    // The client counts progress arriving more than 50 ms after its timeout. The cancel goes
    // out on a fresh POST after the timeout, so on a loaded machine one step (20 ms) can still
    // be on the wire before the server sees it; a server that kept working would send ~15 more
    // in the client's 300 ms listening window.
    let after = v["progress_after_cancel"].as_u64().unwrap();
    assert!(after <= 2, "work went on after the cancel: {v}");
    assert_eq!(v["late_response"], false, "{v}");
    assert_eq!(v["echo_after"], "still alive");
    let lines = s
        .log_until(|l| {
            l.iter()
                .any(|x| x["event"] == "request.end" && x["outcome"] == "cancelled")
        })
        .await;
    let cancelled: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "request.end" && l["outcome"] == "cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1, "{lines:#?}");
}

#[tokio::test]
async fn python_sdk_client_calls_slow_count_with_progress_over_http() {
    let Some(py) = external::python() else { return };
    let s = HttpServer::start(&[]).await;
    let url = s.url();
    let v =
        tokio::task::spawn_blocking(move || run(py, "tests-external/py_http_client.py", &[&url]))
            .await
            .unwrap();
    assert_eq!(v["serverInfo"]["name"], "staunch", "{v}");
    assert_eq!(v["progress"], json!([1, 2, 3, 4, 5]));
    assert_eq!(v["slow_result"], "counted 5");
}

#[tokio::test]
async fn python_sdk_2x_low_level_session_speaks_2025_11_25() {
    // mcp 2.x's low-level `ClientSession` runs the initialize handshake itself; the same
    // server serves it a 2025-11-25 session (its high-level `Client` speaks 2026-07-28: see
    // real_clients_2026.rs).
    let Some(py2) = external::tool(".tools/py2/bin/python", "Python mcp 2.x client") else {
        return;
    };
    let s = HttpServer::start(&[]).await;
    let url = s.url();
    let v =
        tokio::task::spawn_blocking(move || run(py2, "tests-external/py_http_client.py", &[&url]))
            .await
            .unwrap();
    assert_eq!(
        v["mcpVersion"].as_str().unwrap().chars().next(),
        Some('2'),
        "{v}"
    );
    assert_eq!(v["protocolVersion"], "2025-11-25");
    assert_eq!(v["slow_result"], "counted 5");
}
