//! The tool face of durable jobs: `start_x` returns `{job_id, status, poll_after_ms}` at once,
//! `get_x {job_id}` reports status, progress and the outcome, `cancel_x {job_id}` asks it to
//! stop.
//!
//! Starting is the one step that must not happen twice. Each logical call gets one
//! `idempotency_key` (generated unless the caller brings one) and every retry of `start_x` by
//! this client — after a timeout, a lost stream, a busy server — carries the *same* key, so
//! the server returns the job it already has instead of starting a second one.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use crate::result::{is_tool_error, payload, text_of};
use crate::{CallOptions, Client, ClientError};

/// How to start and follow a job.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// The key to send; `None` generates one per call.
    pub idempotency_key: Option<String>,
    /// Attempts at `start_x` (the first included) on retryable errors.
    pub start_attempts: u32,
    /// Pause before retry *n* is `n × retry_backoff`.
    pub retry_backoff: Duration,
    /// Poll interval when the server gives no `poll_after_ms`.
    pub default_poll: Duration,
    /// Bounds on the poll interval actually used.
    pub min_poll: Duration,
    /// See `min_poll`.
    pub max_poll: Duration,
    /// After `cancel_x`, how long to keep polling for the terminal state.
    pub cancel_wait: Duration,
    /// Consecutive failed polls tolerated (the job keeps running on the server meanwhile).
    pub poll_failures: u32,
}

impl Default for JobOptions {
    fn default() -> Self {
        Self {
            idempotency_key: None,
            start_attempts: 3,
            retry_backoff: Duration::from_millis(250),
            default_poll: Duration::from_millis(500),
            min_poll: Duration::from_millis(20),
            max_poll: Duration::from_secs(5),
            cancel_wait: Duration::from_secs(10),
            poll_failures: 5,
        }
    }
}

/// The handle `start_x` returned.
#[derive(Debug, Clone)]
pub struct JobHandle {
    /// The job's id.
    pub job_id: String,
    /// Its status at start.
    pub status: String,
    /// When to poll first.
    pub poll_after: Option<Duration>,
    /// The whole payload.
    pub raw: Value,
}

/// One `get_x` answer.
#[derive(Debug, Clone)]
pub struct JobStatus {
    /// `queued`, `running`, `succeeded`, `failed`, `cancelled` (or the server's word).
    pub status: String,
    /// The server's sentence on what to do next, if it gave one.
    pub next: Option<String>,
    /// The whole payload.
    pub raw: Value,
}

impl JobStatus {
    fn from_payload(v: Value) -> Option<Self> {
        let status = v.get("status")?.as_str()?.to_string();
        let next = ["next", "next_step", "what_next", "hint"]
            .iter()
            .find_map(|k| v[*k].as_str())
            .map(str::to_string);
        Some(Self {
            status,
            next,
            raw: v,
        })
    }

    /// Whether the job can no longer change.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.status.as_str(),
            "succeeded" | "completed" | "done" | "failed" | "error" | "cancelled" | "canceled"
        )
    }

    /// Whether it ended well.
    pub fn succeeded(&self) -> bool {
        matches!(self.status.as_str(), "succeeded" | "completed" | "done")
    }

    /// Whether it ended cancelled.
    pub fn cancelled(&self) -> bool {
        matches!(self.status.as_str(), "cancelled" | "canceled")
    }

    /// `(done, total, message)` from `progress`, which may be a number or an object
    /// (`{done|progress|current, total, message}`).
    pub fn progress(&self) -> Option<(f64, Option<f64>, Option<String>)> {
        let p = self.raw.get("progress")?;
        if let Some(n) = p.as_f64() {
            return Some((n, self.raw["total"].as_f64(), None));
        }
        let done = ["done", "progress", "current", "completed"]
            .iter()
            .find_map(|k| p[*k].as_f64())?;
        Some((
            done,
            p["total"].as_f64(),
            p["message"].as_str().map(str::to_string),
        ))
    }

    /// The job's result, if it has one.
    pub fn result(&self) -> Option<&Value> {
        self.raw.get("result").filter(|r| !r.is_null())
    }

    /// The job's error, if it has one.
    pub fn error(&self) -> Option<&Value> {
        self.raw.get("error").filter(|r| !r.is_null())
    }
}

