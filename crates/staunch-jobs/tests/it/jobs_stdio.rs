//! Durable jobs over one stdio session (the demo's job tools, in-process): the tool face,
//! the tasks face, idempotency, cancellation that leaves no write behind, and a task's progress
//! token. The side effects of `import_rows` are rows in the SQLite table `demo_import_rows`,
//! read straight from the store's file: a row written after a cancel, or a second execution,
//! would show.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_testkit::jobs::{JobsClient, rows, until};
use staunch_testkit::{StdioServer, TestServer};

const LIMIT: Duration = Duration::from_secs(20);

/// An initialized session of the demo server with fast job loops and a SQLite store.
async fn client() -> JobsClient<StdioServer> {
    JobsClient::new(TestServer::setup().fast_jobs().stdio().await).await
}

#[tokio::test]
async fn tools_list_shows_the_faces_and_the_tasks_capability() {
    let mut c = client().await;
    let init = c.init.clone();
    let tasks = &init["result"]["capabilities"]["tasks"];
    assert_eq!(tasks["requests"]["tools"]["call"], json!({}), "{init}");
    assert_eq!(tasks["cancel"], json!({}));
    assert!(tasks.get("list").is_none(), "no auth context, so no list");
    let list = c.rpc("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let find = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("{n} missing"))
            .clone()
    };
    for n in ["import_rows", "long_scan"] {
        assert_eq!(find(n)["execution"]["taskSupport"], "optional");
        let start = find(&format!("start_{n}"));
        let key = &start["inputSchema"]["properties"]["idempotency_key"];
        assert!(
            key["description"].as_str().unwrap().contains("SAME key"),
            "{key}"
        );
        assert_eq!(
            find(&format!("get_{n}"))["inputSchema"]["required"],
            json!(["job_id"])
        );
        find(&format!("cancel_{n}"));
    }
    assert_eq!(
        find("start_import_rows")["annotations"]["readOnlyHint"],
        false
    );
    assert_eq!(find("start_long_scan")["annotations"]["readOnlyHint"], true);
}

#[tokio::test]
async fn start_then_get_reports_progress_and_the_result() {
    let mut c = client().await;
    let db = c.p.dir().join("staunch.db");
    let s = c
        .ok("start_import_rows", json!({"rows": 4, "delay_ms": 10}))
        .await;
    let id = s["job_id"].as_str().unwrap().to_string();
    assert_eq!(s["poll_after_ms"], 100);
    assert!(["queued", "running"].contains(&s["status"].as_str().unwrap()));
    let done = c.get_until("import_rows", &id, &["succeeded"]).await;
    assert_eq!(done["result"], json!({"imported": 4}));
    assert_eq!(done["progress"]["done"], 4);
    assert!(done["next"].as_str().unwrap().contains("finished"));
    assert_eq!(rows(&db, &id), 4);
    let counted = c.ok("imported_rows", json!({"job_id": id})).await;
    assert_eq!(counted["attempts"], 1);
    // An unknown id is a tool error the model can act on.
    let r = c.tool("get_import_rows", json!({"job_id": "nope"})).await;
    assert_eq!(r["isError"], true);
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("start_import_rows")
    );
}

#[tokio::test]
async fn an_idempotency_key_from_the_arguments_or_meta_returns_the_same_job() {
    let mut c = client().await;
    let db = c.p.dir().join("staunch.db");
    let args = json!({"rows": 3, "delay_ms": 10, "idempotency_key": "order-17"});
    let first = c.ok("start_import_rows", args.clone()).await;
    let id = first["job_id"].as_str().unwrap().to_string();
    assert!(first.get("existing").is_none());
    let again = c.ok("start_import_rows", args).await;
    assert_eq!(again["job_id"], id.as_str());
    assert_eq!(again["existing"], true);
    // The same key in request _meta, under the vendor prefix.
    let r = c
        .rpc(
            "tools/call",
            json!({"name": "start_import_rows", "arguments": {"rows": 3, "delay_ms": 10},
                   "_meta": {"io.staunch/idempotency-key": "order-17"}}),
        )
        .await;
    assert_eq!(r["result"]["structuredContent"]["job_id"], id.as_str());
    // Same key, other arguments: refused, nothing started.
    let refused = c
        .tool(
            "start_import_rows",
            json!({"rows": 5, "idempotency_key": "order-17"}),
        )
        .await;
    assert_eq!(refused["isError"], true);
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("idempotency_key_reused"), "{text}");
    assert!(text.contains(&id), "{text}");
    c.get_until("import_rows", &id, &["succeeded"]).await;
    assert_eq!(rows(&db, &id), 3, "one execution");
}

#[tokio::test]
async fn cancel_tool_stops_the_import_at_its_next_row_and_nothing_is_written_after() {
    let mut c = client().await;
    let db = c.p.dir().join("staunch.db");
    let s = c
        .ok("start_import_rows", json!({"rows": 100000, "delay_ms": 30}))
        .await;
    let id = s["job_id"].as_str().unwrap().to_string();
    until("3 rows", || rows(&db, &id) >= 3).await;
    let cancel = c.ok("cancel_import_rows", json!({"job_id": id})).await;
    assert_eq!(cancel["status"], "cancelling", "{cancel}");
    let done = c.get_until("import_rows", &id, &["cancelled"]).await;
    let written = rows(&db, &id);
    assert!(written < 100000);
    // The last recorded progress is the last row written: the body stopped right after it.
    assert_eq!(done["progress"]["done"], written, "{done}");
    c.p.pump(Duration::from_millis(300)).await;
    assert_eq!(
        rows(&db, &id),
        written,
        "a row was written after the cancel"
    );
    // Cancelling a finished job reports how it ended.
    let again = c.ok("cancel_import_rows", json!({"job_id": id})).await;
    assert_eq!(again["status"], "cancelled");
}

