//! 2025-11-25 tasks: `tools/call` with `task: {ttl}` returns a `CreateTaskResult`; the
//! requester polls `tasks/get` (honouring `pollInterval`), then fetches `tasks/result`, and
//! cancels with `tasks/cancel` — never with `notifications/cancelled`, which the spec forbids
//! for tasks.

use std::future::pending;
use std::time::Duration;

use serde_json::{Value, json};
use staunch_protocol::ErrorObject;
use tokio::time::{Instant, sleep_until};

use crate::{CallOptions, Client, ClientError, Progress};

/// A task's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for the requester (elicitation, sampling).
    InputRequired,
    /// Done; `tasks/result` has the result.
    Completed,
    /// Done with an error; `tasks/result` has it.
    Failed,
    /// Cancelled; terminal.
    Cancelled,
    /// Something this client does not know.
    Other(String),
}

impl TaskStatus {
    fn parse(s: &str) -> Self {
        match s {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            other => Self::Other(other.to_string()),
        }
    }

    /// Whether the status can no longer change.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Other(s) => s,
        }
    }
}

/// A task as the server describes it (a 2025-11-25 `Task` or the extension's `DetailedTask`).
#[derive(Debug, Clone)]
pub struct Task {
    /// Its id.
    pub task_id: String,
    /// Its status.
    pub status: TaskStatus,
    /// The server's sentence about it.
    pub status_message: Option<String>,
    /// How often the server wants to be polled.
    pub poll_interval: Option<Duration>,
    /// The whole object.
    pub raw: Value,
}

impl Task {
    /// Reads a `Task` object (from `CreateTaskResult.task` or a `tasks/get` result).
    pub fn from_value(v: &Value) -> Option<Self> {
        Some(Self {
            task_id: v["taskId"].as_str()?.to_string(),
            status: TaskStatus::parse(v["status"].as_str()?),
            status_message: v["statusMessage"].as_str().map(str::to_string),
            // `pollInterval` in 2025-11-25, `pollIntervalMs` in the 2026 extension.
            poll_interval: v["pollInterval"]
                .as_u64()
                .or_else(|| v["pollIntervalMs"].as_u64())
                .map(Duration::from_millis),
            raw: v.clone(),
        })
    }
}

/// How to follow a task.
#[derive(Debug, Clone)]
pub struct TaskOptions {
    /// The `ttl` to request.
    pub ttl: Option<Duration>,
    /// Poll interval when the server gives none.
    pub default_poll: Duration,
    /// Bounds on the interval we actually use (the server's value is clamped to them).
    pub min_poll: Duration,
    /// See `min_poll`.
    pub max_poll: Duration,
    /// Timeout of each `tasks/*` request.
    pub request_timeout: Duration,
}

impl Default for TaskOptions {
    fn default() -> Self {
        Self {
            ttl: Some(Duration::from_secs(600)),
            default_poll: Duration::from_millis(500),
            min_poll: Duration::from_millis(20),
            max_poll: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// What happens while a task is followed.
#[derive(Debug)]
pub enum TaskEvent<'a> {
    /// The server created it.
    Created(&'a Task),
    /// A `tasks/get` answer.
    Status(&'a Task),
    /// A progress notification for the creating request's token.
    Progress(&'a Progress),
    /// We sent `tasks/cancel`; the server's answer.
    CancelSent(&'a Value),
}

/// How a followed task ended.
#[derive(Debug)]
pub enum TaskOutcome {
    /// The server did not create a task and answered the call directly.
    Immediate(Value),
    /// Completed or failed; the `tasks/result` answer.
    Finished {
        /// The final task.
        task: Task,
        /// The underlying result, or the JSON-RPC error it ended with.
        result: Result<Value, ErrorObject>,
    },
    /// It ended `cancelled` without us asking.
    Cancelled(Task),
}

impl Client {
    /// Calls a tool as a task and follows it to a terminal state. The caller's cancel token
    /// and `call.max_total` end it with `tasks/cancel` (and [`ClientError::Cancelled`] /
    /// [`ClientError::Timeout`]).
    pub async fn call_tool_task(
        &self,
        name: &str,
        arguments: Value,
        call: &CallOptions,
        topts: &TaskOptions,
        mut on_event: impl FnMut(TaskEvent<'_>) + Send,
    ) -> Result<TaskOutcome, ClientError> {
        let started = Instant::now();
        let hard = call.max_total.map(|d| started + d);
        let mut task_param = json!({});
        if let Some(ttl) = topts.ttl {
            task_param["ttl"] = json!(ttl.as_millis() as u64);
        }
        let p = self.start_request(
            staunch_protocol::mcp::methods::TOOLS_CALL,
            Some(json!({"name": name, "arguments": arguments, "task": task_param})),
            call.progress,
        )?;
        let mut on_progress = |pr: &Progress| on_event(TaskEvent::Progress(pr));
        let (created, mut progress) = p.wait_keep_progress(call, &mut on_progress).await;
        let created = created?;
        let Some(mut task) = created.get("task").and_then(Task::from_value) else {
            return Ok(TaskOutcome::Immediate(created));
        };
        on_event(TaskEvent::Created(&task));
        let req = CallOptions {
            timeout: Some(topts.request_timeout),
            max_total: Some(topts.request_timeout),
            progress: false,
            reset_on_progress: false,
            cancel: None,
        };
        while !task.status.is_terminal() {
            let wait = task
                .poll_interval
                .unwrap_or(topts.default_poll)
                .clamp(topts.min_poll, topts.max_poll);
            let next_poll = Instant::now() + wait;
            // Sleep until the next poll, passing on progress, unless the caller cancels or
            // the ceiling passes.
            let stop = loop {
                let next_progress = async {
                    match progress.as_mut() {
                        Some(s) => s.rx.recv().await,
                        None => pending().await,
                    }
                };
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
                    _ = cancelled => break Some(ClientError::Cancelled),
                    _ = ceiling => break Some(ClientError::Timeout {
                        elapsed: started.elapsed(),
                        ceiling: true,
                    }),
                    _ = sleep_until(next_poll) => break None,
                    Some(pr) = next_progress => on_event(TaskEvent::Progress(&pr)),
                }
            };
            if let Some(err) = stop {
                let r = self
                    .request("tasks/cancel", Some(json!({"taskId": task.task_id})), &req)
                    .await;
                if let Ok(v) = &r {
                    on_event(TaskEvent::CancelSent(v));
                }
                return Err(err);
            }
            let v = self
                .request("tasks/get", Some(json!({"taskId": task.task_id})), &req)
                .await?;
            task = Task::from_value(&v).ok_or_else(|| {
                ClientError::Protocol(format!("tasks/get answered without a task: {v}"))
            })?;
            on_event(TaskEvent::Status(&task));
        }
        drop(progress);
        match task.status {
            TaskStatus::Cancelled => Ok(TaskOutcome::Cancelled(task)),
            _ => {
                let result = match self
                    .request("tasks/result", Some(json!({"taskId": task.task_id})), &req)
                    .await
                {
                    Ok(v) => Ok(v),
                    Err(ClientError::Rpc(e)) => Err(e),
                    Err(e) => return Err(e),
                };
                Ok(TaskOutcome::Finished { task, result })
            }
        }
    }
}
