//! A client no one here wrote — rmcp 3.11's `Peer<RoleClient>` over its own Streamable HTTP
//! transport (reqwest) — drives the 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`,
//! SEP-2663) against the real `staunch serve --http`, end to end:
//!
//! - rmcp negotiates statelessly through `server/discover` (the lifecycle log shows every
//!   request at 2026-07-28, each under its own `req-…` key, and no `initialize`);
//! - a job tool called with the extension declared answers `CreateTaskResult`, `tasks/get`
//!   polls it to `completed` with the tool's result inlined, and the import wrote its rows once;
//! - a task parked at `input_required` is answered through `tasks/update` and completes;
//! - `tasks/cancel` ends a long import `cancelled`, and its rows stop growing;
//! - a tool error is `completed` with `isError`, a protocol error `failed` with its error;
//! - without the extension a job tool is a plain call, and a task-only tool is refused with
//!   -32021, which rmcp surfaces as a JSON-RPC error.
//!
//! Everything rmcp decodes goes through its own typed results (`CallToolResponse::Task`,
//! `GetTaskResult`, `TaskPayload`, the task acks), so a wire shape it could not read would fail
//! here as `ServiceError::UnexpectedResponse` or a decode error.

use crate::common;

use std::future::Future;
use std::time::Duration;

use common::http::HttpServer;
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, ErrorCode, GetTaskParams, Implementation, InputRequest, InputResponses,
    JsonObject, ProtocolVersion, TASKS_EXTENSION_ID, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::time::Instant;

/// The bound on every wait in this file (the machine is shared; nothing here measures speed).
const T: Duration = Duration::from_secs(30);

use common::job_flags as flags;

type Client = RunningService<RoleClient, ClientConfig>;

/// Bounds one future by [`T`], naming what did not finish.
async fn bounded<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(T, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {T:?}"))
}

/// rmcp's client in the 2026-07-28 era: `server/discover` first, then every request carries its
/// version, client info and capabilities in `_meta`. `tasks` declares the extension.
async fn connect(s: &HttpServer, tasks: bool) -> Client {
    let caps = ClientCapabilities::builder().enable_elicitation();
    let caps = if tasks {
        caps.enable_tasks().build()
    } else {
        caps.build()
    };
    let info = ClientConfig::new(caps, Implementation::new("rmcp-tasks-test", "1"))
        .with_protocol_version(ProtocolVersion::V_2026_07_28);
    let transport = StreamableHttpClientTransport::from_uri(s.url());
    let client = bounded(
        "server/discover",
        info.serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        ),
    )
    .await
    .expect("rmcp negotiates 2026-07-28 through server/discover");
    let peer = client.peer_info().expect("discover filled the peer info");
    assert_eq!(peer.protocol_version, ProtocolVersion::V_2026_07_28);
    let advertised = peer
        .capabilities
        .extensions
        .as_ref()
        .is_some_and(|e| e.contains_key(TASKS_EXTENSION_ID));
    assert!(
        advertised,
        "staunch advertises the tasks extension: {:?}",
        peer.capabilities
    );
    client
}

fn args(v: Value) -> JsonObject {
    v.as_object().expect("arguments are an object").clone()
}

async fn call_once(c: &Client, tool: &'static str, a: Value) -> CallToolResponse {
    bounded(
        tool,
        c.call_tool_once(CallToolRequestParams::new(tool).with_arguments(args(a))),
    )
    .await
    .unwrap_or_else(|e| panic!("{tool}: {e:?}"))
}

/// Calls a job tool with the extension declared; staunch must answer with a task.
async fn create_task(c: &Client, tool: &'static str, a: Value) -> String {
    match call_once(c, tool, a).await {
        CallToolResponse::Task(t) => {
            assert!(t.result_type.is_task());
            assert!(
                matches!(
                    t.task.status,
                    TaskStatus::Working | TaskStatus::InputRequired
                ),
                "{t:?}"
            );
            assert!(t.task.ttl_ms.is_some_and(|ms| ms > 0), "{t:?}");
            assert!(t.task.poll_interval_ms.is_some_and(|ms| ms > 0), "{t:?}");
            assert!(!t.task.created_at.is_empty() && !t.task.last_updated_at.is_empty());
            t.task.task_id
        }
        other => panic!("{tool}: expected a task, got {other:?}"),
    }
}

