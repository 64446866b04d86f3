//! stdio: newline-delimited JSON-RPC; stdout carries only protocol messages.
//!
//! One reader loop hands each line to the [`Session`](crate::Session); one writer task owns stdout and flushes
//! when its queue is empty (so a burst of responses costs one write). stdin EOF (or server
//! shutdown) closes the session: every in-flight request is cancelled, and the loop returns
//! after a bounded drain.
//!
//! **A client that does not read gets no more work.** The bytes queued for stdout and not yet
//! written are counted; once they reach `stdout_queue_max` ([`crate::Config`]), the reader
//! stops reading stdin until the writer is below it again (logged when it starts waiting).
//! The client then blocks on its own stdin pipe: back-pressure instead of a queue that grows
//! with every request it sends. Messages of requests already admitted are still queued, never
//! dropped, so the queue can pass the cap by what the requests in flight still send (bounded
//! by `max_in_flight` and the progress rate limit).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use staunch_protocol::ErrorObject;
use staunch_protocol::codes;
use staunch_protocol::error_response_bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::stdio_fds::{blocking_again, runtime_stdio};
use crate::outbound::{Outbound, Sink};
use crate::registry::CancelReason;
use crate::server::Server;

/// What stdout owes: bytes queued and not yet written, against the cap at which the reader
/// waits. Shared by the reader (which waits), the sinks (which add) and the writer (which
/// subtracts and wakes the reader).
struct Backlog {
    queued: AtomicUsize,
    cap: usize,
    /// The writer ended (stdout failed): nothing will drain, and nothing needs to.
    gone: AtomicBool,
    /// Signalled when the queue falls below the cap, or the writer ends.
    drained: Notify,
}

impl Backlog {
    fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            queued: AtomicUsize::new(0),
            cap: cap.max(1),
            gone: AtomicBool::new(false),
            drained: Notify::new(),
        })
    }

    /// `n` bytes left the queue (written, or never queued).
    fn written(&self, n: usize) {
        let before = self.queued.fetch_sub(n, Ordering::AcqRel);
        // Only the write that takes the queue below the cap wakes the reader (one atomic per
        // message otherwise: the writer is on the hot path).
        if before >= self.cap && before - n < self.cap {
            self.drained.notify_waiters();
        }
    }

    fn writer_gone(&self) {
        self.gone.store(true, Ordering::Release);
        self.drained.notify_waiters();
    }

    fn over(&self) -> bool {
        self.queued.load(Ordering::Acquire) >= self.cap && !self.gone.load(Ordering::Acquire)
    }

    /// Waits until the writer is below the cap (or gone, or the server shuts down). Logs
    /// when it has to wait, and when the wait ends.
    async fn wait_below(&self, shutdown: &CancellationToken) {
        let mut waited = false;
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            // Registered before the check: a write that crosses the cap after it wakes us.
            drained.as_mut().enable();
            if !self.over() {
                break;
            }
            if !waited {
                waited = true;
                tracing::warn!(
                    queued = self.queued.load(Ordering::Relaxed),
                    cap = self.cap,
                    "stdout is behind (the client is not reading): not reading stdin until it is written"
                );
            }
            tokio::select! {
                () = &mut drained => {}
                () = shutdown.cancelled() => return,
            }
        }
        if waited {
            tracing::info!(
                queued = self.queued.load(Ordering::Relaxed),
                "stdout caught up; reading stdin again"
            );
        }
    }
}

/// The way to stdout: the writer's queue, counted in [`Backlog`].
#[derive(Clone)]
struct Out {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    backlog: Arc<Backlog>,
}

impl Out {
    fn send(&self, bytes: Vec<u8>) {
        let n = queued_len(&bytes);
        self.backlog.queued.fetch_add(n, Ordering::AcqRel);
        // A closed channel means the writer is gone (stdout closed); nothing to do.
        if self.tx.send(bytes).is_err() {
            self.backlog.written(n);
        }
    }

    /// The stop marker: everything queued before it is written, then the writer ends.
    fn stop(&self) {
        let _ = self.tx.send(Vec::new());
    }
}

/// What a message counts for in the backlog: itself and its newline.
fn queued_len(msg: &[u8]) -> usize {
    msg.len() + 1
}

struct ChannelSink(Out);

impl Sink for ChannelSink {
    fn send(&self, msg: Outbound) {
        self.0.send(msg.bytes);
    }
}

/// How the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdioExit {
    /// Whether every in-flight request ended within the drain timeout.
    pub drained: bool,
}

