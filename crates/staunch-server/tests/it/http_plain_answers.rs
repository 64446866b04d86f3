//! Plain JSON answers in a 2025 session, over real loopback HTTP: which requests get a single
//! `application/json` body (no progress token, a `quick` tool that is safe to run again, the
//! list and read methods), that nothing of them is stored, that everything else keeps its
//! resumable SSE stream, and that a plain answer becomes a stored stream the moment its
//! handler sends something before the response.

use crate::http_client;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use http_client::{
    ACCEPT_BOTH, BatchHook, HookedStore, content_type, events, initialize, json_body, read_all,
    send, serve,
};
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use staunch_server::transport::http::{HttpConfig, HttpTransport};
use staunch_server::{CallToolResult, Context, Metrics, Server, ToolError, ToolSpec};
use staunch_store::{EventWrite, MemorySessionStore};

/// Records every write the transport makes, in order (the memory store then applies it).
#[derive(Default)]
struct Recording {
    writes: Mutex<Vec<String>>,
}

impl Recording {
    /// The writes so far, as `create <stream>`, `append <stream> <payload>`, `close <stream>`.
    fn writes(&self) -> Vec<String> {
        self.writes.lock().unwrap().clone()
    }

    /// Waits for the `initialize` answer's writes (stored: that client takes only JSON, so
    /// it gets the stored answer), then forgets them.
    async fn settle_initialize(&self) {
        self.wait_for(|w| w.starts_with("close ")).await;
        self.writes.lock().unwrap().clear();
    }

