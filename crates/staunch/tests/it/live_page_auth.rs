//! The live page behind `--auth` (`staunch serve --http … --auth bearer --live-page /staunch`):
//! every page route — the HTML, its stream, the cancel — needs a token with the operator
//! scope (401 without a token, 403 without the scope), in headless Chromium too (the page asks
//! for the token and reads its stream with fetch); and the cap on open streams answers 503.

use crate::common;

use std::time::Duration;

use common::http::{HttpServer, call};
use common::page::{browser, raw};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(20);

const OPERATOR: &str = "operator-token-0123456789";
const VIEWER: &str = "viewer-token-0123456789ab";

/// `staunch serve --auth bearer --live-page /staunch`: OPERATOR has `staunch:operate`, VIEWER
/// has no scope.
async fn authed_server(extra: &[&str]) -> HttpServer {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    std::fs::write(
        &file,
        format!("{OPERATOR} op staunch:operate\n{VIEWER} viewer\n"),
    )
    .unwrap();
    let file = file.display().to_string();
    let mut args = vec![
        "--auth",
        "bearer",
        "--auth-tokens",
        file.as_str(),
        "--live-page",
        "/staunch",
        "--job-heartbeat-ms",
        "100",
    ];
    args.extend_from_slice(extra);
    HttpServer::start(&args).await
}

/// A session-era request with a token; the JSON-RPC answer.
async fn authed_rpc(s: &HttpServer, sid: Option<&str>, msg: Value) -> (Option<String>, Value) {
    let bearer = format!("Bearer {OPERATOR}");
    let mut h = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", bearer.as_str()),
    ];
    if let Some(sid) = sid {
        h.push(("mcp-session-id", sid));
        h.push(("mcp-protocol-version", "2025-11-25"));
    }
    let r = s.send("POST", &h, &msg.to_string()).await;
    let sid = r.header("mcp-session-id");
    if msg.get("id").is_none() {
        return (sid, Value::Null);
    }
    let (_, v) = r.answer(T).await;
    (sid, v)
}

async fn authed_tool(s: &HttpServer, sid: &str, name: &str, args: Value) -> Value {
    let msg = call(json!(1), name, args, None);
    authed_rpc(s, Some(sid), msg).await.1["result"]["structuredContent"].clone()
}

