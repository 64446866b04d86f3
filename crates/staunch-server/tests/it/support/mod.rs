//! In-process harness: a server with a few tools of known behaviour, a sink that keeps what
//! was sent, and the lifecycle log captured in memory and parsed back.

#![allow(dead_code)] // each test file uses its own part of the harness

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use staunch_lifecycle::{Line, Parsed, parse_line};
use staunch_server::protocol::stateless::{RequestMeta, keys};
use staunch_server::protocol::{Message, Request, parse_message};
use staunch_server::{
    CallToolResult, CancelReason, Config, Context, Outbound, OutboundKind, Server, Session, Sink,
    StandaloneRequest, ToolError, ToolSpec,
};
pub use staunch_testkit::CapturedLog;

/// Everything a session or a stateless request sent, in order.
#[derive(Default)]
pub struct Wire {
    sent: Mutex<Vec<(OutboundKind, Value)>>,
    ended_streams: Mutex<Vec<Value>>,
}

impl Sink for Wire {
    fn send(&self, msg: Outbound) {
        let v: Value = serde_json::from_slice(&msg.bytes).expect("the server sends JSON");
        self.sent.lock().unwrap().push((msg.kind, v));
    }

    fn end_stream(&self, related: &staunch_server::protocol::RequestId) {
        let id = serde_json::to_value(related).expect("ids serialise");
        self.ended_streams.lock().unwrap().push(id);
    }
}

impl Wire {
    /// The responses (results and errors) for request `id`.
    pub fn responses(&self, id: i64) -> Vec<Value> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, v)| *k == OutboundKind::Response && v["id"] == json!(id))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Progress notifications for progress token `token`.
    pub fn progress(&self, token: &str) -> Vec<f64> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, v)| {
                v["method"] == "notifications/progress" && v["params"]["progressToken"] == token
            })
            .filter_map(|(_, v)| v["params"]["progress"].as_f64())
            .collect()
    }

    /// Every message with JSON-RPC method `method` (notifications), in order.
    pub fn with_method(&self, method: &str) -> Vec<Value> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, v)| v["method"] == method)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// How many messages were sent in all.
    pub fn count(&self) -> usize {
        self.sent.lock().unwrap().len()
    }

    /// Whether the transport was told that `id`'s stream can end (no response follows).
    pub fn stream_ended(&self, id: i64) -> bool {
        self.ended_streams.lock().unwrap().contains(&json!(id))
    }
}

