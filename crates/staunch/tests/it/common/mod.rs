//! A raw JSON-RPC driver for `staunch serve` over stdio: spawns the real binary, writes lines,
//! and keeps every message it reads so tests can assert on order and timing.

#![allow(dead_code)]

pub mod external;
pub mod http;
pub mod page;
pub mod pg;
pub mod tls;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

pub const BIN: &str = env!("CARGO_BIN_EXE_staunch");

/// One message read from the server, with when it arrived.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    pub msg: Value,
}

pub struct Proc {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::UnboundedReceiver<Seen>,
    pub history: Vec<Seen>,
    pub log_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Proc {
    /// Spawns `staunch serve` with extra flags; the lifecycle log goes to a temp file.
    pub async fn spawn(extra: &[&str]) -> Self {
        Self::spawn_sub("serve", extra).await
    }

    /// Spawns `staunch SUB` (`serve`, or `proxy` with its upstream after `--` in `extra`).
    pub async fn spawn_sub(sub: &str, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("lifecycle.jsonl");
        // No stray staunch.db in the working directory unless a test names a store.
        let store: &[&str] = if extra.contains(&"--store") {
            &[]
        } else {
            &["--store", ":memory:"]
        };
        let mut child = Command::new(BIN)
            .arg(sub)
            .arg("--log-file")
            .arg(&log_path)
            .args(store)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn staunch");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let msg: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("server wrote non-JSON on stdout: {line:?}: {e}"));
                if tx
                    .send(Seen {
                        at: Instant::now(),
                        msg,
                    })
                    .is_err()
                {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            rx,
            history: Vec::new(),
            log_path,
            _dir: dir,
        }
    }

    /// Spawns and initializes.
    pub async fn ready(extra: &[&str]) -> Self {
        let mut p = Self::spawn(extra).await;
        p.initialize("2025-11-25").await;
        p
    }

    pub async fn initialize(&mut self, version: &str) -> Value {
        self.request(
            json!("init"),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
        let r = self.response(&json!("init")).await;
        self.notify("notifications/initialized", json!({})).await;
        r
    }

    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, v: Value) {
        self.send_raw(&v.to_string()).await;
    }

    pub async fn request(&mut self, id: Value, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Calls a tool; `token` adds a progress token.
    pub async fn call(&mut self, id: Value, tool: &str, args: Value, token: Option<Value>) {
        let mut params = json!({"name": tool, "arguments": args});
        if let Some(t) = token {
            params["_meta"] = json!({"progressToken": t});
        }
        self.request(id, "tools/call", params).await;
    }

    pub async fn cancel(&mut self, id: Value) {
        self.notify(
            "notifications/cancelled",
            json!({"requestId": id, "reason": "test cancel"}),
        )
        .await;
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Reads until `pred` matches a new message or `limit` passes.
    pub async fn wait_for(
        &mut self,
        limit: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        if let Some(s) = self.history.iter().find(|s| pred(&s.msg)) {
            return Some(s.msg.clone());
        }
        let end = Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(end, self.rx.recv()).await {
                Ok(Some(seen)) => {
                    let hit = pred(&seen.msg);
                    let msg = seen.msg.clone();
                    self.history.push(seen);
                    if hit {
                        return Some(msg);
                    }
                }
                _ => return None,
            }
        }
    }

    /// Reads everything that arrives within `d`.
    pub async fn pump(&mut self, d: Duration) {
        let _ = self.wait_for(d, |_| false).await;
    }

    /// The response to `id` (panics after 10 s).
    pub async fn response(&mut self, id: &Value) -> Value {
        let id = id.clone();
        self.wait_for(Duration::from_secs(10), |m| is_response_to(m, &id))
            .await
            .unwrap_or_else(|| panic!("no response to {id}"))
    }

    pub fn responses_to(&self, id: &Value) -> usize {
        self.history
            .iter()
            .filter(|s| is_response_to(&s.msg, id))
            .count()
    }

    /// Progress notifications for `token`, with arrival times.
    pub fn progress(&self, token: &Value) -> Vec<(Instant, f64)> {
        self.history
            .iter()
            .filter(|s| {
                s.msg["method"] == "notifications/progress"
                    && s.msg["params"]["progressToken"] == *token
            })
            .map(|s| (s.at, s.msg["params"]["progress"].as_f64().unwrap()))
            .collect()
    }

    /// Lifecycle lines, waiting (bounded) until `pred` holds on them.
    pub async fn log_until(&self, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.log_lines();
            if pred(&lines) || Instant::now() > end {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log_path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("lifecycle line is JSON"))
            .collect()
    }
}

/// Whether `pid` is a live process (a zombie counts as dead).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next())
                .unwrap_or("X");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// A plain HTTP/1.1 GET over loopback; the whole answer (head and body) as text.
pub async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

pub fn is_response_to(m: &Value, id: &Value) -> bool {
    m.get("method").is_none() && m.get("id") == Some(id)
}

/// Lifecycle lines of one request.
pub fn events_of<'a>(lines: &'a [Value], id: &Value) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["request_id"] == *id).collect()
}

pub fn has_event(lines: &[Value], id: &Value, event: &str) -> bool {
    lines
        .iter()
        .any(|l| l["request_id"] == *id && l["event"] == event)
}

/// The tool names of a `tools/list` response, sorted.
pub fn sorted_tool_names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a tools/list result: {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect();
    n.sort();
    n
}

/// Fast job loops for tests (lease, heartbeat, reaper, claim poll, suggested poll, cancel
/// grace), followed by `extra`.
pub fn job_flags(extra: &[&'static str]) -> Vec<&'static str> {
    const FAST: &[&str] = &[
        "--job-lease-ms",
        "900",
        "--job-heartbeat-ms",
        "150",
        "--job-reap-ms",
        "100",
        "--job-claim-poll-ms",
        "50",
        "--job-poll-after-ms",
        "100",
        "--job-cancel-grace-ms",
        "500",
    ];
    FAST.iter().chain(extra).copied().collect()
}
