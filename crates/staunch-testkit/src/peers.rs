//! What `scripts/setup-tools` installs into `.tools/` and `benches/peers/`: the official SDKs'
//! peer servers (TypeScript and Python, over stdio and HTTP), the interpreters real clients run
//! on, and a loopback proxy that cuts a call's stream — for tests against servers and clients
//! of other makers.
//!
//! A test that needs them skips with a clear `SKIPPED:` line when they are missing, unless
//! `STAUNCH_REQUIRE_EXTERNAL=1` (set by `scripts/test` and CI), where a missing one fails.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path of an installed tool, or `None` after printing why the test is skipped.
pub fn installed(rel: &str, what: &str) -> Option<PathBuf> {
    let p = workspace_root().join(rel);
    if p.exists() {
        return Some(p);
    }
    if std::env::var("STAUNCH_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
        panic!(
            "{what} is missing at {} (run scripts/setup-tools)",
            p.display()
        );
    }
    eprintln!(
        "SKIPPED: {what} not installed at {} (run scripts/setup-tools)",
        p.display()
    );
    None
}

/// Python with the `mcp` SDK (1.x).
pub fn python() -> Option<PathBuf> {
    installed(".tools/py/bin/python", "Python mcp client")
}

/// Node 22 with the TypeScript SDK.
pub fn node() -> Option<PathBuf> {
    installed(
        ".tools/node22/node_modules/node/bin/node",
        "Node 22 with the TS SDK",
    )
}

/// Python with the `mcp` SDK 2.x.
pub fn python2() -> Option<PathBuf> {
    installed(".tools/py2/bin/python", "Python mcp 2.x client")
}

/// Node 22, when the TypeScript SDK v2 client is installed beside it.
pub fn node_with_ts2() -> Option<PathBuf> {
    installed(
        ".tools/ts2/node_modules/@modelcontextprotocol/client/package.json",
        "TypeScript SDK v2 client",
    )?;
    node()
}

/// The SDK peers' interpreters, or `None` (after saying SKIPPED) when `.tools/` is missing.
pub struct Peers {
    /// Node 22, with the TypeScript SDK beside it.
    pub node: PathBuf,
    /// Python with the `mcp` SDK.
    pub python: PathBuf,
}

impl Peers {
    /// The peers, or `None` after saying why `test` is skipped (a panic instead with
    /// `STAUNCH_REQUIRE_EXTERNAL=1`).
    pub fn find(test: &str) -> Option<Self> {
        let r = workspace_root();
        let node = r.join(".tools/node22/node_modules/node/bin/node");
        let python = r.join(".tools/py/bin/python");
        let sdk = r.join("benches/peers/ts/node_modules/@modelcontextprotocol/sdk");
        if node.exists() && python.exists() && sdk.exists() {
            return Some(Self { node, python });
        }
        if std::env::var("STAUNCH_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
            panic!(
                "{test}: STAUNCH_REQUIRE_EXTERNAL=1 but the peers are not installed (scripts/setup-tools)"
            );
        }
        eprintln!("SKIPPED: {test}: the SDK peers are not installed (run scripts/setup-tools)");
        None
    }

    /// The TypeScript peer's command line over stdio.
    pub fn ts_stdio(&self) -> Vec<String> {
        vec![
            self.node.display().to_string(),
            workspace_root()
                .join("benches/peers/ts/server.mjs")
                .display()
                .to_string(),
            "stdio".into(),
        ]
    }

    /// The Python peer's command line over stdio.
    pub fn py_stdio(&self) -> Vec<String> {
        vec![
            self.python.display().to_string(),
            workspace_root()
                .join("benches/peers/python/server.py")
                .display()
                .to_string(),
            "stdio".into(),
        ]
    }

    /// The TS peer over HTTP (with tasks), on a free port.
    pub async fn ts_http(&self) -> Process {
        let script = workspace_root().join("benches/peers/ts/server.mjs");
        Process::peer(&self.node, &[script.display().to_string()], &["--tasks"]).await
    }

    /// The Python peer over HTTP, on a free port.
    pub async fn py_http(&self) -> Process {
        let script = workspace_root().join("benches/peers/python/server.py");
        Process::peer(&self.python, &[script.display().to_string()], &[]).await
    }
}

