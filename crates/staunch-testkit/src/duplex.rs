//! [`Duplex`]: a server on an in-memory duplex, one session as `staunch serve` runs on stdio,
//! and the client's end of it: JSON-RPC lines written, every line the server sent kept. No
//! socket and no process, so it runs under tokio's paused time
//! (`#[tokio::test(start_paused = true)]`): deadlines and grace periods pass at once.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_server::Server;
use staunch_server::transport::stdio::{self, StdioExit};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::task::JoinHandle;

/// The bytes the duplex buffers each way.
const BUFFER: usize = 1 << 20;

/// The client's end of a session served on an in-memory duplex.
#[derive(Debug)]
pub struct Duplex {
    to_server: Option<DuplexStream>,
    from_server: Lines<BufReader<DuplexStream>>,
    seen: Vec<Value>,
    served: JoinHandle<std::io::Result<StdioExit>>,
}

impl Duplex {
    /// Serves `server` on a fresh duplex (session label `session`, as the log names it).
    pub fn serve(server: Server, session: &str) -> Self {
        let (client_out, server_in) = tokio::io::duplex(BUFFER);
        let (server_out, client_in) = tokio::io::duplex(BUFFER);
        let session = session.to_string();
        let served =
            tokio::spawn(
                async move { stdio::serve(&server, server_in, server_out, &session).await },
            );
        Self {
            to_server: Some(client_out),
            from_server: BufReader::new(client_in).lines(),
            seen: Vec::new(),
            served,
        }
    }

    /// Writes one line as it is (bad input included).
    pub async fn send_raw(&mut self, line: &str) {
        let w = self.to_server.as_mut().expect("the duplex is open");
        w.write_all(line.as_bytes())
            .await
            .expect("the server reads");
        w.write_all(b"\n").await.expect("the server reads");
    }

    /// Writes one message.
    pub async fn send(&mut self, msg: Value) {
        self.send_raw(&msg.to_string()).await;
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

    /// `initialize` at `version` and `notifications/initialized`; the result.
    pub async fn initialize(&mut self, version: &str) -> Value {
        let id = json!("init");
        self.request(
            id.clone(),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "testkit", "version": "0"}}),
        )
        .await;
        let answer = self.response(&id, Duration::from_secs(10)).await;
        self.notify("notifications/initialized", json!({})).await;
        answer
    }

    /// The next line the server sends, `None` once its end closed or `limit` passed.
    pub async fn next(&mut self, limit: Duration) -> Option<Value> {
        let line = tokio::time::timeout(limit, self.from_server.next_line())
            .await
            .ok()?
            .ok()??;
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the server sent a line that is not JSON ({e}): {line}"));
        self.seen.push(v.clone());
        Some(v)
    }

    /// The response to request `id` (a result or an error), reading on until it comes; panics
    /// after `limit`.
    pub async fn response(&mut self, id: &Value, limit: Duration) -> Value {
        if let Some(r) = self.responses_to(id).into_iter().next() {
            return r;
        }
        let end = tokio::time::Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(m) if m.get("method").is_none() && m["id"] == *id => return m,
                Some(_) => {}
                None => panic!("no response to {id} within {limit:?}"),
            }
        }
    }

    /// Every response to `id` seen so far (a server must send at most one).
    pub fn responses_to(&self, id: &Value) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|m| m.get("method").is_none() && m["id"] == *id)
            .cloned()
            .collect()
    }

    /// Every line the server sent so far, in order.
    pub fn seen(&self) -> &[Value] {
        &self.seen
    }

    /// Closes the client's end, as an MCP client closes the server's stdin, reads what the
    /// server still sends (kept in [`Duplex::seen`]) and waits for the session to end: how it
    /// ended.
    pub async fn close(&mut self) -> StdioExit {
        drop(self.to_server.take());
        while self.next(Duration::from_secs(60)).await.is_some() {}
        (&mut self.served)
            .await
            .expect("the session's task")
            .expect("the session's streams")
    }
}
