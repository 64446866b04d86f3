//! A tool's result as the client receives it, whole, in both eras.
//!
//! The request core writes a tool's `CallToolResult` straight into the response (no value
//! tree), and for a stateless request adds the era's keys to the written object. These tests
//! pin the exact result objects: a session-era result is the tool's own; a stateless one is
//! the same plus `resultType: "complete"` and the server's identity in `_meta`, beside any
//! `_meta` keys the tool set itself (which it keeps, including its own serverInfo).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use staunch_server::protocol::stateless::keys;
use staunch_server::{CallToolResult, Context, Server, Session, ToolError, ToolSpec};
use support::{Wire, request_of, stateless_meta};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

fn server() -> Server {
    Server::builder("results", "1.2.3")
        .tool(
            ToolSpec::quick("plain", "one text item"),
            |_ctx: Context, a: Text| async move { Ok::<_, ToolError>(CallToolResult::text(a.text)) },
        )
        .tool(
            ToolSpec::quick("with_meta", "a result with _meta of its own"),
            |_ctx: Context, a: Text| async move {
                let mut r = CallToolResult::text(a.text);
                let mut meta = Map::new();
                meta.insert("x.example/trace".into(), json!("t1"));
                r.meta = Some(meta);
                Ok::<_, ToolError>(r)
            },
        )
        .tool(
            ToolSpec::quick("fails", "a tool execution error"),
            |_ctx: Context, a: Text| async move { Err::<CallToolResult, _>(ToolError::Tool(a.text)) },
        )
        .build()
}

fn session(server: &Server, wire: &Arc<Wire>) -> Session {
    let s = server.session("s", wire.clone());
    s.handle_frame(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}})
        .to_string()
        .as_bytes(),
    );
    s
}

async fn one_response(wire: &Wire, id: i64) -> Value {
    for _ in 0..400 {
        if let Some(r) = wire.responses(id).pop() {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no response to {id}");
}

fn server_info() -> Value {
    json!({"name": "results", "version": "1.2.3"})
}

#[tokio::test]
async fn a_session_result_is_the_tools_own() {
    let server = server();
    let wire = Arc::new(Wire::default());
    let s = session(&server, &wire);
    for (id, tool, want) in [
        (
            1,
            "plain",
            json!({"content": [{"type": "text", "text": "hé \"q\""}]}),
        ),
        (
            2,
            "with_meta",
            json!({"content": [{"type": "text", "text": "hé \"q\""}],
                   "_meta": {"x.example/trace": "t1"}}),
        ),
        (
            3,
            "fails",
            json!({"content": [{"type": "text", "text": "hé \"q\""}], "isError": true}),
        ),
    ] {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {"text": "hé \"q\""}}});
        s.handle_frame(frame.to_string().as_bytes());
        let r = one_response(&wire, id).await;
        assert_eq!(r["result"], want, "{tool}");
        assert_eq!(r["jsonrpc"], "2.0");
    }
}

#[tokio::test]
async fn a_stateless_result_adds_the_result_type_and_the_server_beside_the_tools_meta() {
    let server = server();
    let plain = {
        json!({"content": [{"type": "text", "text": "x"}],
               "_meta": {(keys::SERVER_INFO): server_info()},
               "resultType": "complete"})
    };
    let with_meta = json!({"content": [{"type": "text", "text": "x"}],
        "_meta": {"x.example/trace": "t1", (keys::SERVER_INFO): server_info()},
        "resultType": "complete"});
    let fails = json!({"content": [{"type": "text", "text": "x"}], "isError": true,
        "_meta": {(keys::SERVER_INFO): server_info()}, "resultType": "complete"});
    for (id, tool, want) in [
        (1, "plain", plain),
        (2, "with_meta", with_meta),
        (3, "fails", fails),
    ] {
        let wire = Arc::new(Wire::default());
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": {"text": "x"}, "_meta": stateless_meta(None)}});
        let req = request_of(&frame);
        let meta =
            staunch_server::protocol::stateless::RequestMeta::from_params(req.params.as_ref())
                .expect("valid _meta");
        let _request = server.serve_stateless(req, meta, wire.clone());
        let r = one_response(&wire, id).await;
        assert_eq!(r["result"], want, "{tool}");
        assert_eq!(r["id"], id);
    }
}
