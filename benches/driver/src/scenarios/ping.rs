//! `ping` latency while 8 slow calls run and report progress: is the message loop free?

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::client::Client;
use crate::rpc;

pub struct PingStats {
    pub samples: Vec<Duration>,
    pub failed: usize,
}

pub async fn run(client: &Client, pings: usize) -> anyhow::Result<PingStats> {
    let mut slow = Vec::new();
    for _ in 0..8 {
        slow.push(
            client
                .start_tool(
                    "slow_count",
                    json!({"steps": 100_000, "delay_ms": 10}),
                    true,
                )
                .await?,
        );
    }
    // Let the slow calls get going before measuring.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut samples = Vec::with_capacity(pings);
    let mut failed = 0;
    for i in 0..pings + 20 {
        let t = Instant::now();
        match client.request("ping", Duration::from_secs(5)).await {
            Ok(_) if i >= 20 => samples.push(t.elapsed()),
            Ok(_) => {} // warm-up
            Err(_) => failed += 1,
        }
        // Drain progress so the driver's channels do not grow without bound.
        for p in slow.iter_mut() {
            while p.events.try_recv().is_ok() {}
        }
    }
    let ids: Vec<u64> = slow.iter().map(|p| p.id).collect();
    for id in ids {
        client.notify(&rpc::cancelled(id)).await?;
    }
    Ok(PingStats { samples, failed })
}
