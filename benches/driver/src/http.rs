//! A raw Streamable HTTP client: keep-alive HTTP/1.1 connections with `TCP_NODELAY`, one MCP
//! session, POST answered as JSON or as an SSE stream, GET with `Last-Event-ID`.
//!
//! It is deliberately small (hyper's connection API, no pool, no retries) so that what is
//! measured is the server.

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::rpc::{self, Event, classify};
use crate::sse::SseParser;

/// One keep-alive connection.
pub struct Conn {
    send: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Closes the socket now, not when the server gives up on it.
        self.driver.abort();
    }
}

impl Conn {
    pub async fn open(port: u16) -> anyhow::Result<Self> {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .context("connecting")?;
        tcp.set_nodelay(true)?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Self { send, driver })
    }

    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> anyhow::Result<Response<Incoming>> {
        self.send.ready().await?;
        Ok(self.send.send_request(req).await?)
    }
}

/// The MCP session (if the server keeps one) and how to address it.
#[derive(Clone, Debug)]
pub struct Session {
    pub port: u16,
    pub id: Option<String>,
    pub version: String,
}

impl Session {
    /// `initialize` + `notifications/initialized` on `conn`.
    pub async fn open(port: u16, conn: &mut Conn) -> anyhow::Result<Self> {
        let mut s = Session {
            port,
            id: None,
            version: rpc::PROTOCOL_VERSION.into(),
        };
        let resp = conn.send(s.post(&rpc::initialize(0))).await?;
        if !resp.status().is_success() {
            bail!("initialize: HTTP {}", resp.status());
        }
        s.id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let msgs = read_messages(resp).await?;
        let init = msgs
            .iter()
            .find(|m| m.get("id").is_some())
            .context("no initialize response")?;
        if let Some(v) = init["result"]["protocolVersion"].as_str() {
            s.version = v.to_string();
        }
        let resp = conn.send(s.post(&rpc::initialized())).await?;
        let _ = resp.into_body().collect().await;
        Ok(s)
    }

    fn base(&self, method: &str) -> hyper::http::request::Builder {
        let mut b = Request::builder()
            .method(method)
            .uri("/mcp")
            .header("host", format!("127.0.0.1:{}", self.port))
            .header("mcp-protocol-version", &self.version);
        if let Some(id) = &self.id {
            b = b.header("mcp-session-id", id);
        }
        b
    }

    /// A POST of one message.
    pub fn post(&self, msg: &Value) -> Request<Full<Bytes>> {
        self.post_bytes(Bytes::from(serde_json::to_vec(msg).unwrap_or_default()))
    }

    pub fn post_bytes(&self, body: Bytes) -> Request<Full<Bytes>> {
        self.base("POST")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Full::new(body))
            .unwrap_or_default()
    }

    /// A GET that resumes after `last_event_id`.
    pub fn resume(&self, last_event_id: &str) -> Request<Full<Bytes>> {
        self.base("GET")
            .header("accept", "text/event-stream")
            .header("last-event-id", last_event_id)
            .body(Full::new(Bytes::new()))
            .unwrap_or_default()
    }

    /// Sends a notification on `conn` and waits for the (empty) answer.
    pub async fn notify(&self, conn: &mut Conn, msg: &Value) -> anyhow::Result<()> {
        let resp = conn.send(self.post(msg)).await?;
        let _ = resp.into_body().collect().await;
        Ok(())
    }

    /// Sends a request on `conn` and returns its response message.
    pub async fn request(&self, conn: &mut Conn, msg: &Value) -> anyhow::Result<Value> {
        let resp = conn.send(self.post(msg)).await?;
        let msgs = read_messages(resp).await?;
        msgs.into_iter()
            .find(|m| m.get("id").is_some() && m.get("method").is_none())
            .context("no response in the body")
    }

    /// POSTs a request on a connection of its own and streams what arrives for it as
    /// [`Event`]s, ending with [`Event::Closed`] when the body ends (or the POST fails).
    /// Returns once connected; `accepted` reports the HTTP status when headers arrive (some
    /// servers send them only with the first event).
    pub async fn start_call(&self, msg: &Value) -> anyhow::Result<Call> {
        let mut conn = Conn::open(self.port).await?;
        let req = self.post(msg);
        let (tx, rx) = mpsc::unbounded_channel();
        let (status_tx, status_rx) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn(async move {
            if let Ok(resp) = conn.send(req).await {
                let _ = status_tx.send(resp.status().as_u16());
                stream_events(resp, &tx).await;
            }
            drop(conn);
            let _ = tx.send(Event::Closed { at: Instant::now() });
        });
        Ok(Call {
            accepted: status_rx,
            events: rx,
            reader,
        })
    }
}

/// A call in flight on its own connection.
pub struct Call {
    pub accepted: tokio::sync::oneshot::Receiver<u16>,
    pub events: mpsc::UnboundedReceiver<Event>,
    reader: JoinHandle<()>,
}

impl Drop for Call {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn is_sse(resp: &Response<Incoming>) -> bool {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// Reads a whole body (JSON or SSE until it ends) into its messages.
pub async fn read_messages(resp: Response<Incoming>) -> anyhow::Result<Vec<Value>> {
    let sse = is_sse(&resp);
    let body = resp.into_body().collect().await?.to_bytes();
    if !sse {
        if body.is_empty() {
            return Ok(Vec::new());
        }
        return Ok(vec![serde_json::from_slice(&body)?]);
    }
    let mut p = SseParser::default();
    p.push(&body);
    Ok(p.drain()
        .filter_map(|e| serde_json::from_str(&e.data).ok())
        .collect())
}

/// Streams a body's messages as events, as they arrive.
async fn stream_events(resp: Response<Incoming>, tx: &mpsc::UnboundedSender<Event>) {
    let sse = is_sse(&resp);
    let mut body = resp.into_body();
    let mut p = SseParser::default();
    let mut json = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        let at = Instant::now();
        if !sse {
            json.extend_from_slice(&chunk);
            continue;
        }
        p.push(&chunk);
        for e in p.drain() {
            let Ok(msg) = serde_json::from_str::<Value>(&e.data) else {
                continue;
            };
            if let Some((_, ev)) = classify(msg, at) {
                let _ = tx.send(ev);
            }
        }
    }
    if !json.is_empty()
        && let Ok(msg) = serde_json::from_slice::<Value>(&json)
        && let Some((_, ev)) = classify(msg, Instant::now())
    {
        let _ = tx.send(ev);
    }
}
