//! A tool's result as the client receives it, whole, in both eras.
//!
//! The request core writes a tool's `CallToolResult` straight into the response (no value
//! tree), and for a stateless request adds the era's keys to the written object. These tests
//! pin the exact result objects: a session-era result is the tool's own; a stateless one is
//! the same plus `resultType: "complete"` and the server's identity in `_meta`, beside any
//! `_meta` keys the tool set itself (which it keeps, including its own serverInfo). A handler
//! that answers with JSON (`ToolHandler::answers_json`, a proxy's way) has its result sent
//! unread: content types and keys `CallToolResult` does not model arrive as it wrote them.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use staunch_server::protocol::stateless::keys;
use staunch_server::{
    CallToolResult, Context, JsonToolResult, Outbound, Server, Session, Sink, ToolError,
    ToolHandler, ToolSpec,
};
use support::{Wire, request_of, stateless_meta};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

/// A result with what `CallToolResult` does not model: a content type of a later protocol
/// version and a key of the result's own.
fn relayed_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text, "annotations": {"priority": 1}},
                       {"type": "x.example/hologram", "frames": [1, 2]}],
           "x.example/field": {"later": true}})
}

/// A result whose text a value tree would change: keys out of order, an integer beyond 64
/// bits, a number written the JavaScript way.
const EXACT: &str = r#"{"zeta":1,"content":[{"type":"text","text":"x"}],"n":123456789012345678901234567890,"e":1e+21}"#;

/// Answers with JSON it holds (`Err` for the text "fail": a tool error; [`EXACT`] for the text
/// "exact").
struct Relay;

impl ToolHandler for Relay {
    fn call(&self, _: Context, _: Value) -> BoxFuture<'static, Result<CallToolResult, ToolError>> {
        unreachable!("a handler that answers JSON is called through call_json")
    }

    fn answers_json(&self) -> bool {
        true
    }

    fn call_json(
        &self,
        _: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<JsonToolResult, ToolError>> {
        let text = args["text"].as_str().unwrap_or_default().to_string();
        Box::pin(async move {
            if text == "fail" {
                return Err(ToolError::Tool("relayed failure".into()));
            }
            let json = match text.as_str() {
                "exact" => EXACT.to_string(),
                _ => relayed_result(&text).to_string(),
            };
            Ok(JsonToolResult::from_raw(RawValue::from_string(json).unwrap()).unwrap())
        })
    }
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
        .tool_handler(ToolSpec::quick("relayed", "a result held as JSON"), Relay)
        .build()
}

fn session(server: &Server, wire: Arc<dyn Sink>) -> Session {
    let s = server.session("s", wire);
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
    let s = session(&server, wire.clone());
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
    for (id, text, want) in [
        (4, "x", relayed_result("x")),
        (
            5,
            "fail",
            json!({"content": [{"type": "text", "text": "relayed failure"}], "isError": true}),
        ),
    ] {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "relayed", "arguments": {"text": text}}});
        s.handle_frame(frame.to_string().as_bytes());
        assert_eq!(one_response(&wire, id).await["result"], want, "{text}");
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
    let mut relayed = relayed_result("x");
    relayed["_meta"] = json!({(keys::SERVER_INFO): server_info()});
    relayed["resultType"] = json!("complete");
    for (id, tool, want) in [
        (1, "plain", plain),
        (2, "with_meta", with_meta),
        (3, "fails", fails),
        (4, "relayed", relayed),
    ] {
        let wire = Arc::new(Wire::default());
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": {"text": "x"}, "_meta": stateless_meta(None)}});
        let req = request_of(&frame);
        let meta =
            staunch_server::protocol::stateless::RequestMeta::from_params(req.params.as_ref())
                .expect("valid _meta");
        let _request = server.serve_standalone(req, meta, wire.clone());
        let r = one_response(&wire, id).await;
        assert_eq!(r["result"], want, "{tool}");
        assert_eq!(r["id"], id);
    }
}

/// Keeps every frame as the bytes the server wrote.
#[derive(Default)]
struct Bytes(std::sync::Mutex<Vec<String>>);

impl Sink for Bytes {
    fn send(&self, msg: Outbound) {
        let text = String::from_utf8(msg.bytes.to_vec()).expect("the server sends UTF-8");
        self.0.lock().unwrap().push(text);
    }

    fn end_stream(&self, _: &staunch_server::protocol::RequestId) {}
}

impl Bytes {
    async fn answer(&self, id: i64) -> String {
        let prefix = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#);
        for _ in 0..400 {
            let found = self
                .0
                .lock()
                .unwrap()
                .iter()
                .find(|f| f.starts_with(&prefix))
                .cloned();
            if let Some(f) = found {
                return f;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("no response to {id}");
    }
}

/// A result held as JSON text is written as it is: in a session the response's result is the
/// handler's text to the byte; a stateless request's has the era's keys after it.
#[tokio::test]
async fn a_result_held_as_text_is_written_as_it_is_in_both_eras() {
    let server = server();
    let wire = Arc::new(Bytes::default());
    let s = session(&server, wire.clone());
    let frame = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "relayed", "arguments": {"text": "exact"}}});
    s.handle_frame(frame.to_string().as_bytes());
    assert_eq!(
        wire.answer(1).await,
        format!(r#"{{"jsonrpc":"2.0","id":1,"result":{EXACT}}}"#)
    );

    let wire = Arc::new(Bytes::default());
    let frame = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "relayed", "arguments": {"text": "exact"}, "_meta": stateless_meta(None)}});
    let req = request_of(&frame);
    let meta = staunch_server::protocol::stateless::RequestMeta::from_params(req.params.as_ref())
        .expect("valid _meta");
    let _request = server.serve_standalone(req, meta, wire.clone());
    let answer = wire.answer(2).await;
    let kept = EXACT.strip_suffix('}').unwrap();
    assert!(
        answer.starts_with(&format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{kept},"resultType":"complete","_meta":{{"{}":"#,
            keys::SERVER_INFO
        )),
        "{answer}"
    );
}
