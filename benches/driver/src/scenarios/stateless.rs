//! The 2026-07-28 (stateless) era over HTTP: closing a request's response stream is its
//! cancellation, so what is measured is what a server does when the client goes away.
//!
//! - **close → stop**: `slow_count {steps: 100000, delay_ms: 10, tag}` with a progress token
//!   on a socket of its own; after 3 progress events the driver closes the socket (as a client
//!   that gives up does) and, 300 ms later, asks `slow_count_status {tag}` on a fresh
//!   connection how many steps the handler recorded and when the last one was (unix ms). The
//!   handler's last step minus the close time is *close → handler stopped* (0 when its last
//!   step came before the close); steps recorded after the close are progress the handler
//!   produced for a stream that was gone (each step reports progress right after it is
//!   recorded). A handler still stepping 300 ms later never stopped.
//! - **silent handler**: `slow_count {steps: 2, delay_ms: 1000, tag}` without a progress token
//!   (nothing is written for a second), closed after 300 ms; a step recorded by 1.5 s means
//!   the server did not notice the close while its handler was silent.
//! - **memory**: RSS idle, with N calls in flight (each on its own socket, nothing read), after
//!   closing all N sockets at once, and after a second load/close cycle.
//!
//! The socket work is raw: a request written whole, the response bytes scanned for progress
//! events (no body framing is needed to count them), and the socket dropped to close.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::http::{Conn, read_messages};
use crate::procfs;
use crate::stateless;

/// How long after the close the side effects are read.
const QUIET: Duration = Duration::from_millis(300);

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Sends one request on a fresh connection and returns its response message.
pub async fn call(port: u16, msg: &Value) -> anyhow::Result<Value> {
    let mut conn = Conn::open(port).await?;
    let resp = tokio::time::timeout(
        Duration::from_secs(10),
        conn.send(stateless::post(port, msg)),
    )
    .await
    .context("no answer within 10 s")??;
    let status = resp.status();
    let msgs = tokio::time::timeout(Duration::from_secs(10), read_messages(resp))
        .await
        .context("body not finished within 10 s")??;
    let resp = msgs
        .into_iter()
        .find(|m| m.get("id").is_some() && m.get("method").is_none())
        .with_context(|| format!("HTTP {status}: no response in the body"))?;
    if let Some(e) = resp.get("error") {
        bail!("HTTP {status}: error {e}");
    }
    Ok(resp)
}

/// `slow_count_status {tag}` → (steps, unix ms of the last step).
pub async fn status(port: u16, tag: &str) -> anyhow::Result<(u64, u64)> {
    let resp = call(
        port,
        &stateless::tool_call(next_id(), "slow_count_status", json!({"tag": tag}), false),
    )
    .await?;
    let r = &resp["result"];
    // structuredContent, or the JSON text when a server sent only that.
    let s = match r.get("structuredContent") {
        Some(v) if v.get("steps").is_some() => v.clone(),
        _ => r["content"][0]["text"]
            .as_str()
            .and_then(|t| serde_json::from_str(t).ok())
            .context("slow_count_status: no status in the result")?,
    };
    Ok((
        s["steps"].as_u64().context("no steps")?,
        s["last_step_unix_ms"].as_u64().unwrap_or(0),
    ))
}

/// Opens a socket and writes `msg` as a whole POST.
async fn open_call(port: u16, msg: &Value) -> anyhow::Result<TcpStream> {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    tcp.write_all(&stateless::raw_post(port, msg)).await?;
    Ok(tcp)
}

#[derive(Debug, Default)]
pub struct CloseRuns {
    pub runs: usize,
    pub failed: usize,
    pub first_error: Option<String>,
    /// Close → the handler's last step (zero when that came before the close).
    pub stop: Vec<Duration>,
    /// Steps (each a progress report) recorded after the close, summed over the runs.
    pub steps_after: u64,
    /// Runs whose handler was still stepping [`QUIET`] after the close.
    pub kept_running: usize,
}

/// `runs` close → stop runs against the server on `port`.
pub async fn close_runs(port: u16, runs: usize, label: &str) -> CloseRuns {
    let mut out = CloseRuns::default();
    for i in 0..runs {
        out.runs += 1;
        let tag = format!("{label}-close-{i}-{}", unix_ms());
        if let Err(e) = close_once(port, &tag, &mut out).await {
            out.failed += 1;
            out.first_error.get_or_insert_with(|| format!("{e:#}"));
        }
    }
    out
}