/// What happens while a job is started and followed.
#[derive(Debug)]
pub enum JobEvent<'a> {
    /// `start_x` failed in a retryable way; it is tried again with the same key.
    StartRetry {
        /// The attempt that failed (1-based).
        attempt: u32,
        /// Why.
        error: &'a ClientError,
    },
    /// The job exists.
    Started(&'a JobHandle),
    /// A `get_x` answer.
    Status(&'a JobStatus),
    /// We asked `cancel_x`; its answer.
    CancelSent(&'a Value),
}

/// How a followed job ended.
#[derive(Debug)]
pub struct JobOutcome {
    /// The handle from `start_x`.
    pub handle: JobHandle,
    /// The last `get_x` answer (terminal unless `interrupted` and the wait ran out).
    pub last: JobStatus,
    /// The key the job was started with.
    pub idempotency_key: String,
    /// How many `start_x` requests it took.
    pub start_attempts: u32,
    /// Set when this client cancelled the job (caller cancel or ceiling).
    pub interrupted: Option<ClientError>,
}

/// `start_x` → (`get_x`, `cancel_x`); `None` when the name has no `start_` prefix.
pub fn job_tool_names(start_tool: &str) -> Option<(String, String)> {
    let base = start_tool
        .strip_prefix("start_")
        .filter(|b| !b.is_empty())?;
    Some((format!("get_{base}"), format!("cancel_{base}")))
}

/// A fresh key: 128 random bits, hex.
pub fn new_idempotency_key() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: fall back to time and address entropy; a key only has to be
        // unique among this client's calls.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b = t.to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Client {
    /// Starts a job with `start_tool` and follows it with `get_x` to a terminal state.
    ///
    /// `args` must be an object; `idempotency_key` is added unless present. The caller's
    /// cancel token or `call.max_total` sends `cancel_x` and then waits (bounded) for the
    /// terminal state, which is returned with `interrupted` set.
    pub async fn call_job(
        &self,
        start_tool: &str,
        args: Value,
        call: &CallOptions,
        opts: &JobOptions,
        mut on_event: impl FnMut(JobEvent<'_>) + Send,
    ) -> Result<JobOutcome, ClientError> {
        let (get_tool, cancel_tool) = job_tool_names(start_tool).ok_or_else(|| {
            ClientError::Protocol(format!("{start_tool} is not a job tool (no start_ prefix)"))
        })?;
        let Value::Object(mut args) = args else {
            return Err(ClientError::Protocol(
                "job arguments must be an object".into(),
            ));
        };
        let key = match args.get("idempotency_key").and_then(Value::as_str) {
            Some(k) => k.to_string(),
            None => opts
                .idempotency_key
                .clone()
                .unwrap_or_else(new_idempotency_key),
        };
        args.insert("idempotency_key".into(), json!(key));
        let args = Value::Object(args);
        let started = Instant::now();
        let hard = call.max_total.map(|d| started + d);
        // Each start/get/cancel is short: the idle timeout bounds it, and its expiry stays a
        // retryable timeout (the job's own ceiling is enforced by the loop below).
        let quick = CallOptions {
            progress: false,
            cancel: None,
            ..call.clone()
        };

        // Start, retrying with the same key. The caller's cancel is deliberately not applied
        // to a start in flight: the server may already have created the job, and only its id
        // lets us cancel it, so a cancel takes effect right after the start answers (below).
        let mut attempt = 0;
        let handle = loop {
            attempt += 1;
            match self
                .call_tool(start_tool, args.clone(), &quick, |_| {})
                .await
            {
                Ok(r) if is_tool_error(&r) => {
                    return Err(ClientError::Tool(text_of(&r)));
                }
                Ok(r) => break parse_handle(&r)?,
                Err(e) if e.is_retryable() && attempt < opts.start_attempts.max(1) => {
                    on_event(JobEvent::StartRetry { attempt, error: &e });
                    sleep(opts.retry_backoff.saturating_mul(attempt)).await;
                }
                Err(e) => return Err(e),
            }
        };
        on_event(JobEvent::Started(&handle));

        let mut poll = handle.poll_after.unwrap_or(opts.default_poll);
        let mut failures = 0;
        let mut interrupted: Option<ClientError> = None;
        let mut cancel_deadline: Option<Instant> = None;
        let mut last = JobStatus {
            status: handle.status.clone(),
            next: None,
            raw: handle.raw.clone(),
        };
        loop {
            let wake = Instant::now() + poll.clamp(opts.min_poll, opts.max_poll);
            if interrupted.is_none() {
                let stop = tokio::select! {
                    biased;
                    _ = cancelled(call) => Some(ClientError::Cancelled),
                    _ = until(hard) => Some(ClientError::Timeout {
                        elapsed: started.elapsed(),
                        ceiling: true,
                    }),
                    _ = tokio::time::sleep_until(wake) => None,
                };
                if let Some(err) = stop {
                    let r = self
                        .call_tool(
                            &cancel_tool,
                            json!({"job_id": handle.job_id}),
                            &quick,
                            |_| {},
                        )
                        .await;
                    if let Ok(v) = &r {
                        on_event(JobEvent::CancelSent(v));
                    }
                    interrupted = Some(err);
                    cancel_deadline = Some(Instant::now() + opts.cancel_wait);
                }
            } else {
                tokio::time::sleep_until(wake).await;
            }
            if cancel_deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            match self
                .call_tool(&get_tool, json!({"job_id": handle.job_id}), &quick, |_| {})
                .await
            {
                Ok(r) if is_tool_error(&r) => return Err(ClientError::Tool(text_of(&r))),
                Ok(r) => {
                    failures = 0;
                    last = payload(&r)
                        .and_then(JobStatus::from_payload)
                        .ok_or_else(|| {
                            ClientError::Protocol(format!("{get_tool} gave no status: {r}"))
                        })?;
                    on_event(JobEvent::Status(&last));
                    if last.is_terminal() {
                        break;
                    }
                    if let Some(ms) = last.raw["poll_after_ms"].as_u64() {
                        poll = Duration::from_millis(ms);
                    }
                }
                Err(e) if e.is_retryable() && failures < opts.poll_failures => failures += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(JobOutcome {
            handle,
            last,
            idempotency_key: key,
            start_attempts: attempt,
            interrupted,
        })
    }
}

fn parse_handle(r: &Value) -> Result<JobHandle, ClientError> {
    let p = payload(r)
        .ok_or_else(|| ClientError::Protocol(format!("start gave no job handle: {r}")))?;
    let job_id = match &p["job_id"] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return Err(ClientError::Protocol(format!("start gave no job_id: {p}"))),
    };
    Ok(JobHandle {
        job_id,
        status: p["status"].as_str().unwrap_or("queued").to_string(),
        poll_after: p["poll_after_ms"].as_u64().map(Duration::from_millis),
        raw: p,
    })
}

async fn cancelled(call: &CallOptions) {
    match &call.cancel {
        Some(t) => t.cancelled().await,
        None => std::future::pending().await,
    }
}

async fn until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys() {
        assert_eq!(
            job_tool_names("start_import_rows"),
            Some(("get_import_rows".into(), "cancel_import_rows".into()))
        );
        assert_eq!(job_tool_names("import_rows"), None);
        assert_eq!(job_tool_names("start_"), None);
        let (a, b) = (new_idempotency_key(), new_idempotency_key());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn status_progress_shapes() {
        let s = JobStatus::from_payload(
            json!({"status":"running","progress":{"done":3,"total":10,"message":"m"}}),
        )
        .unwrap();
        assert_eq!(s.progress(), Some((3.0, Some(10.0), Some("m".into()))));
        assert!(!s.is_terminal());
        let s =
            JobStatus::from_payload(json!({"status":"succeeded","progress":5,"result":{"x":1}}))
                .unwrap();
        assert_eq!(s.progress(), Some((5.0, None, None)));
        assert!(s.succeeded() && s.is_terminal());
        assert_eq!(s.result(), Some(&json!({"x":1})));
    }
}
