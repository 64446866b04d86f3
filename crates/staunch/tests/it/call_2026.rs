//! `staunch call` and `staunch-client` in protocol 2026-07-28 against a real `staunch serve
//! --http` on loopback: discover first, `_meta` and headers on every request (the server
//! refuses a request without them, so each success proves them), progress on the request's own
//! stream, input-required rounds, a timeout or Ctrl-C that closes the stream (the server's
//! lifecycle log says `stream closed` and the side effects stop), the same server in forced
//! 2025 mode, and the fall back to `initialize` against servers that only speak 2025.

use crate::client_support;

use std::process::{Output, Stdio};
use std::time::Duration;

use client_support::{BIN, Peers, Server};
use serde_json::{Value, json};
use staunch_client::era::Era;
use staunch_client::{CallOptions, Client, ClientError, ConnectOptions, EraChoice};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

async fn call(args: &[&str]) -> Output {
    tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(BIN).arg("call").args(args).output(),
    )
    .await
    .expect("staunch call finishes")
    .expect("run staunch call")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Lifecycle lines of `tool`'s calls.
fn tool_lines(server: &Server, tool: &str) -> Vec<Value> {
    server
        .log_lines()
        .into_iter()
        .filter(|l| l["tool"] == tool)
        .collect()
}

async fn status_steps(url: &str, tag: &str) -> u64 {
    let o = call(&["--json", url, "slow_count_status", &format!("tag={tag}")]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["structuredContent"]["steps"].as_u64().unwrap()
}

/// Waits (bounded) for the lifecycle log to end the request of `tool`, then returns its lines.
async fn ended(server: &Server, tool: &str) -> Vec<Value> {
    for _ in 0..200 {
        let lines = tool_lines(server, tool);
        if lines.iter().any(|l| l["event"] == "request.end") {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{tool} never ended: {:#?}", server.log_lines());
}

#[tokio::test]
async fn echo_and_progress_in_2026() {
    let server = client_support::staunch(&[]).await;
    let url = server.url();
    let o = call(&["-v", &url, "echo", "text=hello"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "hello");
    assert!(
        stderr(&o).contains("protocol 2026-07-28 (stateless era, server/discover)"),
        "{}",
        stderr(&o)
    );
    let o = call(&["-v", &url, "slow_count", "steps=4", "delay_ms=20"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "counted 4");
    for n in 1..=4 {
        assert!(
            stderr(&o).contains(&format!("progress {n}/4")),
            "{}",
            stderr(&o)
        );
    }
    // The server served both calls statelessly: no session, a stateless key, version 2026.
    for tool in ["echo", "slow_count"] {
        let start = tool_lines(&server, tool)
            .into_iter()
            .find(|l| l["event"] == "request.start")
            .unwrap();
        assert_eq!(start["protocol_version"], "2026-07-28", "{start}");
        assert!(
            start["session"].as_str().unwrap().starts_with("req-"),
            "{start}"
        );
    }
    assert!(
        server
            .log_lines()
            .iter()
            .all(|l| l["method"] != "initialize"),
        "no initialize in 2026 mode"
    );
}

#[tokio::test]
async fn forced_2025_against_the_same_server() {
    let server = client_support::staunch(&[]).await;
    let url = server.url();
    let o = call(&[
        "-v",
        "--protocol",
        "2025-11-25",
        &url,
        "slow_count",
        "steps=2",
        "delay_ms=10",
    ])
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "counted 2");
    assert!(
        stderr(&o).contains("protocol 2025-11-25 (session era, initialize)"),
        "{}",
        stderr(&o)
    );
    let lines = server
        .log_until(|ls| ls.iter().any(|l| l["method"] == "initialize"))
        .await;
    assert!(
        lines.iter().any(|l| l["method"] == "initialize"),
        "{lines:#?}"
    );
    assert!(
        lines.iter().all(|l| l["method"] != "server/discover"),
        "forced 2025 sends no discover"
    );
}

#[tokio::test]
async fn a_timeout_in_2026_closes_the_stream_and_the_work_stops() {
    let server = client_support::staunch(&[]).await;
    let url = server.url();
    let o = call(&[
        "--timeout",
        "400ms",
        "--no-reset-on-progress",
        &url,
        "slow_count",
        "steps=1000",
        "delay_ms=20",
        "tag=timeout",
    ])
    .await;
    assert_eq!(o.status.code(), Some(124), "{}", stderr(&o));
    let lines = ended(&server, "slow_count").await;
    let all = server.log_lines();
    let cancel = all
        .iter()
        .find(|l| l["event"] == "request.cancel_received")
        .unwrap_or_else(|| panic!("no cancel in {all:#?}"));
    assert_eq!(cancel["reason"], "stream closed", "{cancel}");
    let end = lines.iter().find(|l| l["event"] == "request.end").unwrap();
    assert_eq!(end["outcome"], "cancelled", "{end}");
    // The side effects stopped: the count does not move any more.
    let a = status_steps(&url, "timeout").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b = status_steps(&url, "timeout").await;
    assert_eq!(a, b, "steps went on after the close");
    assert!(a > 0 && a < 1000, "{a}");
}

#[tokio::test]
async fn ctrl_c_in_2026_closes_the_stream() {
    let server = client_support::staunch(&[]).await;
    let url = server.url();
    let mut child = Command::new(BIN)
        .args([
            "call",
            &url,
            "slow_count",
            "steps=1000",
            "delay_ms=20",
            "tag=ctrlc",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(l) = err.next_line().await.unwrap() {
            if l.starts_with("progress 3/") {
                return;
            }
        }
        panic!("no progress");
    })
    .await
    .expect("progress");
    let pid = child.id().unwrap().to_string();
    let st = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(st.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(130));
    ended(&server, "slow_count").await;
    let all = server.log_lines();
    let cancels: Vec<_> = all
        .iter()
        .filter(|l| l["event"] == "request.cancel_received")
        .collect();
    assert_eq!(cancels.len(), 1, "{all:#?}");
    assert_eq!(cancels[0]["reason"], "stream closed");
}

#[tokio::test]
async fn an_input_required_round_through_the_cli() {
    let server = client_support::staunch(&["--profile", "conformance"]).await;
    let url = server.url();
    let tool = "test_input_required_result_elicitation";
    // Unanswered: the call stops and says what the server asked.
    let o = call(&["--input", "other=1", &url, tool]).await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("user_name: elicitation/create"),
        "{}",
        stderr(&o)
    );
    // Answered: a second request with inputResponses and the sealed requestState.
    let o = call(&[
        "--input",
        r#"user_name={"action":"accept","content":{"name":"Ada"}}"#,
        &url,
        tool,
    ])
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("Ada"), "{}", stdout(&o));
    // The log is written behind the requests: wait (bounded) for the third round's start.
    let mut starts = 0;
    for _ in 0..200 {
        starts = tool_lines(&server, tool)
            .into_iter()
            .filter(|l| l["event"] == "request.start")
            .count();
        if starts >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(starts, 3, "one refused round, then two rounds");
}

fn stateless_opts() -> ConnectOptions {
    ConnectOptions {
        era: EraChoice::Stateless,
        capabilities: json!({"elicitation": {}}),
        ..ConnectOptions::default()
    }
}

#[tokio::test]
async fn the_library_answers_rounds_and_encodes_non_ascii_names() {
    let server = client_support::staunch(&["--profile", "conformance"]).await;
    let client = Client::connect_http(&server.url(), &stateless_opts())
        .await
        .unwrap();
    assert_eq!(client.era(), Era::Stateless);
    assert_eq!(client.session_id(), None);
    let opts = CallOptions::default().timeout(Duration::from_secs(10));
    let mut rounds = 0;
    let r = client
        .call_tool_with_input(
            "test_input_required_result_multi_round",
            json!({}),
            &opts,
            |_| {},
            |reqs| {
                rounds += 1;
                async move {
                    let mut out = serde_json::Map::new();
                    for k in reqs.keys() {
                        let content = if k == "step1" {
                            json!({"name": "Ada"})
                        } else {
                            json!({"color": "green"})
                        };
                        out.insert(k.clone(), json!({"action": "accept", "content": content}));
                    }
                    Ok(out)
                }
            },
        )
        .await
        .unwrap();
    assert_eq!(rounds, 2);
    let text = staunch_client::result::text_of(&r);
    assert!(text.contains("Ada") && text.contains("green"), "{text}");

    // A non-ASCII tool name travels as =?base64?…?= in Mcp-Name: the server decodes it, finds
    // it equal to the body, and only then says the tool is unknown (-32602, not -32020).
    let err = client
        .call_tool("héllo", json!({}), &opts, |_| {})
        .await
        .unwrap_err();
    match err {
        ClientError::Rpc(e) => assert_eq!(e.code, -32602, "{e:?}"),
        other => panic!("{other:?}"),
    }
    // tools/list works and its result is complete.
    assert!(!client.list_tools(&opts).await.unwrap().is_empty());
    client.close().await;
}

#[tokio::test]
async fn discover_falls_back_to_initialize_against_2025_only_servers() {
    let Some(peers) = Peers::find("discover_falls_back_to_initialize_against_2025_only_servers")
    else {
        return;
    };
    for (name, server) in [
        ("ts", peers.ts_http().await),
        ("python", peers.py_http().await),
    ] {
        let url = server.url();
        let o = call(&["-v", &url, "slow_count", "steps=2", "delay_ms=10"]).await;
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("session era, initialize); fell back to initialize"),
            "{name}: {}",
            stderr(&o)
        );
        // Forcing 2026 against them is an error that says so.
        let o = call(&["--protocol", "2026-07-28", &url, "echo", "text=x"]).await;
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("does not speak 2026-07-28"),
            "{name}: {}",
            stderr(&o)
        );
    }
    // Over stdio too (TS answers -32601, Python -32602 to the unknown method).
    for argv in [peers.ts_stdio(), peers.py_stdio()] {
        let mut args = vec!["-v", "echo", "text=hi", "--"];
        args.extend(argv.iter().map(String::as_str));
        let o = call(&args).await;
        assert_eq!(o.status.code(), Some(0), "{argv:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), "hi");
        assert!(
            stderr(&o).contains("fell back to initialize"),
            "{}",
            stderr(&o)
        );
    }
}
