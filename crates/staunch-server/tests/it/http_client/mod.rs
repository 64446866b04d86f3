//! A loopback HTTP client for the transport's tests: one request per connection, bodies read
//! whole, SSE events split into (id, data).

#![allow(dead_code)] // each test file uses its own part of it

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use staunch_server::transport::http::HttpTransport;
use staunch_store::{BatchOutcome, EventStore, EventWrite, MemoryEventStore, Replay, StoreError};
use tokio::net::TcpSocket;

/// Both, as a client of the 2025 revisions must accept.
pub const ACCEPT_BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");

/// Serves `transport` on a loopback port.
pub async fn serve(transport: HttpTransport) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(transport.serve(listener));
    port
}

/// One request on its own connection; `recv_buf` shrinks the client's socket buffer.
pub async fn send(
    port: u16,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
    recv_buf: Option<u32>,
) -> Response<Incoming> {
    let socket = TcpSocket::new_v4().unwrap();
    if let Some(n) = recv_buf {
        socket.set_recv_buffer_size(n).unwrap();
    }
    let stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri("/mcp")
        .header("host", format!("127.0.0.1:{port}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
    if method == "POST" {
        req = req.header("content-type", "application/json");
    }
    sender
        .send_request(req.body(Full::new(body)).unwrap())
        .await
        .unwrap()
}

pub async fn json_body(r: Response<Incoming>) -> Value {
    let b = r.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&b).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&b)))
}

/// Initializes a session (JSON answers); returns its id.
pub async fn initialize(port: u16) -> String {
    let r = send(
        port,
        "POST",
        &[("accept", "application/json")],
        Some(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        ),
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let _ = json_body(r).await;
    let r = send(
        port,
        "POST",
        &[("accept", "application/json"), ("mcp-session-id", &sid)],
        Some(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    sid
}

/// The events of an SSE body as (id, data); priming events (no data) included.
pub fn events(buf: &str) -> Vec<(Option<String>, String)> {
    buf.split("\n\n")
        .filter(|e| e.contains("data:"))
        .map(|e| {
            let mut id = None;
            let mut data = String::new();
            for line in e.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            (id, data)
        })
        .collect()
}

pub async fn read_all(r: Response<Incoming>) -> String {
    let b = r.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(b.to_vec()).unwrap()
}

/// The response's Content-Type.
pub fn content_type(r: &Response<Incoming>) -> String {
    r.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// What a [`HookedStore`] does with each batch before the memory store applies it (a delay,
/// a record of the writes).
#[async_trait::async_trait]
pub trait BatchHook: Send + Sync + 'static {
    async fn before(&self, writes: &[EventWrite]);
}

/// A memory event store whose every batch goes through `hook` first.
pub struct HookedStore<H> {
    pub inner: MemoryEventStore,
    pub hook: H,
}

impl<H> HookedStore<H> {
    pub fn new(hook: H) -> Self {
        Self {
            inner: MemoryEventStore::new(),
            hook,
        }
    }
}

#[async_trait::async_trait]
impl<H: BatchHook> EventStore for HookedStore<H> {
    async fn create_stream(&self, s: &str, st: &str, now: i64) -> Result<(), StoreError> {
        self.inner.create_stream(s, st, now).await
    }
    async fn append(&self, s: &str, st: &str, p: String, now: i64) -> Result<u64, StoreError> {
        self.inner.append(s, st, p, now).await
    }
    async fn replay_after(
        &self,
        s: &str,
        st: &str,
        after: u64,
        limit: usize,
    ) -> Result<Replay, StoreError> {
        self.inner.replay_after(s, st, after, limit).await
    }
    async fn mark_closed(&self, s: &str, st: &str, now: i64) -> Result<bool, StoreError> {
        self.inner.mark_closed(s, st, now).await
    }
    async fn purge(&self, now: i64, age: i64, per: u64) -> Result<u64, StoreError> {
        self.inner.purge(now, age, per).await
    }
    async fn delete_session(&self, s: &str) -> Result<u64, StoreError> {
        self.inner.delete_session(s).await
    }
    async fn write_batch(
        &self,
        writes: Vec<EventWrite>,
        now: i64,
    ) -> Result<BatchOutcome, StoreError> {
        self.hook.before(&writes).await;
        self.inner.write_batch(writes, now).await
    }
}
