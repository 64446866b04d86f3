//! `tools/call echo` throughput. The driver stays out of the way: over stdio one task keeps
//! `window` calls in flight on the pipe (a response read → the next request written, in
//! batches); over HTTP, `concurrency` keep-alive connections (`TCP_NODELAY`) each loop
//! POST → whole body. Only responses that carry a `result` count.

use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::http::{Conn, Session};
use crate::servers::Running;
use crate::{rpc, stateless};

/// Hard cap on calls per measurement, besides the time bound.
const MAX_CALLS: u64 = 5_000_000;

pub struct Rate {
    pub per_sec: f64,
    pub errors: u64,
}

/// Pipelined echo calls over the server's stdin/stdout. `stateless`: the 2026-07-28 era
/// (`server/discover` opens, every call carries the envelope) instead of `initialize`.
pub async fn stdio(
    server: &mut Running,
    window: usize,
    warmup: Duration,
    measure: Duration,
    stateless: bool,
) -> anyhow::Result<Rate> {
    let echo_line = if stateless {
        stateless::echo_line
    } else {
        rpc::echo_line
    };
    let mut stdin = server.child.stdin.take().context("stdin")?;
    let mut stdout = server.child.stdout.take().context("stdout")?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut pending: Vec<u8> = Vec::new();

    // Handshake, raw.
    let opening = if stateless {
        stateless::discover(0)
    } else {
        rpc::initialize(0)
    };
    let mut init = serde_json::to_vec(&opening)?;
    init.push(b'\n');
    stdin.write_all(&init).await?;
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let n = tokio::time::timeout_at(until, stdout.read(&mut buf))
            .await
            .context("initialize timed out")??;
        if n == 0 {
            bail!("the server exited during initialize");
        }
        pending.extend_from_slice(&buf[..n]);
        if pending.contains(&b'\n') {
            break;
        }
    }
    pending.clear();
    if !stateless {
        let mut note = serde_json::to_vec(&rpc::initialized())?;
        note.push(b'\n');
        stdin.write_all(&note).await?;
    }

    let mut next_id: u64 = 1;
    let mut out = Vec::with_capacity(64 * 1024);
    for _ in 0..window {
        out.extend_from_slice(echo_line(next_id).as_bytes());
        out.push(b'\n');
        next_id += 1;
    }
    stdin.write_all(&out).await?;

    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + measure;
    let (mut counted, mut errors) = (0u64, 0u64);
    let mut in_flight = window;
    loop {
        let now = Instant::now();
        if now >= end || counted >= MAX_CALLS {
            break;
        }
        let n = match tokio::time::timeout_at(end, stdout.read(&mut buf)).await {
            Ok(r) => r?,
            Err(_) => break,
        };
        if n == 0 {
            bail!("the server exited under load");
        }
        let at = Instant::now();
        pending.extend_from_slice(&buf[..n]);
        let mut done = 0usize;
        let mut consumed = 0usize;
        while let Some(pos) = pending[consumed..].iter().position(|b| *b == b'\n') {
            let line = &pending[consumed..consumed + pos];
            consumed += pos + 1;
            // Cheap checks: a response (has an id) with a result.
            if line.windows(9).any(|w| w == b"\"result\":") {
                done += 1;
                if at >= measure_from {
                    counted += 1;
                }
            } else if line.windows(8).any(|w| w == b"\"error\":") {
                done += 1;
                errors += 1;
            }
        }
        pending.drain(..consumed);
        in_flight -= done.min(in_flight);
        out.clear();
        while in_flight < window {
            out.extend_from_slice(echo_line(next_id).as_bytes());
            out.push(b'\n');
            next_id += 1;
            in_flight += 1;
        }
        if !out.is_empty() {
            stdin.write_all(&out).await?;
        }
    }
    let secs = Instant::now()
        .saturating_duration_since(measure_from)
        .as_secs_f64();
    Ok(Rate {
        per_sec: counted as f64 / secs.max(1e-9),
        errors,
    })
}

/// `concurrency` connections, each looping POST echo → whole body: on one session, or
/// (`stateless`) as 2026-07-28 requests that need none.
pub async fn http(
    port: u16,
    concurrency: usize,
    warmup: Duration,
    measure: Duration,
    stateless: bool,
) -> anyhow::Result<Rate> {
    let session = if stateless {
        None
    } else {
        let mut conn = Conn::open(port).await?;
        Some(Session::open(port, &mut conn).await?)
    };
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + measure;
    let ids = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let session = session.clone();
        let ids = ids.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(port).await?;
            let (mut counted, mut errors) = (0u64, 0u64);
            while Instant::now() < end && counted < MAX_CALLS {
                let id = ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let req = match &session {
                    Some(s) => s.post_bytes(Bytes::from(rpc::echo_line(id))),
                    None => stateless::post_bytes(
                        port,
                        "tools/call",
                        Some("echo"),
                        Bytes::from(stateless::echo_line(id)),
                    ),
                };
                let resp =
                    match tokio::time::timeout_at(end + Duration::from_secs(5), conn.send(req))
                        .await
                    {
                        Ok(Ok(r)) => r,
                        Ok(Err(_)) => {
                            errors += 1;
                            conn = Conn::open(port).await?;
                            continue;
                        }
                        Err(_) => break,
                    };
                let ok = resp.status().is_success();
                let body = http_body_util::BodyExt::collect(resp.into_body())
                    .await?
                    .to_bytes();
                let at = Instant::now();
                if ok && body.windows(9).any(|w| w == b"\"result\":") {
                    if at >= measure_from && at < end {
                        counted += 1;
                    }
                } else {
                    errors += 1;
                }
            }
            anyhow::Ok((counted, errors))
        }));
    }
    let (mut counted, mut errors) = (0u64, 0u64);
    for t in tasks {
        let (c, e) = t.await??;
        counted += c;
        errors += e;
    }
    Ok(Rate {
        per_sec: counted as f64 / measure.as_secs_f64(),
        errors,
    })
}
