//! The raw JSON-RPC the driver speaks: the same bytes to every server.

use serde_json::{Value, json};
use tokio::time::Instant;

/// The protocol version the driver asks for (every peer speaks it; servers may answer lower).
pub const PROTOCOL_VERSION: &str = "2025-11-25";

pub fn initialize(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "staunch-bench", "version": env!("CARGO_PKG_VERSION")}
        }
    })
}

pub fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// A request; with `progress`, its id doubles as its `progressToken` (so progress routes by id).
pub fn request(id: u64, method: &str, params: Option<Value>, progress: bool) -> Value {
    let mut params = params.unwrap_or_else(|| json!({}));
    if progress {
        params["_meta"] = json!({"progressToken": id});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub fn tool_call(id: u64, tool: &str, args: Value, progress: bool) -> Value {
    request(
        id,
        "tools/call",
        Some(json!({"name": tool, "arguments": args})),
        progress,
    )
}

pub fn cancelled(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "staunch-bench: client gave up"}
    })
}

/// The echo call of the throughput loops, as one line.
pub fn echo_line(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello"}}}}}}"#
    )
}

/// What arrived for one call.
#[derive(Clone, Debug)]
pub enum Event {
    /// `notifications/progress` for the call's token.
    Progress { at: Instant, value: f64 },
    /// The response (result or error), as sent.
    Response { msg: Value },
    /// HTTP only: the call's SSE stream (or JSON body) ended.
    Closed { at: Instant },
}

/// Classifies one incoming message: `(id, event)` for progress (routed by token) and
/// responses; `None` for anything else.
pub fn classify(msg: Value, at: Instant) -> Option<(u64, Event)> {
    if msg.get("method").and_then(Value::as_str) == Some("notifications/progress") {
        let p = msg.get("params")?;
        let token = p.get("progressToken")?;
        let id = token.as_u64().or_else(|| token.as_str()?.parse().ok())?;
        let value = p.get("progress")?.as_f64()?;
        return Some((id, Event::Progress { at, value }));
    }
    if msg.get("method").is_none() && (msg.get("result").is_some() || msg.get("error").is_some()) {
        let id = msg.get("id")?;
        let id = id.as_u64().or_else(|| id.as_str()?.parse().ok())?;
        return Some((id, Event::Response { msg }));
    }
    None
}
