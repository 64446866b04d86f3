//! `staunch tools`: any server's tools, over stdio and over HTTP in both protocol eras, and
//! from a server written with the official Python SDK.

use crate::client_support::{BIN, Peers};

use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

async fn tools(args: &[&str]) -> Output {
    tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(BIN).arg("tools").args(args).output(),
    )
    .await
    .expect("staunch tools finishes")
    .expect("run staunch tools")
}

fn names(o: &Output) -> Vec<String> {
    let list: Value = serde_json::from_slice(&o.stdout).expect("--json prints JSON");
    list.as_array()
        .expect("an array")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn lists_a_stdio_servers_tools_with_hints_and_a_count() {
    let o = tools(&["--", BIN, "serve", "--no-log", "--store", ":memory:"]).await;
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let echo = out
        .lines()
        .find(|l| l.starts_with("echo "))
        .unwrap_or_else(|| panic!("an echo line in {out}"));
    assert!(echo.contains("read-only"), "{echo}");
    assert!(echo.contains("Returns the given text unchanged."), "{echo}");
    let rows = out.lines().count() - 1;
    assert_eq!(out.lines().last(), Some(format!("{rows} tools").as_str()));
}

#[tokio::test]
async fn both_eras_over_http_list_the_same_tools() {
    let server = crate::client_support::staunch(&[]).await;
    let url = server.url();
    let stateless = tools(&["--json", "-v", "--protocol", "2026-07-28", &url]).await;
    assert_eq!(stateless.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&stateless.stderr).contains("2026-07-28"),
        "the connection line names the era: {}",
        String::from_utf8_lossy(&stateless.stderr)
    );
    let session = tools(&["--json", "--protocol", "2025-11-25", &url]).await;
    assert_eq!(session.status.code(), Some(0));
    let (a, b) = (names(&stateless), names(&session));
    assert!(a.contains(&"slow_count".to_string()), "{a:?}");
    assert_eq!(a, b);
}

#[tokio::test]
async fn lists_the_tools_of_a_python_sdk_server() {
    let Some(peers) = Peers::find("lists_the_tools_of_a_python_sdk_server") else {
        return;
    };
    let mut args = vec!["--json", "--"];
    let argv = peers.py_stdio();
    args.extend(argv.iter().map(String::as_str));
    let o = tools(&args).await;
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let found = names(&o);
    for want in ["echo", "slow_count", "slow_count_status", "progress_flood"] {
        assert!(found.iter().any(|n| n == want), "{want} in {found:?}");
    }
}

#[tokio::test]
async fn without_a_server_or_with_an_unreachable_one_it_is_a_usage_error() {
    let o = tools(&[]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("give a server URL first"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let port = crate::client_support::free_port().await;
    let o = tools(&[&format!("http://127.0.0.1:{port}/mcp")]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot connect"));
}
