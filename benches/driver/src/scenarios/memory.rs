//! Memory: RSS idle, with N in-flight slow calls (bytes per call), after cancelling them all
//! at once (does the server survive?), and after further load/cancel cycles of the largest
//! load (a leak shows as growth from one post-cancel figure to the next).

use std::time::Duration;

use serde_json::json;

use crate::client::{Client, Pending};
use crate::procfs;
use crate::servers::Running;

#[derive(Debug, Default)]
pub struct MemStats {
    pub idle: Option<u64>,
    /// (in-flight calls, RSS, bytes per call over idle)
    pub loaded: Vec<(usize, u64, f64)>,
    pub survived_cancel: Option<bool>,
    /// RSS after cancelling the first full load, and after each further cycle (2nd, 3rd …).
    pub after_cancel: Option<u64>,
    pub after_cycles: Vec<u64>,
    pub peak: Option<u64>,
}

/// Waits until the server has taken in everything sent so far (a ping is answered after the
/// requests before it on stdio; over HTTP every call was already accepted), then lets the
/// allocator settle.
async fn settle(client: &Client) -> anyhow::Result<()> {
    client.request("ping", Duration::from_secs(120)).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

/// One load of `n` calls, measured, then cancelled at once; `None` when the server died.
async fn cycle(
    server: &mut Running,
    client: &Client,
    n: usize,
    idle: u64,
    out: &mut MemStats,
) -> anyhow::Result<Option<u64>> {
    let pid = server.pid;
    // Long enough to outlive the measurement; all are cancelled.
    let args = json!({"steps": 1, "delay_ms": 600_000});
    let mut held: Vec<Pending> = Vec::new();
    let ids = client.load(n, &args, &mut held).await?;
    settle(client).await?;
    let rss = procfs::rss_bytes(pid).unwrap_or(0);
    out.loaded
        .push((n, rss, (rss as f64 - idle as f64) / n as f64));
    out.peak = Some(out.peak.unwrap_or(0).max(rss));
    client.cancel_all(&ids).await?;
    let alive = settle(client).await.is_ok() && server.alive();
    if !alive {
        return Ok(None);
    }
    drop(held); // the client goes away from its streams too
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(procfs::rss_bytes(pid))
}

/// `counts`: the loads measured, smallest first (e.g. 1,000 and 10,000). The smallest is
/// also the "cancelled at once" check; the largest is run `cycles` times in all for the leak
/// check.
pub async fn run(
    server: &mut Running,
    client: &Client,
    counts: &[usize],
    cycles: usize,
    out: &mut MemStats,
) -> anyhow::Result<()> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    settle(client).await?;
    let idle = procfs::rss_bytes(server.pid).unwrap_or(0);
    out.idle = Some(idle);
    for (i, &n) in counts.iter().enumerate() {
        let after = cycle(server, client, n, idle, out).await?;
        if i == 0 {
            out.survived_cancel = Some(after.is_some());
        }
        let Some(after) = after else {
            out.survived_cancel = Some(false);
            return Ok(());
        };
        out.after_cancel = Some(after);
    }
    // The leak check: the largest load again, cycle after cycle.
    let n = counts.last().copied().unwrap_or(0);
    for _ in 1..cycles.max(2) {
        let mut again = MemStats::default();
        match cycle(server, client, n, idle, &mut again).await? {
            Some(after) => out.after_cycles.push(after),
            None => {
                out.survived_cancel = Some(false);
                return Ok(());
            }
        }
        if let Some(p) = again.peak {
            out.peak = Some(out.peak.unwrap_or(0).max(p));
        }
    }
    Ok(())
}