    /// Waits until a write matching `pred` was made (the writer runs behind the responses).
    async fn wait_for(&self, pred: impl Fn(&str) -> bool) {
        for _ in 0..500 {
            if self.writes().iter().any(|w| pred(w)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no such write: {:?}", self.writes());
    }
}

#[async_trait]
impl BatchHook for Recording {
    async fn before(&self, writes: &[EventWrite]) {
        self.writes
            .lock()
            .unwrap()
            .extend(writes.iter().map(|w| match w {
                EventWrite::Create { stream_id, .. } => format!("create {stream_id}"),
                EventWrite::Append {
                    stream_id, payload, ..
                } => format!("append {stream_id} {payload}"),
                EventWrite::Close { stream_id, .. } => format!("close {stream_id}"),
            }));
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

fn reply(a: Text) -> Result<CallToolResult, ToolError> {
    Ok(CallToolResult::text(a.text))
}

/// Whether the handler was still in the same tokio task after its first wait: `same`, or
/// `moved` (its first step ran on the caller's task; the rest in a task of its own).
async fn task_steps() -> Result<CallToolResult, ToolError> {
    let first = tokio::task::try_id();
    tokio::task::yield_now().await;
    let later = tokio::task::try_id();
    Ok(CallToolResult::text(if first == later {
        "same"
    } else {
        "moved"
    }))
}

fn server() -> Server {
    let read_only = json!({"readOnlyHint": true});
    Server::builder("plain", "0")
        .metrics(Metrics::enabled())
        .tool(
            ToolSpec::quick("steps_look", "reads, after a yield").annotations(read_only.clone()),
            |_: Context, _: Text| task_steps(),
        )
        .tool(
            ToolSpec::quick("steps_write", "writes, after a yield"),
            |_: Context, _: Text| task_steps(),
        )
        .tool(
            ToolSpec::quick("look", "reads").annotations(read_only.clone()),
            |_: Context, a: Text| async move { reply(a) },
        )
        .tool(
            ToolSpec::quick("set", "writes; may repeat")
                .annotations(json!({"idempotentHint": true})),
            |_: Context, a: Text| async move { reply(a) },
        )
        .tool(
            ToolSpec::quick("write", "writes (no annotations)"),
            |_: Context, a: Text| async move { reply(a) },
        )
        .tool(
            ToolSpec::streaming("long_look", "reads for a long time")
                .annotations(read_only.clone()),
            |_: Context, a: Text| async move { reply(a) },
        )
        .tool(
            ToolSpec::quick("chatty_look", "reads, and says so first").annotations(read_only),
            |ctx: Context, a: Text| async move {
                ctx.notify(
                    "notifications/message",
                    json!({"level": "info", "data": "looking"}),
                );
                // The note is on its way before the answer is.
                tokio::time::sleep(Duration::from_millis(50)).await;
                reply(a)
            },
        )
        .build()
}

type Store = Arc<HookedStore<Recording>>;

async fn start(cfg: HttpConfig) -> (u16, String, Store) {
    let (port, sid, store, _) = start_with_metrics(cfg).await;
    (port, sid, store)
}

async fn start_with_metrics(cfg: HttpConfig) -> (u16, String, Store, Metrics) {
    let store = Arc::new(HookedStore::new(Recording::default()));
    let server = server();
    let metrics = server.metrics().clone();
    let transport = HttpTransport::new(
        server,
        store.clone(),
        Arc::new(MemorySessionStore::new()),
        cfg,
    );
    let port = serve(transport).await;
    let sid = initialize(port).await;
    store.hook.settle_initialize().await;
    (port, sid, store, metrics)
}

fn call(id: u32, tool: &str, token: Option<&str>) -> Value {
    let mut params = json!({"name": tool, "arguments": {"text": format!("t{id}")}});
    if let Some(t) = token {
        params["_meta"] = json!({"progressToken": t});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// POSTs `body` in the session, accepting both answer kinds.
async fn post(port: u16, sid: &str, body: Value) -> hyper::Response<hyper::body::Incoming> {
    let r = send(
        port,
        "POST",
        &[ACCEPT_BOTH, ("mcp-session-id", sid)],
        Some(body),
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    r
}

/// Whether the answer to `body` is an SSE stream (else a JSON body); checks the result is
/// there either way.
async fn is_stream(port: u16, sid: &str, body: Value) -> bool {
    let id = body["id"].clone();
    let r = post(port, sid, body).await;
    let ct = content_type(&r);
    if ct == "application/json" {
        let v = json_body(r).await;
        assert_eq!(v["id"], id, "{v}");
        assert!(v.get("result").is_some(), "{v}");
        return false;
    }
    assert_eq!(ct, "text/event-stream");
    let evs = events(&read_all(r).await);
    assert_eq!(evs[0].1, "", "a priming event comes first: {evs:?}");
    assert!(evs[0].0.is_some(), "with an id to resume from");
    let last: Value = serde_json::from_str(&evs.last().unwrap().1).unwrap();
    assert_eq!(last["id"], id, "{last}");
    true
}

/// Reads (token-less, quick, rerun-safe) get plain JSON; a token, a write, a streaming tool or
/// a client that takes only SSE keep the resumable stream.
#[tokio::test]
async fn only_token_less_quick_rerun_safe_requests_are_answered_plainly() {
    let (port, sid, _, metrics) = start_with_metrics(HttpConfig::default()).await;
    assert!(!is_stream(port, &sid, call(1, "look", None)).await);
    assert!(!is_stream(port, &sid, call(2, "set", None)).await);
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    assert!(!is_stream(port, &sid, list).await);
    let ping = json!({"jsonrpc": "2.0", "id": 4, "method": "ping"});
    assert!(!is_stream(port, &sid, ping).await);

    assert!(is_stream(port, &sid, call(5, "look", Some("p5"))).await);
    assert!(is_stream(port, &sid, call(6, "write", None)).await);
    assert!(is_stream(port, &sid, call(7, "long_look", None)).await);
    assert!(is_stream(port, &sid, call(8, "no_such_tool", None)).await);

    // A client that takes only SSE gets SSE.
    let r = send(
        port,
        "POST",
        &[("accept", "text/event-stream"), ("mcp-session-id", &sid)],
        Some(call(9, "look", None)),
        None,
    )
    .await;
    assert_eq!(content_type(&r), "text/event-stream");
    let _ = read_all(r).await;
    // Operators see the split: four plain, five streams.
    assert_eq!(answers(&metrics, "plain").await, 4.0);
    assert_eq!(answers(&metrics, "stream").await, 5.0);
    assert_eq!(answers(&metrics, "upgraded").await, 0.0);
}

/// `staunch_http_answers_total{kind}` from a scrape (0 when the series is absent).
async fn answers(metrics: &Metrics, kind: &str) -> f64 {
    let series = format!("staunch_http_answers_total{{kind=\"{kind}\"}} ");
    metrics
        .scrape()
        .await
        .lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A plain answer leaves nothing in the event store; a streamed one is stored whole.
#[tokio::test]
async fn a_plain_answer_stores_nothing() {
    let (port, sid, store) = start(HttpConfig::default()).await;
    assert!(!is_stream(port, &sid, call(1, "look", None)).await);
    assert!(is_stream(port, &sid, call(2, "write", None)).await);
    // The writer keeps order: once the streamed call's stream is closed, anything of the
    // plain call would have been written before it.
    store.hook.wait_for(|w| w.starts_with("close ")).await;
    let writes = store.hook.writes();
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(writes[0].starts_with("create "), "{writes:?}");
    assert!(writes[1].contains("\"t2\""), "{writes:?}");
    assert!(
        !writes.iter().any(|w| w.contains("\"t1\"")),
        "the plain answer was stored: {writes:?}"
    );
}

/// `always_sse`: every answer is a stored stream.
#[tokio::test]
async fn always_sse_streams_every_answer() {
    let cfg = HttpConfig {
        always_sse: true,
        ..HttpConfig::default()
    };
    let (port, sid, store) = start(cfg).await;
    assert!(is_stream(port, &sid, call(1, "look", None)).await);
    store.hook.wait_for(|w| w.contains("\"t1\"")).await;
}

/// A handler that sends something before its response turns the plain answer into a stream
/// at that moment: priming event, the message, the response — all stored, so a client that
/// lost the connection resumes from the priming id and gets both.
#[tokio::test]
async fn a_message_before_the_response_makes_it_a_stored_resumable_stream() {
    let (port, sid, store, metrics) = start_with_metrics(HttpConfig::default()).await;
    let r = post(port, &sid, call(1, "chatty_look", None)).await;
    assert_eq!(content_type(&r), "text/event-stream");
    let evs = events(&read_all(r).await);
    assert_eq!(evs.len(), 3, "{evs:?}");
    let priming = evs[0].0.clone().expect("priming id");
    assert_eq!(evs[0].1, "");
    let note: Value = serde_json::from_str(&evs[1].1).unwrap();
    assert_eq!(note["method"], "notifications/message", "{note}");
    let answer: Value = serde_json::from_str(&evs[2].1).unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "t1", "{answer}");
    assert_eq!(answers(&metrics, "upgraded").await, 1.0);

    store.hook.wait_for(|w| w.starts_with("close ")).await;
    let stream = priming.rsplit_once(':').unwrap().0;
    let kinds: Vec<&str> = store
        .hook
        .writes()
        .iter()
        .filter(|w| w.contains(stream))
        .map(|w| w.split(' ').next().unwrap())
        .map(|k| match k {
            "create" => "create",
            "append" => "append",
            _ => "close",
        })
        .collect();
    assert_eq!(kinds, ["create", "append", "append", "close"]);

    // Resuming from the priming event replays the message and the response.
    let r = send(
        port,
        "GET",
        &[
            ("accept", "text/event-stream"),
            ("mcp-session-id", &sid),
            ("last-event-id", &priming),
        ],
        None,
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let replayed = events(&read_all(r).await);
    let data: Vec<Value> = replayed
        .iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(data.len(), 2, "{replayed:?}");
    assert_eq!(data[0]["method"], "notifications/message");
    assert_eq!(data[1]["id"], 1);
}

/// A plain answer's handler takes its first step on the POST's own task (the request core's
/// eager start) and moves to a task of its own when it first waits; a request answered on an
/// SSE stream runs in its own task from the start, while the connection serves the stream.
#[tokio::test]
async fn a_plain_answers_first_step_runs_on_the_posts_task() {
    let (port, sid, _) = start(HttpConfig::default()).await;
    let r = post(port, &sid, call(1, "steps_look", None)).await;
    assert_eq!(content_type(&r), "application/json");
    let v = json_body(r).await;
    assert_eq!(v["result"]["content"][0]["text"], "moved", "{v}");
    let r = post(port, &sid, call(2, "steps_write", None)).await;
    assert_eq!(content_type(&r), "text/event-stream");
    let evs = events(&read_all(r).await);
    let last: Value = serde_json::from_str(&evs.last().unwrap().1).unwrap();
    assert_eq!(last["result"]["content"][0]["text"], "same", "{last}");

    // A 2026-07-28 request: its POST waits for nothing else either, whatever the tool.
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "steps_write", "arguments": {"text": "t3"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let r = send(
        port,
        "POST",
        &[
            ACCEPT_BOTH,
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "steps_write"),
        ],
        Some(body),
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let text = read_all(r).await;
    assert!(text.contains(r#""text":"moved""#), "{text}");
}

/// A plain request cancelled before it answers: no response is due, the POST ends with 202
/// and nothing was stored for it.
#[tokio::test]
async fn a_cancelled_plain_request_ends_without_a_body() {
    let server = Server::builder("plain-cancel", "0")
        .tool(
            ToolSpec::quick("wait", "reads, slowly").annotations(json!({"readOnlyHint": true})),
            |ctx: Context, _: Value| async move {
                ctx.sleep(Duration::from_secs(30)).await?;
                Ok::<_, ToolError>(CallToolResult::text("late"))
            },
        )
        .build();
    let store = Arc::new(HookedStore::new(Recording::default()));
    let transport = HttpTransport::new(
        server,
        store.clone(),
        Arc::new(MemorySessionStore::new()),
        HttpConfig::default(),
    );
    let port = serve(transport).await;
    let sid = initialize(port).await;
    store.hook.settle_initialize().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "wait", "arguments": {}}});
    let sid2 = sid.clone();
    let pending = tokio::spawn(async move {
        send(
            port,
            "POST",
            &[ACCEPT_BOTH, ("mcp-session-id", &sid2)],
            Some(body),
            None,
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "test"}});
    let r = send(
        port,
        "POST",
        &[ACCEPT_BOTH, ("mcp-session-id", &sid)],
        Some(cancel),
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let answered = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .expect("the POST ends after the cancel")
        .unwrap();
    assert_eq!(answered.status(), StatusCode::ACCEPTED);
    assert_eq!(read_all(answered).await, "");
    assert!(store.hook.writes().is_empty(), "{:?}", store.hook.writes());
}
