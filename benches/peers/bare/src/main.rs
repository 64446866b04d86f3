//! The throughput ceiling: a bare tokio JSON-RPC loop with no MCP framework.
//!
//! ```text
//! bare-peer stdio          # newline-delimited JSON-RPC on stdin/stdout
//! bare-peer http PORT      # POST http://127.0.0.1:PORT/mcp, application/json answers
//! ```
//!
//! It parses a frame, answers `initialize`, `ping`, `tools/list` and `tools/call echo`,
//! serialises, and does nothing else: no sessions, no cancellation, no progress, no
//! registry, no logging. Whatever staunch spends beyond this is the price of its runtime;
//! DESIGN.md's throughput target is a fraction of this loop's rate, measured in the same run.

#![forbid(unsafe_code)]

mod rpc;

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        // On a worker: the main thread is not the one the runtime wakes when a pipe is ready.
        Some("stdio") | None => tokio::spawn(stdio()).await.map_err(std::io::Error::other)?,
        Some("http") => {
            let port: u16 = args
                .get(1)
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| std::io::Error::other("usage: bare-peer http PORT"))?;
            http(port).await
        }
        Some(_) => Err(std::io::Error::other("usage: bare-peer stdio | http PORT")),
    }
}

/// stdin and stdout as the runtime's own non-blocking pipes when both are pipes (the fastest
/// way tokio has, and the one `staunch serve` takes), else tokio's blocking-pool stdio.
async fn stdio() -> std::io::Result<()> {
    use std::os::fd::AsFd as _;
    use tokio::net::unix::pipe;
    let fds = (
        std::io::stdin().as_fd().try_clone_to_owned()?,
        std::io::stdout().as_fd().try_clone_to_owned()?,
    );
    let is_pipe = |fd: &std::os::fd::OwnedFd| {
        use std::os::unix::fs::FileTypeExt as _;
        fd.try_clone()
            .map(std::fs::File::from)
            .and_then(|f| f.metadata())
            .is_ok_and(|m| m.file_type().is_fifo())
    };
    if is_pipe(&fds.0) && is_pipe(&fds.1) {
        let input = pipe::Receiver::from_owned_fd(fds.0)?;
        let out = pipe::Sender::from_owned_fd(fds.1)?;
        return serve_lines(input, out).await;
    }
    serve_lines(tokio::io::stdin(), tokio::io::stdout()).await
}

/// One task reads lines and writes answers; it flushes only when no more input is buffered,
/// so a pipelined burst costs one write.
async fn serve_lines(
    input: impl tokio::io::AsyncRead + Unpin,
    out: impl tokio::io::AsyncWrite + Unpin,
) -> std::io::Result<()> {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut out = BufWriter::with_capacity(64 * 1024, out);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).await? == 0 {
            break;
        }
        if let Some(answer) = rpc::answer(line.trim_ascii()) {
            out.write_all(&answer).await?;
            out.write_all(b"\n").await?;
        }
        if input.buffer().is_empty() {
            out.flush().await?;
        }
    }
    out.flush().await
}

async fn http(port: u16) -> std::io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("[bare-peer] http ready on http://127.0.0.1:{port}/mcp");
    loop {
        let (stream, _) = listener.accept().await?;
        // hyper leaves Nagle on; without this every small response waits for a delayed ACK.
        stream.set_nodelay(true)?;
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(handle))
                .await;
        });
    }
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != hyper::Method::POST || req.uri().path() != "/mcp" {
        return Ok(status(StatusCode::NOT_FOUND));
    }
    let Ok(body) = req.into_body().collect().await else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    Ok(match rpc::answer(&body.to_bytes()) {
        Some(answer) => Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(answer)))
            .unwrap_or_else(|_| status(StatusCode::INTERNAL_SERVER_ERROR)),
        // A notification: accepted, nothing to say.
        None => status(StatusCode::ACCEPTED),
    })
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = code;
    r
}
