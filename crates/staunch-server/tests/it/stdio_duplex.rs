//! One stdio session served on an in-memory duplex (the test kit's `StdioClient`), under tokio's
//! paused time: a quick tool's deadline and an ignored cancel's grace pass at once, yet every
//! duration the lifecycle log reports is the one the rules set.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use staunch_server::{CallToolResult, Config, Context, Server, ToolError, ToolSpec};
use staunch_testkit::stdio::{LogSource, is_response_to};
use staunch_testkit::{CapturedLog, StdioClient};

#[derive(Deserialize, schemars::JsonSchema)]
struct Nothing {}

fn server(log: &CapturedLog) -> Server {
    let config = Config {
        cancel_grace: Duration::from_secs(30),
        ..Config::default()
    };
    Server::builder("duplex", "0")
        .config(config)
        .lifecycle_log(log.log())
        .tool(
            ToolSpec::quick("too_slow", "needs an hour, has 50 s"),
            |ctx: Context, _: Nothing| async move {
                ctx.sleep(Duration::from_secs(3600)).await?;
                Ok(CallToolResult::text("never"))
            },
        )
        .tool(
            ToolSpec::streaming("ignores_cancel", "never looks at its cancel"),
            |_ctx: Context, _: Nothing| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, ToolError>(CallToolResult::text("too late"))
            },
        )
        .build()
}

fn end_of(lines: &[Value], id: i64) -> Option<Value> {
    lines
        .iter()
        .find(|l| l["request_id"] == id && l["event"] == "request.end")
        .cloned()
}

#[tokio::test(start_paused = true)]
async fn deadlines_and_grace_periods_pass_under_paused_time() {
    let log = CapturedLog::default();
    let mut client = StdioClient::serve(server(&log), LogSource::Memory(log.clone()));
    let init = client.initialize("2025-11-25").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");

    // The quick tool's default deadline (50 s) ends it with a tool error.
    let call = |id: i64, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": {}}})
    };
    client.send(call(1, "too_slow")).await;
    let answer = client
        .wait_for(Duration::from_secs(120), |m| is_response_to(m, &json!(1)))
        .await
        .expect("the deadline's answer");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    // The end line is written behind the answer.
    let lines = log
        .until(Duration::from_secs(120), |l| end_of(l, 1).is_some())
        .await;
    let end = end_of(&lines, 1).expect("the deadline's end line");
    assert_eq!(end["outcome"], "deadline", "{end}");
    assert_eq!(end["duration_ms"], 50_000, "{end}");

    // A handler that ignores its cancel is aborted when the grace (30 s) has passed, and the
    // cancelled request is never answered.
    client.send(call(2, "ignores_cancel")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    client
        .notify(
            "notifications/cancelled",
            json!({"requestId": 2, "reason": "test"}),
        )
        .await;
    let lines = log
        .until(Duration::from_secs(120), |l| end_of(l, 2).is_some())
        .await;
    let end = end_of(&lines, 2).expect("the abort's end line");
    assert_eq!(end["outcome"], "aborted", "{end}");
    assert_eq!(end["duration_ms"], 31_000, "{end}");
    let exit = client.close().await;
    assert!(exit.drained, "the session drained");
    assert_eq!(client.responses_to(&json!(2)), 0, "{:?}", client.history);
}
