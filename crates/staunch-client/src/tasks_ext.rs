//! The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) from the client's
//! side.
//!
//! Unlike 2025-11-25 tasks there is no `task` parameter: the client declares the extension in
//! the request's `clientCapabilities.extensions`, and the *server* decides whether a
//! `tools/call` becomes a task (`resultType: "task"`, a flat `Task` with `ttlMs` and
//! `pollIntervalMs`) or is answered at once. A task is then followed with `tasks/get`, whose
//! `DetailedTask` carries the outcome itself (`result` when `completed` — tool errors included —
//! `error` when `failed`), so there is no `tasks/result`. A task that needs input moves to
//! `input_required` with `inputRequests`, answered by `tasks/update {inputResponses}`; giving
//! up is `tasks/cancel` (never `notifications/cancelled`).
//!
//! Every request here — the call and each `tasks/*` — declares the extension on its own,
//! because stateless requests carry their capabilities each time (a `tasks/get` without it is
//! refused with -32021).

use std::future::pending;

use serde_json::{Value, json};
use staunch_protocol::ErrorObject;
use staunch_protocol::mcp::methods;
use staunch_protocol::stateless::{TASKS_EXTENSION, keys};
use tokio::time::{Instant, sleep_until};

use crate::era::ResultType;
use crate::input::{InputRequests, InputResponses, MAX_ROUNDS};
use crate::tasks::{Task, TaskEvent, TaskOptions, TaskOutcome, TaskStatus};
use crate::{CallOptions, Client, ClientError, Era};

impl Client {
    /// Whether the server advertised the tasks extension in `server/discover`.
    pub fn offers_tasks_extension(&self) -> bool {
        let info = self.server();
        info.era == Era::Stateless
            && info
                .capabilities
                .get("extensions")
                .and_then(|e| e.get(TASKS_EXTENSION))
                .is_some()
    }

