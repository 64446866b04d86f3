//! `staunch serve --http … --live-page /staunch`: the page's access rules over plain HTTP, and
//! the whole page end to end in Debian's headless Chromium (driven by playwright-core from
//! `scripts/setup-tools`): a job's progress bar moves, its Cancel button stops it, the row ends
//! `cancelled`, and a screenshot is saved to `target/artifacts/live-page.png`. With `--auth`:
//! every page route needs a token with the operator scope (401 without, 403 without the scope),
//! in Chromium too (the page asks for the token); and the cap on open streams answers 503.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::http::{HttpServer, call};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(20);

/// One raw HTTP/1.1 exchange on the server's port: (status code, headers, body).
async fn raw(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    // An SSE response never ends: read what arrives within a moment.
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head.to_string(), body.to_string())
}

async fn tool(s: &HttpServer, sid: &str, name: &str, args: Value) -> Value {
    let id = json!(format!("{name}-{}", Instant::now().elapsed().as_nanos()));
    let mut r = s.post(Some(sid), &call(id.clone(), name, args, None)).await;
    let resp = r
        .events_until_end(T)
        .await
        .iter()
        .map(|e| e.json())
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {name}"));
    resp["result"]["structuredContent"].clone()
}

async fn wait_status(s: &HttpServer, sid: &str, job: &str, want: &str) {
    let end = Instant::now() + T;
    loop {
        let v = tool(s, sid, "get_import_rows", json!({"job_id": job})).await;
        if v["status"] == want {
            return;
        }
        assert!(Instant::now() < end, "job never reached {want}: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn token_of(page: &str) -> String {
    let at = page
        .find("data-token=\"")
        .expect("the page carries its token")
        + 12;
    page[at..].split('"').next().unwrap().to_string()
}

#[tokio::test]
async fn the_page_refuses_foreign_hosts_origins_and_tokenless_cancels() {
    let s = HttpServer::start(&["--live-page", "/staunch", "--job-heartbeat-ms", "100"]).await;
    let sid = s.initialize().await;
    let job = tool(
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
    let cancel_path = format!("/staunch/jobs/{job}/cancel");

    // The page, with the running job in it.
    let (code, head, page) = raw(s.port, "GET", "/staunch", &[("Host", &host)]).await;
    assert_eq!(code, 200, "{head}");
    assert!(
        head.to_ascii_lowercase().contains("x-frame-options: deny"),
        "{head}"
    );
    assert!(page.contains(&format!("data-job-id=\"{job}\"")), "{page}");
    let token = token_of(&page);
    assert_eq!(token.len(), 32);

    // DNS rebinding: another Host is refused, for the page and its events.
    assert_eq!(
        raw(s.port, "GET", "/staunch", &[("Host", "evil.example")])
            .await
            .0,
        403
    );
    assert_eq!(
        raw(
            s.port,
            "GET",
            "/staunch/events",
            &[("Host", "evil.example")]
        )
        .await
        .0,
        403
    );
    // The event stream sends snapshots.
    let (code, _, events) = raw(s.port, "GET", "/staunch/events", &[("Host", &host)]).await;
    assert_eq!(code, 200);
    assert!(
        events.contains("data: {") && events.contains(&job),
        "{events}"
    );

    // Cancels: no Origin, a foreign Origin, no token, a made-up token — all refused, and the
    // job runs on.
    for headers in [
        vec![
            ("Host", host.as_str()),
            ("x-staunch-page-token", token.as_str()),
        ],
        vec![
            ("Host", host.as_str()),
            ("Origin", "http://evil.example"),
            ("x-staunch-page-token", token.as_str()),
        ],
        vec![("Host", host.as_str()), ("Origin", origin.as_str())],
        vec![
            ("Host", host.as_str()),
            ("Origin", origin.as_str()),
            ("x-staunch-page-token", "0123456789abcdef0123456789abcdef"),
        ],
    ] {
        let (code, _, body) = raw(s.port, "POST", &cancel_path, &headers).await;
        assert_eq!(code, 403, "{headers:?}: {body}");
    }
    assert_eq!(
        tool(&s, &sid, "get_import_rows", json!({"job_id": job})).await["status"],
        "running"
    );
    // A GET cannot cancel.
    assert_eq!(
        raw(s.port, "GET", &cancel_path, &[("Host", &host)]).await.0,
        405
    );

    // Same origin with the page's token: cancelled through the store, the worker stops.
    let good = [
        ("Host", host.as_str()),
        ("Origin", origin.as_str()),
        ("x-staunch-page-token", token.as_str()),
    ];
    let (code, _, body) = raw(s.port, "POST", &cancel_path, &good).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("cancelling"), "{body}");
    wait_status(&s, &sid, &job, "cancelled").await;
    let (code, _, body) = raw(s.port, "POST", "/staunch/jobs/nope/cancel", &good).await;
    assert_eq!(code, 404, "{body}");
    // The MCP endpoint still answers beside the page's routes (a GET without
    // `Accept: text/event-stream` is its own 406, not a 404).
    assert_eq!(raw(s.port, "GET", "/mcp", &[("Host", &host)]).await.0, 406);
}

#[tokio::test]
async fn the_page_is_refused_on_a_public_address() {
    let out = tokio::process::Command::new(common::BIN)
        .args([
            "serve",
            "--http",
            "0.0.0.0:0",
            "--store",
            ":memory:",
            "--no-log",
            "--live-page",
            "/staunch",
        ])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("loopback"), "{err}");
}

/// Node, playwright-core and Chromium, or `None` after saying why the browser test is skipped.
fn browser() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let node = common::external::node()?;
    let driver = common::external::tool(
        "tests-external/browser/node_modules/playwright-core/package.json",
        "playwright-core",
    )?;
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let chromium = PathBuf::from(chromium);
    if !chromium.exists() {
        if std::env::var("STAUNCH_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
            panic!(
                "Chromium is missing at {} (apt-get install chromium)",
                chromium.display()
            );
        }
        eprintln!(
            "SKIPPED: Chromium not installed at {} (apt-get install chromium)",
            chromium.display()
        );
        return None;
    }
    let _ = driver;
    Some((
        node,
        common::external::root().join("tests-external/browser/live_page.mjs"),
        chromium,
    ))
}

