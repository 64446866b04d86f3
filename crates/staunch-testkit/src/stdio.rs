//! [`StdioClient`]: a JSON-RPC client of one stdio session, by hand — lines written, every
//! message read kept with when it arrived, so tests assert on order and timing — and the
//! session's lifecycle log read back. It drives a server in the test's process over an
//! in-memory duplex ([`StdioClient::serve`]; under tokio's paused time when the test asks,
//! `#[tokio::test(start_paused = true)]`, so deadlines and grace periods pass at once) or a
//! spawned `staunch serve` over its pipes ([`StdioClient::over`]).

use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use serde_json::{Value, json};
use staunch_server::Server;
use staunch_server::transport::stdio::{self, StdioExit};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::CapturedLog;

/// The bytes the in-memory duplex buffers each way.
const BUFFER: usize = 1 << 20;

/// How long [`StdioClient::response`] and [`StdioClient::log_until`] wait.
const WAIT: Duration = Duration::from_secs(10);

/// One message read from the server, with when it arrived.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When it was read.
    pub at: Instant,
    /// The message.
    pub msg: Value,
}

/// Where the session's lifecycle log is read back from.
#[derive(Debug, Clone)]
pub enum LogSource {
    /// A file the server appends to (every line must be JSON).
    File(PathBuf),
    /// A log kept in memory.
    Memory(CapturedLog),
}

/// The client's end of one stdio session.
pub struct StdioClient {
    stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    rx: mpsc::UnboundedReceiver<Seen>,
    /// Every message read so far, in order.
    pub history: Vec<Seen>,
    log: LogSource,
    served: Option<JoinHandle<std::io::Result<StdioExit>>>,
}

impl std::fmt::Debug for StdioClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioClient")
            .field("open", &self.stdin.is_some())
            .field("read", &self.history.len())
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl StdioClient {
    /// A client of a server reached through `stdin` and `stdout` (a child's pipes); a line on
    /// `stdout` that is not JSON fails the test.
    pub fn over(
        stdin: impl AsyncWrite + Send + 'static,
        stdout: impl AsyncRead + Send + 'static,
        log: LogSource,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(Box::pin(stdout)).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let msg: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("the server wrote a line that is not JSON: {line:?}: {e}")
                });
                let seen = Seen {
                    at: Instant::now(),
                    msg,
                };
                if tx.send(seen).is_err() {
                    break;
                }
            }
        });
        Self {
            stdin: Some(Box::pin(stdin)),
            rx,
            history: Vec::new(),
            log,
            served: None,
        }
    }

    /// Serves `server` in this process on a fresh in-memory duplex (the log names the session
    /// `stdio`, as the binary's does).
    pub fn serve(server: Server, log: LogSource) -> Self {
        let (client_out, server_in) = tokio::io::duplex(BUFFER);
        let (server_out, client_in) = tokio::io::duplex(BUFFER);
        let served =
            tokio::spawn(
                async move { stdio::serve(&server, server_in, server_out, "stdio").await },
            );
        let mut client = Self::over(client_out, client_in, log);
        client.served = Some(served);
        client
    }

    /// `initialize` at `version` and `notifications/initialized`; the response.
    pub async fn initialize(&mut self, version: &str) -> Value {
        self.request(
            json!("init"),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
        let r = self.response(&json!("init")).await;
        self.notify("notifications/initialized", json!({})).await;
        r
    }

    /// Writes one line as it is (bad input included).
    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(line.as_bytes())
            .await
            .expect("the server reads");
        stdin.write_all(b"\n").await.expect("the server reads");
        stdin.flush().await.expect("the server reads");
    }

    /// Writes one message.
    pub async fn send(&mut self, v: Value) {
        self.send_raw(&v.to_string()).await;
    }

    /// Sends a request.
    pub async fn request(&mut self, id: Value, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
    }

    /// Sends a notification.
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

    /// Cancels request `id`.
    pub async fn cancel(&mut self, id: Value) {
        self.notify(
            "notifications/cancelled",
            json!({"requestId": id, "reason": "test cancel"}),
        )
        .await;
    }

    /// Closes the server's stdin, as an MCP client does to end the session.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The first message, read before or within `limit`, for which `pred` holds.
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
        self.wait_for(WAIT, |m| is_response_to(m, &id))
            .await
            .unwrap_or_else(|| panic!("no response to {id}"))
    }

    /// How many responses to `id` were read (a server must send at most one).
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
            .filter_map(|s| Some((s.at, s.msg["params"]["progress"].as_f64()?)))
            .collect()
    }

    /// The lifecycle log's lines so far.
    pub fn log_lines(&self) -> Vec<Value> {
        match &self.log {
            LogSource::File(path) => std::fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .map(|l| serde_json::from_str(l).expect("a lifecycle line is JSON"))
                .collect(),
            LogSource::Memory(log) => log.lines(),
        }
    }

    /// The lifecycle log's lines once `pred` holds for them (or after 10 s, as they are).
    pub async fn log_until(&self, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let end = Instant::now() + WAIT;
        loop {
            let lines = self.log_lines();
            if pred(&lines) || Instant::now() > end {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// For a server in this process: closes its stdin, reads what it still sends (into
    /// [`StdioClient::history`]) and waits for the session to end; how it ended.
    pub async fn close(&mut self) -> StdioExit {
        self.close_stdin();
        while self.rx.recv().await.map(|s| self.history.push(s)).is_some() {}
        let served = self.served.as_mut().expect("a server in this process");
        served
            .await
            .expect("the session's task")
            .expect("the session's streams")
    }
}

/// Whether `m` is a response (a result or an error) to request `id`.
pub fn is_response_to(m: &Value, id: &Value) -> bool {
    m.get("method").is_none() && m.get("id") == Some(id)
}
