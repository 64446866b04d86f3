//! The seed's question, asked from outside: after `notifications/cancelled`, does the work
//! stop (its progress stops), and does the request go unanswered, as the spec says it should?
//!
//! Progress alone can hide work that goes on: a server may stop reporting but keep working,
//! and a proxy keeps its client clean while its upstream goes on. When the server has the
//! status tool (`slow_count_status {tag}`), the steps done after the cancel are read too, and
//! work that went on is reported even when no progress showed it. A proxy that says on the
//! session that its upstream went on (`staunch proxy`'s warnings from logger
//! `staunch.proxy`) makes it a WARN too, status tool or not.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::status::{new_tag, read_status};
use super::watch::{Watch, ms, progress_in};
use super::{Check, Probe, Status};

pub(crate) async fn checks(p: &Probe) -> Vec<Check> {
    const ROUTED: &str = "cancel.routed";
    const NO_RESPONSE: &str = "cancel.no_response";
    let tag = new_tag(p);
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
        Err(e) => {
            let ev = format!("could not call: {e}");
            return vec![
                Check::new(ROUTED, Status::Fail, ev.clone(), json!({})),
                Check::new(NO_RESPONSE, Status::Fail, ev, json!({})),
            ];
        }
    };
    let id = pending.id().clone();
    let token = pending.progress_token().cloned();
    let t0 = pending.sent_at();
    // Let it get going: three progress reports, or a bounded wait for servers that send none.
    let warmup = (p.step * 20).clamp(Duration::from_secs(2), Duration::from_secs(10));
    if let Some(t) = &token {
        let want = serde_json::to_value(t).unwrap_or(Value::Null);
        w.until(t0 + warmup, |seen| progress_in(seen, &want).len() >= 3)
            .await;
    }
    let window = (p.step * 8).clamp(Duration::from_millis(800), Duration::from_secs(4));
    let t_cancel = Instant::now();
    p.client.cancel(&id, "staunch probe: cancel check");
    // Steps done when the cancel went out (one may still be in flight), and at the window's end.
    let at_cancel = match &tag {
        Some(t) => read_status(p, Some(t)).await.ok(),
        None => None,
    };
    w.pump_until(t_cancel + window).await;
    drop(pending);
    let at_end = match (&tag, at_cancel) {
        (Some(t), Some(_)) => read_status(p, Some(t)).await.ok(),
        _ => None,
    };
    let steps_after = at_cancel
        .zip(at_end)
        .map(|((c, _), (e, _))| e.saturating_sub(c));
    let prog = token
        .as_ref()
        .map(|t| w.progress_for(t))
        .unwrap_or_default();
    let before = prog.iter().filter(|(at, _)| *at <= t_cancel).count();
    let after: Vec<_> = prog.iter().filter(|(at, _)| *at > t_cancel).collect();
    let last_after = after
        .last()
        .map(|(at, _)| at.saturating_duration_since(t_cancel));
    let ping = p
        .client
        .request(
            p.ping_method(),
            None,
            &staunch_client::CallOptions::default()
                .timeout(Duration::from_secs(5))
                .progress(false),
        )
        .await;
    let alive = match &ping {
        Ok(_) => format!("the server still answers {}", p.ping_method()),
        Err(e) => format!("{} after the cancel: {e}", p.ping_method()),
    };
    let data = json!({
        "step_ms": p.step.as_secs_f64() * 1000.0,
        "window_ms": window.as_millis() as u64,
        "progress_before_cancel": before,
        "progress_after_cancel": after.len(),
        "cancel_to_last_progress_ms": last_after.map(|d| d.as_secs_f64() * 1000.0),
        "ping_after_cancel_ok": ping.is_ok(),
        "status_tool": tag.as_ref().map(|_| p.status_tool.as_str()),
        "tag": tag,
        "steps_after_cancel": steps_after,
    });

    let routed = if before == 0 {
        Check::new(
            ROUTED,
            Status::Warn,
            format!(
                "no progress within {} of the call, so whether the work stops cannot be seen ({alive})",
                ms(warmup)
            ),
            data.clone(),
        )
    } else {
        match last_after {
            None => {
                let last_before = prog
                    .iter()
                    .filter(|(at, _)| *at <= t_cancel)
                    .map(|(at, _)| t_cancel.saturating_duration_since(*at))
                    .min()
                    .unwrap_or_default();
                Check::new(
                    ROUTED,
                    Status::Pass,
                    format!(
                        "progress stopped at the cancel: the last came {} before it, none in the {} \
                         after it (one every {} before); {alive}",
                        ms(last_before),
                        ms(window),
                        ms(p.step)
                    ),
                    data.clone(),
                )
            }
            Some(d) if after.len() <= 2 && d <= p.step * 2 + Duration::from_millis(100) => {
                Check::new(
                    ROUTED,
                    Status::Pass,
                    format!(
                        "progress stopped {} after the cancel ({} already in flight); {alive}",
                        ms(d),
                        after.len()
                    ),
                    data.clone(),
                )
            }
            Some(d) if d + p.step * 3 >= window => Check::new(
                ROUTED,
                Status::Fail,
                format!(
                    "the work goes on after the cancel: {} progress notifications in the {} after it, the last {} after it",
                    after.len(),
                    ms(window),
                    ms(d)
                ),
                data.clone(),
            ),
            Some(d) => Check::new(
                ROUTED,
                Status::Warn,
                format!(
                    "progress stopped only {} after the cancel ({} notifications)",
                    ms(d),
                    after.len()
                ),
                data.clone(),
            ),
        }
    };

    // A proxy that keeps its client clean says so on the session when the work went on
    // upstream (`staunch proxy`: a warning from logger `staunch.proxy` naming the request).
    let id_json = serde_json::to_value(&id).unwrap_or(Value::Null);
    let reported = w.proxy_reports(t_cancel, &id_json);
    let routed = match reported.first() {
        Some(first) if routed.status == Status::Pass => {
            let mut data = routed.data.clone();
            data["proxy_reports"] = json!(reported);
            Check::new(
                ROUTED,
                Status::Warn,
                format!(
                    "no progress reached this client after the cancel, but the proxy says the \
                     work went on upstream: {}",
                    first["message"].as_str().unwrap_or("(no message)")
                ),
                data,
            )
        }
        _ => routed,
    };

    let routed = match steps_after {
        // More than the step in flight when the cancel went out: the work went on.
        Some(n) if n > 2 && routed.status != Status::Fail => Check::new(
            ROUTED,
            Status::Warn,
            format!(
                "no progress reached this client after the cancel, but the work went on: {n} \
                 more steps in the {} after it ({} {}); behind a proxy this is its upstream's \
                 orphaned work (staunch audit on the proxy's log lists it)",
                ms(window),
                p.status_tool,
                tag.as_deref().unwrap_or_default()
            ),
            routed.data.clone(),
        ),
        _ => routed,
    };

    let late = p.client.late_responses().into_iter().find(|l| l.id == id);
    let no_response = match (w.response_for(&id), late) {
        (Some((at, _)), _) if at <= t_cancel => Check::new(
            NO_RESPONSE,
            Status::Warn,
            "the call finished before the cancel was sent; nothing to judge",
            data,
        ),
        (_, Some(l)) => {
            let body: Value = match &l.outcome {
                Ok(v) => json!({"result": v}),
                Err(e) => json!({"error": e}),
            };
            Check::new(
                NO_RESPONSE,
                Status::Fail,
                format!(
                    "the cancelled request was answered {} after the cancel: {}",
                    ms(l.since_abandoned),
                    body
                ),
                json!({"late_response": body, "after_cancel_ms": l.since_abandoned.as_millis() as u64}),
            )
        }
        (Some((at, outcome)), None) => Check::new(
            NO_RESPONSE,
            Status::Fail,
            format!(
                "the cancelled request was answered {} after the cancel: {:?}",
                ms(at.saturating_duration_since(t_cancel)),
                outcome
            ),
            data,
        ),
        (None, None) => Check::new(
            NO_RESPONSE,
            Status::Pass,
            format!("no response in the {} after the cancel", ms(window)),
            data,
        ),
    };
    vec![routed, no_response]
}
