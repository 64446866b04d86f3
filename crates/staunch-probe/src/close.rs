//! `cancel.stream_close`: the 2026-07-28 cancel, asked from outside. Over HTTP in this era
//! closing a request's response stream *is* its cancellation. Call the slow tool with a
//! progress token, close the stream after `--close-after`, then judge whether the work stopped.
//!
//! Progress cannot tell: the stream that carried it is closed, so none can arrive (the count
//! after the close is still reported, as a sanity check). The side effects can: a tool that
//! records each step under a tag (`slow_count {tag}`) and a status tool that reads them back
//! (`slow_count_status {tag}` → `{steps, last_step_unix_ms}`) show how many steps ran after the
//! close and when the last one ran. Without the status tool the verdict is "unknown".

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use super::status::{new_tag, read_status, unix_ms};
use super::watch::{Watch, ms, progress_in};
use super::{Check, Probe, Status};

const ID: &str = "cancel.stream_close";

/// One reading of the status tool.
#[derive(Debug, Clone, Copy)]
struct Sample {
    since_close_ms: u64,
    steps: u64,
    last_step_unix_ms: u64,
}

/// No verdict from the side effects: WARN, or FAIL when progress arrived on the closed stream.
fn unknown(why: String, progress_text: &str, progress_after: bool, mut data: Value) -> Check {
    data["verdict"] = json!("unknown");
    data["side_effects"] = json!(why);
    let status = if progress_after {
        Status::Fail
    } else {
        Status::Warn
    };
    Check::new(
        ID,
        status,
        format!("{progress_text}; whether the work stopped: {why}"),
        data,
    )
}

