//! A tool call run as a task, followed to its end in the era the connection speaks
//! ([`Client::call_tool_task`]).
//!
//! In a session (2025-11-25 tasks) the call asks for a task (`task: {ttl}`) and gets a
//! `CreateTaskResult` when the server makes one; the requester polls `tasks/get` (honouring
//! `pollInterval`), then fetches `tasks/result`. Without a session (the 2026-07-28 tasks
//! extension, SEP-2663) there is no `task` parameter: every request declares the extension in
//! its own `clientCapabilities.extensions` (a `tasks/get` without it is refused with -32021),
//! the *server* decides whether a call becomes a task (`resultType: "task"`, a flat `Task`
//! with `ttlMs` and `pollIntervalMs`), and `tasks/get`'s `DetailedTask` carries the outcome
//! itself (`result` when `completed`, `error` when `failed`); a task that needs input moves to
//! `input_required` with `inputRequests`, answered by `tasks/update {inputResponses}`. Either
//! way a task is given up with `tasks/cancel`, never with `notifications/cancelled`, which the
//! spec forbids for tasks.

use std::collections::HashSet;
use std::future::{Future, pending};
use std::time::Duration;

use serde_json::{Value, json};
use staunch_protocol::ErrorObject;
use staunch_protocol::mcp::methods;
use tokio::time::{Instant, sleep_until};

use crate::client::ProgressStream;
use crate::era::ResultType;
use crate::input::{InputRequests, InputResponses, MAX_ROUNDS};
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

/// How the connection runs a task: asked for, its outcome fetched with `tasks/result` (in a
/// session); or declared on every request, decided by the server, its outcome inlined in
/// `tasks/get` and its questions answered with `tasks/update` (the tasks extension).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Face {
    Asked,
    Declared,
}

impl Face {
    fn of(client: &Client) -> Self {
        if client.has_session() {
            Face::Asked
        } else {
            Face::Declared
        }
    }

    /// The task a call's result describes; `None` when the server answered the call itself.
    fn created(self, result: &Value) -> Result<Option<Task>, ClientError> {
        match self {
            Face::Asked => Ok(result.get("task").and_then(Task::from_value)),
            Face::Declared if ResultType::of(result)? != ResultType::Task => Ok(None),
            Face::Declared => Task::from_value(result).map(Some).ok_or_else(|| {
                ClientError::Protocol(format!("a task result without taskId/status: {result}"))
            }),
        }
    }

    /// The params of a `tasks/*` request about `task_id`, with `more` fields.
    fn params(self, client: &Client, task_id: &str, more: Value) -> Result<Value, ClientError> {
        let mut params = json!({"taskId": task_id});
        if let (Value::Object(p), Value::Object(more)) = (&mut params, more) {
            p.extend(more);
        }
        match self {
            Face::Asked => Ok(params),
            Face::Declared => client.with_tasks_extension(params),
        }
    }
}