/// Serves one session on the process's stdin and stdout until EOF or shutdown.
///
/// When both are pipes or sockets — as an MCP client that spawns its server makes them — they
/// are read and written on the runtime itself, non-blocking (put back in blocking mode at the
/// end): a message crosses no thread on its way in or out. Over the proxy's two stdio hops
/// that took its added p50 from about 130 to 70 µs (benches/README.md, "The proxy's overhead").
/// Otherwise (a terminal, a file) each has a thread of its own rather than going through
/// `tokio::io::Stdout`/`Stdin`, which hand every write, flush and read to the blocking pool: a
/// task spawn and a cross-thread wake-up per burst (30.4k → 29.0k instructions per echo call,
/// and 72–79k → 88–95k calls/s, benches/profile and staunch-bench). The stdout thread blocks
/// on the queue and flushes when it is empty, as the task does.
///
/// The session is served from a task of the runtime, not from the caller's task (often the
/// thread that waits for the whole program): a request read there is spawned onto the same
/// worker and runs without waking another thread.
pub async fn serve_stdio(server: &Server) -> std::io::Result<StdioExit> {
    let server = server.clone();
    tokio::spawn(async move { serve_stdio_here(&server).await })
        .await
        .map_err(std::io::Error::other)?
}

async fn serve_stdio_here(server: &Server) -> std::io::Result<StdioExit> {
    if let Some((stdin, stdout)) = runtime_stdio() {
        let exit = serve(server, stdin, stdout, "stdio").await;
        blocking_again();
        return exit;
    }
    let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let backlog = Backlog::new(server.config().stdout_queue_max);
    let out = Out {
        tx,
        backlog: backlog.clone(),
    };
    let writer = std::thread::Builder::new()
        .name("staunch-stdout".into())
        .spawn(move || {
            write_thread(std::io::stdout(), rx, &backlog);
            backlog.writer_gone();
        })?;
    // stdin likewise: tokio's Stdin spawns a blocking-pool task per read.
    let stdin = ThreadReader::spawn()?;
    let exit = read_loop(server, stdin, out.clone(), "stdio").await;
    out.stop();
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    Ok(exit)
}

/// Serves one session over any byte streams (tests use an in-memory duplex).
pub async fn serve<R, W>(
    server: &Server,
    reader: R,
    writer: W,
    session_id: &str,
) -> std::io::Result<StdioExit>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let backlog = Backlog::new(server.config().stdout_queue_max);
    let out = Out {
        tx,
        backlog: backlog.clone(),
    };
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let writer_task = tokio::spawn(async move {
        write_loop(writer, rx, stop_rx, &backlog).await;
        backlog.writer_gone();
    });
    let exit = read_loop(server, reader, out, session_id).await;
    let _ = stop_tx.send(());
    let _ = writer_task.await;
    Ok(exit)
}

/// Reads frames into a session until EOF or shutdown, then closes it and drains it.
async fn read_loop<R: AsyncRead + Unpin>(
    server: &Server,
    reader: R,
    out: Out,
    session_id: &str,
) -> StdioExit {
    let session = server.session(session_id, Arc::new(ChannelSink(out.clone())));

    let shutdown = server.shutdown_token();
    let max = server.config().max_message_bytes;
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::with_capacity(4096);
    loop {
        if out.backlog.over() {
            // Back-pressure: no new work for a client that does not read what it has.
            out.backlog.wait_below(&shutdown).await;
            if shutdown.is_cancelled() {
                break;
            }
        }
        let read = tokio::select! {
            r = read_frame(&mut reader, &mut line, max) => r,
            _ = shutdown.cancelled() => break,
        };
        match read {
            Ok(Frame::Eof) => break,
            Ok(Frame::TooLong) => {
                tracing::warn!(max, "message too large; skipped");
                let e = ErrorObject::new(
                    codes::INVALID_REQUEST,
                    format!("message exceeds the limit of {max} bytes"),
                );
                out.send(error_response_bytes(None, &e));
            }
            Ok(Frame::Line) => {
                let frame = line.trim_ascii();
                if !frame.is_empty() {
                    session.handle_frame(frame);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "stdin read failed; closing");
                break;
            }
        }
    }
    let reason = if shutdown.is_cancelled() {
        // Subscriptions end gracefully; everything else is cancelled, never answered.
        server.listen_hub().close();
        CancelReason::Shutdown
    } else {
        CancelReason::SessionClosed("transport closed")
    };
    session.close(reason);
    let drained = session.drain().await;
    server.lifecycle_log().flush();
    StdioExit { drained }
}

