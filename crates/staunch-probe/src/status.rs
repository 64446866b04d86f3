//! Side effects read from outside: a slow tool that records each step under a tag
//! (`slow_count {tag}`) and a status tool that reads them back (`slow_count_status {tag}` →
//! `{steps, last_step_unix_ms}`) tell whether work went on after a cancel even when nothing
//! reached the client — a server that stops sending but keeps working, or a proxy that keeps
//! its client clean while its upstream goes on.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use staunch_client::CallOptions;

use super::Probe;

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A fresh tag when the server has the status tool and the slow tool takes a `tag`, else
/// `None` (the side effects cannot be read).
pub(crate) fn new_tag(p: &Probe) -> Option<String> {
    (p.has_tool(&p.status_tool) && p.takes_arg(&p.tool, "tag")).then(|| {
        format!(
            "staunch-probe-{}",
            &staunch_client::jobs::new_idempotency_key()[..8]
        )
    })
}

/// One reading of the status tool: steps done under `tag`, and when the last one ran.
pub(crate) async fn read_status(p: &Probe, tag: Option<&str>) -> Result<(u64, u64), String> {
    let opts = CallOptions::default()
        .timeout(Duration::from_secs(5))
        .max_total(Duration::from_secs(5))
        .progress(false);
    let args = match tag {
        Some(t) => json!({"tag": t}),
        None => json!({}),
    };
    let r = p
        .client
        .call_tool(&p.status_tool, args, &opts, |_| {})
        .await
        .map_err(|e| e.to_string())?;
    let v = staunch_client::result::payload(&r)
        .ok_or_else(|| format!("{} returned no JSON object", p.status_tool))?;
    let steps = v["steps"]
        .as_u64()
        .ok_or_else(|| format!("{} returned no `steps`: {v}", p.status_tool))?;
    Ok((steps, v["last_step_unix_ms"].as_u64().unwrap_or(0)))
}
