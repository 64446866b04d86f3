//! `Server::update_tools`: tools added, replaced and removed while the server runs — the new
//! set is listed and called at once, a removed tool's call in flight still ends with its
//! result while a new call of it gets the unknown-tool error, and open 2025 sessions and
//! 2026-07-28 `subscriptions/listen` streams hear `notifications/tools/list_changed`.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use staunch_server::protocol::stateless::RequestMeta;
use staunch_server::{CallToolResult, Context, Server, ToolError, ToolSpec, ToolUpdate};
use support::{Nothing, Wire, call_frame, request_of, stateless_meta};
use tokio::sync::Notify;

const LIMIT: Duration = Duration::from_secs(10);

fn server(dynamic: bool, gate: Arc<Notify>) -> Server {
    let mut b = Server::builder("updates", "0.0.0").tool(
        ToolSpec::streaming("gated", "ends when the test says so"),
        move |_ctx: Context, _: Nothing| {
            let gate = gate.clone();
            async move {
                gate.notified().await;
                Ok::<_, ToolError>(CallToolResult::text("gated done"))
            }
        },
    );
    if dynamic {
        b = b.dynamic_tools();
    }
    b.build()
}

fn frame(id: i64, method: &str, params: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        .to_string()
        .into_bytes()
}

fn session(server: &Server, wire: &Arc<Wire>) -> (staunch_server::Session, Value) {
    let s = server.session("s", wire.clone());
    s.handle_frame(&frame(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "t", "version": "0"}}),
    ));
    s.handle_frame(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let init = wire
        .responses(0)
        .pop()
        .expect("initialize answered at once");
    (s, init)
}

/// Waits until `pred` holds; fails after [`LIMIT`].
async fn until(what: &str, pred: impl Fn() -> bool) {
    let end = tokio::time::Instant::now() + LIMIT;
    while !pred() {
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn response(wire: &Wire, id: i64) -> Value {
    until(&format!("response {id}"), || !wire.responses(id).is_empty()).await;
    wire.responses(id).remove(0)
}

fn listed(v: &Value) -> Vec<String> {
    v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn hello() -> ToolUpdate {
    ToolUpdate::new().tool(
        ToolSpec::quick("hello", "says hello"),
        |_ctx: Context, _: Nothing| async move { Ok::<_, ToolError>(CallToolResult::text("hi")) },
    )
}

#[tokio::test]
async fn an_added_tool_is_listed_callable_and_announced_to_open_sessions() {
    let server = server(true, Arc::new(Notify::new()));
    let wire = Arc::new(Wire::default());
    let (s, init) = session(&server, &wire);
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    let changed = server.update_tools(hello());
    assert_eq!(changed.added, ["hello"]);
    assert!(changed.list_changed);
    until("tools/list_changed on the session", || {
        wire.with_method("notifications/tools/list_changed").len() == 1
    })
    .await;
    s.handle_frame(&frame(1, "tools/list", json!({})));
    assert_eq!(listed(&response(&wire, 1).await), ["gated", "hello"]);
    s.handle_frame(&call_frame(2, "hello", json!({})));
    let r = response(&wire, 2).await;
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
    assert_eq!(server.tool_names(), ["gated", "hello"]);
}

#[tokio::test]
async fn a_removed_tool_finishes_its_call_in_flight_and_refuses_new_ones() {
    let gate = Arc::new(Notify::new());
    let server = server(true, gate.clone());
    let wire = Arc::new(Wire::default());
    let (s, _) = session(&server, &wire);
    s.handle_frame(&call_frame(1, "gated", json!({})));
    until("the call is running", || server.in_flight() == 1).await;
    let changed = server.update_tools(ToolUpdate::new().remove("gated").remove("never_was"));
    assert_eq!(changed.removed, ["gated"]);
    assert!(server.tool_names().is_empty());
    s.handle_frame(&call_frame(2, "gated", json!({})));
    let refused = response(&wire, 2).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["message"], "unknown tool: gated");
    // The call that started before the removal ends with its own result.
    gate.notify_one();
    let r = response(&wire, 1).await;
    assert_eq!(r["result"]["content"][0]["text"], "gated done", "{r}");
    until("tools/list_changed on the session", || {
        wire.with_method("notifications/tools/list_changed").len() == 1
    })
    .await;
}

#[tokio::test]
async fn only_a_different_declaration_is_announced_and_without_the_capability_sessions_hear_nothing()
 {
    let server = server(false, Arc::new(Notify::new()));
    let wire = Arc::new(Wire::default());
    let (s, init) = session(&server, &wire);
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"],
        false
    );
    assert!(server.update_tools(hello()).list_changed);
    // The same declaration with another handler: replaced, nothing for clients to re-list.
    let same = server.update_tools(hello());
    assert_eq!(same.replaced, ["hello"]);
    assert!(!same.list_changed);
    let other = ToolUpdate::new().tool(
        ToolSpec::quick("hello", "says hello, louder"),
        |_ctx: Context, _: Nothing| async move { Ok::<_, ToolError>(CallToolResult::text("HI")) },
    );
    assert!(server.update_tools(other).list_changed);
    s.handle_frame(&call_frame(1, "hello", json!({})));
    assert_eq!(
        response(&wire, 1).await["result"]["content"][0]["text"],
        "HI"
    );
    s.handle_frame(&frame(2, "tools/list", json!({})));
    let list = response(&wire, 2).await;
    assert_eq!(
        list["result"]["tools"][1]["description"],
        "says hello, louder"
    );
    assert!(
        wire.with_method("notifications/tools/list_changed")
            .is_empty()
    );
}

#[tokio::test]
async fn a_listen_stream_hears_that_the_tools_changed() {
    let server = server(true, Arc::new(Notify::new()));
    let wire = Arc::new(Wire::default());
    let mut params = json!({"notifications": {"toolsListChanged": true}});
    params["_meta"] = stateless_meta(None);
    let req = request_of(&json!({"jsonrpc": "2.0", "id": 9,
        "method": "subscriptions/listen", "params": params}));
    let meta = RequestMeta::from_params(req.params.as_ref()).unwrap();
    let listen = server.serve_standalone(req, meta, wire.clone());
    until("the acknowledgement", || {
        !wire
            .with_method("notifications/subscriptions/acknowledged")
            .is_empty()
    })
    .await;
    server.update_tools(hello());
    until("tools/list_changed on the listen stream", || {
        !wire
            .with_method("notifications/tools/list_changed")
            .is_empty()
    })
    .await;
    let n = wire
        .with_method("notifications/tools/list_changed")
        .remove(0);
    assert_eq!(
        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 9,
        "{n}"
    );
    listen.stream_closed();
}