#[tokio::test]
async fn in_chromium_the_bar_moves_and_cancel_ends_the_job() {
    let Some((node, script, chromium)) = browser() else {
        return;
    };
    let s = HttpServer::start(&[
        "--live-page",
        "/staunch",
        "--instance-name",
        "demo-a",
        "--job-heartbeat-ms",
        "100",
    ])
    .await;
    let sid = s.initialize().await;
    // Something in flight for the requests table, and a finished job for contrast.
    let mut counting = s
        .post(
            Some(&sid),
            &call(
                json!("count-1"),
                "slow_count",
                json!({"steps": 600, "delay_ms": 100}),
                Some(json!("p")),
            ),
        )
        .await;
    counting.next_event(T).await.expect("priming");
    let quick = tool(
        &s,
        &sid,
        "start_long_scan",
        json!({"steps": 3, "delay_ms": 5}),
    )
    .await["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let end = Instant::now() + T;
    while tool(&s, &sid, "get_long_scan", json!({"job_id": quick})).await["status"] != "succeeded" {
        assert!(Instant::now() < end);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let job = tool(
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
    let shot = artifacts.join("live-page.png");
    let _ = std::fs::remove_file(&shot);
    let url = format!("http://127.0.0.1:{}/staunch", s.port);
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(&node)
            .arg(&script)
            .args([url.as_str(), job.as_str()])
            .arg(&shot)
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
    assert!(seen["second"].as_f64() > seen["first"].as_f64(), "{seen}");
    assert_eq!(seen["state"], "cancelled", "{seen}");
    assert_eq!(seen["live"], "live", "{seen}");
    assert!(
        seen["status"]
            .as_str()
            .unwrap()
            .contains("Cancel requested"),
        "{seen}"
    );
    assert!(seen["requests"].as_u64().unwrap() >= 1, "{seen}");

    // The server agrees: the job was cancelled and stopped writing rows.
    wait_status(&s, &sid, &job, "cancelled").await;
    let rows = tool(&s, &sid, "imported_rows", json!({"job_id": job})).await["rows"]
        .as_i64()
        .unwrap();
    assert!(rows > 0 && rows < 300, "{rows}");
    let png = std::fs::read(&shot).expect("the screenshot was saved");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    drop(counting);
}

#[tokio::test]
async fn the_page_shows_requests_in_flight_and_their_cancel_state() {
    let s = HttpServer::start(&["--live-page", "/staunch", "--cancel-grace-ms", "5000"]).await;
    let sid = s.initialize().await;
    let host = format!("127.0.0.1:{}", s.port);
    // A count that ignores its cancel: after the cancel it runs on until the grace period.
    let mut stubborn = s
        .post(
            Some(&sid),
            &call(
                json!("st-1"),
                "stubborn_count",
                json!({"steps": 400, "delay_ms": 50}),
                None,
            ),
        )
        .await;
    stubborn.next_event(T).await.expect("priming");
    let (_, _, page) = raw(s.port, "GET", "/staunch", &[("Host", &host)]).await;
    let row = page
        .split("<tr")
        .find(|r| r.contains("data-request-id=\"&quot;st-1&quot;\""))
        .unwrap_or_else(|| panic!("the request is not listed: {page}"));
    assert!(
        // The page names the session as the logs do: by its hash (the id is a credential).
        row.contains("stubborn_count")
            && row.contains(&staunch_server::session_hash(&sid))
            && !row.contains(&sid),
        "{row}"
    );
    assert!(!row.contains("cancelled"), "{row}");

    let r = s
        .post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": "st-1", "reason": "operator test"}}),
        )
        .await;
    assert_eq!(r.status, 202);
    let (_, _, page) = raw(s.port, "GET", "/staunch", &[("Host", &host)]).await;
    let row = page
        .split("<tr")
        .find(|r| r.contains("data-request-id=\"&quot;st-1&quot;\""))
        .unwrap_or_else(|| panic!("the cancelled request is not listed: {page}"));
    // Cancelled, with the client's reason, and not (yet) orphaned: it is within its grace.
    assert!(row.starts_with(" class=\"cancelled\""), "{row}");
    assert!(row.contains("operator test"), "{row}");
    assert!(!row.contains("ORPHANED"), "{row}");
    drop(stubborn);
}

// ---------------------------------------------------------------------------------------------
// With --auth: the page asks for the endpoint's tokens and the operator scope.

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
