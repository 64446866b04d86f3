//! Pressure on the HTTP transport, over real loopback HTTP: an event store slower than the
//! offered load (a wrapper that delays every batch), and a client that stops reading its
//! stream. Both must stay bounded and lose nothing that was promised.

use crate::http_client;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http_client::{BatchHook, HookedStore, events, initialize, json_body, read_all, send, serve};
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use staunch_server::transport::http::{HttpConfig, HttpTransport};
use staunch_server::{CallToolResult, Config, Context, ProgressRate, Server, ToolError, ToolSpec};
use staunch_store::{EventWrite, MemoryEventStore, MemorySessionStore};

/// Every batch takes `0` (a slow disk, a far database).
struct Slow(Duration);

#[async_trait]
impl BatchHook for Slow {
    async fn before(&self, _: &[EventWrite]) {
        tokio::time::sleep(self.0).await;
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Chatty {
    reports: u32,
    bytes: usize,
}

fn server() -> Server {
    let config = Config {
        // Every report goes out: the test wants a stream that outruns its reader.
        progress_rate: ProgressRate {
            burst: 100_000,
            per_second: 1_000_000.0,
        },
        ..Config::default()
    };
    Server::builder("pressure", "0")
        .config(config)
        .tool(
            ToolSpec::quick("echo", "echo"),
            |_: Context, a: Text| async move { Ok::<_, ToolError>(CallToolResult::text(a.text)) },
        )
        .tool(
            ToolSpec::streaming("chatty", "many large progress messages"),
            |ctx: Context, a: Chatty| async move {
                let filler = "x".repeat(a.bytes);
                for i in 1..=a.reports {
                    ctx.progress(
                        f64::from(i),
                        Some(f64::from(a.reports)),
                        Some(filler.clone()),
                    );
                    tokio::task::yield_now().await;
                }
                Ok::<_, ToolError>(CallToolResult::text("done"))
            },
        )
        .build()
}

fn echo(id: u32) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": format!("n{id}")}}})
}

/// The store takes 3 s per batch and the queue admits 4 writes: new requests wait for it
/// (backpressure), and once the 2 s admission wait passes they are refused with 503 and a
/// JSON-RPC "server busy" error naming the store. Every request is answered or refused —
/// none vanishes — and the queue never holds more than the admitted requests' writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_slower_than_the_load_slows_then_refuses_new_requests() {
    let transport = HttpTransport::new(
        server(),
        Arc::new(HookedStore::new(Slow(Duration::from_secs(3)))),
        Arc::new(MemorySessionStore::new()),
        HttpConfig {
            event_queue_max: 4,
            ..HttpConfig::default()
        },
    );
    let port = serve(transport.clone()).await;
    let sid = initialize(port).await;

    let calls: Vec<_> = (1..=12u32)
        .map(|id| {
            let sid = sid.clone();
            tokio::spawn(async move {
                let r = send(
                    port,
                    "POST",
                    &[("accept", "application/json"), ("mcp-session-id", &sid)],
                    Some(echo(id)),
                    None,
                )
                .await;
                let status = r.status();
                let retry_after = r.headers().get("retry-after").cloned();
                (id, status, retry_after, json_body(r).await)
            })
        })
        .collect();
    let mut answered = 0;
    let mut refused = 0;
    let mut peak = 0;
    for c in calls {
        let (id, status, retry_after, body) = c.await.unwrap();
        peak = peak.max(transport.event_queue_stats().queued);
        match status {
            StatusCode::OK => {
                assert_eq!(body["id"], id);
                assert_eq!(body["result"]["content"][0]["text"], format!("n{id}"));
                answered += 1;
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(body["error"]["code"], -32000, "{body}");
                let msg = body["error"]["message"].as_str().unwrap();
                assert!(msg.contains("event store"), "{msg}");
                assert!(retry_after.is_some(), "a refusal says when to retry");
                refused += 1;
            }
            other => panic!("request {id}: unexpected {other}: {body}"),
        }
    }
    assert_eq!(answered + refused, 12);
    assert!(
        refused > 0,
        "a store 3 s behind must refuse some new requests"
    );
    assert!(
        answered > 0,
        "requests admitted before the queue filled are answered"
    );
    let stats = transport.event_queue_stats();
    assert_eq!(stats.refused, refused);
    assert!(stats.delayed >= stats.refused, "{stats:?}");
    // Init's 3 writes, then at most 3 (stream created, response, closed) per admitted call.
    assert!(
        peak <= 3 + 3 * answered as usize,
        "queue peaked at {peak} with {answered} admitted"
    );

