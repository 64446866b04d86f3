//! Authentication flags of `staunch serve --http` (issue 12), on the real binary over loopback:
//! `--auth bearer` and `--auth oauth` with their files, variables and `--tool-scope` reach the
//! transport, bad ones stop the start, a JWKS comes over https with the system's (here a test
//! CA's) roots, and the TypeScript SDK's own OAuth client gets through end to end. What the
//! transport does with tokens and keys is tested in-process, in
//! `crates/staunch-server/tests/it/http_auth.rs`.

use crate::common;

use std::time::Duration;

use common::http::{HttpServer, stateless};
use serde_json::{Value, json};
use staunch_testkit::auth::{
    ISSUER, JwksServer, Key, claims, initialize, post, post_stateless, req, rpc, www_authenticate,
};

const T: Duration = Duration::from_secs(15);
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";
const WRITER: &str = "writer-token-0123456789";
const SET: &str = "set_value=kv:write";

// ---------------------------------------------------------------------------------------------
// Servers under test and requests

/// Fast job loops.
const JOB_FLAGS: &[&str] = &[
    "--job-claim-poll-ms",
    "50",
    "--job-poll-after-ms",
    "100",
    "--job-reap-ms",
    "100",
];

async fn bearer_server(extra: &[&str]) -> HttpServer {
    let tokens = format!("# test tokens\n{ALICE} alice\n{BOB} bob\n{WRITER} writer kv:write\n");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    std::fs::write(&file, tokens).unwrap();
    let file = file.display().to_string();
    let mut args = vec!["--auth", "bearer", "--auth-tokens", file.as_str()];
    args.extend_from_slice(JOB_FLAGS);
    args.extend_from_slice(extra);
    let s = HttpServer::start(&args).await;
    // The server has read the file; the directory may go.
    drop(dir);
    s
}

