//! [`Context::session_closed`] over real loopback HTTP: it completes when its own session is
//! DELETEd, and not when another session ends (what a proxy's per-session upstream waits on).

use crate::http_client;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_client::{json_body, send};
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::json;
use staunch_server::transport::http::{HttpConfig, HttpTransport};
use staunch_server::{CallToolResult, Context, Server, ToolError, ToolSpec};
use staunch_store::{MemoryEventStore, MemorySessionStore};

type Closed = Pin<Box<dyn Future<Output = ()> + Send>>;

#[derive(Deserialize, schemars::JsonSchema)]
struct Tag {
    tag: String,
}

#[tokio::test]
async fn session_closed_completes_when_its_own_session_is_deleted() {
    let kept: Arc<Mutex<Vec<(String, Closed)>>> = Arc::default();
    let keep = kept.clone();
    let server = Server::builder("session-closed", "0")
        .tool(
            ToolSpec::quick("keep", "keeps the session's end"),
            move |ctx: Context, a: Tag| {
                let keep = keep.clone();
                async move {
                    let closed = ctx.session_closed().expect("an HTTP session owns its work");
                    keep.lock().unwrap().push((a.tag, Box::pin(closed)));
                    Ok::<_, ToolError>(CallToolResult::text("kept"))
                }
            },
        )
        .build();
    let transport = HttpTransport::new(
        server,
        Arc::new(MemoryEventStore::new()),
        Arc::new(MemorySessionStore::new()),
        HttpConfig::default(),
    );
    let port = http_client::serve(transport).await;
    let mut sessions = Vec::new();
    for tag in ["a", "b"] {
        let sid = http_client::initialize(port).await;
        let r = send(
            port,
            "POST",
            &[("accept", "application/json"), ("mcp-session-id", &sid)],
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "keep", "arguments": {"tag": tag}}})),
            None,
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK);
        let body = json_body(r).await;
        assert_eq!(body["result"]["content"][0]["text"], "kept", "{body}");
        sessions.push(sid);
    }
    let mut kept = std::mem::take(&mut *kept.lock().unwrap());
    assert_eq!(kept.len(), 2);
    let (b_tag, mut b) = kept.pop().unwrap();
    let (a_tag, a) = kept.pop().unwrap();
    assert_eq!((a_tag.as_str(), b_tag.as_str()), ("a", "b"));
    let r = send(
        port,
        "DELETE",
        &[("mcp-session-id", &sessions[0])],
        None,
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(10), a)
        .await
        .expect("the deleted session's end is seen");
    // The other session goes on.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut b)
            .await
            .is_err()
    );
}
