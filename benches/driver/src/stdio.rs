//! A raw JSON-RPC client over a child's stdin/stdout.
//!
//! One reader task parses every line the server writes and routes progress (by token, which
//! the driver sets to the request id) and responses (by id) to the call that is waiting for
//! them. Lines nobody waits for are dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::rpc::{Event, classify};

type Routes = Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Event>>>>;

pub struct StdioClient {
    stdin: tokio::sync::Mutex<ChildStdin>,
    routes: Routes,
}

impl StdioClient {
    pub fn new(stdin: ChildStdin, stdout: ChildStdout) -> Self {
        let routes: Routes = Arc::default();
        tokio::spawn(read_loop(stdout, routes.clone()));
        Self {
            stdin: tokio::sync::Mutex::new(stdin),
            routes,
        }
    }

    /// Starts receiving the events of request `id` (call before sending it).
    pub fn route(&self, id: u64) -> mpsc::UnboundedReceiver<Event> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        rx
    }

    pub fn unroute(&self, id: u64) {
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Writes one message as one line.
    pub async fn send(&self, msg: &Value) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(msg)?;
        line.push(b'\n');
        self.send_raw(&line).await
    }

    /// Writes bytes as they are (many lines at once: one write for a burst).
    pub async fn send_raw(&self, bytes: &[u8]) -> anyhow::Result<()> {
        let mut w = self.stdin.lock().await;
        w.write_all(bytes)
            .await
            .context("writing to the server's stdin")?;
        w.flush().await?;
        Ok(())
    }
}

async fn read_loop(stdout: ChildStdout, routes: Routes) {
    let mut lines = BufReader::with_capacity(256 * 1024, stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let at = Instant::now();
        // A line that is not JSON (a log line on stdout) is skipped.
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some((id, ev)) = classify(msg, at) else {
            continue;
        };
        let mut r = routes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = r.get(&id)
            && tx.send(ev).is_err()
        {
            r.remove(&id);
        }
    }
    // EOF: the server exited (or closed stdout). Waiters see their channel close.
    routes.lock().unwrap_or_else(|p| p.into_inner()).clear();
}
