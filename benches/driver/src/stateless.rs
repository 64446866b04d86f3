//! A minimal 2026-07-28 request writer: the per-request envelope and the routing headers, the
//! same bytes to every server.
//!
//! A stateless-era request carries `_meta["io.modelcontextprotocol/protocolVersion"]`,
//! `clientInfo` and `clientCapabilities`; over HTTP it is one POST with `MCP-Protocol-Version`,
//! `Mcp-Method` and (for `tools/call`) `Mcp-Name` agreeing with the body. No `initialize`, no
//! session. Over stdio the same messages go down the pipe after a `server/discover`.
//! Written here rather than taken from `staunch-client` so that the driver measures every
//! server with one fixed writer.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use serde_json::{Value, json};

/// The revision these requests speak.
pub const VERSION: &str = "2026-07-28";

/// The envelope every request carries in `params._meta`.
fn envelope() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "staunch-bench", "version": env!("CARGO_PKG_VERSION")},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// A request with the envelope; with `progress`, its id doubles as its `progressToken`.
pub fn request(id: u64, method: &str, params: Value, progress: bool) -> Value {
    let mut params = if params.is_object() {
        params
    } else {
        json!({})
    };
    let mut meta = envelope();
    if progress {
        meta["progressToken"] = json!(id);
    }
    params["_meta"] = meta;
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub fn tool_call(id: u64, tool: &str, args: Value, progress: bool) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        progress,
    )
}

pub fn discover(id: u64) -> Value {
    request(id, "server/discover", json!({}), false)
}

/// The throughput loops' echo call, as one line (no allocation of a `Value` per call).
pub fn echo_line(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{VERSION}","io.modelcontextprotocol/clientInfo":{{"name":"staunch-bench","version":"{}"}},"io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#,
        env!("CARGO_PKG_VERSION")
    )
}

/// The `Mcp-Name` a method's body names (the tool for `tools/call`), if any.
fn name_of(msg: &Value) -> Option<&str> {
    let p = msg.get("params")?;
    match msg.get("method")?.as_str()? {
        "tools/call" | "prompts/get" => p.get("name")?.as_str(),
        "resources/read" => p.get("uri")?.as_str(),
        _ => None,
    }
}

/// The headers of a POST of `msg` (as name/value pairs, for hyper and for raw sockets).
fn headers(port: u16, method: &str, name: Option<&str>) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("host", format!("127.0.0.1:{port}")),
        ("content-type", "application/json".into()),
        ("accept", "application/json, text/event-stream".into()),
        ("mcp-protocol-version", VERSION.into()),
        ("mcp-method", method.into()),
    ];
    if let Some(n) = name {
        h.push(("mcp-name", n.into()));
    }
    h
}

/// A hyper POST of `body` (already serialised) for `method` naming `name`.
pub fn post_bytes(
    port: u16,
    method: &str,
    name: Option<&str>,
    body: Bytes,
) -> Request<Full<Bytes>> {
    let mut b = Request::builder().method("POST").uri("/mcp");
    for (k, v) in headers(port, method, name) {
        b = b.header(k, v);
    }
    b.body(Full::new(body)).unwrap_or_default()
}

/// A hyper POST of one message.
pub fn post(port: u16, msg: &Value) -> Request<Full<Bytes>> {
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let body = Bytes::from(serde_json::to_vec(msg).unwrap_or_default());
    post_bytes(port, method, name_of(msg), body)
}

/// The whole HTTP/1.1 request for a raw socket (the close and memory scenarios hold or drop
/// sockets themselves).
pub fn raw_post(port: u16, msg: &Value) -> Vec<u8> {
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut out = String::from("POST /mcp HTTP/1.1\r\n");
    for (k, v) in headers(port, method, name_of(msg)) {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_line_is_the_same_request_as_the_writer_builds() {
        let line: Value = serde_json::from_str(&echo_line(7)).unwrap();
        let built = tool_call(7, "echo", json!({"text": "hello"}), false);
        assert_eq!(line, built);
    }

    #[test]
    fn raw_post_names_the_tool_and_frames_the_body() {
        let msg = tool_call(3, "slow_count", json!({"steps": 1}), true);
        let raw = String::from_utf8(raw_post(9, &msg)).unwrap();
        assert!(raw.contains("mcp-method: tools/call\r\n"));
        assert!(raw.contains("mcp-name: slow_count\r\n"));
        let body = raw.split("\r\n\r\n").nth(1).unwrap();
        assert!(raw.contains(&format!("content-length: {}\r\n", body.len())));
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["params"]["_meta"]["progressToken"], 3);
    }
}
