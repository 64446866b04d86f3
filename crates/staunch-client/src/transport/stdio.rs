//! stdio: spawn the server and speak newline-delimited JSON-RPC on its stdin/stdout.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use staunch_protocol::parse_incoming;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::ClientError;
use crate::inbox::Inbox;
use crate::router::Inbound;

/// A line longer than this ends the connection: a server that writes one is broken, and
/// buffering it would let it exhaust our memory.
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// How much of a captured stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// How long a server gets to exit after its stdin closes before it gets SIGTERM.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long a server gets to exit after SIGTERM before it is killed (SIGKILL). Long enough
/// for a server that ends its cancelled requests (a grace period, then an abort) and writes
/// its logs on the way out.
const TERM_GRACE: Duration = Duration::from_secs(3);

/// What to do with the spawned server's stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StderrMode {
    /// Share ours (the user sees the server's logs).
    #[default]
    Inherit,
    /// Discard it.
    Null,
    /// Keep the last few KiB, reported when the server exits unexpectedly.
    Capture,
}

/// The command that runs a server.
#[derive(Debug, Clone)]
pub struct StdioCommand {
    /// Program to run.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Extra environment variables.
    pub env: Vec<(OsString, OsString)>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
}

impl StdioCommand {
    /// `program` with no arguments.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
        }
    }

    /// From an argv (`["node", "server.mjs", "stdio"]`); `None` when empty.
    pub fn from_argv<S: Into<OsString> + Clone>(argv: &[S]) -> Option<Self> {
        let (first, rest) = argv.split_first()?;
        Some(Self::new(first.clone()).args(rest.iter().cloned()))
    }

    /// Adds an argument.
    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = A>, A: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, k: impl Into<OsString>, v: impl Into<OsString>) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// The command line, for messages.
    pub fn display(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|s| s.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

type Tail = Arc<Mutex<VecDeque<u8>>>;

/// A running stdio connection.
pub(crate) struct StdioTransport {
    writer: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    child: tokio::sync::Mutex<Option<Child>>,
}

impl StdioTransport {
    /// Spawns the server.
    pub(crate) fn spawn(
        cmd: &StdioCommand,
        stderr: StderrMode,
        inbound: Inbox,
    ) -> Result<Self, ClientError> {
        let mut c = Command::new(&cmd.program);
        c.args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(match stderr {
                StderrMode::Inherit => Stdio::inherit(),
                StderrMode::Null => Stdio::null(),
                StderrMode::Capture => Stdio::piped(),
            })
            // A client that goes away must not leave its server running.
            .kill_on_drop(true);
        if let Some(dir) = &cmd.cwd {
            c.current_dir(dir);
        }
        let mut child = c.spawn().map_err(|e| ClientError::Spawn {
            command: cmd.display(),
            message: e.to_string(),
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(ClientError::Spawn {
                command: cmd.display(),
                message: "no stdio pipes".into(),
            });
        };
        let tail: Option<Tail> = child.stderr.take().map(|err| {
            let tail = Tail::default();
            tokio::spawn(capture(err, tail.clone()));
            tail
        });
        let mut t = Self::from_io(stdout, stdin, inbound, tail);
        t.child = tokio::sync::Mutex::new(Some(child));
        Ok(t)
    }

    /// Speaks over any pair of byte streams (used by tests with in-memory pipes).
    pub(crate) fn from_io<R, W>(reader: R, writer: W, inbound: Inbox, tail: Option<Tail>) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_loop(writer, rx));
        tokio::spawn(read_loop(BufReader::new(reader), inbound, tail));
        Self {
            writer: Mutex::new(Some(tx)),
            child: tokio::sync::Mutex::new(None),
        }
    }

    pub(crate) fn send(&self, bytes: Vec<u8>) {
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = w.as_ref() {
            let _ = w.send(bytes);
        }
    }

    /// Shuts the server down the MCP specification's way: closes its stdin (the signal to
    /// finish), waits; then SIGTERM, waits; then SIGKILL. Each wait is bounded.
    pub(crate) async fn close(&self) {
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut child = self.child.lock().await;
        if let Some(c) = child.as_mut() {
            shut_down(c, EXIT_GRACE, TERM_GRACE).await;
        }
        child.take();
    }
}

/// Waits `exit_grace` for `c` to exit on its own, then sends SIGTERM and waits `term_grace`,
/// then kills it. Returns how it ended.
pub(crate) async fn shut_down(c: &mut Child, exit_grace: Duration, term_grace: Duration) -> Ended {
    if tokio::time::timeout(exit_grace, c.wait()).await.is_ok() {
        return Ended::Exited;
    }
    if terminate(c) && tokio::time::timeout(term_grace, c.wait()).await.is_ok() {
        return Ended::Terminated;
    }
    let _ = c.kill().await;
    Ended::Killed
}

/// How a stdio server ended at shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// After its stdin closed.
    Exited,
    /// After SIGTERM.
    Terminated,
    /// Killed.
    Killed,
}

