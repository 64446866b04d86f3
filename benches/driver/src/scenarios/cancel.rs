//! Cancel → stop: start a counting tool with a progress token, cancel it after a few
//! progress notifications, and watch the wire.
//!
//! Per run: the time from sending `notifications/cancelled` to the last progress notification
//! that arrived after it (0 when none did), how many arrived after it, whether a response
//! came anyway, and (HTTP) when the request's SSE stream closed.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::client::Client;
use crate::rpc::{self, Event};
use crate::servers::Transport;

/// How long the wire is watched after the cancel for stray progress and a response.
const QUIET: Duration = Duration::from_millis(300);
/// How long an SSE stream may stay open after the cancel before it is called "open".
pub const SSE_WAIT: Duration = Duration::from_millis(1600);

#[derive(Debug, Default)]
pub struct CancelRuns {
    pub stop: Vec<Duration>,
    pub late_progress: u64,
    pub runs: usize,
    pub failed: usize,
    /// Responses that came for cancelled requests, as sent (first one kept).
    pub responses: usize,
    pub response_sample: Option<String>,
    /// HTTP: time to stream close; `None` = still open after [`SSE_WAIT`].
    pub sse_close: Vec<Option<Duration>>,
}

/// `runs` cancels of `tool` (args: many short steps, so progress flows steadily).
pub async fn run(client: &Client, transport: Transport, tool: &str, runs: usize) -> CancelRuns {
    let mut out = CancelRuns::default();
    for _ in 0..runs {
        out.runs += 1;
        if one(client, transport, tool, &mut out).await.is_err() {
            out.failed += 1;
        }
    }
    out
}

async fn one(
    client: &Client,
    transport: Transport,
    tool: &str,
    out: &mut CancelRuns,
) -> anyhow::Result<()> {
    let args = json!({"steps": 100_000, "delay_ms": 10});
    let mut p = client.start_tool(tool, args, true).await?;
    // Wait for 3 progress notifications (the tool is really running).
    let mut seen = 0;
    let until = Instant::now() + Duration::from_secs(5);
    while seen < 3 {
        match tokio::time::timeout_at(until, p.events.recv()).await {
            Ok(Some(Event::Progress { .. })) => seen += 1,
            Ok(Some(_)) | Ok(None) => anyhow::bail!("the call ended before it was cancelled"),
            Err(_) => anyhow::bail!("no progress within 5 s"),
        }
    }
    let t0 = Instant::now();
    client.notify(&rpc::cancelled(p.id)).await?;
    let quiet_until = t0 + QUIET;
    let close_until = t0 + SSE_WAIT;
    let mut last: Option<Instant> = None;
    let mut closed: Option<Duration> = None;
    loop {
        let until = if transport == Transport::Http && closed.is_none() {
            close_until
        } else {
            quiet_until
        };
        let ev = match tokio::time::timeout_at(until, p.events.recv()).await {
            Ok(Some(ev)) => ev,
            Ok(None) | Err(_) => break,
        };
        match ev {
            Event::Progress { at, .. } => {
                // A notification already in the pipe when the cancel left is not "late".
                if at > t0 {
                    out.late_progress += 1;
                    last = Some(at);
                }
            }
            Event::Response { msg, .. } => {
                out.responses += 1;
                if out.response_sample.is_none() {
                    let shown = msg.get("error").or_else(|| msg.get("result")).cloned();
                    out.response_sample = shown.map(|v| v.to_string());
                }
            }
            Event::Closed { at } => {
                closed = Some(at.saturating_duration_since(t0));
                if Instant::now() >= quiet_until {
                    break;
                }
            }
        }
    }
    out.stop
        .push(last.map_or(Duration::ZERO, |l| l.saturating_duration_since(t0)));
    if transport == Transport::Http {
        out.sse_close.push(closed);
    }
    Ok(())
}
