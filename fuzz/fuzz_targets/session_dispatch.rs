//! The dispatcher: a `Session` fed an arbitrary sequence of frames — requests, cancels,
//! responses to the server's own requests, garbage — with the clock moved between them, then
//! closed. Never panics, never hangs, answers no request id more often than it was asked,
//! and sends no response for a request after the cancel for it arrived.
//!
//! Input: lines. A line `~N` moves the (paused) clock N ms and lets the tasks run; any other
//! line is one frame. The session is initialized first (with elicitation and sampling
//! declared), so the fuzzer starts past the handshake.
//!
//! No tool panics here: libFuzzer's panic hook aborts the process on any panic, even one the
//! runtime catches and answers with -32603 (that path is tested in the normal suite).
#![no_main]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use serde_json::{Value, json};
use staunch_server::protocol::{Message, parse_message};
use staunch_server::{
    CallToolResult, CancelReason, Config, Context, Outbound, OutboundKind, Server, Sink, ToolError,
    ToolSpec,
};

#[derive(Default)]
struct Wire(Mutex<Vec<(OutboundKind, Vec<u8>)>>);

impl Sink for Wire {
    fn send(&self, msg: Outbound) {
        self.0.lock().unwrap().push((msg.kind, msg.bytes));
    }
}

impl Wire {
    /// Responses sent so far, by id (as JSON).
    fn responses(&self) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for (kind, bytes) in self.0.lock().unwrap().iter() {
            if *kind != OutboundKind::Response {
                continue;
            }
            let v: Value = serde_json::from_slice(bytes).expect("the server sends JSON");
            *out.entry(v["id"].to_string()).or_insert(0) += 1;
        }
        out
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Steps {
    steps: u32,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Nothing {}

fn server() -> Server {
    let config = Config {
        cancel_grace: Duration::from_millis(200),
        drain_timeout: Duration::from_secs(5),
        ..Config::default()
    };
    Server::builder("fuzz", "0")
        .config(config)
        .tool(
            ToolSpec::quick("echo", "echo"),
            |_: Context, a: Text| async move { Ok::<_, ToolError>(CallToolResult::text(a.text)) },
        )
        .tool(
            ToolSpec::streaming("counts", "counts with progress"),
            |ctx: Context, a: Steps| async move {
                for step in 1..=a.steps.min(50) {
                    ctx.sleep(Duration::from_millis(10)).await?;
                    ctx.progress(f64::from(step), Some(f64::from(a.steps)), None);
                }
                Ok(CallToolResult::text("counted"))
            },
        )
        .tool(
            ToolSpec::streaming("finishes_on_cancel", "returns a result when cancelled"),
            |ctx: Context, _: Nothing| async move {
                ctx.cancelled().await;
                Ok::<_, ToolError>(CallToolResult::text("finished anyway"))
            },
        )
        .tool(
            ToolSpec::quick("ignores_cancel", "never looks"),
            |_: Context, _: Nothing| async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok::<_, ToolError>(CallToolResult::text("late"))
            },
        )
        .tool(
            ToolSpec::streaming("asks", "asks the client"),
            |ctx: Context, _: Nothing| async move {
                let answer = ctx
                    .request_client(
                        "elicitation/create",
                        json!({"message": "name?",
                        "requestedSchema": {"type": "object", "properties": {}}}),
                    )
                    .await?;
                Ok(CallToolResult::text(answer.to_string()))
            },
        )
        .tool(
            ToolSpec::atomic("atomic_write", "finishes even when cancelled"),
            |ctx: Context, _: Nothing| async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = ctx.cancel_reason();
                Ok::<_, ToolError>(CallToolResult::text("written"))
            },
        )
        .build()
}

/// What the model of the client knows: requests sent per id, and ids cancelled while their
/// request was unanswered (with the requests sent and responses seen at that moment: a later
/// request may reuse the id once the cancelled one is over, and is answered).
#[derive(Default)]
struct Model {
    requests: HashMap<String, usize>,
    cancelled: HashMap<String, (usize, usize)>,
    not_cancellable: HashSet<String>,
}

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let server = server();
        let wire = Arc::new(Wire::default());
        let session = server.session("fuzz", wire.clone());
        session.handle_frame(
            json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
                "clientInfo": {"name": "fuzz", "version": "0"}}})
            .to_string()
            .as_bytes(),
        );
        session.handle_frame(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let mut model = Model::default();
        model.requests.insert("\"init\"".into(), 1);
        model.not_cancellable.insert("\"init\"".into());

        for line in data.split(|&b| b == b'\n').take(64) {
            if let Some(ms) = line.strip_prefix(b"~") {
                let ms: u64 = std::str::from_utf8(ms)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(1)
                    .min(60_000);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                continue;
            }
            observe(&mut model, line, &wire);
            session.handle_frame(line);
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        session.close(CancelReason::Shutdown);
        // Paused time auto-advances while everything waits: the drain ends on its own
        // timeout at the latest.
        let drained = session.drain().await;
        let _ = drained;
        check(&model, &wire);
    });
});

/// Records what the frame about to be sent means for the invariants.
fn observe(model: &mut Model, line: &[u8], wire: &Wire) {
    match parse_message(line) {
        Ok(Message::Request(r)) => {
            let id = r.id.to_value().to_string();
            *model.requests.entry(id.clone()).or_insert(0) += 1;
            if r.method == "initialize" {
                model.not_cancellable.insert(id);
            }
        }
        Ok(Message::Notification(n)) if n.method == "notifications/cancelled" => {
            let Some(id) = n.params.as_ref().and_then(|p| p.get("requestId")) else {
                return;
            };
            let key = id.to_string();
            let asked = model.requests.get(&key).copied().unwrap_or(0);
            let answered = wire.responses().get(&key).copied().unwrap_or(0);
            // Only the simple case is checked: one request with this id, still unanswered.
            if asked == 1 && answered == 0 && !model.not_cancellable.contains(&key) {
                model.cancelled.entry(key).or_insert((asked, answered));
            }
        }
        // A frame that names an id but is otherwise wrong is answered with that id.
        Err(e) => {
            if let Some(id) = e.id() {
                *model.requests.entry(id.to_value().to_string()).or_insert(0) += 1;
            }
        }
        _ => {}
    }
}

fn check(model: &Model, wire: &Wire) {
    let responses = wire.responses();
    for (id, n) in &responses {
        let asked = model.requests.get(id).copied().unwrap_or(0);
        // A frame with an unreadable id is answered with `id: null`.
        if id != "null" {
            assert!(
                *n <= asked,
                "id {id} answered {n} times, asked {asked} times"
            );
        }
    }
    for (id, (asked_then, answered_then)) in &model.cancelled {
        let answered = responses.get(id).copied().unwrap_or(0) - answered_then;
        let asked_since = model.requests.get(id).copied().unwrap_or(0) - asked_then;
        assert!(
            answered <= asked_since,
            "request {id} was answered after its cancel ({answered} responses, {asked_since} \
             later requests with that id)"
        );
    }
}
