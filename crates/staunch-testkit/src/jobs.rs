//! [`JobsClient`]: a client of the demo's job tools over one stdio session — `start_x`,
//! `get_x` polled to a status, plain calls — and the side effects `import_rows` leaves in its
//! SQLite file, read straight from it: a row written after a cancel, or a second execution,
//! would show. [`get_until`]: `get_x` over HTTP, polled until it says what a test waits for.

use std::ops::DerefMut;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::StdioClient;
use crate::http::{Endpoint, tool_structured};

/// How long a poll waits before the test fails.
const LIMIT: Duration = Duration::from_secs(20);

/// A stdio session (in-process, or a spawned server's) used through the job tools.
#[derive(Debug)]
pub struct JobsClient<P> {
    /// The session.
    pub p: P,
    /// The `initialize` response.
    pub init: Value,
    next: i64,
}

impl<P: DerefMut<Target = StdioClient>> JobsClient<P> {
    /// Initializes the session at 2025-11-25.
    pub async fn new(mut p: P) -> Self {
        let init = p.initialize("2025-11-25").await;
        Self { p, init, next: 100 }
    }

    /// A request; the whole response.
    pub async fn rpc(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = json!(self.next);
        self.p.request(id.clone(), method, params).await;
        self.p.response(&id).await
    }

    /// A tool call; its `result`.
    pub async fn tool(&mut self, name: &str, args: Value) -> Value {
        let r = self
            .rpc("tools/call", json!({"name": name, "arguments": args}))
            .await;
        r["result"].clone()
    }

    /// A tool call whose result must be structured and not an error: its `structuredContent`.
    pub async fn ok(&mut self, name: &str, args: Value) -> Value {
        let r = self.tool(name, args).await;
        assert_ne!(r["isError"], true, "{name}: {r}");
        r["structuredContent"].clone()
    }

    /// Polls `get_<tool>` until the status is one of `done`.
    pub async fn get_until(&mut self, tool: &str, job_id: &str, done: &[&str]) -> Value {
        let end = Instant::now() + LIMIT;
        loop {
            let v = self
                .ok(&format!("get_{tool}"), json!({"job_id": job_id}))
                .await;
            if done.contains(&v["status"].as_str().unwrap_or_default()) {
                return v;
            }
            assert!(Instant::now() < end, "job never reached {done:?}: {v}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Rows `import_rows` wrote for a job.
pub fn rows(db: &Path, job_id: &str) -> i64 {
    let c = rusqlite::Connection::open(db).expect("the SQLite file opens");
    c.busy_timeout(Duration::from_secs(5))
        .expect("a busy timeout");
    c.query_row(
        "SELECT COUNT(*) FROM demo_import_rows WHERE job_id = ?1",
        [job_id],
        |r| r.get(0),
    )
    .unwrap_or(0)
}

/// A job's state as stored.
pub fn stored_state(db: &Path, job_id: &str) -> String {
    let c = rusqlite::Connection::open(db).expect("the SQLite file opens");
    c.busy_timeout(Duration::from_secs(5))
        .expect("a busy timeout");
    c.query_row(
        "SELECT state FROM staunch_jobs WHERE id = ?1",
        [job_id],
        |r| r.get(0),
    )
    .expect("the job is stored")
}

/// Waits (bounded) until `pred` holds; fails the test naming `what` otherwise.
pub async fn until(what: &str, mut pred: impl FnMut() -> bool) {
    let end = Instant::now() + LIMIT;
    while !pred() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `get_{tool}` of `job` in session `sid` of `s`, polled until `pred` holds on it (the test
/// fails after 20 s, with the last answer).
pub async fn get_until(
    s: &Endpoint,
    sid: &str,
    job: &str,
    tool: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let end = Instant::now() + LIMIT;
    loop {
        let v = tool_structured(s, sid, &format!("get_{tool}"), json!({"job_id": job})).await;
        if pred(&v) {
            return v;
        }
        assert!(Instant::now() < end, "timed out; last: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
