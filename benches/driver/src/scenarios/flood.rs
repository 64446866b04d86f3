//! Progress flood: `progress_flood {reports}` with a progress token. What reaches the wire,
//! whether the last value is exact, and the server's CPU time per report.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::client::Client;
use crate::procfs;
use crate::rpc::Event;

pub struct FloodStats {
    pub on_wire: u64,
    pub last: Option<f64>,
    pub wall: Duration,
    pub cpu: Option<Duration>,
    pub completed: bool,
}

pub async fn run(
    client: &Client,
    pid: u32,
    reports: u32,
    limit: Duration,
) -> anyhow::Result<FloodStats> {
    // Settle so idle work before the call is not counted.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cpu0 = procfs::cpu_time(pid);
    let t0 = Instant::now();
    let mut p = client
        .start_tool("progress_flood", json!({"reports": reports}), true)
        .await?;
    let mut on_wire = 0;
    let mut last = None;
    let mut completed = false;
    let until = t0 + limit;
    loop {
        match tokio::time::timeout_at(until, p.events.recv()).await {
            Ok(Some(Event::Progress { value, .. })) => {
                on_wire += 1;
                last = Some(value);
            }
            Ok(Some(Event::Response { msg, .. })) => {
                completed = msg.get("result").is_some();
                break;
            }
            Ok(Some(Event::Closed { .. })) | Ok(None) | Err(_) => break,
        }
    }
    let wall = t0.elapsed();
    let cpu = match (cpu0, procfs::cpu_time(pid)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    Ok(FloodStats {
        on_wire,
        last,
        wall,
        cpu,
        completed,
    })
}
