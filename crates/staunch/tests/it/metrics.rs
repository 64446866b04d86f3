//! `staunch serve --metrics ADDR`: the flag binds the listener, which serves the server's and
//! the job runtime's metrics (what they count is tested in-process, in
//! `crates/staunch-server/tests/it/metrics_scrape.rs`).

use crate::common;

use std::time::Duration;

use common::http::{HttpServer, call};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const T: Duration = Duration::from_secs(20);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET /metrics` naming `host`: the whole response.
async fn get_metrics(port: u16, host: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    raw
}

#[tokio::test]
async fn the_metrics_flag_serves_the_servers_and_the_jobs_metrics() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let s = HttpServer::start(&["--metrics", &addr]).await;
    let sid = s.initialize().await;
    let echo = call(json!(1), "echo", json!({"text": "hi"}), None);
    let (_, answer) = s.post(Some(&sid), &echo).await.answer(T).await;
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    let scraped = get_metrics(port, "127.0.0.1").await;
    assert!(scraped.starts_with("HTTP/1.1 200"), "{scraped}");
    assert!(
        scraped.contains(r#"staunch_requests_total{tool="echo""#),
        "{scraped}"
    );
    assert!(scraped.contains("staunch_jobs{state="), "{scraped}");
    assert!(
        get_metrics(port, "evil.example")
            .await
            .starts_with("HTTP/1.1 403")
    );
}
