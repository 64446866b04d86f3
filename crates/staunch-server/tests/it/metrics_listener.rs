//! The metrics listener is as hard as the MCP endpoint (security review, second pass, finding
//! 7): over real loopback HTTP, a foreign or doubled `Host` is refused as the endpoint refuses
//! it (DNS rebinding could otherwise read the metrics), a connection that never finishes its
//! request head is closed after the header-read timeout, and connections past the cap are
//! answered 503 instead of held.

use std::time::Duration;

use staunch_server::Metrics;
use staunch_server::transport::http::Allow;
use staunch_server::transport::http::{ListenerConfig, serve_metrics};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Long enough for any loaded machine to answer a plain request; the timeout under test is
/// far shorter than this.
const T: Duration = Duration::from_secs(20);

async fn start(max_connections: usize, header_read_timeout: Duration) -> (u16, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    let cfg = ListenerConfig {
        allow: Allow::loopback(),
        max_connections,
        header_read_timeout,
    };
    tokio::spawn(serve_metrics(
        listener,
        Metrics::enabled(),
        cfg,
        shutdown.clone(),
    ));
    (port, shutdown)
}

/// Sends `raw` on a new connection and reads the answer until the server closes it.
async fn exchange(port: u16, raw: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(T, s.read_to_string(&mut answer))
        .await
        .expect("the listener answered and closed")
        .unwrap();
    answer
}

fn get(hosts: &[&str]) -> String {
    let mut raw = String::from("GET /metrics HTTP/1.1\r\n");
    for h in hosts {
        raw.push_str(&format!("Host: {h}\r\n"));
    }
    raw.push_str("Connection: close\r\n\r\n");
    raw
}

fn status(answer: &str) -> &str {
    answer.lines().next().unwrap_or_default()
}

#[tokio::test]
async fn metrics_listener_refuses_foreign_host_and_slow_heads() {
    let (port, shutdown) = start(64, Duration::from_millis(300)).await;

    let ok = exchange(port, &get(&["127.0.0.1"])).await;
    assert!(status(&ok).contains(" 200 "), "{ok}");
    assert!(ok.contains("# EOF"), "{ok}");

    // A page on a rebound name sends its own name as Host: refused, with the endpoint's body.
    let foreign = exchange(port, &get(&["evil.example:9000"])).await;
    assert!(status(&foreign).contains(" 403 "), "{foreign}");
    assert!(foreign.contains("Host not allowed"), "{foreign}");
    assert!(foreign.contains("\"jsonrpc\":\"2.0\""), "{foreign}");
    assert!(!foreign.contains("staunch_"), "no metric leaks: {foreign}");

    // A second Host smuggles a name past a check that reads only the first.
    let doubled = exchange(port, &get(&["127.0.0.1", "evil.example"])).await;
    assert!(status(&doubled).contains(" 400 "), "{doubled}");
    assert!(doubled.contains("more than one host header"), "{doubled}");

    // A cross-site Origin from a browser is refused too.
    let origin = exchange(
        port,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\n\
         Connection: close\r\n\r\n",
    )
    .await;
    assert!(status(&origin).contains(" 403 "), "{origin}");

    // Slow heads: three connections that send half a head and stop are closed by the server
    // once the header-read timeout passes (before the fix they stayed open indefinitely).
    let mut slow = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(s);
    }
    for mut s in slow {
        let mut sink = Vec::new();
        let read = tokio::time::timeout(T, s.read_to_end(&mut sink)).await;
        assert!(read.is_ok(), "a slow head was still held open after {T:?}");
    }
    shutdown.cancel();
}

#[tokio::test]
async fn metrics_listener_answers_connections_past_its_cap_with_503() {
    let (port, shutdown) = start(2, Duration::from_secs(30)).await;
    // Two idle connections hold the two slots (their heads are not finished)...
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    // ...give the listener time to accept them (it takes a slot on accept, not on connect).
    let deadline = tokio::time::Instant::now() + T;
    let refused = loop {
        let answer = exchange(port, &get(&["127.0.0.1"])).await;
        if status(&answer).contains(" 503 ") {
            break answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a third connection was never refused: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(refused.contains("connections are open"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 1"),
        "{refused}"
    );
    // A slot freed is a slot served again.
    drop(held);
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let answer = exchange(port, &get(&["127.0.0.1"])).await;
        if status(&answer).contains(" 200 ") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{answer}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
}