/// Polls `tasks/get` through rmcp until `pred` holds on the decoded task.
async fn get_until(
    c: &Client,
    id: &str,
    pred: impl Fn(&rmcp::model::GetTaskResult) -> bool,
) -> rmcp::model::GetTaskResult {
    let end = Instant::now() + T;
    loop {
        let t = bounded("tasks/get", c.get_task(GetTaskParams::new(id)))
            .await
            .unwrap_or_else(|e| panic!("tasks/get {id}: {e:?}"));
        assert_eq!(t.task.task.task_id, id);
        assert!(t.result_type.is_complete(), "{t:?}");
        if pred(&t) {
            return t;
        }
        assert!(Instant::now() < end, "timed out; last: {t:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn terminal(t: &rmcp::model::GetTaskResult) -> bool {
    t.task.status().is_terminal()
}

/// The result of a quick tool, which never becomes a task.
async fn call_complete(c: &Client, tool: &'static str, a: Value) -> CallToolResult {
    match call_once(c, tool, a).await {
        CallToolResponse::Complete(r) => r,
        other => panic!("{tool}: expected a plain result, got {other:?}"),
    }
}

/// `imported_rows {job_id}`: the rows an import wrote and in how many attempts.
async fn imported(c: &Client, job: &str) -> (i64, i64) {
    let r = call_complete(c, "imported_rows", json!({"job_id": job})).await;
    let s = r.structured_content.expect("imported_rows is structured");
    (s["rows"].as_i64().unwrap(), s["attempts"].as_i64().unwrap())
}

/// The lifecycle log saw only 2026-07-28 requests, each stateless, and no `initialize`; the
/// methods in `want` all appear.
async fn assert_stateless_2026(s: &HttpServer, want: &[&str]) {
    let lines = s
        .log_until(|l| {
            want.iter().all(|m| {
                l.iter()
                    .any(|x| x["event"] == "request.start" && x["method"] == *m)
            })
        })
        .await;
    let starts: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "request.start")
        .collect();
    for m in want {
        assert!(
            starts.iter().any(|l| l["method"] == *m),
            "no {m} in the log: {lines:#?}"
        );
    }
    for l in &starts {
        assert_eq!(l["protocol_version"], "2026-07-28", "{l}");
        assert!(
            l["session"].as_str().is_some_and(|k| k.starts_with("req-")),
            "a stateless request: {l}"
        );
    }
    assert!(
        lines
            .iter()
            .all(|l| l["method"] != "initialize" && l["method"] != "notifications/initialized"),
        "rmcp sent initialize in 2026 mode: {lines:#?}"
    );
}

#[tokio::test]
async fn rmcp_runs_a_job_tool_as_a_task_and_reads_its_inlined_result() {
    let s = HttpServer::start(&flags(&[])).await;
    let c = connect(&s, true).await;

    let id = create_task(&c, "import_rows", json!({"rows": 3, "delay_ms": 50})).await;
    let done = get_until(&c, &id, terminal).await;
    assert_eq!(done.task.status(), TaskStatus::Completed, "{done:?}");
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("completed without a result: {done:?}");
    };
    // The inlined result is the tool's CallToolResult: rmcp decodes it as one.
    let result: CallToolResult =
        serde_json::from_value(Value::Object(result.clone())).expect("a CallToolResult");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        result.structured_content.as_ref().unwrap()["imported"],
        3,
        "{result:?}"
    );
    // Written once: three rows, one attempt.
    assert_eq!(imported(&c, &id).await, (3, 1));

    assert_stateless_2026(&s, &["server/discover", "tools/call", "tasks/get"]).await;
    bounded("close", c.cancel()).await.unwrap();
}