/// Sends SIGTERM; `false` when that is not possible (not unix, or already reaped).
#[cfg(unix)]
fn terminate(c: &Child) -> bool {
    use rustix::process::{Pid, Signal, kill_process};
    let Some(pid) = c
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
    else {
        return false;
    };
    kill_process(pid, Signal::TERM).is_ok()
}

#[cfg(not(unix))]
fn terminate(_: &Child) -> bool {
    false
}

/// Frames written in one batch at most (a proxy with many calls in flight queues many).
const WRITE_BATCH_BYTES: usize = 1 << 20;

async fn write_loop<W: AsyncWrite + Unpin>(mut w: W, mut rx: mpsc::UnboundedReceiver<Vec<u8>>) {
    let mut batch = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.clear();
        batch.extend_from_slice(&first);
        batch.push(b'\n');
        // What is already queued goes out in the same write: one syscall per batch, not per
        // frame, when many requests are in flight.
        while batch.len() < WRITE_BATCH_BYTES {
            let Ok(more) = rx.try_recv() else { break };
            batch.extend_from_slice(&more);
            batch.push(b'\n');
        }
        if w.write_all(&batch).await.is_err() || w.flush().await.is_err() {
            break;
        }
    }
    let _ = w.shutdown().await;
}

async fn read_loop<R: AsyncBufRead + Unpin>(mut r: R, inbound: Inbox, tail: Option<Tail>) {
    let mut line = Vec::new();
    let why = loop {
        line.clear();
        match read_line(&mut r, &mut line).await {
            Ok(0) => break "the server closed its stdout".to_string(),
            Ok(_) => {}
            Err(e) => break format!("reading the server's stdout: {e}"),
        }
        let frame = line.trim_ascii();
        if frame.is_empty() {
            continue;
        }
        match parse_incoming(frame) {
            Ok(msg) => {
                if !inbound.deliver(Inbound::Message(msg, None)) {
                    return;
                }
            }
            // stdout is for protocol messages only; say so, but keep reading.
            Err(e) => tracing::warn!(
                line = %String::from_utf8_lossy(&frame[..frame.len().min(200)]),
                "server wrote a non-JSON-RPC line on stdout: {e}"
            ),
        }
    };
    let why = match tail.map(|t| tail_text(&t)) {
        Some(t) if !t.is_empty() => format!("{why}; its stderr ended with: {t}"),
        _ => why,
    };
    inbound.deliver(Inbound::Closed(why));
}

/// `read_until(b'\n')` with a size limit.
async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(total);
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        line.extend_from_slice(&chunk[..take]);
        r.consume(take);
        total += take;
        if done {
            return Ok(total);
        }
        if line.len() > MAX_LINE_BYTES {
            return Err(std::io::Error::other("line too long"));
        }
    }
}

async fn capture<R: AsyncRead + Unpin>(r: R, tail: Tail) {
    let mut r = BufReader::new(r);
    loop {
        let n = match r.fill_buf().await {
            Ok([]) | Err(_) => return,
            Ok(buf) => {
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                t.extend(buf.iter().copied());
                let excess = t.len().saturating_sub(STDERR_TAIL_BYTES);
                t.drain(..excess);
                buf.len()
            }
        };
        r.consume(n);
    }
}

fn tail_text(t: &Tail) -> String {
    let t = t.lock().unwrap_or_else(|p| p.into_inner());
    let bytes: Vec<u8> = t.iter().copied().collect();
    String::from_utf8_lossy(&bytes).trim().to_string()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A server that ignores its stdin closing but handles SIGTERM gets SIGTERM, not SIGKILL,
    /// and its handler runs (it writes a file).
    #[tokio::test]
    async fn a_server_that_ignores_eof_gets_sigterm_before_sigkill() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("got-term");
        let script = format!(
            "trap 'echo term > {}; exit 0' TERM; while :; do sleep 0.05; done",
            mark.display()
        );
        let mut c = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        drop(c.stdin.take());
        let ended = shut_down(&mut c, Duration::from_millis(200), Duration::from_secs(10)).await;
        assert_eq!(ended, Ended::Terminated);
        assert_eq!(std::fs::read_to_string(&mark).unwrap().trim(), "term");
    }

    /// One that ignores SIGTERM too is killed after the second wait.
    #[tokio::test]
    async fn a_server_that_ignores_sigterm_is_killed() {
        let mut c = Command::new("sh")
            .args(["-c", "trap '' TERM; while :; do sleep 0.05; done"])
            .stdin(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        drop(c.stdin.take());
        let ended = shut_down(
            &mut c,
            Duration::from_millis(100),
            Duration::from_millis(300),
        )
        .await;
        assert_eq!(ended, Ended::Killed);
        assert!(c.try_wait().unwrap().is_some(), "the process is gone");
    }

    /// One that exits when its stdin closes gets no signal at all.
    #[tokio::test]
    async fn a_server_that_exits_on_eof_gets_no_signal() {
        let mut c = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        drop(c.stdin.take());
        let ended = shut_down(&mut c, Duration::from_secs(10), Duration::from_secs(10)).await;
        assert_eq!(ended, Ended::Exited);
    }
}
