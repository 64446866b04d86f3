//! The clients of the new generation, written by the SDK teams, against one running `staunch
//! serve --http`: Python `mcp` 2.3.0's `Client` and the TypeScript SDK v2 client
//! (`@modelcontextprotocol/client` 2.4.0), each once in 2026-07-28 mode (they probe
//! `server/discover`) and once in 2025 mode (the initialize handshake).
//!
//! Each run calls `slow_count` with progress, answers `greet`'s elicitation (an input-required
//! round in 2026, a server->client request in 2025) and gives up on a long `slow_count` from
//! the client side — by closing the request's stream in 2026, by `notifications/cancelled` in
//! 2025. The lifecycle log must show the cancel with the era's reason, and the work must stop:
//! `slow_count_status` reads the steps the handler did, and they stop growing.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::external;
use common::http::HttpServer;
use serde_json::{Value, json};

fn run(program: PathBuf, script: &str, args: &[&str]) -> Value {
    let out = Command::new(program)
        .arg(external::root().join(script))
        .args(args)
        .output()
        .expect("run client");
    assert!(
        out.status.success(),
        "{script} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// What both clients must show in either mode.
async fn check(s: &HttpServer, v: &Value, tag: &str, stateless: bool) {
    let want_version = if stateless {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    assert_eq!(v["protocolVersion"], want_version, "{v}");
    assert_eq!(v["serverInfo"]["name"], "staunch", "{v}");
    assert_eq!(v["progress"], json!([1, 2, 3, 4, 5]), "{v}");
    assert_eq!(v["slow_result"], "counted 5", "{v}");
    assert_eq!(v["greeting"], "Hello, Ada!", "{v}");

    let c = &v["cancel"];
    assert!(
        c["progress_before"].as_u64().unwrap() > 0,
        "no progress before the cancel: {v}"
    );
    // At most one that the server sent before the cancel reached it (in flight as the client
    // closed, read on a loaded machine); the handler's progress stops with the cancel.
    assert!(
        c["progress_after"].as_u64().unwrap() <= 1,
        "progress after the cancel: {v}"
    );
    // The handler stopped: its side effects stop growing (at most one step that was already
    // under way when the cancel landed; the first reading is 300 ms after the close).
    let at_close = c["steps_at_close"].as_u64().unwrap();
    assert_eq!(
        c["steps_later"], at_close,
        "work went on after the cancel: {v}"
    );
    assert_eq!(
        c["steps_later_still"], at_close,
        "work went on after the cancel: {v}"
    );
    assert!(at_close < 400, "{v}");

    // The lifecycle log: the cancel with its era's reason, and the end without a response.
    let lines = s
        .log_until(|l| {
            l.iter().any(|x| {
                x["event"] == "request.end"
                    && x["tool"] == "slow_count"
                    && x["outcome"] == "cancelled"
                    && x["session"]
                        .as_str()
                        .is_some_and(|k| k.starts_with("req-") == stateless)
            })
        })
        .await;
    let cancels: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "request.cancel_received")
        .filter(|l| {
            l["session"]
                .as_str()
                .is_some_and(|k| k.starts_with("req-") == stateless)
        })
        .collect();
    assert!(!cancels.is_empty(), "{tag}: no cancel in the log");
    if stateless {
        assert!(
            cancels.iter().all(|c| c["reason"] == "stream closed"),
            "{tag}: {cancels:?}"
        );
        // The elicitation was an input-required round.
        assert!(
            lines
                .iter()
                .any(|l| l["tool"] == "greet" && l["outcome"] == "input_required"),
            "{tag}: no input-required round"
        );
    }
}

async fn both_modes(s: &HttpServer, program: PathBuf, script: &str, name: &str) {
    for (mode, stateless) in [("auto", true), ("legacy", false)] {
        let tag = format!("{name}-{mode}");
        let url = s.url();
        let (p, sc, t) = (program.clone(), script.to_string(), tag.clone());
        let v = tokio::task::spawn_blocking(move || {
            let flag = if sc.ends_with(".py") { "--mode" } else { "" };
            let tag_flag = if sc.ends_with(".py") { "--tag" } else { "" };
            let args: Vec<&str> = [url.as_str(), flag, mode, tag_flag, t.as_str()]
                .into_iter()
                .filter(|a| !a.is_empty())
                .collect();
            run(p, &sc, &args)
        })
        .await
        .unwrap();
        check(s, &v, &tag, stateless).await;
    }
}

#[tokio::test]
async fn python_mcp_2_in_both_eras() {
    let Some(py2) = external::python2() else {
        return;
    };
    let s = HttpServer::start(&[]).await;
    both_modes(&s, py2, "tests-external/py2_client.py", "py2").await;
}

#[tokio::test]
async fn typescript_sdk_v2_in_both_eras() {
    let Some(node) = external::node_with_ts2() else {
        return;
    };
    let s = HttpServer::start(&[]).await;
    both_modes(&s, node, "tests-external/v2/ts2_client.mjs", "ts2").await;
}
