//! Round-trip latency of one `tools/call echo` at a time (p50/p99): what a proxy in front of a
//! server adds to every call. Over stdio one request on the pipe at a time; over HTTP one
//! keep-alive connection in one session. Bounded by time and by a call count.

use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::time::Instant;

use crate::http::{Conn, Session};
use crate::rpc;
use crate::servers::Running;

/// Hard cap on calls per measurement, besides the time bound.
const MAX_CALLS: usize = 200_000;

/// Sequential echo calls over stdio; the round trips measured after `warmup`.
pub async fn stdio(
    server: &mut Running,
    warmup: Duration,
    measure: Duration,
) -> anyhow::Result<Vec<Duration>> {
    let mut stdin = server.child.stdin.take().context("stdin")?;
    let stdout = server.child.stdout.take().context("stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let send = |v: String| {
        let mut b = v.into_bytes();
        b.push(b'\n');
        b
    };
    stdin
        .write_all(&send(rpc::initialize(0).to_string()))
        .await?;
    tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .context("initialize timed out")??
        .context("the server exited during initialize")?;
    stdin
        .write_all(&send(rpc::initialized().to_string()))
        .await?;
    let measure_from = Instant::now() + warmup;
    let end = measure_from + measure;
    let mut out = Vec::new();
    let mut id = 1u64;
    while Instant::now() < end && out.len() < MAX_CALLS {
        let sent = Instant::now();
        stdin.write_all(&send(rpc::echo_line(id))).await?;
        id += 1;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
                .await
                .context("no answer within 10 s")??
                .context("the server exited")?;
            // Progress or log notifications may come first; the answer has a result.
            if line.contains("\"result\"") {
                break;
            }
            if line.contains("\"error\"") {
                bail!("echo failed: {line}");
            }
        }
        if sent >= measure_from {
            out.push(sent.elapsed());
        }
    }
    Ok(out)
}

/// Sequential echo calls over one keep-alive HTTP connection in one 2025 session.
pub async fn http(port: u16, warmup: Duration, measure: Duration) -> anyhow::Result<Vec<Duration>> {
    let mut conn = Conn::open(port).await?;
    let session = Session::open(port, &mut conn).await?;
    let measure_from = Instant::now() + warmup;
    let end = measure_from + measure;
    let mut out = Vec::new();
    let mut id = 1u64;
    while Instant::now() < end && out.len() < MAX_CALLS {
        let sent = Instant::now();
        let req = session.post_bytes(Bytes::from(rpc::echo_line(id)));
        id += 1;
        let resp = tokio::time::timeout(Duration::from_secs(10), conn.send(req))
            .await
            .context("no answer within 10 s")??;
        let ok = resp.status().is_success();
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await?
            .to_bytes();
        if !ok || !body.windows(9).any(|w| w == b"\"result\":") {
            bail!("echo failed: {}", String::from_utf8_lossy(&body));
        }
        if sent >= measure_from {
            out.push(sent.elapsed());
        }
    }
    Ok(out)
}