/// A server process on a loopback port (an SDK peer, or the `staunch` binary); killed on drop.
#[derive(Debug)]
pub struct Process {
    /// The process.
    pub child: Child,
    /// Its loopback port.
    pub port: u16,
    /// Its lifecycle log (a staunch process).
    pub log_path: Option<PathBuf>,
    _dir: Option<tempfile::TempDir>,
}

impl Process {
    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// `BIN serve --http 127.0.0.1:0` (a SQLite store and the lifecycle log in a directory of
    /// its own): the real `staunch` binary, which its own integration tests name.
    pub async fn staunch(bin: &Path, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("lifecycle.jsonl");
        let mut child = Command::new(bin)
            .args(["serve", "--http", "127.0.0.1:0", "--store"])
            .arg(dir.path().join("staunch.db"))
            .arg("--log-file")
            .arg(&log)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn staunch serve --http");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let port = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(l)) = lines.next_line().await {
                if let Some(rest) = l.split("http://127.0.0.1:").nth(1) {
                    return rest
                        .split(|c: char| !c.is_ascii_digit())
                        .next()
                        .unwrap()
                        .parse()
                        .unwrap();
                }
            }
            panic!("staunch serve exited before listening");
        })
        .await
        .expect("staunch serve listens");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child,
            port,
            log_path: Some(log),
            _dir: Some(dir),
        }
    }

    async fn peer(program: &Path, script: &[String], extra: &[&str]) -> Self {
        let port = free_port().await;
        let child = Command::new(program)
            .args(script)
            .arg("http")
            .arg(port.to_string())
            .args(extra)
            .current_dir(workspace_root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn peer");
        wait_listening(port).await;
        Self {
            child,
            port,
            log_path: None,
            _dir: None,
        }
    }

    /// Lifecycle log lines (staunch only).
    pub fn log_lines(&self) -> Vec<Value> {
        let Some(p) = &self.log_path else {
            return Vec::new();
        };
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Lifecycle log lines, waiting (at most 10 s) until `pred` holds on them: a background
    /// writer flushes the log, so a request's line can land just after its answer did.
    pub async fn log_until(&self, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let end = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.log_lines();
            if pred(&lines) || std::time::Instant::now() > end {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A loopback port nothing listens on (for a peer that takes its port as an argument).
pub async fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

/// Waits (at most 15 s) until something listens on `port`.
pub async fn wait_listening(port: u16) {
    for _ in 0..300 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on port {port} after 15 s");
}

/// A loopback TCP proxy that cuts, once, the first connection on which the server starts
/// sending progress (a call's SSE stream), and counts `tools/call` requests passing through.
#[derive(Debug)]
pub struct DropProxy {
    /// Its port.
    pub port: u16,
    /// `tools/call` requests that passed through.
    pub tool_calls: Arc<AtomicUsize>,
    /// Whether it cut a connection.
    pub dropped: Arc<AtomicBool>,
}

impl DropProxy {
    /// A proxy in front of `upstream` (a loopback port).
    pub async fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let tool_calls = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicBool::new(false));
        let (calls, drop_flag) = (tool_calls.clone(), dropped.clone());
        tokio::spawn(async move {
            // Bounded: a test makes a handful of connections.
            for _ in 0..1000 {
                let Ok((down, _)) = listener.accept().await else {
                    return;
                };
                let Ok(up) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    return;
                };
                tokio::spawn(pipe(down, up, calls.clone(), drop_flag.clone()));
            }
        });
        Self {
            port,
            tool_calls,
            dropped,
        }
    }

    /// The MCP endpoint through it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

async fn pipe(down: TcpStream, up: TcpStream, calls: Arc<AtomicUsize>, dropped: Arc<AtomicBool>) {
    let (mut dr, mut dw) = down.into_split();
    let (mut ur, mut uw) = up.into_split();
    let to_server = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match dr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            calls.fetch_add(count(chunk, b"\"tools/call\""), Ordering::SeqCst);
            if uw.write_all(chunk).await.is_err() {
                return;
            }
        }
    };
    let to_client = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match ur.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            if dw.write_all(chunk).await.is_err() {
                return;
            }
            if count(chunk, b"notifications/progress") > 0 && !dropped.swap(true, Ordering::SeqCst)
            {
                return; // cut this connection, mid-call
            }
        }
    };
    // Whichever direction ends first ends the connection (both halves are dropped).
    tokio::select! {
        _ = to_server => {}
        _ = to_client => {}
    }
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}
