//! Helpers of the binary's tests: the real `staunch` spawned and driven over stdio ([`Proc`])
//! or HTTP ([`http`]) by the test kit's drivers, external clients, PostgreSQL schemas, TLS.

#![allow(dead_code)]

pub mod external;
pub mod http;
pub mod page;
pub mod pg;
pub mod tls;

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::Value;
use staunch_testkit::StdioClient;
use staunch_testkit::stdio::LogSource;
use tokio::process::{Child, Command};

pub const BIN: &str = env!("CARGO_BIN_EXE_staunch");

pub use staunch_testkit::stdio::is_response_to;

/// `staunch serve` (or `staunch proxy`) in a process of its own, driven over its stdin and
/// stdout by the test kit's [`StdioClient`], which it derefs to.
pub struct Proc {
    pub child: Child,
    client: StdioClient,
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
        let stdin = child.stdin.take().unwrap();
        let client = StdioClient::over(stdin, stdout, LogSource::File(log_path.clone()));
        Self {
            child,
            client,
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
}

impl std::ops::Deref for Proc {
    type Target = StdioClient;

    fn deref(&self) -> &StdioClient {
        &self.client
    }
}

impl std::ops::DerefMut for Proc {
    fn deref_mut(&mut self) -> &mut StdioClient {
        &mut self.client
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