async fn close_once(port: u16, tag: &str, out: &mut CloseRuns) -> anyhow::Result<()> {
    let msg = stateless::tool_call(
        next_id(),
        "slow_count",
        json!({"steps": 100_000, "delay_ms": 10, "tag": tag}),
        true,
    );
    let mut tcp = open_call(port, &msg).await?;
    let mut seen = 0usize;
    let mut buf = vec![0u8; 16 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    let until = Instant::now() + Duration::from_secs(5);
    while seen < 3 {
        let n = tokio::time::timeout_at(until, tcp.read(&mut buf))
            .await
            .context("no 3 progress events within 5 s")??;
        if n == 0 {
            bail!("the server closed the stream before the close");
        }
        carry.extend_from_slice(&buf[..n]);
        let needle = b"notifications/progress";
        while let Some(p) = carry.windows(needle.len()).position(|w| w == needle) {
            seen += 1;
            carry.drain(..p + needle.len());
        }
        // Keep only a tail that could hold the start of a split needle.
        let keep = carry.len().min(needle.len());
        carry.drain(..carry.len() - keep);
    }
    let closed_at = unix_ms();
    drop(tcp);
    tokio::time::sleep(QUIET).await;
    let (steps, last) = status(port, tag).await?;
    if last > closed_at {
        out.stop.push(Duration::from_millis(last - closed_at));
        out.steps_after += steps.saturating_sub(seen as u64).max(1);
        if last + 50 >= closed_at + QUIET.as_millis() as u64 {
            out.kept_running += 1;
        }
    } else {
        out.stop.push(Duration::ZERO);
    }
    Ok(())
}

/// Silent-handler runs: how many of `runs` stopped when the stream closed with nothing
/// written yet. Returns (stopped, ok runs, first error).
pub async fn silent_runs(port: u16, runs: usize, label: &str) -> (usize, usize, Option<String>) {
    let (mut stopped, mut ok, mut err) = (0, 0, None);
    for i in 0..runs {
        let tag = format!("{label}-silent-{i}-{}", unix_ms());
        let r = async {
            let msg = stateless::tool_call(
                next_id(),
                "slow_count",
                json!({"steps": 2, "delay_ms": 1000, "tag": tag}),
                false,
            );
            let tcp = open_call(port, &msg).await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(tcp);
            tokio::time::sleep(Duration::from_millis(1200)).await;
            status(port, &tag).await
        }
        .await;
        match r {
            Ok((steps, _)) => {
                ok += 1;
                if steps == 0 {
                    stopped += 1;
                }
            }
            Err(e) => {
                err.get_or_insert_with(|| format!("{e:#}"));
            }
        }
    }
    (stopped, ok, err)
}

#[derive(Debug, Default)]
pub struct Mem {
    pub idle: Option<u64>,
    pub loaded: Option<u64>,
    pub after_close: Option<u64>,
    pub loaded_2: Option<u64>,
    pub after_close_2: Option<u64>,
    pub survived: Option<bool>,
}

/// Waits until RSS stops moving (two readings 300 ms apart within 64 KiB; 1–10 s).
async fn settle_rss(pid: u32) -> Option<u64> {
    let start = Instant::now();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut last = procfs::rss_bytes(pid)?;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = procfs::rss_bytes(pid)?;
        if now.abs_diff(last) <= 64 * 1024 || start.elapsed() > Duration::from_secs(10) {
            return Some(now);
        }
        last = now;
    }
}

/// `n` calls in flight, each on its own socket (connected in waves of 64).
async fn load(port: u16, n: usize) -> anyhow::Result<Vec<TcpStream>> {
    let mut held = Vec::with_capacity(n);
    let mut left = n;
    while left > 0 {
        let wave = left.min(64);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..wave {
            let msg = stateless::tool_call(
                next_id(),
                "slow_count",
                json!({"steps": 1, "delay_ms": 600_000}),
                false,
            );
            set.spawn(async move { open_call(port, &msg).await });
        }
        while let Some(r) = set.join_next().await {
            held.push(r??);
        }
        left -= wave;
    }
    Ok(held)
}

/// Idle → `n` in flight → all closed at once → again.
pub async fn memory(port: u16, pid: u32, n: usize, out: &mut Mem) -> anyhow::Result<()> {
    call(
        port,
        &stateless::tool_call(next_id(), "echo", json!({"text": "warm"}), false),
    )
    .await?;
    out.idle = settle_rss(pid).await;
    for cycle in 0..2 {
        let held = load(port, n).await?;
        let loaded = settle_rss(pid).await;
        drop(held);
        let after = settle_rss(pid).await;
        let alive = call(
            port,
            &stateless::tool_call(next_id(), "echo", json!({"text": "after"}), false),
        )
        .await
        .is_ok();
        if cycle == 0 {
            out.loaded = loaded;
            out.after_close = after;
            out.survived = Some(alive);
        } else {
            out.loaded_2 = loaded;
            out.after_close_2 = after;
            out.survived = Some(out.survived == Some(true) && alive);
        }
        if !alive {
            break;
        }
    }
    Ok(())
}
