//! A client of the 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`), by hand:
//! stateless requests carrying their version and capabilities in `_meta`, with the headers
//! their body implies; tasks created, polled, and listened to.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::http::{Endpoint, Resp};

/// How long a request, a poll or a listen waits before the test fails.
const T: Duration = Duration::from_secs(20);

/// The extension's identifier.
pub const EXT: &str = "io.modelcontextprotocol/tasks";

/// A stateless request's answer: HTTP status and the JSON-RPC response.
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The JSON-RPC response.
    pub msg: Value,
}

impl Answer {
    /// The result; panics on an error.
    pub fn result(&self) -> &Value {
        assert!(self.msg.get("error").is_none(), "error: {}", self.msg);
        &self.msg["result"]
    }

    /// The error's code; panics on a result.
    pub fn code(&self) -> i64 {
        self.msg["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("expected an error: {}", self.msg))
    }
}

static NEXT_ID: AtomicI64 = AtomicI64::new(1);

/// Sends one stateless request: `_meta` with the version and `caps`, headers mirroring the
/// body (`Mcp-Name` = tool name or task id unless `name` overrides it).
pub async fn send(
    s: &Endpoint,
    method: &str,
    mut params: Value,
    caps: Value,
    name: Option<&str>,
) -> Answer {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let meta = params
        .as_object_mut()
        .unwrap()
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
    meta["io.modelcontextprotocol/clientCapabilities"] = caps;
    meta["io.modelcontextprotocol/clientInfo"] = json!({"name": "tasks-test", "version": "1"});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let derived = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .map(String::from);
    let mcp_name = name.map(String::from).or(derived);
    let mut h = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(n) = &mcp_name {
        h.push(("mcp-name", n.as_str()));
    }
    let mut r = s.send("POST", &h, &body.to_string()).await;
    let status = r.status.as_u16();
    if r.header("content-type").as_deref() == Some("application/json") {
        return Answer {
            status,
            msg: r.json().await,
        };
    }
    for e in r.events_until_end(T).await {
        let m = e.json();
        if m.get("method").is_none() && m["id"] == json!(id) {
            return Answer { status, msg: m };
        }
    }
    panic!("no answer to {method}");
}

/// Client capabilities with the extension (and form elicitation).
pub fn with_ext() -> Value {
    json!({"elicitation": {}, "extensions": {EXT: {}}})
}

/// `tools/call` with `caps`.
pub async fn call_tool(s: &Endpoint, tool: &str, args: Value, caps: Value) -> Answer {
    send(
        s,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        caps,
        None,
    )
    .await
}

/// `tasks/get`'s result.
pub async fn task_get(s: &Endpoint, id: &str) -> Value {
    send(s, "tasks/get", json!({"taskId": id}), with_ext(), None)
        .await
        .result()
        .clone()
}

/// Polls `tasks/get` until `pred` holds.
pub async fn get_until(s: &Endpoint, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + T;
    loop {
        let t = task_get(s, id).await;
        if pred(&t) {
            return t;
        }
        assert!(Instant::now() < end, "timed out; last: {t}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a task's status is terminal.
pub fn terminal(t: &Value) -> bool {
    matches!(
        t["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

/// Starts a task and returns its id, checking the `CreateTaskResult` shape.
pub async fn create(s: &Endpoint, tool: &str, args: Value) -> String {
    let a = call_tool(s, tool, args, with_ext()).await;
    let r = a.result();
    assert_eq!(r["resultType"], "task", "{r}");
    assert!(r.get("task").is_none() && r.get("result").is_none() && r.get("ttl").is_none());
    assert!(r["ttlMs"].as_i64().unwrap() > 0, "{r}");
    assert!(r["pollIntervalMs"].as_i64().unwrap() > 0, "{r}");
    r["taskId"].as_str().unwrap().to_string()
}

/// Opens `subscriptions/listen` for `task_ids` on `s` and waits for its acknowledgement.
pub async fn listen_tasks(s: &Endpoint, task_ids: &[&str]) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": task_ids}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": with_ext(),
            "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"}}}});
    let h = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "subscriptions/listen"),
    ];
    let mut stream = s.send("POST", &h, &body.to_string()).await;
    assert_eq!(stream.status, 200);
    let ack = stream.next_event(T).await.expect("an ack").json();
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!(task_ids),
        "{ack}"
    );
    stream
}

/// The `notifications/tasks` a listen stream carries, until one with a terminal status.
pub async fn task_notes_until_terminal(stream: &mut Resp) -> Vec<Value> {
    let mut notes = Vec::new();
    let end = Instant::now() + T;
    while Instant::now() < end {
        let Some(e) = stream.next_event(end - Instant::now()).await else {
            break;
        };
        let m = e.json();
        if m["method"] == "notifications/tasks" {
            let done = terminal(&m["params"]);
            notes.push(m["params"].clone());
            if done {
                return notes;
            }
        }
    }
    panic!("no terminal task status on the listen stream; heard {notes:?}");
}