pub(crate) async fn stream_close(p: &Probe) -> Check {
    let has_status = p.has_tool(&p.status_tool);
    let tag = new_tag(p);
    let baseline = if has_status {
        read_status(p, tag.as_deref()).await.ok()
    } else {
        None
    };
    let mut args = p.arguments(p.long_steps());
    if let (Some(t), Some(obj)) = (&tag, args.as_object_mut()) {
        obj.insert("tag".into(), json!(t));
    }
    let mut w = Watch::new(&p.client);
    let pending = match p.client.start_request(
        "tools/call",
        Some(json!({"name": p.tool, "arguments": args})),
        true,
    ) {
        Ok(x) => x,
        Err(e) => return Check::new(ID, Status::Fail, format!("could not call: {e}"), json!({})),
    };
    let id = pending.id().clone();
    let token = pending
        .progress_token()
        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    w.pump_until(pending.sent_at() + p.close_after).await;
    if let Some((_, outcome)) = w.response_for(&id) {
        return Check::new(
            ID,
            Status::Warn,
            format!(
                "the call finished within --close-after {} ({}); nothing to judge: raise --args' \
                 step count or lower --close-after",
                ms(p.close_after),
                if outcome.is_ok() {
                    "a result"
                } else {
                    "an error"
                }
            ),
            json!({}),
        );
    }
    let before = progress_in(&w.seen, &token);
    let t_close = Instant::now();
    let close_unix = unix_ms();
    pending.cancel("staunch probe: closing the stream");

    // Watch for a bounded window: long enough for a server that ignores the close to show it.
    let window = (p.step * 8).clamp(Duration::from_secs(1), Duration::from_secs(4));
    let every = (p.step * 2).clamp(Duration::from_millis(50), Duration::from_millis(500));
    let mut samples = Vec::new();
    let mut status_error = None;
    loop {
        if has_status {
            match read_status(p, tag.as_deref()).await {
                Ok((steps, last)) => samples.push(Sample {
                    since_close_ms: t_close.elapsed().as_millis() as u64,
                    steps,
                    last_step_unix_ms: last,
                }),
                Err(e) => {
                    status_error = Some(e);
                    break;
                }
            }
        }
        if t_close.elapsed() >= window {
            break;
        }
        let next = (Instant::now() + every).min(t_close + window);
        w.pump_until(next).await;
        if !has_status && Instant::now() >= t_close + window {
            break;
        }
        sleep(Duration::ZERO).await;
    }
    w.pump_until(Instant::now()).await;
    let after: Vec<_> = progress_in(&w.seen, &token)
        .into_iter()
        .filter(|(at, _)| *at > t_close)
        .collect();
    let last_progress = before
        .iter()
        .map(|(_, v)| *v)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let progress_text = format!(
        "{} progress before the close at {}, {} after it",
        before.len(),
        ms(p.close_after),
        after.len()
    );
    let mut data = json!({
        "close_after_ms": p.close_after.as_millis() as u64,
        "window_ms": window.as_millis() as u64,
        "step_ms": p.step.as_secs_f64() * 1000.0,
        "progress_before_close": before.len(),
        "last_progress_before_close": last_progress,
        "progress_after_close": after.len(),
        "status_tool": p.status_tool,
        "tag": tag,
    });

    if !has_status || status_error.is_some() {
        let why = match &status_error {
            Some(e) => format!("unknown: {} failed: {e}", p.status_tool),
            None => format!("unknown: server has no {}", p.status_tool),
        };
        return unknown(why, &progress_text, !after.is_empty(), data);
    }

    let base = baseline.map_or(0, |(s, _)| s);
    let first = samples[0];
    let last = samples[samples.len() - 1];
    // Progress says steps ran, the status tool saw none: it reads another process's count
    // (an instance behind a load balancer other than the one that ran the call). No verdict
    // can come from it.
    if !before.is_empty() && last.steps <= base && last.last_step_unix_ms == 0 {
        let why = format!(
            "unknown: {} saw none of the steps that {} progress notifications reported (it \
             reads another process's count: another instance behind a load balancer?)",
            p.status_tool,
            before.len()
        );
        return unknown(why, &progress_text, !after.is_empty(), data);
    }
    // Steps done when the stream closed: what progress said (it counts steps), else the first
    // reading after the close.
    let at_close = last_progress
        .filter(|v| v.fract() == 0.0 && *v >= 0.0)
        .map_or(first.steps, |v| base + v as u64)
        .min(last.steps);
    let steps_after = last.steps.saturating_sub(at_close);
    let stop_ms = last.last_step_unix_ms as i64 - close_unix as i64;
    // Still running: a step in the last few step-times of the window.
    let quiet_ms = (close_unix + last.since_close_ms) as i64 - last.last_step_unix_ms as i64;
    let still_running = steps_after > 1 && quiet_ms < (p.step.as_millis() as i64 * 3).max(150);
    data["steps_at_close"] = json!(at_close.saturating_sub(base));
    data["steps_after_close"] = json!(steps_after);
    data["close_to_last_step_ms"] = json!(stop_ms);
    // Time to stop: from the close to the last step (0 when nothing ran after the close).
    data["time_to_stop_ms"] = json!(stop_ms.max(0));
    data["samples"] = json!(
        samples
            .iter()
            .map(|s| json!({"since_close_ms": s.since_close_ms, "steps": s.steps.saturating_sub(base),
                            "last_step_unix_ms": s.last_step_unix_ms}))
            .collect::<Vec<_>>()
    );
    let stop_text = if stop_ms <= 0 {
        format!("the last step ran {} ms before the close", -stop_ms)
    } else {
        format!("the last step ran {stop_ms} ms after the close")
    };
    let (status, verdict, text) = if still_running {
        (
            Status::Fail,
            "still_running",
            format!(
                "the work goes on after the stream closed: {steps_after} steps in the {} after \
                 it, the last {} ago",
                ms(window),
                ms(Duration::from_millis(quiet_ms.max(0) as u64))
            ),
        )
    } else if steps_after <= 1 && after.is_empty() {
        (
            Status::Pass,
            "stopped",
            format!(
                "stopped: {steps_after} step(s) after the close (at most one was in flight), \
                 {stop_text}"
            ),
        )
    } else if steps_after <= 1 {
        (
            Status::Fail,
            "stopped",
            format!("stopped, but progress arrived on a closed stream; {stop_text}"),
        )
    } else {
        (
            Status::Warn,
            "stopped_late",
            format!("stopped only after {steps_after} more steps; {stop_text}"),
        )
    };
    data["verdict"] = json!(verdict);
    Check::new(
        ID,
        status,
        format!(
            "{text} ({} {}: {} steps at the close, {} {} ms later; {progress_text})",
            p.status_tool,
            tag.as_deref().unwrap_or("(untagged)"),
            at_close.saturating_sub(base),
            last.steps.saturating_sub(base),
            last.since_close_ms
        ),
        data,
    )
}