#[tokio::test]
async fn with_auth_every_page_route_needs_a_token_with_the_operator_scope() {
    let s = authed_server(&[]).await;
    let (sid, _) = authed_rpc(
        &s,
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
    )
    .await;
    let sid = sid.expect("a session");
    authed_rpc(
        &s,
        Some(&sid),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let job = authed_tool(
        &s,
        &sid,
        "start_import_rows",
        json!({"rows": 400, "delay_ms": 25}),
    )
    .await["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let host = format!("127.0.0.1:{}", s.port);
    let origin = format!("http://{host}");
    let operator = format!("Bearer {OPERATOR}");
    let viewer = format!("Bearer {VIEWER}");
    let cancel_path = format!("/staunch/jobs/{job}/cancel");

    // No token: 401 with the endpoint's challenge. The page answers with its shell, which
    // asks for a token and shows no data.
    let (code, head, page) = raw(s.port, "GET", "/staunch", &[("Host", &host)]).await;
    assert_eq!(code, 401, "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(
        lower.contains("www-authenticate: bearer resource_metadata="),
        "{head}"
    );
    assert!(page.contains("id=\"login\"") && page.contains("data-auth=\"bearer\""));
    assert!(!page.contains(&job), "the shell leaks data: {page}");
    // A token without the scope: 403 insufficient_scope, on every route.
    let (code, head, _) = raw(
        s.port,
        "GET",
        "/staunch",
        &[("Host", &host), ("Authorization", &viewer)],
    )
    .await;
    assert_eq!(code, 403, "{head}");
    assert!(head.contains("insufficient_scope") && head.contains("staunch:operate"));
    for (auth, want) in [(None, 401), (Some(viewer.as_str()), 403)] {
        let mut h = vec![("Host", host.as_str())];
        h.extend(auth.map(|a| ("Authorization", a)));
        let (code, _, body) = raw(s.port, "GET", "/staunch/events", &h).await;
        assert_eq!(code, want, "events with {auth:?}: {body}");
        assert!(!body.contains(&job));
        h.push(("Origin", origin.as_str()));
        let (code, _, body) = raw(s.port, "POST", &cancel_path, &h).await;
        assert_eq!(code, want, "cancel with {auth:?}: {body}");
    }
    assert_eq!(
        authed_tool(&s, &sid, "get_import_rows", json!({"job_id": job})).await["status"],
        "running"
    );

    // The operator: the page with its data, the stream, and a cancel (which still needs the
    // page's own Origin).
    let op = [
        ("Host", host.as_str()),
        ("Authorization", operator.as_str()),
    ];
    let (code, _, page) = raw(s.port, "GET", "/staunch", &op).await;
    assert_eq!(code, 200);
    assert!(page.contains(&format!("data-job-id=\"{job}\"")), "{page}");
    let (code, _, events) = raw(s.port, "GET", "/staunch/events", &op).await;
    assert_eq!(code, 200);
    assert!(events.contains("data: {") && events.contains(&job));
    let (code, _, body) = raw(s.port, "POST", &cancel_path, &op).await;
    assert_eq!(code, 403, "a cancel without Origin: {body}");
    let mut with_origin = op.to_vec();
    with_origin.push(("Origin", origin.as_str()));
    let (code, _, body) = raw(s.port, "POST", &cancel_path, &with_origin).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("cancelling"), "{body}");
    let end = Instant::now() + T;
    while authed_tool(&s, &sid, "get_import_rows", json!({"job_id": job})).await["status"]
        != "cancelled"
    {
        assert!(Instant::now() < end, "the job was never cancelled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The metadata lists the operator scope.
    let (code, _, meta) = raw(
        s.port,
        "GET",
        "/.well-known/oauth-protected-resource",
        &[("Host", &host)],
    )
    .await;
    assert_eq!(code, 200);
    assert!(meta.contains("staunch:operate"), "{meta}");
}

/// Opens the page's stream and reads until its first snapshot; the connection stays open.
async fn open_stream(port: u16, host: &str) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(format!("GET /staunch/events HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = Instant::now() + T;
    while !String::from_utf8_lossy(&got).contains("data: {") {
        let n = tokio::time::timeout_at(end, s.read(&mut buf))
            .await
            .expect("a snapshot in time")
            .unwrap();
        assert!(n > 0, "stream closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    s
}

#[tokio::test]
async fn streams_beyond_the_cap_get_503_until_one_closes() {
    let s = HttpServer::start(&["--live-page", "/staunch", "--live-page-max-streams", "2"]).await;
    let host = format!("127.0.0.1:{}", s.port);
    let first = open_stream(s.port, &host).await;
    let _second = open_stream(s.port, &host).await;
    let (code, head, body) = raw(s.port, "GET", "/staunch/events", &[("Host", &host)]).await;
    assert_eq!(code, 503, "{head}");
    assert!(body.contains("--live-page-max-streams"), "{body}");
    assert!(head.to_ascii_lowercase().contains("retry-after"), "{head}");
    // The page itself is not a stream: still served.
    assert_eq!(
        raw(s.port, "GET", "/staunch", &[("Host", &host)]).await.0,
        200
    );
    // A closed stream frees its slot (noticed at its next update).
    drop(first);
    let end = Instant::now() + T;
    loop {
        let (code, _, _) = raw(s.port, "GET", "/staunch/events", &[("Host", &host)]).await;
        if code == 200 {
            break;
        }
        assert_eq!(code, 503);
        assert!(Instant::now() < end, "the slot was never freed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn in_chromium_an_operator_signs_in_with_a_token_and_cancels_a_job() {
    let Some((node, script, chromium)) = browser() else {
        return;
    };
    let s = authed_server(&[]).await;
    let (sid, _) = authed_rpc(
        &s,
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
    )
    .await;
    let sid = sid.expect("a session");
    authed_rpc(
        &s,
        Some(&sid),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let job = authed_tool(
        &s,
        &sid,
        "start_import_rows",
        json!({"rows": 300, "delay_ms": 60}),
    )
    .await["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let artifacts = common::external::root().join("target/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("live-page-auth.png");
    let _ = std::fs::remove_file(&shot);
    let url = format!("http://127.0.0.1:{}/staunch", s.port);
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(&node)
            .arg(&script)
            .args([url.as_str(), job.as_str()])
            .arg(&shot)
            .arg(OPERATOR)
            .env("CHROMIUM", &chromium)
            .output(),
    )
    .await
    .expect("the browser run finishes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "browser run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    // Opened without a token: 401 and the sign-in form, no data.
    assert_eq!(seen["opened"], 401, "{seen}");
    assert_eq!(seen["jobsBeforeSignIn"], 0, "{seen}");
    // Signed in: the token is kept in the tab, the stream moves the bar, Cancel works.
    assert_eq!(seen["stored"], 1, "{seen}");
    assert!(seen["second"].as_f64() > seen["first"].as_f64(), "{seen}");
    assert_eq!(seen["state"], "cancelled", "{seen}");
    assert!(
        seen["status"]
            .as_str()
            .unwrap()
            .contains("Cancel requested"),
        "{seen}"
    );
    let end = Instant::now() + T;
    while authed_tool(&s, &sid, "get_import_rows", json!({"job_id": job})).await["status"]
        != "cancelled"
    {
        assert!(Instant::now() < end, "the job was never cancelled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