impl Client {
    /// Calls a tool as a task and follows it to the end, in the era the connection speaks:
    /// an answer at once ([`TaskOutcome::Immediate`]) when the server runs the call itself,
    /// else a task polled with `tasks/get` at the server's poll interval (clamped by `topts`).
    /// `answer` is asked for the inputs of input-required rounds — the call's own rounds and
    /// those of a task that is `input_required` (answered with `tasks/update`); a caller that
    /// cannot answer passes [`no_answers`](crate::input::no_answers). The caller's cancel
    /// token and `call.max_total` end a task with `tasks/cancel` (and
    /// [`ClientError::Cancelled`] / [`ClientError::Timeout`]).
    pub async fn call_tool_task<F, Fut>(
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
        let face = Face::of(self);
        let started = Instant::now();
        let hard = call.max_total.map(|d| started + d);
        let params = json!({"name": name, "arguments": arguments});
        // A session's task keeps the creating request's progress: it outlives the call.
        let (created, mut progress) = match face {
            Face::Asked => {
                let mut params = params;
                params["task"] = match topts.ttl {
                    Some(ttl) => json!({"ttl": ttl.as_millis() as u64}),
                    None => json!({}),
                };
                let p = self.start_request(methods::TOOLS_CALL, Some(params), call.progress)?;
                let mut on_progress = |pr: &Progress| on_event(TaskEvent::Progress(pr));
                let (created, progress) = p.wait_keeping_progress(call, &mut on_progress).await;
                (created?, progress)
            }
            Face::Declared => {
                let params = self.with_tasks_extension(params)?;
                let on_progress = |p: &Progress| on_event(TaskEvent::Progress(p));
                let created = self
                    .request_with_input(methods::TOOLS_CALL, params, call, on_progress, &mut answer)
                    .await?;
                (created, None)
            }
        };
        let Some(mut task) = face.created(&created)? else {
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
        // Input rounds answered so far: the keys of `inputRequests` are unique for the life of
        // the task, so a key already answered (an update the server has not applied yet) is not
        // asked again.
        let mut answered = HashSet::new();
        let mut rounds = 0;
        loop {
            match task.status {
                TaskStatus::Completed | TaskStatus::Failed => {
                    drop(progress);
                    let result = self.task_result(face, &task, &req).await?;
                    return Ok(TaskOutcome::Finished { task, result });
                }
                TaskStatus::Cancelled => return Ok(TaskOutcome::Cancelled(task)),
                // A session's task asks on the session (its requests arrive on the
                // connection); only a declared one asks in its `tasks/get` answer.
                TaskStatus::InputRequired if face == Face::Declared => {
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
                        let update = json!({"inputResponses": responses});
                        let params = face.params(self, &task.task_id, update)?;
                        self.request("tasks/update", Some(params), &req).await?;
                        answered.extend(keys);
                    }
                }
                _ => {}
            }
            let wait = task
                .poll_interval
                .unwrap_or(topts.default_poll)
                .clamp(topts.min_poll, topts.max_poll);
            let until = Instant::now() + wait;
            if let Some(stop) = wait_or_stop(until, hard, call, &mut progress, &mut on_event).await
            {
                let params = face.params(self, &task.task_id, json!({}))?;
                if let Ok(v) = &self.request("tasks/cancel", Some(params), &req).await {
                    on_event(TaskEvent::CancelSent(v));
                }
                return Err(match stop {
                    Stop::Cancelled => ClientError::Cancelled,
                    Stop::Ceiling => ClientError::Timeout {
                        elapsed: started.elapsed(),
                        ceiling: true,
                    },
                });
            }
            let params = face.params(self, &task.task_id, json!({}))?;
            let v = self.request("tasks/get", Some(params), &req).await?;
            task = Task::from_value(&v).ok_or_else(|| {
                ClientError::Protocol(format!("tasks/get answered without a task: {v}"))
            })?;
            on_event(TaskEvent::Status(&task));
        }
    }

    /// The outcome of a completed or failed task: fetched with `tasks/result` in a session,
    /// carried by the last `tasks/get` answer without one.
    async fn task_result(
        &self,
        face: Face,
        task: &Task,
        req: &CallOptions,
    ) -> Result<Result<Value, ErrorObject>, ClientError> {
        if face == Face::Declared {
            return Ok(match task.status {
                TaskStatus::Failed => Err(task_error(task)),
                _ => Ok(task.raw.get("result").cloned().unwrap_or(Value::Null)),
            });
        }
        let params = face.params(self, &task.task_id, json!({}))?;
        match self.request("tasks/result", Some(params), req).await {
            Ok(v) => Ok(Ok(v)),
            Err(ClientError::Rpc(e)) => Ok(Err(e)),
            Err(e) => Err(e),
        }
    }
}

/// Why following a task stopped early.
enum Stop {
    Cancelled,
    Ceiling,
}

/// Sleeps until `until`, passing on the task's progress, unless the caller cancels or the
/// ceiling passes first.
async fn wait_or_stop(
    until: Instant,
    hard: Option<Instant>,
    call: &CallOptions,
    progress: &mut Option<ProgressStream>,
    on_event: &mut (impl FnMut(TaskEvent<'_>) + Send),
) -> Option<Stop> {
    loop {
        let next_progress = async {
            match progress.as_mut() {
                Some(s) => s.next().await,
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
            _ = cancelled => return Some(Stop::Cancelled),
            _ = ceiling => return Some(Stop::Ceiling),
            _ = sleep_until(until) => return None,
            Some(pr) = next_progress => on_event(TaskEvent::Progress(&pr)),
        }
    }
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
