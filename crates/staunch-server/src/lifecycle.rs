//! The request-lifecycle log: one JSON object per line, format in `docs/lifecycle-log.md`, the
//! events typed in `staunch-lifecycle` (shared with `staunch audit`, which reads them).
//!
//! Lines are formatted on the caller's thread and written by one background thread, so a
//! request task never waits on a slow terminal or disk. `flush` waits until everything queued
//! so far is written (used before the process exits).

use std::io::Write;
use std::sync::mpsc;

use staunch_lifecycle::{Event, IdRef, write_line};
use staunch_protocol::RequestId;

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

    /// Lines appended to a file. A new file is created readable by its owner only (0600):
    /// the log names requests, tools and arguments' fingerprints.
    pub fn file(path: &std::path::Path) -> std::io::Result<Self> {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let f = options.open(path)?;
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

    /// Writes one event of request `id` on connection `label`.
    pub fn event(&self, label: &str, id: &RequestId, event: &Event<'_>) {
        let Some(tx) = &self.tx else { return };
        let id = match id {
            RequestId::Number(n) => IdRef::Number(*n),
            RequestId::String(s) => IdRef::String(s),
        };
        let mut line = String::with_capacity(192);
        write_line(&mut line, &staunch_lifecycle::timestamp(), label, id, event);
        let _ = tx.send(Command::Line(line));
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