    // Once the store caught up, a new request is admitted at once.
    while transport.event_queue_stats().queued > 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = send(
        port,
        "POST",
        &[("accept", "application/json"), ("mcp-session-id", &sid)],
        Some(echo(99)),
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json_body(r).await["result"]["content"][0]["text"], "n99");
}

/// A client that stops reading while its call sends ~19 MB: its connection is closed once it
/// is 8 messages behind (memory stays bounded), and resuming with `Last-Event-ID` delivers the
/// rest — every event exactly once, in order, ending with the response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_off_and_resumes_without_loss() {
    let transport = HttpTransport::new(
        server(),
        Arc::new(MemoryEventStore::new()),
        Arc::new(MemorySessionStore::new()),
        HttpConfig {
            connection_backlog: 8,
            ..HttpConfig::default()
        },
    );
    let port = serve(transport.clone()).await;
    let sid = initialize(port).await;
    let reports = 600u32;
    let r = send(
        port,
        "POST",
        &[
            ("accept", "application/json, text/event-stream"),
            ("mcp-session-id", &sid),
        ],
        Some(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "chatty", "arguments": {"reports": reports, "bytes": 32 * 1024},
            "_meta": {"progressToken": "p1"}}}),
        ),
        Some(4096),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    // Not reading: wait until the server gave up on this connection.
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    while transport.event_queue_stats().connections_cut == 0 {
        assert!(
            tokio::time::Instant::now() < until,
            "the connection was never cut"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // What was queued before the cut still arrives; then the connection ends.
    let first = events(&read_all(r).await);
    let last_id = first
        .iter()
        .rev()
        .find_map(|(id, _)| id.clone())
        .expect("events with ids before the cut");
    assert!(
        !first.iter().any(|(_, d)| d.contains("\"result\"")),
        "the response cannot have been delivered to a cut connection"
    );

    // Resume until the response arrives. The resumed connection has the same backlog, so a
    // reader slower than the call is cut again (and resumes again): what matters is that the
    // events of every connection together are each event once, in order.
    let mut rest = Vec::new();
    let mut last_id = last_id;
    for _ in 0..200 {
        let r = send(
            port,
            "GET",
            &[
                ("accept", "text/event-stream"),
                ("mcp-session-id", &sid),
                ("last-event-id", &last_id),
            ],
            None,
            None,
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK);
        let got = events(&read_all(r).await);
        if let Some(id) = got.iter().rev().find_map(|(id, _)| id.clone()) {
            last_id = id;
        }
        let done = got.iter().any(|(_, d)| d.contains("\"result\""));
        rest.extend(got);
        if done {
            break;
        }
    }
    let all: Vec<_> = first
        .into_iter()
        .chain(rest)
        .filter(|(id, d)| {
            // The priming event has an id and empty data.
            id.is_some() && !d.is_empty()
        })
        .collect();
    let seqs: Vec<u64> = all
        .iter()
        .map(|(id, _)| {
            id.as_ref()
                .unwrap()
                .rsplit_once(':')
                .unwrap()
                .1
                .parse()
                .unwrap()
        })
        .collect();
    let expected: Vec<u64> = (1..=u64::from(reports) + 1).collect();
    assert_eq!(seqs, expected, "every event once, in order, no gap");
    let response: Value = serde_json::from_str(&all.last().unwrap().1).unwrap();
    assert_eq!(response["id"], 1);
    assert_eq!(response["result"]["content"][0]["text"], "done");
}
