//! Connections served on threads of their own (`HttpConfig::conn_workers`, opt-in), over real
//! loopback HTTP: a request runs on its connection's thread (or, with 0 workers, on the
//! runtime that called `serve`), a cancel sent on another connection — another thread —
//! still reaches it, and shutdown ends the requests on the workers and returns.

use crate::http_client;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_client::{ACCEPT_BOTH, initialize, json_body, send};
use serde::Deserialize;
use serde_json::{Value, json};
use staunch_server::transport::http::{HttpConfig, HttpTransport};
use staunch_server::{CallToolResult, Context, Server, ToolError, ToolSpec};
use staunch_store::{MemoryEventStore, MemorySessionStore};

#[derive(Deserialize, schemars::JsonSchema)]
struct Nothing {}

/// What the waiting tool saw: its thread, and whether its cancel reached it.
#[derive(Default)]
struct Seen {
    waiting_on: Mutex<Option<String>>,
    cancelled: Mutex<bool>,
}

fn thread_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_string()
}

fn server(seen: Arc<Seen>) -> Server {
    let read_only = json!({"readOnlyHint": true});
    Server::builder("workers", "0")
        .tool(
            ToolSpec::quick("where", "the thread this call runs on").annotations(read_only),
            |_: Context, _: Nothing| async move {
                Ok::<_, ToolError>(CallToolResult::text(thread_name()))
            },
        )
        .tool(
            ToolSpec::streaming("wait", "waits for its cancel"),
            move |ctx: Context, _: Nothing| {
                let seen = seen.clone();
                async move {
                    *seen.waiting_on.lock().unwrap() = Some(thread_name());
                    ctx.cancelled().await;
                    *seen.cancelled.lock().unwrap() = true;
                    Err::<CallToolResult, _>(ToolError::Cancelled)
                }
            },
        )
        .build()
}

struct Running {
    port: u16,
    server: Server,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start(workers: usize, seen: Arc<Seen>) -> Running {
    let server = server(seen);
    let transport = HttpTransport::new(
        server.clone(),
        Arc::new(MemoryEventStore::new()),
        Arc::new(MemorySessionStore::new()),
        HttpConfig {
            conn_workers: workers,
            ..HttpConfig::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = tokio::spawn(transport.serve(listener));
    Running {
        port,
        server,
        served,
    }
}

fn call(id: u32, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": {}}})
}

async fn post(port: u16, sid: &str, msg: Value) -> hyper::Response<hyper::body::Incoming> {
    send(
        port,
        "POST",
        &[
            ACCEPT_BOTH,
            ("mcp-session-id", sid),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        Some(msg),
        None,
    )
    .await
}

#[tokio::test]
async fn requests_run_on_their_connections_worker_thread_or_on_the_callers_runtime() {
    for workers in [2, 0] {
        let r = start(workers, Arc::default()).await;
        let sid = initialize(r.port).await;
        let mut names = Vec::new();
        for id in 1..=4 {
            let body = json_body(post(r.port, &sid, call(id, "where")).await).await;
            names.push(
                body["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        if workers == 0 {
            assert!(
                names.iter().all(|n| !n.starts_with("staunch-http-")),
                "{names:?}"
            );
        } else {
            // One connection per call, round robin: both workers served some.
            for i in 0..workers {
                let w = format!("staunch-http-{i}");
                assert!(names.contains(&w), "{w} in {names:?}");
            }
        }
        r.server.shutdown_token().cancel();
        r.served.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_cancel_from_another_connection_reaches_a_request_on_a_worker_and_shutdown_returns() {
    let seen = Arc::new(Seen::default());
    let r = start(2, seen.clone()).await;
    let sid = initialize(r.port).await;
    // The call's stream stays open on its own connection (and worker) while it waits.
    let waiting = post(r.port, &sid, call(7, "wait")).await;
    for _ in 0..500 {
        if seen.waiting_on.lock().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let on = seen
        .waiting_on
        .lock()
        .unwrap()
        .clone()
        .expect("the call started");
    assert!(on.starts_with("staunch-http-"), "{on}");

    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 7, "reason": "test"}});
    assert_eq!(post(r.port, &sid, cancel).await.status(), 202);
    for _ in 0..500 {
        if *seen.cancelled.lock().unwrap() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        *seen.cancelled.lock().unwrap(),
        "the cancel reached the handler"
    );
    drop(waiting);

    // Another call left running at shutdown: shutdown cancels it and `serve` returns.
    *seen.cancelled.lock().unwrap() = false;
    *seen.waiting_on.lock().unwrap() = None;
    let _left = post(r.port, &sid, call(8, "wait")).await;
    for _ in 0..500 {
        if seen.waiting_on.lock().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        seen.waiting_on.lock().unwrap().is_some(),
        "the second call started"
    );
    r.server.shutdown_token().cancel();
    tokio::time::timeout(Duration::from_secs(20), r.served)
        .await
        .expect("serve returned after shutdown")
        .unwrap()
        .unwrap();
    assert!(
        *seen.cancelled.lock().unwrap(),
        "shutdown cancelled the running call"
    );
}