/// An OAuth server whose audience is its own URL, with the JWKS at `url`, `extra` flags and
/// environment variables for the server.
async fn oauth_server_with(
    url: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (HttpServer, String) {
    // The audience must be known before the port is: bind a port first, then hand it over.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let addr = format!("127.0.0.1:{port}");
    let audience = format!("http://{addr}/mcp");
    let mut args = vec![
        "--http",
        addr.as_str(),
        "--auth",
        "oauth",
        "--issuer",
        ISSUER,
        "--audience",
        audience.as_str(),
        "--jwks-url",
        url,
    ];
    args.extend_from_slice(JOB_FLAGS);
    args.extend_from_slice(extra);
    (start_at(&args, env).await, audience)
}

/// `staunch serve` with the given flags (which name `--http` themselves) and environment.
async fn start_at(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("lifecycle.jsonl");
    let mut child = tokio::process::Command::new(common::BIN)
        .arg("serve")
        .arg("--log-file")
        .arg(&log_path)
        .arg("--store")
        .arg(dir.path().join("staunch.db"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn staunch");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let port = tokio::time::timeout(T, async {
        while let Ok(Some(l)) = lines.next_line().await {
            if let Some(rest) = l.split("http://127.0.0.1:").nth(1) {
                return rest.split('/').next().unwrap().parse::<u16>().unwrap();
            }
        }
        panic!("server exited before listening");
    })
    .await
    .expect("server listens");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    HttpServer::of(child, dir, port, log_path)
}

// ---------------------------------------------------------------------------------------------
// The flags' wiring

#[tokio::test]
async fn the_bearer_flags_reach_the_transport() {
    let s = bearer_server(&["--tool-scope", SET]).await;
    let list = req(1, "tools/list", json!({}));
    assert_eq!(post(&s, None, None, &list).await.status, 401);
    let sid = initialize(&s, ALICE).await;
    let listed = rpc(&s, ALICE, &sid, req(2, "tools/list", json!({}))).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    // --tool-scope: alice lacks kv:write, writer has it (its line in the tokens file).
    let set = stateless(
        json!(3),
        "tools/call",
        json!({"name": "set_value", "arguments": {"key": "k", "value": "v"}}),
    );
    let refused = post_stateless(&s, Some(ALICE), &set).await;
    assert_eq!(refused.status, 403);
    assert!(www_authenticate(&refused).contains("kv:write"));
    assert_eq!(post_stateless(&s, Some(WRITER), &set).await.status, 200);
    // Bob is another principal: alice's session is not his.
    let r = post(&s, Some(BOB), Some(&sid), &req(4, "tools/list", json!({}))).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn the_jwks_is_fetched_over_https_and_an_unverifiable_certificate_is_refused() {
    use common::tls::{Cert, test_ca, tls_front};
    let k1 = Key::ec("ec-key-1.pem", "k1");
    let ca = test_ca();
    let env = [("SSL_CERT_FILE", ca.to_str().unwrap())];
    let list = stateless(json!(1), "tools/list", json!({}));

    let jwks = JwksServer::start(vec![k1.jwk()]).await;
    let front = tls_front(([127, 0, 0, 1], jwks.port).into(), Cert::Trusted).await;
    let url = format!("https://localhost:{}/jwks.json", front.addr.port());
    let (s, aud) = oauth_server_with(&url, &[], &env).await;
    let r = post_stateless(&s, Some(&k1.sign(&claims("alice", &aud, ""))), &list).await;
    assert_eq!(r.status, 200);
    assert_eq!(jwks.hits(), 1, "the keys came over TLS");

    let hidden = JwksServer::start(vec![k1.jwk()]).await;
    let bad_front = tls_front(([127, 0, 0, 1], hidden.port).into(), Cert::Untrusted).await;
    let url = format!("https://localhost:{}/jwks.json", bad_front.addr.port());
    let (s, aud) = oauth_server_with(&url, &[], &env).await;
    let r = post_stateless(&s, Some(&k1.sign(&claims("alice", &aud, ""))), &list).await;
    assert_eq!(r.status, 503, "no keys, no access");
    assert_eq!(hidden.hits(), 0, "the handshake failed before any request");
}

#[tokio::test]
async fn auth_flags_are_checked_at_start() {
    let out = std::process::Command::new(common::BIN)
        .args(["serve", "--auth", "bearer", "--store", ":memory:"])
        .env_remove("STAUNCH_AUTH_TOKENS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--http"), "{err}");
    let out = std::process::Command::new(common::BIN)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--auth",
            "oauth",
            "--store",
            ":memory:",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--issuer") && err.contains("--audience"),
        "{err}"
    );
    let out = std::process::Command::new(common::BIN)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--auth",
            "bearer",
            "--store",
            ":memory:",
        ])
        .env("STAUNCH_AUTH_TOKENS", "short alice")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("shorter than 16") && !err.contains("short alice"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// A real OAuth client, end to end

/// The TypeScript SDK's own OAuth client (client credentials) against `staunch serve --auth
/// oauth` and a small authorization server (tests-external/oauth_as.mjs): from the first 401 the
/// SDK finds the RFC 9728 metadata, the authorization server's RFC 8414 metadata, gets a token
/// for this resource (RFC 8707) and ends in tool calls; without the tool's scope it meets 403
/// insufficient_scope. Then the v2 SDK client does the same in the 2026-07-28 era. staunch finds
/// the JWKS from the issuer's metadata (no --jwks-url).
#[tokio::test]
async fn typescript_sdk_oauth_client_discovers_the_authorization_server_and_calls_a_tool() {
    use tokio::io::AsyncBufReadExt;
    let Some(node) = common::external::node() else {
        return;
    };
    let root = common::external::root();
    let mut as_proc = tokio::process::Command::new(&node)
        .arg(root.join("tests-external/oauth_as.mjs"))
        .args(["staunch-test-client", "s3cret-s3cret"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the authorization server");
    let mut as_lines = tokio::io::BufReader::new(as_proc.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(T, as_lines.next_line())
        .await
        .expect("authorization server starts")
        .unwrap()
        .expect("a first line");
    let as_port = serde_json::from_str::<Value>(&first).unwrap()["listening"]
        .as_u64()
        .expect("its port");
    let issuer = format!("http://127.0.0.1:{as_port}");
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let addr = format!("127.0.0.1:{port}");
    let audience = format!("http://{addr}/mcp");
    let s = start_at(
        &[
            "--http",
            &addr,
            "--auth",
            "oauth",
            "--issuer",
            &issuer,
            "--audience",
            &audience,
            "--tool-scope",
            SET,
        ],
        &[],
    )
    .await;
    let run = |scope: Option<&'static str>| {
        let (node, url) = (node.clone(), audience.clone());
        let client = root.join("tests-external/ts_oauth_client.mjs");
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(node)
                .arg(client)
                .args([url.as_str(), "staunch-test-client", "s3cret-s3cret"])
                .args(scope)
                .output()
                .expect("run the TS OAuth client")
        })
    };
    // Configured without the scope: authenticated, but set_value is refused with 403
    // insufficient_scope (the SDK's own step-up retry cannot get more than it asks for).
    let out = run(None).await.unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("403"), "{err}");
    let refused: Value = serde_json::from_str(
        &tokio::time::timeout(T, as_lines.next_line())
            .await
            .expect("a token was issued")
            .unwrap()
            .expect("a token line"),
    )
    .unwrap();
    assert_eq!(refused["token"]["scope"], "", "{refused}");
    // Drain the step-up retry's token line(s) before the next run.
    while let Ok(Ok(Some(_))) =
        tokio::time::timeout(Duration::from_millis(300), as_lines.next_line()).await
    {}
    let out = run(Some("kv:write")).await.unwrap();
    assert!(
        out.status.success(),
        "ts_oauth_client failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "set_value"),
        "{v}"
    );
    assert_eq!(v["set"]["isError"], false, "{v}");
    assert_eq!(v["get"]["isError"], false, "{v}");
    assert!(v["get"].to_string().contains("ok"), "{v}");
    assert_eq!(v["token_type"], "Bearer", "{v}");
    // What the SDK asked the authorization server for: this resource (RFC 8707), the scope.
    let token_line = tokio::time::timeout(T, as_lines.next_line())
        .await
        .expect("a token was issued")
        .unwrap()
        .expect("a token line");
    let issued: Value = serde_json::from_str(&token_line).unwrap();
    assert_eq!(issued["token"]["resource"], audience.as_str(), "{issued}");
    assert_eq!(issued["token"]["scope"], "kv:write", "{issued}");
    assert_eq!(issued["token"]["client"], "staunch-test-client");

    // The v2 SDK client speaks 2026-07-28: every stateless request carries the token.
    if common::external::node_with_ts2().is_some() {
        let (node, url) = (node.clone(), audience.clone());
        let client = root.join("tests-external/v2/ts2_oauth_client.mjs");
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(node)
                .arg(client)
                .args([
                    url.as_str(),
                    "staunch-test-client",
                    "s3cret-s3cret",
                    "kv:write",
                ])
                .output()
                .expect("run the TS v2 OAuth client")
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "ts2_oauth_client failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert_eq!(v["protocolVersion"], "2026-07-28", "{v}");
        assert_eq!(v["set"]["isError"], false, "{v}");
        assert_eq!(v["get"]["text"], "ok", "{v}");
        let line = tokio::time::timeout(T, as_lines.next_line())
            .await
            .expect("a token was issued")
            .unwrap()
            .expect("a token line");
        let issued: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(issued["token"]["resource"], audience.as_str(), "{issued}");
    }
    drop(s);
}
