//! The request-lifecycle log: one JSON object per line, format in `docs/lifecycle-log.md`.
//!
//! Lines are formatted on the caller's thread and written by one background thread, so a
//! request task never waits on a slow terminal or disk. `flush` waits until everything queued
//! so far is written (used before the process exits).

use std::io::Write;
use std::sync::mpsc;

use serde_json::{Map, Value};
use staunch_protocol::RequestId;
use time::OffsetDateTime;
use time::macros::format_description;

enum Command {
    Line(String),
    Flush(mpsc::SyncSender<()>),
}

/// Where lifecycle lines go. Cheap to clone.
#[derive(Clone, Default)]
pub struct LifecycleLog {
    tx: Option<mpsc::Sender<Command>>,
}

impl std::fmt::Debug for LifecycleLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifecycleLog")
            .field("enabled", &self.tx.is_some())
            .finish()
    }
}

impl LifecycleLog {
    /// No log at all.
    pub fn disabled() -> Self {
        Self { tx: None }
    }

    /// Lines to stderr.
    pub fn stderr() -> Self {
        Self::to_writer(Box::new(std::io::stderr()))
    }

    /// Lines appended to a file.
    pub fn file(path: &std::path::Path) -> std::io::Result<Self> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self::to_writer(Box::new(f)))
    }

    /// Lines to any writer (tests use a shared buffer).
    pub fn to_writer(mut w: Box<dyn Write + Send>) -> Self {
        let (tx, rx) = mpsc::channel::<Command>();
        std::thread::Builder::new()
            .name("staunch-lifecycle-log".into())
            .spawn(move || {
                while let Ok(cmd) = rx.recv() {
                    let mut next = Some(cmd);
                    // Write whatever is queued, then flush once.
                    while let Some(cmd) = next.take() {
                        match cmd {
                            Command::Line(l) => {
                                let _ = w.write_all(l.as_bytes());
                            }
                            Command::Flush(done) => {
                                let _ = w.flush();
                                let _ = done.send(());
                            }
                        }
                        next = rx.try_recv().ok();
                    }
                    let _ = w.flush();
                }
            })
            .map(|_| Self { tx: Some(tx) })
            .unwrap_or_default()
    }

    /// Whether lines are written at all (callers skip computing fields when not).
    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Writes one line: the common fields plus `extra`.
    pub fn emit(&self, event: &str, session: &str, id: &RequestId, extra: Map<String, Value>) {
        let Some(tx) = &self.tx else { return };
        let mut line = Map::with_capacity(extra.len() + 4);
        line.insert("ts".into(), Value::String(now_rfc3339()));
        line.insert("event".into(), Value::String(event.into()));
        line.insert("request_id".into(), id.to_value());
        line.insert("session".into(), Value::String(session.into()));
        line.extend(extra);
        let mut s = Value::Object(line).to_string();
        s.push('\n');
        let _ = tx.send(Command::Line(s));
    }

    /// Blocks until every line emitted so far is written and flushed.
    pub fn flush(&self) {
        let Some(tx) = &self.tx else { return };
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        if tx.send(Command::Flush(done_tx)).is_ok() {
            let _ = done_rx.recv_timeout(std::time::Duration::from_secs(5));
        }
    }
}

/// Now as RFC 3339 UTC with milliseconds.
pub(crate) fn now_rfc3339() -> String {
    // Fixed width (always three fraction digits) so lines sort and align.
    let fmt =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    OffsetDateTime::now_utc().format(fmt).unwrap_or_default()
}
