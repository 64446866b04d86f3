//! https:// for every client side of staunch, over real TLS on loopback: a terminator with
//! the fixture certificate (tests/fixtures/tls) fronts `staunch serve --http`, and the client
//! trusts the test CA through `SSL_CERT_FILE`, as a user would point it at a private CA.
//! Each side must also refuse a certificate it cannot verify, before any request reaches
//! the server.

use crate::common;

use std::time::Duration;

use common::BIN;
use common::http::{HttpServer, call};
use common::tls::{Cert, TlsFront, test_ca, tls_front};
use serde_json::json;

/// `staunch serve --http` and a TLS terminator in front of it; `https://localhost:PORT/mcp`.
async fn https_server(cert: Cert) -> (HttpServer, TlsFront, String) {
    let server = HttpServer::start(&[]).await;
    let front = tls_front(([127, 0, 0, 1], server.port).into(), cert).await;
    let url = format!("https://localhost:{}/mcp", front.addr.port());
    (server, front, url)
}

async fn staunch_call(args: &[&str]) -> std::process::Output {
    let ca = test_ca();
    tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(BIN)
            .arg("call")
            .args(args)
            .env("SSL_CERT_FILE", &ca)
            .output(),
    )
    .await
    .expect("staunch finishes")
    .expect("run staunch")
}

#[tokio::test]
async fn staunch_call_reaches_an_https_server_that_ssl_cert_file_trusts() {
    let (_server, _front, url) = https_server(Cert::Trusted).await;
    let o = staunch_call(&[&url, "echo", "text=over-tls"]).await;
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("over-tls"), "{out}");
}

#[tokio::test]
async fn staunch_call_refuses_a_certificate_it_cannot_verify() {
    let (server, _front, url) = https_server(Cert::Untrusted).await;
    let o = staunch_call(&[&url, "echo", "text=never"]).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "an unverifiable server was trusted");
    assert!(
        err.contains("certificate"),
        "the refusal names the cause: {err}"
    );
    // The handshake failed before any HTTP reached the server.
    assert!(
        server.log_lines().is_empty(),
        "nothing reached the server behind the untrusted certificate"
    );
}

#[tokio::test]
async fn proxy_serves_the_tools_of_an_https_upstream() {
    let (upstream, _front, url) = https_server(Cert::Trusted).await;
    let ca = test_ca();
    let ca = ca.to_str().unwrap();
    let proxy = HttpServer::launch_with_env(
        "proxy",
        Some(":memory:"),
        &["--upstream", &url],
        &[("SSL_CERT_FILE", ca)],
    )
    .await;
    let sid = proxy.initialize().await;
    let (_, answer) = proxy
        .post(
            Some(&sid),
            &call(json!(7), "echo", json!({"text": "through-tls"}), None),
        )
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(
        answer["result"].to_string().contains("through-tls"),
        "{answer}"
    );
    drop(upstream);
}

#[tokio::test]
async fn proxy_refuses_an_upstream_whose_certificate_it_cannot_verify() {
    let (_upstream, _front, url) = https_server(Cert::Untrusted).await;
    let ca = test_ca();
    let o = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(BIN)
            .args([
                "proxy",
                "--store",
                ":memory:",
                "--no-log",
                "--upstream",
                &url,
            ])
            .env("SSL_CERT_FILE", &ca)
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("the proxy gives up at start")
    .expect("run staunch proxy");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("certificate"),
        "the refusal names the cause: {err}"
    );
}
