//! Auth as a library user sees it: a tool that declares its scopes with `ToolSpec::scopes`, and
//! the principal a handler reads from `Context::principal()` — in a 2025 session and in a
//! 2026-07-28 stateless request — over real HTTP on loopback.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use staunch_server::transport::http::{
    AuthConfig, AuthMethod, HttpConfig, HttpTransport, StaticTokens,
};
use staunch_server::{CallToolResult, Context, Server, ToolSpec};

const ALICE: &str = "alice-token-0123456789";
const WRITER: &str = "writer-token-0123456789";

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

fn server() -> Server {
    Server::builder("auth-lib-test", "0")
        .tool(
            ToolSpec::quick("whoami", "Says who called."),
            |ctx: Context, _: NoArgs| async move {
                Ok(CallToolResult::text(
                    ctx.principal().unwrap_or("<none>").to_string(),
                ))
            },
        )
        .tool(
            ToolSpec::quick("write", "Needs the write scope.").scopes(["store:write"]),
            |_ctx: Context, _: NoArgs| async move { Ok(CallToolResult::text("written")) },
        )
        .build()
}

async fn start(auth: Option<AuthConfig>) -> (u16, tokio::task::JoinHandle<()>) {
    let stores = staunch_store::open(":memory:").await.unwrap();
    let cfg = HttpConfig {
        auth,
        ..HttpConfig::default()
    };
    let t = HttpTransport::new(server(), stores.events, stores.sessions, cfg);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let _ = t.serve(listener).await;
    });
    (port, task)
}

fn bearer() -> AuthConfig {
    let tokens = StaticTokens::parse(
        &format!("{ALICE} alice\n{WRITER} writer store:write"),
        "test",
    )
    .unwrap();
    AuthConfig::new(AuthMethod::Bearer(tokens))
}

/// POSTs `body` with `headers`; the status, the session id header and the JSON body.
async fn post(port: u16, headers: &[(&str, &str)], body: &Value) -> (u16, Option<String>, Value) {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::post("/mcp")
        .header("host", format!("127.0.0.1:{port}"))
        .header("content-type", "application/json")
        .header("accept", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender
        .send_request(req.body(Full::new(Bytes::from(body.to_string()))).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let bytes = tokio::time::timeout(Duration::from_secs(10), resp.into_body().collect())
        .await
        .expect("an answer")
        .unwrap()
        .to_bytes();
    (
        status,
        sid,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn call(id: i64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": {}}})
}

async fn session_call(port: u16, token: &str, tool: &str) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let (status, sid, _) = post(port, &[("authorization", &auth)], &init).await;
    assert_eq!(status, 200);
    let sid = sid.expect("a session");
    let h = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let (s, _, _) = post(
        port,
        &h,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(s, 202);
    let (s, _, body) = post(port, &h, &call(1, tool)).await;
    (s, body)
}

async fn stateless_call(port: u16, token: Option<&str>, tool: &str) -> (u16, Value) {
    let mut body = call(2, tool);
    body["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut h = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ];
    if let Some(a) = &auth {
        h.push(("authorization", a));
    }
    let (s, _, body) = post(port, &h, &body).await;
    (s, body)
}

fn text(v: &Value) -> &str {
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn handlers_see_the_principal_in_both_eras() {
    let (port, task) = start(Some(bearer())).await;
    let (s, body) = session_call(port, ALICE, "whoami").await;
    assert_eq!((s, text(&body)), (200, "alice"), "{body}");
    let (s, body) = stateless_call(port, Some(WRITER), "whoami").await;
    assert_eq!((s, text(&body)), (200, "writer"), "{body}");
    let (s, _) = stateless_call(port, None, "whoami").await;
    assert_eq!(s, 401);
    task.abort();
}

#[tokio::test]
async fn scopes_declared_on_the_tool_are_enforced() {
    let (port, task) = start(Some(bearer())).await;
    let (s, body) = session_call(port, ALICE, "write").await;
    assert_eq!(s, 403, "{body}");
    assert_eq!(body["id"], 1);
    let (s, _) = stateless_call(port, Some(ALICE), "write").await;
    assert_eq!(s, 403);
    let (s, body) = session_call(port, WRITER, "write").await;
    assert_eq!((s, text(&body)), (200, "written"), "{body}");
    let (s, body) = stateless_call(port, Some(WRITER), "write").await;
    assert_eq!((s, text(&body)), (200, "written"), "{body}");
    task.abort();
}

#[tokio::test]
async fn without_auth_there_is_no_principal_and_scopes_are_ignored() {
    let (port, task) = start(None).await;
    let (s, body) = stateless_call(port, None, "whoami").await;
    assert_eq!((s, text(&body)), (200, "<none>"), "{body}");
    let (s, body) = stateless_call(port, None, "write").await;
    assert_eq!((s, text(&body)), (200, "written"), "{body}");
    task.abort();
}
