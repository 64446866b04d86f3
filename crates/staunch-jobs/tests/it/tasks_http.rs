//! MCP tasks (2025-11-25) over Streamable HTTP, by raw requests: a task belongs to the session
//! that created it, through its tasks methods and the job's tool face alike.

use serde_json::{Value, json};
use staunch_testkit::TestServer;
use staunch_testkit::http::{call, rpc};

fn req(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn tasks_belong_to_the_session_that_created_them() {
    let s = TestServer::setup().fast_jobs().start().await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    let mut create = call(
        json!(1),
        "long_scan",
        json!({"steps": 3, "delay_ms": 10}),
        None,
    );
    create["params"]["task"] = json!({"ttl": 30000});
    let created = rpc(&s, &a, create).await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_string();
    // Another session cannot read, wait for or cancel it: to it the task does not exist.
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let r = rpc(&s, &b, req(2, method, json!({"taskId": id}))).await;
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("unknown task")
        );
    }
    let result = rpc(&s, &a, req(3, "tasks/result", json!({"taskId": id}))).await;
    assert_eq!(
        result["result"]["structuredContent"]["scanned"], 3,
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    let got = rpc(&s, &a, req(4, "tasks/get", json!({"taskId": id}))).await;
    assert_eq!(got["result"]["status"], "completed");
    // The tool face reads the same row in the session that owns it, and in no other.
    let via_tool = rpc(
        &s,
        &a,
        call(json!(5), "get_long_scan", json!({"job_id": id}), None),
    )
    .await;
    assert_eq!(
        via_tool["result"]["structuredContent"]["status"],
        "succeeded"
    );
    let other = rpc(
        &s,
        &b,
        call(json!(6), "get_long_scan", json!({"job_id": id}), None),
    )
    .await;
    assert_eq!(other["result"]["isError"], true, "{other}");
}