    /// Calls a tool under the tasks extension and follows what the server makes of it to the
    /// end: an answer at once ([`TaskOutcome::Immediate`]), or a task polled with `tasks/get`
    /// at the server's `pollIntervalMs` (clamped by `topts`). `answer` is asked for the inputs
    /// of input-required rounds, both before a task exists (the call's own rounds) and while
    /// it is `input_required` (answered with `tasks/update`). The caller's cancel token and
    /// `call.max_total` end a task with `tasks/cancel`.
    pub async fn call_tool_task_ext<F, Fut>(
        &self,
        name: &str,
        arguments: Value,
        call: &CallOptions,
        topts: &TaskOptions,
        mut answer: F,
        mut on_event: impl FnMut(TaskEvent<'_>) + Send,
    ) -> Result<TaskOutcome, ClientError>
    where
        F: FnMut(InputRequests) -> Fut,
        Fut: Future<Output = Result<InputResponses, ClientError>>,
    {
        if self.era() != Era::Stateless {
            return Err(ClientError::Protocol(
                "the tasks extension belongs to the 2026-07-28 era; use 2025-11-25 tasks".into(),
            ));
        }
        let started = Instant::now();
        let hard = call.max_total.map(|d| started + d);
        let created = self
            .request_with_input(
                methods::TOOLS_CALL,
                self.with_tasks_extension(json!({"name": name, "arguments": arguments}))?,
                call,
                |p| on_event(TaskEvent::Progress(p)),
                &mut answer,
            )
            .await?;
        if ResultType::of(&created)? != ResultType::Task {
            return Ok(TaskOutcome::Immediate(created));
        }
        let mut task = Task::from_value(&created).ok_or_else(|| {
            ClientError::Protocol(format!("a task result without taskId/status: {created}"))
        })?;
        on_event(TaskEvent::Created(&task));
        let req = CallOptions {
            timeout: Some(topts.request_timeout),
            max_total: Some(topts.request_timeout),
            progress: false,
            reset_on_progress: false,
            cancel: None,
        };
        // Input rounds answered so far: the keys of `inputRequests` are unique for the life of
        // the task, so a key already answered (an update the server has not applied yet) is not
        // asked again.
        let mut answered = std::collections::HashSet::new();
        let mut rounds = 0;
        loop {
            match task.status {
                TaskStatus::Completed | TaskStatus::Failed => {
                    let result = if task.status == TaskStatus::Failed {
                        Err(task_error(&task))
                    } else {
                        Ok(task.raw.get("result").cloned().unwrap_or(Value::Null))
                    };
                    return Ok(TaskOutcome::Finished { task, result });
                }
                TaskStatus::Cancelled => return Ok(TaskOutcome::Cancelled(task)),
                TaskStatus::InputRequired => {
                    let open: InputRequests = task
                        .raw
                        .get("inputRequests")
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.iter()
                                .filter(|(k, _)| !answered.contains(k.as_str()))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect()
                        })
                        .unwrap_or_default();
                    if !open.is_empty() {
                        rounds += 1;
                        if rounds > MAX_ROUNDS {
                            return Err(ClientError::Protocol(format!(
                                "the task still asked for input after {MAX_ROUNDS} rounds"
                            )));
                        }
                        let keys: Vec<String> = open.keys().cloned().collect();
                        let responses = answer(open).await?;
                        self.request(
                            "tasks/update",
                            Some(self.with_tasks_extension(json!({
                                "taskId": task.task_id,
                                "inputResponses": responses,
                            }))?),
                            &req,
                        )
                        .await?;
                        answered.extend(keys);
                    }
                }
                TaskStatus::Working | TaskStatus::Other(_) => {}
            }
            let wait = task
                .poll_interval
                .unwrap_or(topts.default_poll)
                .clamp(topts.min_poll, topts.max_poll);
            if let Some(err) = self.wait_or_stop(Instant::now() + wait, hard, call).await {
                let r = self
                    .request(
                        "tasks/cancel",
                        Some(self.with_tasks_extension(json!({"taskId": task.task_id}))?),
                        &req,
                    )
                    .await;
                if let Ok(v) = &r {
                    on_event(TaskEvent::CancelSent(v));
                }
                return Err(match err {
                    Stop::Cancelled => ClientError::Cancelled,
                    Stop::Ceiling => ClientError::Timeout {
                        elapsed: started.elapsed(),
                        ceiling: true,
                    },
                });
            }
            let v = self
                .request(
                    "tasks/get",
                    Some(self.with_tasks_extension(json!({"taskId": task.task_id}))?),
                    &req,
                )
                .await?;
            task = Task::from_value(&v).ok_or_else(|| {
                ClientError::Protocol(format!("tasks/get answered without a task: {v}"))
            })?;
            on_event(TaskEvent::Status(&task));
        }
    }

    /// Sleeps until `until`, unless the caller cancels or the ceiling passes first.
    async fn wait_or_stop(
        &self,
        until: Instant,
        hard: Option<Instant>,
        call: &CallOptions,
    ) -> Option<Stop> {
        let ceiling = async {
            match hard {
                Some(h) => sleep_until(h).await,
                None => pending().await,
            }
        };
        let cancelled = async {
            match &call.cancel {
                Some(t) => t.cancelled().await,
                None => pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = cancelled => Some(Stop::Cancelled),
            _ = ceiling => Some(Stop::Ceiling),
            _ = sleep_until(until) => None,
        }
    }

    /// `params` with `_meta.clientCapabilities` = this connection's capabilities plus the
    /// tasks extension (the rest of the stateless `_meta` is added when the request is sent):
    /// what a request of the extension sends, for a caller that makes it itself with
    /// [`Client::request`].
    pub fn with_tasks_extension(&self, mut params: Value) -> Result<Value, ClientError> {
        let mut caps = self
            .inner()
            .dialect
            .capabilities()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        let exts = caps
            .as_object_mut()
            .expect("checked to be an object")
            .entry("extensions")
            .or_insert_with(|| json!({}));
        if !exts.is_object() {
            *exts = json!({});
        }
        exts[TASKS_EXTENSION] = json!({});
        let Some(obj) = params.as_object_mut() else {
            return Err(ClientError::Protocol("params must be an object".into()));
        };
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        meta[keys::CLIENT_CAPABILITIES] = caps;
        Ok(params)
    }
}

/// Why following a task stopped early.
enum Stop {
    Cancelled,
    Ceiling,
}

/// The JSON-RPC error a `failed` task carries (or one made from its `statusMessage`).
fn task_error(task: &Task) -> ErrorObject {
    task.raw
        .get("error")
        .and_then(|e| serde_json::from_value::<ErrorObject>(e.clone()).ok())
        .unwrap_or_else(|| {
            ErrorObject::new(
                staunch_protocol::codes::INTERNAL_ERROR,
                task.status_message
                    .clone()
                    .unwrap_or_else(|| "the task failed".into()),
            )
        })
}