enum Frame {
    Line,
    TooLong,
    Eof,
}

/// Reads one line into `buf` (without the newline), refusing to buffer more than `max` bytes.
async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Frame> {
    buf.clear();
    let mut too_long = false;
    loop {
        let avail = reader.fill_buf().await?;
        if avail.is_empty() {
            // EOF: a last line without a newline still counts.
            return Ok(if too_long {
                Frame::TooLong
            } else if buf.is_empty() {
                Frame::Eof
            } else {
                Frame::Line
            });
        }
        let (chunk, used, done) = match avail.iter().position(|b| *b == b'\n') {
            Some(pos) => (&avail[..pos], pos + 1, true),
            None => (avail, avail.len(), false),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        reader.consume(used);
        if done {
            return Ok(if too_long {
                Frame::TooLong
            } else {
                Frame::Line
            });
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    writer: W,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    mut stop: oneshot::Receiver<()>,
    backlog: &Backlog,
) {
    let mut out = BufWriter::with_capacity(64 * 1024, writer);
    loop {
        let msg = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = &mut stop => {
                // Write what is already queued, then stop.
                while let Ok(m) = rx.try_recv() {
                    if write_one(&mut out, &m, backlog).await.is_err() { return; }
                }
                let _ = out.flush().await;
                return;
            }
        };
        let Some(msg) = msg else { break };
        if write_one(&mut out, &msg, backlog).await.is_err() {
            return;
        }
        while let Ok(m) = rx.try_recv() {
            if write_one(&mut out, &m, backlog).await.is_err() {
                return;
            }
        }
        if out.flush().await.is_err() {
            return;
        }
    }
    let _ = out.flush().await;
}

/// stdin read by a thread of its own, handed over in chunks (a bounded queue: the thread
/// stops reading when the loop falls behind). The thread may stay blocked in `read` after the
/// loop has ended; the process exits without waiting for it.
struct ThreadReader {
    rx: mpsc::Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl ThreadReader {
    fn spawn() -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel(4);
        std::thread::Builder::new()
            .name("staunch-stdin".into())
            .spawn(move || {
                use std::io::Read as _;
                let mut stdin = std::io::stdin().lock();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let got = match stdin.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => Ok(buf[..n].to_vec()),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => Err(e),
                    };
                    let failed = got.is_err();
                    if tx.blocking_send(got).is_err() || failed {
                        break;
                    }
                }
            })?;
        Ok(Self {
            rx,
            chunk: Vec::new(),
            pos: 0,
        })
    }
}

impl AsyncRead for ThreadReader {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        out: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        loop {
            if self.pos < self.chunk.len() {
                let n = out.remaining().min(self.chunk.len() - self.pos);
                out.put_slice(&self.chunk[self.pos..self.pos + n]);
                self.pos += n;
                return std::task::Poll::Ready(Ok(()));
            }
            match std::task::ready!(self.rx.poll_recv(cx)) {
                Some(Ok(chunk)) => {
                    self.chunk = chunk;
                    self.pos = 0;
                }
                Some(Err(e)) => return std::task::Poll::Ready(Err(e)),
                // EOF: the thread ended; a read of zero bytes says so.
                None => return std::task::Poll::Ready(Ok(())),
            }
        }
    }
}

/// The stdout thread: writes each message as a line, flushes when the queue is empty, ends at
/// the stop marker (an empty message) or when stdout fails.
fn write_thread<W: std::io::Write>(
    writer: W,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    backlog: &Backlog,
) {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, writer);
    let write = |out: &mut std::io::BufWriter<W>, m: &[u8]| {
        let r = out.write_all(m).and_then(|()| out.write_all(b"\n"));
        backlog.written(queued_len(m));
        r
    };
    while let Some(msg) = rx.blocking_recv() {
        if msg.is_empty() || write(&mut out, &msg).is_err() {
            break;
        }
        let mut stop = false;
        while let Ok(m) = rx.try_recv() {
            if m.is_empty() {
                stop = true;
                break;
            }
            if write(&mut out, &m).is_err() {
                return;
            }
        }
        if out.flush().is_err() || stop {
            break;
        }
    }
    let _ = out.flush();
}

async fn write_one<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    msg: &[u8],
    backlog: &Backlog,
) -> std::io::Result<()> {
    let r = async {
        out.write_all(msg).await?;
        out.write_all(b"\n").await
    }
    .await;
    backlog.written(queued_len(msg));
    r
}
