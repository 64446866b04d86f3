//! The tasks extension's fixtures (SEP-2663; the conformance suite's `tasks-*` scenarios), each
//! a real durable job on the profile's job runtime:
//!
//! - `greet {name}` — an ordinary tool, never a task;
//! - `slow_compute {seconds, label?}` — a task for clients with the extension, a plain call
//!   that waits for the job otherwise; it sleeps cooperatively, so a cancel ends it `cancelled`;
//! - `failing_job` — task only; after ~1 s its body fails: a tool result with `isError`, so the
//!   task is `completed`;
//! - `protocol_error_job` — task only; its body panics: no tool result, so the task is `failed`
//!   with a JSON-RPC error;
//! - `confirm_delete {filename}` and `multi_input` — tasks whose bodies ask the user one
//!   question, or two at once (`input_required` until `tasks/update` answers them);
//! - `test_tool_with_task` — asks the user's name in an input-required round of the
//!   `tools/call` itself, then answers with a task whose result greets that name.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use staunch_jobs::{JobContext, JobError, JobRuntime, JobTool, JobsExt};
use staunch_server::{CallToolResult, Context, ServerBuilder, ToolError, ToolHandler, ToolSpec};
use std::future::Future;
use std::pin::Pin;

use crate::no_args::NoArgs;

#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet.
    name: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ComputeArgs {
    /// How long the computation takes, in seconds (0 answers at once).
    #[serde(default)]
    seconds: f64,
    /// A label echoed in the result.
    #[serde(default)]
    label: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct DeleteArgs {
    /// The file to delete (nothing is deleted: this is a fixture).
    filename: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct NameArgs {
    /// The name gathered before the task was created.
    user_name: String,
}

fn ask(message: &str) -> Value {
    json!({"message": message, "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
    }})
}

fn accepted(answer: &Value) -> bool {
    answer["action"] == "accept"
}

/// Adds the fixtures; their jobs run on `rt`.
pub(super) fn register(b: ServerBuilder, rt: &JobRuntime) -> ServerBuilder {
    let b = b.tool(
        ToolSpec::quick("greet", "Greets someone (an ordinary tool, never a task)."),
        |_ctx: Context, a: GreetArgs| async move {
            Ok(CallToolResult::text(format!("Hello, {}!", a.name)))
        },
    );
    let slow = JobTool::new(
        "slow_compute",
        "Computes for `seconds` seconds, then reports.",
        |ctx: JobContext, a: ComputeArgs| async move {
            if a.seconds > 0.0 {
                ctx.sleep(Duration::from_secs_f64(a.seconds.min(3600.0)))
                    .await?;
            }
            let label = a.label.unwrap_or_default();
            Ok::<_, JobError>(json!({"label": label, "seconds": a.seconds, "answer": 42}))
        },
    )
    .side_effects(false);
    let failing = JobTool::new(
        "failing_job",
        "Always fails as a tool error after about a second.",
        |ctx: JobContext, _a: NoArgs| async move {
            ctx.sleep(Duration::from_secs(1)).await?;
            Err::<Value, _>(JobError::failed(
                "failing_job always reports a tool execution error",
            ))
        },
    )
    .side_effects(false)
    .task_required(true);
    let protocol = JobTool::new(
        "protocol_error_job",
        "Fails without a result (its body panics): a protocol-level error.",
        |_ctx: JobContext, _a: NoArgs| async move {
            if std::hint::black_box(true) {
                panic!("protocol_error_job fails on purpose");
            }
            Ok::<Value, JobError>(Value::Null)
        },
    )
    .side_effects(false)
    .task_required(true);
    let confirm = JobTool::new(
        "confirm_delete",
        "Asks the user to confirm, then 'deletes' the file.",
        |ctx: JobContext, a: DeleteArgs| async move {
            let answer = ctx.elicit(ask(&format!("Delete {}?", a.filename))).await?;
            let deleted = accepted(&answer);
            Ok::<_, JobError>(json!({"filename": a.filename, "deleted": deleted}))
        },
    )
    .side_effects(false)
    .task_required(true);
    let multi = JobTool::new(
        "multi_input",
        "Asks two questions at once, then reports both answers.",
        |ctx: JobContext, _a: NoArgs| async move {
            let answers = ctx
                .ask_all(vec![
                    (None, "elicitation/create", ask("First question?")),
                    (None, "elicitation/create", ask("Second question?")),
                ])
                .await?;
            Ok::<_, JobError>(json!({"answers": answers}))
        },
    )
    .side_effects(false)
    .task_required(true);
    let greet_later = JobTool::new(
        "test_tool_with_task",
        "Greets the name gathered before the task was created.",
        |_ctx: JobContext, a: NameArgs| async move {
            Ok::<_, JobError>(json!({"greeting": format!("Hello, {}!", a.user_name)}))
        },
    )
    .side_effects(false);
    // Its body only: the tool itself is the handler below, which asks first.
    rt.add_tool(greet_later);
    let b = b
        .job_tool(rt, slow)
        .job_tool(rt, failing)
        .job_tool(rt, protocol)
        .job_tool(rt, confirm)
        .job_tool(rt, multi);
    b.tool_handler(
        ToolSpec::quick(
            "test_tool_with_task",
            "Asks the user's name (an input-required round), then runs as a task.",
        )
        .input_schema(json!({"type": "object"}))
        .execution(json!({"taskSupport": "required"})),
        AskThenTask(rt.clone()),
    )
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// `test_tool_with_task`: an input-required round on the `tools/call` itself, then a task.
struct AskThenTask(JobRuntime);

impl ToolHandler for AskThenTask {
    fn call(&self, _ctx: Context, _args: Value) -> BoxFuture<Result<CallToolResult, ToolError>> {
        Box::pin(std::future::ready(Ok(CallToolResult::error(
            "test_tool_with_task runs only as a task of the tasks extension",
        ))))
    }

    fn call_with_tasks(
        &self,
        ctx: Context,
        _args: Value,
    ) -> Option<BoxFuture<Result<Value, ToolError>>> {
        let rt = self.0.clone();
        Some(Box::pin(async move {
            let answer = ctx
                .elicit_as("user_name", ask("What is your name?"))
                .await?;
            let name = answer["content"]["name"]
                .as_str()
                .unwrap_or("friend")
                .to_string();
            rt.start_task(&ctx, "test_tool_with_task", json!({"user_name": name}))
                .await
        }))
    }
}
