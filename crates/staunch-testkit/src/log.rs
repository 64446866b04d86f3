//! [`CapturedLog`]: a lifecycle log kept in memory, for a server built in the test's process,
//! read back as parsed lines.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use staunch_server::LifecycleLog;
use tokio::time::Instant;

/// The lines a server's lifecycle log wrote, in memory.
#[derive(Debug, Clone, Default)]
pub struct CapturedLog {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl CapturedLog {
    /// A log writing here, for `ServerBuilder::lifecycle_log`.
    pub fn log(&self) -> LifecycleLog {
        LifecycleLog::to_writer(Box::new(self.clone()))
    }

    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().expect("the log's buffer")).into_owned()
    }

    /// Every complete line so far, parsed (a line that is not JSON is skipped).
    pub fn lines(&self) -> Vec<Value> {
        self.text()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The lines once `pred` holds for them, or after `limit` as they are.
    pub async fn until(&self, limit: Duration, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let end = Instant::now() + limit;
        loop {
            let lines = self.lines();
            if pred(&lines) || Instant::now() >= end {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes
            .lock()
            .map_err(|_| std::io::Error::other("the log's buffer is poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
