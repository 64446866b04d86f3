//! A raw Streamable HTTP driver: one TCP connection per request (so dropping a response drops
//! its connection, exactly like a flaky network), SSE read event by event, the messages of both
//! protocol eras built by hand, and the server's lifecycle log read back.
//!
//! [`Endpoint`] is where a server listens, in the test's process ([`crate::TestServer`]) or in
//! another (a spawned `staunch serve --http 127.0.0.1:0`).

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::time::Instant;

/// A server's MCP endpoint on loopback (`http://127.0.0.1:{port}/mcp`) and its lifecycle log.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The loopback port it listens on.
    pub port: u16,
    /// The file its lifecycle log is written to.
    pub log_path: PathBuf,
}

/// One SSE event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Event {
    /// Its `id:` field.
    pub id: Option<String>,
    /// Its `data:` lines, joined.
    pub data: String,
    /// Its `retry:` field, in milliseconds.
    pub retry: Option<u64>,
}

impl Event {
    /// The data as JSON (`Null` when it is none).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }
}

/// A response whose body is read as the test asks: whole, or event by event.
pub struct Resp {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: hyper::HeaderMap,
    body: Incoming,
    buf: Vec<u8>,
    _conn: tokio::task::JoinHandle<()>,
}

impl Resp {
    /// A header's value, if it is there and text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    }

    /// The whole body as text.
    pub async fn text(self) -> String {
        let b = self
            .body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        String::from_utf8_lossy(&b).into_owned()
    }

    /// The whole body as JSON; panics if it is not.
    pub async fn json(self) -> Value {
        let t = self.text().await;
        serde_json::from_str(&t).unwrap_or_else(|e| panic!("not JSON ({e}): {t:?}"))
    }

    /// The next SSE event that carries a message (priming events, an id without data, are
    /// skipped), `None` when the stream ended or `limit` passed.
    pub async fn next_message(&mut self, limit: Duration) -> Option<Value> {
        let end = Instant::now() + limit;
        loop {
            let e = self
                .next_event(end.saturating_duration_since(Instant::now()))
                .await?;
            if !e.data.is_empty() {
                return Some(e.json());
            }
        }
    }

    /// The next SSE event, `None` when the stream ended or `limit` passed.
    pub async fn next_event(&mut self, limit: Duration) -> Option<Event> {
        let end = Instant::now() + limit;
        loop {
            if let Some(pos) = find(&self.buf, b"\n\n") {
                let raw: Vec<u8> = self.buf.drain(..pos + 2).collect();
                let text = String::from_utf8_lossy(&raw).into_owned();
                if let Some(e) = parse_event(&text) {
                    return Some(e);
                }
                continue; // a comment (keep-alive)
            }
            match tokio::time::timeout_at(end, self.body.frame()).await {
                Ok(Some(Ok(f))) => {
                    if let Ok(d) = f.into_data() {
                        self.buf.extend_from_slice(&d);
                    }
                }
                _ => return None,
            }
        }
    }