/// A server under test and its captured log.
pub struct Harness {
    pub server: Server,
    log: CapturedLog,
    /// What `returns_cancelled` read from `Context::cancel_reason` when it woke.
    pub reasons: Arc<Mutex<Vec<Option<CancelReason>>>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct Steps {
    pub steps: u32,
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct Nothing {}

/// The tools: each stops in one known way.
/// - `returns_cancelled`: waits for its cancel, then returns `Cancelled` at once (the handler
///   that used to win the race against the session marking its request at shutdown);
/// - `returns_ok_on_cancel`: waits for its cancel, then returns a *result* (late finish);
/// - `counts`: cooperative, progress per 100 ms step;
/// - `ignores_cancel`: never looks (aborted after the grace period);
/// - `too_slow`: a quick tool with a 1 s deadline that needs 10 s;
/// - `panics`: panics.
pub fn harness(grace: Duration) -> Harness {
    harness_traced(grace, staunch_server::Traces::disabled())
}

/// [`harness`] with span hooks.
pub fn harness_traced(grace: Duration, traces: staunch_server::Traces) -> Harness {
    let log = CapturedLog::default();
    let reasons = Arc::new(Mutex::new(Vec::new()));
    let seen = reasons.clone();
    let config = Config {
        cancel_grace: grace,
        drain_timeout: Duration::from_secs(30),
        ..Config::default()
    };
    let server = Server::builder("harness", "0.0.0")
        .config(config)
        .lifecycle_log(log.log())
        .traces(traces)
        .tool(
            ToolSpec::streaming("returns_cancelled", "waits for its cancel"),
            move |ctx: Context, _: Nothing| {
                let seen = seen.clone();
                async move {
                    ctx.cancelled().await;
                    seen.lock().unwrap().push(ctx.cancel_reason());
                    Err::<CallToolResult, _>(ToolError::Cancelled)
                }
            },
        )
        .tool(
            ToolSpec::streaming("returns_ok_on_cancel", "finishes when cancelled"),
            |ctx: Context, _: Nothing| async move {
                ctx.cancelled().await;
                Ok::<_, ToolError>(CallToolResult::text("finished anyway"))
            },
        )
        .tool(
            ToolSpec::streaming("counts", "counts with progress"),
            |ctx: Context, a: Steps| async move {
                for step in 1..=a.steps {
                    ctx.sleep(Duration::from_millis(100)).await?;
                    ctx.progress(f64::from(step), Some(f64::from(a.steps)), None);
                }
                Ok(CallToolResult::text(format!("counted {}", a.steps)))
            },
        )
        .tool(
            ToolSpec::streaming("ignores_cancel", "never looks at its cancel"),
            |_ctx: Context, _: Nothing| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, ToolError>(CallToolResult::text("too late"))
            },
        )
        .tool(
            ToolSpec::quick("too_slow", "misses its deadline").deadline(Duration::from_secs(1)),
            |ctx: Context, _: Nothing| async move {
                ctx.sleep(Duration::from_secs(10)).await?;
                Ok(CallToolResult::text("never"))
            },
        )
        .tool(
            ToolSpec::quick("panics", "panics"),
            |_ctx: Context, _: Nothing| async move {
                if std::hint::black_box(true) {
                    panic!("boom");
                }
                Ok::<_, ToolError>(CallToolResult::text("unreachable"))
            },
        )
        .build();
    Harness {
        server,
        log,
        reasons,
    }
}

impl Harness {
    /// A 2025-era session on `wire`, initialized with `version`.
    pub fn session(&self, name: &str, wire: &Arc<Wire>, version: &str) -> Session {
        let s = self.server.session(name, wire.clone());
        s.handle_frame(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "harness", "version": "0"}}})
            .to_string()
            .as_bytes(),
        );
        s.handle_frame(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        s
    }

    /// Serves one stateless (2026-07-28) `tools/call` on its own `wire`, as the HTTP
    /// transport does for one POST.
    pub fn stateless_call(
        &self,
        wire: &Arc<Wire>,
        id: i64,
        tool: &str,
        args: Value,
    ) -> StandaloneRequest {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": args,
            "_meta": stateless_meta(Some(format!("p{id}")))}});
        let req = request_of(&frame);
        let meta = RequestMeta::from_params(req.params.as_ref()).expect("valid _meta");
        self.server.serve_standalone(req, meta, wire.clone())
    }

    /// Waits (on the test's clock) until nothing is in flight; fails after `limit`.
    pub async fn settle(&self, limit: Duration) {
        let until = tokio::time::Instant::now() + limit;
        while self.server.in_flight() > 0 || self.server.registered() > 0 {
            assert!(
                tokio::time::Instant::now() < until,
                "requests still in flight after {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The lifecycle log so far, as `staunch audit` reads it (every line must parse).
    pub fn log(&self) -> Vec<Line> {
        self.server.lifecycle_log().flush();
        self.log
            .text()
            .lines()
            .filter_map(|l| match parse_line(l.as_bytes()) {
                Ok(Some(Parsed::Known(line))) => Some(line),
                Ok(_) => None,
                Err(e) => panic!("the audit cannot read log line {l}: {e}"),
            })
            .collect()
    }

    /// The raw log lines for request `id` (as JSON, to read fields by name).
    pub fn log_json(&self, id: i64) -> Vec<Value> {
        self.server.lifecycle_log().flush();
        self.log
            .text()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("JSON log line"))
            .filter(|v| v["request_id"] == json!(id))
            .collect()
    }
}

/// The `_meta` a 2026-07-28 client puts on every request.
pub fn stateless_meta(progress_token: Option<String>) -> Value {
    let mut meta = json!({
        (keys::PROTOCOL_VERSION): "2026-07-28",
        (keys::CLIENT_INFO): {"name": "harness", "version": "0"},
        (keys::CLIENT_CAPABILITIES): {},
    });
    if let Some(t) = progress_token {
        meta["progressToken"] = json!(t);
    }
    meta
}

pub fn request_of(frame: &Value) -> Request {
    match parse_message(frame.to_string().as_bytes()) {
        Ok(Message::Request(r)) => r,
        other => panic!("not a request: {other:?}"),
    }
}

/// A `tools/call` frame on a session, with progress token `p<id>`.
pub fn call_frame(id: i64, tool: &str, args: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": tool, "arguments": args, "_meta": {"progressToken": format!("p{id}")}}})
    .to_string()
    .into_bytes()
}

/// A `notifications/cancelled` frame.
pub fn cancel_frame(id: i64, reason: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": reason}})
    .to_string()
    .into_bytes()
}
