//! stdio: newline-delimited JSON-RPC; stdout carries only protocol messages.
//!
//! One reader loop hands each line to the [`Session`]; one writer task owns stdout and flushes
//! when its queue is empty (so a burst of responses costs one write). stdin EOF (or server
//! shutdown) closes the session: every in-flight request is cancelled, and the loop returns
//! after a bounded drain.

use std::sync::Arc;

use staunch_protocol::ErrorObject;
use staunch_protocol::codes;
use staunch_protocol::error_response_bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{mpsc, oneshot};

use crate::outbound::{Outbound, Sink};
use crate::registry::CancelReason;
use crate::server::Server;

struct ChannelSink(mpsc::UnboundedSender<Vec<u8>>);

impl Sink for ChannelSink {
    fn send(&self, msg: Outbound) {
        // A closed channel means the writer is gone (stdout closed); nothing to do.
        let _ = self.0.send(msg.bytes);
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
/// stdout is written by a thread of its own rather than through `tokio::io::Stdout`, which
/// hands every write and flush to the blocking pool: a task spawn and a cross-thread wake-up
/// per burst of responses (30.4k → 29.0k instructions per echo call, and 72–79k → 88–95k
/// calls/s, benches/profile and staunch-bench). The thread blocks on the queue instead and
/// flushes when it is empty, as the task does.
pub async fn serve_stdio(server: &Server) -> std::io::Result<StdioExit> {
    let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = std::thread::Builder::new()
        .name("staunch-stdout".into())
        .spawn(move || write_thread(std::io::stdout(), rx))?;
    // stdin likewise: tokio's Stdin spawns a blocking-pool task per read.
    let stdin = ThreadReader::spawn()?;
    let exit = read_loop(server, stdin, tx.clone(), "stdio").await;
    // The stop marker: everything queued before it is written, then the thread ends.
    let _ = tx.send(Vec::new());
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
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let writer_task = tokio::spawn(write_loop(writer, rx, stop_rx));
    let exit = read_loop(server, reader, tx, session_id).await;
    let _ = stop_tx.send(());
    let _ = writer_task.await;
    Ok(exit)
}

/// Reads frames into a session until EOF or shutdown, then closes it and drains it.
async fn read_loop<R: AsyncRead + Unpin>(
    server: &Server,
    reader: R,
    tx: mpsc::UnboundedSender<Vec<u8>>,
    session_id: &str,
) -> StdioExit {
    let session = server.session(session_id, Arc::new(ChannelSink(tx.clone())));

    let shutdown = server.shutdown_token();
    let max = server.config().max_message_bytes;
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::with_capacity(4096);
    loop {
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
                let _ = tx.send(error_response_bytes(None, &e));
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
) {
    let mut out = BufWriter::with_capacity(64 * 1024, writer);
    loop {
        let msg = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = &mut stop => {
                // Write what is already queued, then stop.
                while let Ok(m) = rx.try_recv() {
                    if write_one(&mut out, &m).await.is_err() { return; }
                }
                let _ = out.flush().await;
                return;
            }
        };
        let Some(msg) = msg else { break };
        if write_one(&mut out, &msg).await.is_err() {
            return;
        }
        while let Ok(m) = rx.try_recv() {
            if write_one(&mut out, &m).await.is_err() {
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
fn write_thread<W: std::io::Write>(writer: W, mut rx: mpsc::UnboundedReceiver<Vec<u8>>) {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, writer);
    let write = |out: &mut std::io::BufWriter<W>, m: &[u8]| {
        out.write_all(m)?;
        out.write_all(b"\n")
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
) -> std::io::Result<()> {
    out.write_all(msg).await?;
    out.write_all(b"\n").await
}
