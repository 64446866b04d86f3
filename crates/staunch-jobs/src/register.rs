//! Putting a job tool on a server: one call adds its four tools and (once) the tasks methods,
//! the 2025-11-25 `tasks` capability and the 2026-07-28 tasks extension (advertised only in
//! `server/discover`, never next to the session era's tasks capability).
//!
//! What the model sees for a tool `x`:
//!
//! | tool | does |
//! |---|---|
//! | `start_x` | starts the job, returns `{job_id, status, poll_after_ms, next}` once it is durable |
//! | `get_x` | `{job_id, status, progress, result \| error, next}` |
//! | `cancel_x` | `cancelling`, or the state it had already reached |
//! | `x` | runs the job and waits for its result; with a task (`execution.taskSupport: optional`) returns a task at once |

use serde_json::{Value, json};
use staunch_server::{ServerBuilder, Shape, TASKS_EXTENSION, ToolSpec, schema_of};

use crate::declare::JobTool;
use crate::idempotency::ARG_KEY;
use crate::runtime::JobRuntime;
use crate::tasks::{TaskCancel, TaskGet, TaskList, TaskResult, capability};
use crate::tasks_ext::TaskUpdate;
use crate::tool_face::{CancelFace, GetFace, JobIdArgs, RunFace, StartFace};

/// `builder.job_tool(&runtime, tool)` — the same as [`JobRuntime::register`].
pub trait JobsExt {
    /// Adds a job tool's faces to this server.
    fn job_tool(self, rt: &JobRuntime, tool: JobTool) -> Self;
}

impl JobsExt for ServerBuilder {
    fn job_tool(self, rt: &JobRuntime, tool: JobTool) -> Self {
        rt.register(self, tool)
    }
}

/// The tool's input schema plus the optional `idempotency_key`.
fn with_key(mut schema: Value, key_hours: f64) -> Value {
    let key = json!({
        "type": "string",
        "maxLength": staunch_store::MAX_IDEM_KEY_CHARS,
        "description": format!(
            "Optional but recommended: a unique string you choose for this piece of work (a \
             UUID is ideal; a short or guessable key may collide with another caller's). If you \
             call again because you got no answer (timeout, dropped connection, reconnect, \
             error), send the SAME key with the same arguments: you get the job that is already \
             running or finished instead of doing the work twice. Use a new key for new work. \
             Keys are remembered for {key_hours:.0} h."
        ),
    });
    if !schema.is_object() {
        schema = json!({"type": "object"});
    }
    match schema.get_mut("properties").and_then(Value::as_object_mut) {
        Some(props) => {
            props.insert(ARG_KEY.to_string(), key);
        }
        None => {
            schema["type"] = "object".into();
            schema["properties"] = json!({ ARG_KEY: key });
        }
    }
    schema
}

impl JobRuntime {
    /// Adds `start_<name>`, `get_<name>`, `cancel_<name>` and `<name>` (task-capable) to the
    /// server, the `tasks` capability and the `tasks/*` methods, and makes the tool runnable by
    /// this runtime.
    pub fn register(&self, builder: ServerBuilder, tool: JobTool) -> ServerBuilder {
        let tool = self.add_tool(tool);
        let name = tool.name.clone();
        let cfg = self.config();
        let key_hours = cfg.idempotency_ttl.as_secs_f64() / 3600.0;
        let schema = with_key(tool.input_schema.clone(), key_hours);
        let effects = if tool.side_effects && !tool.retry_safe {
            "It has side effects and is never re-run automatically: if the server stops while \
             it runs, it ends as failed (lease_lost)."
        } else if tool.retry_safe {
            "It is safe to repeat: if the server stops while it runs, it is run again."
        } else {
            "It changes nothing."
        };
        let base = tool.title.clone().unwrap_or_else(|| name.clone());
        let title = |face: &str| {
            if face.is_empty() {
                base.clone()
            } else {
                format!("{base} ({face})")
            }
        };
        let hints = json!({"readOnlyHint": !tool.side_effects, "idempotentHint": false});
        let run = ToolSpec::new(
            name.clone(),
            Shape::Job,
            format!(
                "{} Runs as a durable job and waits for its result (clients with MCP tasks get a \
                 task instead). For long runs prefer start_{name}, which returns a job_id at \
                 once. {effects}",
                tool.description
            ),
        )
        .title(title(""))
        .input_schema(schema.clone())
        .annotations(hints.clone())
        .execution(json!({
            "taskSupport": if tool.task_required { "required" } else { "optional" }
        }));
        let start = ToolSpec::new(
            format!("start_{name}"),
            Shape::Atomic,
            format!(
                "Starts {name} as a background job and returns {{job_id, status, poll_after_ms}} \
                 at once; follow it with get_{name}, stop it with cancel_{name}. {} {effects} \
                 Pass an idempotency_key and reuse it if you retry this call.",
                tool.description
            ),
        )
        .title(title("start"))
        .input_schema(schema)
        .annotations(hints);
        let get = ToolSpec::quick(
            format!("get_{name}"),
            format!(
                "Reports on a job started with start_{name}: status (queued, running, \
                 succeeded, failed or cancelled), progress, the result or the error, and what \
                 to do next."
            ),
        )
        .title(title("status"))
        .input_schema(schema_of::<JobIdArgs>())
        .annotations(json!({"readOnlyHint": true}));
        let cancel = ToolSpec::new(
            format!("cancel_{name}"),
            Shape::Atomic,
            format!(
                "Asks a job started with start_{name} to stop. It stops at its next unit of work \
                 (work already done stays done). Returns cancelling, or the final state if it \
                 had already ended."
            ),
        )
        .title(title("cancel"))
        .input_schema(schema_of::<JobIdArgs>())
        .annotations(
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true}),
        );

        let rt = self.clone();
        let face = |tool: &str| (rt.clone(), tool.to_string());
        let (r1, t1) = face(&name);
        let (r2, t2) = face(&name);
        let (r3, t3) = face(&name);
        let (r4, t4) = face(&name);
        let mut builder = builder
            .tool_handler(run, RunFace { rt: r1, tool: t1 })
            .tool_handler(start, StartFace { rt: r2, tool: t2 })
            .tool_handler(get, GetFace { rt: r3, tool: t3 })
            .tool_handler(cancel, CancelFace { rt: r4, tool: t4 })
            .capability("tasks", capability(self))
            .method("tasks/get", TaskGet(self.clone()))
            .method("tasks/result", TaskResult(self.clone()))
            .method("tasks/cancel", TaskCancel(self.clone()))
            .method("tasks/update", TaskUpdate(self.clone()))
            .extension(TASKS_EXTENSION, json!({}));
        self.set_listen_hub(builder.listen_hub());
        if cfg.principal.is_some() {
            builder = builder.method("tasks/list", TaskList(self.clone()));
        }
        builder
    }
}