    /// Reads until the body ends; `false` if it is still open after `limit`.
    pub async fn ends_within(&mut self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(end, self.body.frame()).await {
                Ok(Some(Ok(f))) => {
                    if let Ok(d) = f.into_data() {
                        self.buf.extend_from_slice(&d);
                    }
                }
                Ok(Some(Err(_)) | None) => return true,
                Err(_) => return false,
            }
        }
    }

    /// A stateless answer, JSON or SSE: the notifications that came first and the response
    /// (`Value::Null` if the stream ended without one within `limit`).
    pub async fn answer(mut self, limit: Duration) -> (Vec<Value>, Value) {
        let sse = self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"));
        if !sse {
            return (Vec::new(), self.json().await);
        }
        let mut notes = Vec::new();
        for e in self.events_until_end(limit).await {
            let v = e.json();
            if !v.is_object() {
                continue; // a priming event (an id, no data)
            }
            if v.get("method").is_some() {
                notes.push(v);
            } else {
                return (notes, v);
            }
        }
        (notes, Value::Null)
    }

    /// The answer as the text the server wrote: a JSON body, or the data of the stream's
    /// first event that is not a notification (bounded by `limit`); empty when none came.
    pub async fn answer_text(mut self, limit: Duration) -> String {
        let sse = self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"));
        if !sse {
            return self.text().await;
        }
        for e in self.events_until_end(limit).await {
            let v = e.json();
            if v.is_object() && v.get("method").is_none() {
                return e.data;
            }
        }
        String::new()
    }

    /// Every event until the stream ends (bounded by `limit`).
    pub async fn events_until_end(&mut self, limit: Duration) -> Vec<Event> {
        let end = Instant::now() + limit;
        let mut out = Vec::new();
        while let Some(e) = self
            .next_event(end.saturating_duration_since(Instant::now()))
            .await
        {
            out.push(e);
        }
        out
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn parse_event(text: &str) -> Option<Event> {
    let mut e = Event::default();
    let mut any = false;
    let mut data = Vec::new();
    for line in text.lines() {
        if line.starts_with(':') || line.is_empty() {
            continue;
        }
        any = true;
        let (k, v) = line.split_once(':').unwrap_or((line, ""));
        let v = v.strip_prefix(' ').unwrap_or(v);
        match k {
            "id" => e.id = Some(v.to_string()),
            "data" => data.push(v.to_string()),
            "retry" => e.retry = v.parse().ok(),
            _ => {}
        }
    }
    e.data = data.join("\n");
    any.then_some(e)
}

impl Endpoint {
    /// Sends one request on a connection of its own (`/mcp`, with a loopback `Host`).
    pub async fn send(&self, method: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = Request::builder()
            .method(method)
            .uri("/mcp")
            .header("host", format!("127.0.0.1:{}", self.port));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
        let resp = sender.send_request(req).await.unwrap();
        let (parts, body) = resp.into_parts();
        Resp {
            status: parts.status,
            headers: parts.headers,
            body,
            buf: Vec::new(),
            _conn: conn,
        }
    }

    /// POSTs a JSON-RPC message in a session (or none) with the usual headers.
    pub async fn post(&self, session: Option<&str>, msg: &Value) -> Resp {
        self.post_with(session, msg, &[]).await
    }

    /// [`Endpoint::post`] with `extra` headers (an `authorization`, say).
    pub async fn post_with(
        &self,
        session: Option<&str>,
        msg: &Value,
        extra: &[(&str, &str)],
    ) -> Resp {
        let mut h = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        if let Some(s) = session {
            h.push(("mcp-session-id", s));
            h.push(("mcp-protocol-version", "2025-11-25"));
        }
        h.extend_from_slice(extra);
        self.send("POST", &h, &msg.to_string()).await
    }

    /// POSTs in a session that negotiated `version`.
    pub async fn post_as(&self, session: &str, version: &str, msg: &Value) -> Resp {
        let h = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-session-id", session),
            ("mcp-protocol-version", version),
        ];
        self.send("POST", &h, &msg.to_string()).await
    }

    /// Opens a session at `version`; returns its id.
    pub async fn initialize_as(&self, version: &str) -> String {
        let r = self
            .post(
                None,
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": version, "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"}}}),
            )
            .await;
        assert_eq!(r.status, 200);
        let sid = r.header("mcp-session-id").expect("session id");
        let body = r.json().await;
        assert_eq!(body["result"]["protocolVersion"], version, "{body}");
        let n = self
            .post_as(
                &sid,
                version,
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .await;
        assert_eq!(n.status, 202);
        sid
    }

    /// Opens a session's GET stream, resuming after `last_event_id` when given.
    pub async fn get(&self, session: &str, last_event_id: Option<&str>) -> Resp {
        let mut h = vec![("accept", "text/event-stream"), ("mcp-session-id", session)];
        if let Some(l) = last_event_id {
            h.push(("last-event-id", l));
        }
        self.send("GET", &h, "").await
    }

    /// Opens a 2025-11-25 session; returns its id.
    pub async fn initialize(&self) -> String {
        self.initialize_with(&[]).await
    }

    /// [`Endpoint::initialize`], each request with `extra` headers (an `authorization`, say).
    pub async fn initialize_with(&self, extra: &[(&str, &str)]) -> String {
        self.initialize_declaring(json!({}), extra).await
    }

    /// [`Endpoint::initialize_with`] for a client that declares `capabilities` (elicitation,
    /// sampling, …).
    pub async fn initialize_declaring(
        &self,
        capabilities: Value,
        extra: &[(&str, &str)],
    ) -> String {
        let r = self
            .post_with(
                None,
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": capabilities,
                    "clientInfo": {"name": "test", "version": "0"}}}),
                extra,
            )
            .await;
        assert_eq!(r.status, 200);
        let sid = r.header("mcp-session-id").expect("session id");
        let body = r.json().await;
        assert_eq!(body["result"]["protocolVersion"], "2025-11-25");
        let n = self
            .post_with(
                Some(&sid),
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                extra,
            )
            .await;
        assert_eq!(n.status, 202);
        sid
    }

    /// The lifecycle log's lines so far, parsed.
    pub fn log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log_path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The lifecycle log's lines once `pred` holds for them (or after 15 s, as they are).
    pub async fn log_until(&self, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            let lines = self.log_lines();
            if pred(&lines) || Instant::now() > end {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// POSTs a stateless (2026-07-28) request with the headers its body implies.
    pub async fn post_stateless(&self, msg: &Value) -> Resp {
        self.post_stateless_with(msg, &[]).await
    }

    /// Like [`Self::post_stateless`], with `extra` headers (which override the derived ones of
    /// the same name).
    pub async fn post_stateless_with(&self, msg: &Value, extra: &[(&str, &str)]) -> Resp {
        let method = msg["method"].as_str().unwrap_or_default().to_string();
        let name = name_of(msg);
        let mut h: Vec<(&str, &str)> = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", &method),
        ];
        if let Some(n) = &name {
            h.push(("mcp-name", n));
        }
        h.retain(|(k, _)| !extra.iter().any(|(e, _)| e.eq_ignore_ascii_case(k)));
        h.extend(extra.iter().filter(|(_, v)| !v.is_empty()).copied());
        self.send("POST", &h, &msg.to_string()).await
    }

    /// The endpoint's URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// Posts a request in a session and returns its JSON-RPC response (from the SSE stream or a
/// JSON body), waiting at most 20 s for the stream to end.
pub async fn rpc(s: &Endpoint, sid: &str, msg: Value) -> Value {
    let id = msg["id"].clone();
    let mut r = s.post(Some(sid), &msg).await;
    assert_eq!(r.status, 200, "{msg}");
    if r.header("content-type").as_deref() == Some("application/json") {
        return r.json().await;
    }
    for e in r.events_until_end(Duration::from_secs(20)).await {
        let m = e.json();
        if m.get("method").is_none() && m["id"] == id {
            return m;
        }
    }
    panic!("no response to {msg}");
}

/// Calls tool `name` in a session (a fresh request id, no progress token) and returns its
/// `structuredContent`; the call must not fail.
pub async fn tool_structured(s: &Endpoint, sid: &str, name: &str, args: Value) -> Value {
    let id = json!(format!("{name}-{}", uuid_like()));
    let resp = rpc(s, sid, call(id, name, args, None)).await;
    assert!(
        resp.get("error").is_none() && resp["result"]["isError"] != true,
        "{name}: {resp}"
    );
    resp["result"]["structuredContent"].clone()
}

/// A request id unique within the process.
fn uuid_like() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A `tools/call` request, with a progress token when given.
pub fn call(id: Value, tool: &str, args: Value, token: Option<Value>) -> Value {
    let mut params = json!({"name": tool, "arguments": args});
    if let Some(t) = token {
        params["_meta"] = json!({"progressToken": t});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// Lifecycle lines of one request in one session. The log names an HTTP session by a short
/// hash of its id (the id is a credential), other connections by their label.
pub fn lines_of<'a>(lines: &'a [Value], session: &str, id: &Value) -> Vec<&'a Value> {
    let hashed = staunch_server::session_hash(session);
    lines
        .iter()
        .filter(|l| {
            (l["session"] == session || l["session"] == hashed.as_str()) && l["request_id"] == *id
        })
        .collect()
}

/// Whether the log holds the `request.end` of request `id` in `session`.
pub fn ended(lines: &[Value], session: &str, id: &Value) -> bool {
    lines_of(lines, session, id)
        .iter()
        .any(|l| l["event"] == "request.end")
}

/// The `_meta` a 2026-07-28 client puts on every request, merged into `params`.
pub fn stateless(id: Value, method: &str, mut params: Value) -> Value {
    if !params.is_object() {
        params = json!({});
    }
    let meta = params
        .as_object_mut()
        .unwrap()
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
    meta["io.modelcontextprotocol/clientInfo"] = json!({"name": "test", "version": "0"});
    if meta
        .get("io.modelcontextprotocol/clientCapabilities")
        .is_none()
    {
        meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// What `Mcp-Name` carries for a request: the tool or prompt name, or the resource URI.
pub fn name_of(msg: &Value) -> Option<String> {
    let p = &msg["params"];
    match msg["method"].as_str()? {
        "tools/call" | "prompts/get" => p["name"].as_str().map(String::from),
        "resources/read" => p["uri"].as_str().map(String::from),
        _ => None,
    }
}

/// The `progress` values of the `notifications/progress` among `events`, in order.
pub fn progress_values(events: &[Event]) -> Vec<i64> {
    events
        .iter()
        .map(Event::json)
        .filter(|m| m["method"] == "notifications/progress")
        .filter_map(|m| m["params"]["progress"].as_i64())
        .collect()
}

/// The responses to request `id` among `events` (a server must send at most one).
pub fn responses(events: &[Event], id: &Value) -> Vec<Value> {
    events
        .iter()
        .map(Event::json)
        .filter(|m| m.get("method").is_none() && m["id"] == *id)
        .collect()
}