#[tokio::test]
async fn tasks_cancel_stops_the_import_and_the_task_stays_cancelled() {
    let mut c = client().await;
    let db = c.p.dir().join("staunch.db");
    let created = c
        .rpc(
            "tools/call",
            json!({"name": "import_rows", "arguments": {"rows": 100000, "delay_ms": 30},
                   "task": {"ttl": 60000}}),
        )
        .await;
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(task["ttl"], 60000);
    assert_eq!(task["pollInterval"], 100);
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));
    let id = task["taskId"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32, "128 random bits");
    until("3 rows", || rows(&db, &id) >= 3).await;

    let cancelled = c.rpc("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let got = c.rpc("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "cancelled");
    // The job is the same row: the tool face shows it end.
    let done = c.get_until("import_rows", &id, &["cancelled"]).await;
    let written = rows(&db, &id);
    assert_eq!(done["progress"]["done"], written, "{done}");
    c.p.pump(Duration::from_millis(300)).await;
    assert_eq!(
        rows(&db, &id),
        written,
        "a row was written after the cancel"
    );

    let again = c.rpc("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    let result = c.rpc("tasks/result", json!({"taskId": id})).await;
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{result}"
    );
    let unknown = c.rpc("tasks/get", json!({"taskId": "0123"})).await;
    assert_eq!(unknown["error"]["code"], -32602);
}

#[tokio::test]
async fn a_task_runs_to_completion_and_tasks_result_carries_the_related_task() {
    let mut c = client().await;
    let created = c
        .rpc(
            "tools/call",
            json!({"name": "long_scan", "arguments": {"steps": 5, "delay_ms": 10}, "task": {}}),
        )
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    // tasks/result blocks until the task is terminal.
    let result = c.rpc("tasks/result", json!({"taskId": id})).await;
    let r = &result["result"];
    assert_eq!(r["structuredContent"]["scanned"], 5, "{result}");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    let got = c.rpc("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "completed");
    // The optional status notification reached this session.
    let note =
        c.p.wait_for(LIMIT, |m| {
            m["method"] == "notifications/tasks/status" && m["params"]["taskId"] == id.as_str()
        })
        .await
        .expect("a status notification");
    assert_eq!(note["params"]["status"], "completed");
    // No auth context: tasks/list is not offered.
    let list = c.rpc("tasks/list", json!({})).await;
    assert_eq!(list["error"]["code"], -32601);
}

#[tokio::test]
async fn a_plain_call_waits_for_its_job_and_cancelling_the_request_cancels_the_job() {
    let mut c = client().await;
    let db = c.p.dir().join("staunch.db");
    let done = c
        .tool("import_rows", json!({"rows": 2, "delay_ms": 5}))
        .await;
    assert_eq!(done["structuredContent"], json!({"imported": 2}));

    c.p.call(
        json!("slow"),
        "import_rows",
        json!({"rows": 100000, "delay_ms": 30}),
        Some(json!("tok")),
    )
    .await;
    // Find the job this request created.
    let mut id = String::new();
    until("the job row", || {
        let conn = rusqlite::Connection::open(&db).unwrap();
        id = conn
            .query_row(
                "SELECT job_id FROM demo_import_rows GROUP BY job_id HAVING COUNT(*) >= 3 LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap_or_default();
        !id.is_empty()
    })
    .await;
    c.p.cancel(json!("slow")).await;
    let ended = c.get_until("import_rows", &id, &["cancelled"]).await;
    assert_eq!(ended["progress"]["done"], rows(&db, &id));
    c.p.pump(Duration::from_millis(200)).await;
    assert_eq!(
        c.p.responses_to(&json!("slow")),
        0,
        "a cancelled request gets no response"
    );
}

#[tokio::test]
async fn a_tasks_progress_token_gets_the_jobs_progress_until_it_ends() {
    let mut c = client().await;
    let created = c
        .rpc(
            "tools/call",
            json!({"name": "long_scan", "arguments": {"steps": 12, "delay_ms": 100},
                   "task": {}, "_meta": {"progressToken": "task-progress"}}),
        )
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let result = c.rpc("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        result["result"]["structuredContent"]["scanned"], 12,
        "{result}"
    );
    c.p.pump(Duration::from_millis(600)).await;
    let progress: Vec<&Value> =
        c.p.history
            .iter()
            .map(|s| &s.msg)
            .filter(|m| {
                m["method"] == "notifications/progress"
                    && m["params"]["progressToken"] == "task-progress"
            })
            .collect();
    assert!(!progress.is_empty(), "no progress for the task's token");
    let values: Vec<f64> = progress
        .iter()
        .map(|m| m["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    assert!(values.iter().all(|v| *v <= 12.0));
    assert!(progress.iter().all(
        |m| m["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == id.as_str()
    ));
}