#[tokio::test]
async fn rmcp_answers_an_input_required_task_through_tasks_update() {
    let s = HttpServer::start(&flags(&["--profile", "conformance"])).await;
    let c = connect(&s, true).await;

    let id = create_task(&c, "confirm_delete", json!({"filename": "notes.txt"})).await;
    let parked = get_until(&c, &id, |t| t.task.status() == TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = &parked.task.payload else {
        panic!("input_required without inputRequests: {parked:?}");
    };
    let keys: Vec<&String> = input_requests.keys().collect();
    assert_eq!(keys, vec!["elicitation-1"], "{parked:?}");
    let InputRequest::Elicitation(ask) = &input_requests["elicitation-1"] else {
        panic!("an elicitation: {parked:?}");
    };
    let asked = serde_json::to_value(ask).unwrap();
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert!(
        asked["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("notes.txt")),
        "{asked}"
    );

    let answers: InputResponses = [(
        "elicitation-1".to_string(),
        json!({"action": "accept", "content": {"confirm": true}}),
    )]
    .into_iter()
    .collect();
    bounded(
        "tasks/update",
        c.update_task(UpdateTaskParams::new(id.clone(), answers)),
    )
    .await
    .expect("tasks/update is an empty ack rmcp accepts");

    let done = get_until(&c, &id, terminal).await;
    assert_eq!(done.task.status(), TaskStatus::Completed, "{done:?}");
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("{done:?}");
    };
    assert_eq!(result["structuredContent"]["deleted"], true, "{done:?}");
    assert_eq!(result["structuredContent"]["filename"], "notes.txt");

    assert_stateless_2026(&s, &["server/discover", "tasks/get", "tasks/update"]).await;
    bounded("close", c.cancel()).await.unwrap();
}

#[tokio::test]
async fn rmcp_cancels_a_long_import_and_its_rows_stop_growing() {
    let s = HttpServer::start(&flags(&[])).await;
    let c = connect(&s, true).await;

    let id = create_task(&c, "import_rows", json!({"rows": 400, "delay_ms": 50})).await;
    // Wait until the import is visibly under way.
    let end = Instant::now() + T;
    while imported(&c, &id).await.0 < 3 {
        assert!(Instant::now() < end, "the import never started");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    bounded(
        "tasks/cancel",
        c.cancel_task(CancelTaskParams::new(id.clone())),
    )
    .await
    .expect("tasks/cancel is an empty ack rmcp accepts");

    let done = get_until(&c, &id, terminal).await;
    assert_eq!(done.task.status(), TaskStatus::Cancelled, "{done:?}");
    assert_eq!(done.task.payload, TaskPayload::Cancelled);
    // The cancel settled: the rows stop growing.
    let (settled, attempts) = imported(&c, &id).await;
    assert!((3..400).contains(&settled), "{settled} rows");
    assert_eq!(attempts, 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        imported(&c, &id).await,
        (settled, 1),
        "rows written after the task was cancelled"
    );
    // Cancelling a terminal task is the same empty ack.
    bounded(
        "tasks/cancel",
        c.cancel_task(CancelTaskParams::new(id.clone())),
    )
    .await
    .expect("a second cancel is still an ack");

    assert_stateless_2026(&s, &["server/discover", "tasks/cancel"]).await;
    bounded("close", c.cancel()).await.unwrap();
}

#[tokio::test]
async fn rmcp_reads_a_tool_error_as_completed_and_a_protocol_error_as_failed() {
    let s = HttpServer::start(&flags(&["--profile", "conformance"])).await;
    let c = connect(&s, true).await;

    // The body reported an error: the tool ran, so the task is `completed` with an
    // `isError` result (the 2026 rule), not `failed`.
    let id = create_task(&c, "failing_job", json!({})).await;
    let done = get_until(&c, &id, terminal).await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("a tool error is completed: {done:?}");
    };
    let result: CallToolResult =
        serde_json::from_value(Value::Object(result.clone())).expect("a CallToolResult");
    assert_eq!(result.is_error, Some(true), "{result:?}");

    // The body panicked: no tool result, a JSON-RPC error — `failed`, with a status message.
    let id = create_task(&c, "protocol_error_job", json!({})).await;
    let done = get_until(&c, &id, terminal).await;
    let TaskPayload::Failed { error } = &done.task.payload else {
        panic!("a protocol error is failed: {done:?}");
    };
    let error: rmcp::model::ErrorData =
        serde_json::from_value(Value::Object(error.clone())).expect("a JSON-RPC error object");
    assert_eq!(error.code, ErrorCode::INTERNAL_ERROR, "{error:?}");
    assert!(done.task.task.status_message.is_some(), "{done:?}");

    // An id no one issued: -32602, surfaced as a JSON-RPC error.
    let got = bounded("tasks/get", c.get_task(GetTaskParams::new("0000"))).await;
    let Err(ServiceError::McpError(e)) = &got else {
        panic!("expected a JSON-RPC error, got {got:?}");
    };
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
    bounded("close", c.cancel()).await.unwrap();
}

#[tokio::test]
async fn without_the_extension_rmcp_gets_a_plain_result_or_minus_32021() {
    // A job tool that may run either way: a plain call that waits for its job.
    let s = HttpServer::start(&flags(&[])).await;
    let c = connect(&s, false).await;
    let r = call_complete(&c, "import_rows", json!({"rows": 2, "delay_ms": 10})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(
        r.structured_content.as_ref().unwrap()["imported"],
        2,
        "{r:?}"
    );
    assert_stateless_2026(&s, &["server/discover", "tools/call"]).await;
    bounded("close", c.cancel()).await.unwrap();

    // A tool that runs only as a task: refused with -32021, naming the extension.
    let s = HttpServer::start(&flags(&["--profile", "conformance"])).await;
    let c = connect(&s, false).await;
    let refused = bounded(
        "confirm_delete",
        c.call_tool_once(
            CallToolRequestParams::new("confirm_delete")
                .with_arguments(args(json!({"filename": "x.txt"}))),
        ),
    )
    .await;
    let Err(ServiceError::McpError(e)) = &refused else {
        panic!("expected a JSON-RPC error, got {refused:?}");
    };
    assert_eq!(
        e.code,
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "{e:?}"
    );
    let required = &e.data.as_ref().expect("error data")["requiredCapabilities"];
    assert!(
        required["extensions"][TASKS_EXTENSION_ID].is_object(),
        "{e:?}"
    );
    // And the tasks methods are refused the same way for a client without the extension.
    let got = bounded("tasks/get", c.get_task(GetTaskParams::new("0000"))).await;
    let Err(ServiceError::McpError(e)) = &got else {
        panic!("expected a JSON-RPC error, got {got:?}");
    };
    assert_eq!(
        e.code,
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "{e:?}"
    );
    bounded("close", c.cancel()).await.unwrap();
}
