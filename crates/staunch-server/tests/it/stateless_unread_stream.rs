//! Issue 14: a 2026-07-28 client that stops reading its response stream. The request's queue
//! used to be unbounded, so a streaming tool's progress piled up in memory for as long as the
//! tool ran. Now the stream may fall `connection_backlog` messages behind; past that the
//! request is cancelled as if the stream had closed (in this era that *is* the cancel), the
//! lifecycle log says so, and the server goes on serving others. Over real loopback HTTP.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Value, json};
use staunch_server::transport::http::{HttpConfig, HttpTransport};
use staunch_server::{CallToolResult, Config, Context, ProgressRate, Server, ToolError, ToolSpec};
use staunch_store::{MemoryEventStore, MemorySessionStore};
use support::CapturedLog;
use tokio::net::TcpSocket;

#[derive(Deserialize, schemars::JsonSchema)]
struct Flood {
    reports: u32,
    bytes: usize,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

/// What the flooding tool saw.
#[derive(Default)]
struct Seen {
    sent: AtomicU32,
    cancelled: AtomicBool,
}

fn server(log: CapturedLog, seen: Arc<Seen>) -> Server {
    let config = Config {
        // Every report goes out: the stream must outrun its reader.
        progress_rate: ProgressRate {
            burst: 100_000,
            per_second: 1_000_000.0,
        },
        ..Config::default()
    };
    Server::builder("unread", "0")
        .config(config)
        .lifecycle_log(log.log())
        .tool(
            ToolSpec::quick("echo", "echo"),
            |_: Context, a: Text| async move { Ok::<_, ToolError>(CallToolResult::text(a.text)) },
        )
        .tool(
            ToolSpec::streaming("flood", "large progress messages until cancelled"),
            move |ctx: Context, a: Flood| {
                let seen = seen.clone();
                async move {
                    let filler = "x".repeat(a.bytes);
                    for i in 1..=a.reports {
                        if ctx.is_cancelled() {
                            seen.cancelled.store(true, Ordering::SeqCst);
                            return Err(ToolError::Cancelled);
                        }
                        ctx.progress(f64::from(i), None, Some(filler.clone()));
                        seen.sent.store(i, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                    }
                    Ok::<_, ToolError>(CallToolResult::text("done"))
                }
            },
        )
        .build()
}

/// A stateless `tools/call` POSTed on its own connection; `recv_buf` shrinks the client's
/// socket buffer so that a client that does not read is behind quickly.
async fn call(port: u16, id: u32, tool: &str, args: Value, recv_buf: u32) -> Response<Incoming> {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(recv_buf).unwrap();
    let stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": format!("p{id}")}}});
    let req = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", format!("127.0.0.1:{port}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    sender.send_request(req).await.unwrap()
}

/// Waits (bounded) until `cond` holds.
async fn until(what: &str, limit: Duration, cond: impl Fn() -> bool) {
    let end = tokio::time::Instant::now() + limit;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < end,
            "{what}: not within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_client_that_stops_reading_is_cancelled_not_queued_for() {
    let log = CapturedLog::default();
    let seen = Arc::new(Seen::default());
    let transport = HttpTransport::new(
        server(log.clone(), seen.clone()),
        Arc::new(MemoryEventStore::new()),
        Arc::new(MemorySessionStore::new()),
        HttpConfig {
            connection_backlog: 8,
            ..HttpConfig::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(transport.clone().serve(listener));

    // 4000 reports of 16 KiB: 64 MiB the old code would have held for this one client.
    let reports = 4000;
    let flood = call(
        port,
        1,
        "flood",
        json!({"reports": reports, "bytes": 16 * 1024}),
        4096,
    )
    .await;
    assert_eq!(flood.status(), StatusCode::OK);
    assert_eq!(flood.headers()["content-type"], "text/event-stream");
    // Not reading the body: the server must give up on this stream by itself.
    until("the stream cut", Duration::from_secs(60), || {
        transport.event_queue_stats().streams_cut > 0
    })
    .await;
    until("the tool saw its cancel", Duration::from_secs(30), || {
        seen.cancelled.load(Ordering::SeqCst)
    })
    .await;
    let sent = seen.sent.load(Ordering::SeqCst);
    assert!(
        sent < reports,
        "the tool ran to the end ({sent} reports) for a client that read nothing"
    );
    assert_eq!(transport.event_queue_stats().streams_cut, 1);

    // The lifecycle log tells it as the client having gone.
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let text = log.text();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|l: &Value| l["request_id"] == 1)
            .collect();
        if lines.iter().any(|l| l["event"] == "request.end") {
            break lines;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "no request.end: {lines:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let cancel = lines
        .iter()
        .find(|l| l["event"] == "request.cancel_received")
        .unwrap_or_else(|| panic!("no cancel_received: {lines:#?}"));
    assert_eq!(cancel["reason"], "stream closed");
    let end = lines.iter().find(|l| l["event"] == "request.end").unwrap();
    assert_eq!(end["outcome"], "cancelled", "{end}");

    // Others are served meanwhile.
    let r = call(port, 2, "echo", json!({"text": "still here"}), 64 * 1024).await;
    assert_eq!(r.status(), StatusCode::OK);
    let b = r.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["result"]["content"][0]["text"], "still here", "{v}");

    // What was queued before the cut still arrives, then the stream ends without a response.
    let rest = tokio::time::timeout(Duration::from_secs(60), flood.into_body().collect())
        .await
        .expect("the cut stream ends")
        .expect("a clean end")
        .to_bytes();
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.contains("notifications/progress"),
        "queued progress is delivered"
    );
    assert!(
        !rest.contains("\"result\""),
        "a cancelled request is not answered"
    );
}
