//! Progress rules (spec: utilities/progress): none without a token; with one, strictly
//! increasing and stopped by the result. The token call also measures the time per step that
//! the later checks use to size their calls and windows.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::watch::{Watch, has_response, ms};
use super::{Check, Probe, Status};

const STEPS: u64 = 10;
/// How long to keep listening after the result for progress that should not come.
const AFTER: Duration = Duration::from_millis(300);

pub(crate) async fn with_token(p: &mut Probe) -> Check {
    const ID: &str = "progress.token";
    let mut w = Watch::new(&p.client);
    let pending = match p.start_call(STEPS, true) {
        Ok(x) => x,
        Err(e) => return Check::new(ID, Status::Fail, format!("could not call: {e}"), json!({})),
    };
    let id = pending.id().clone();
    let Some(token) = pending.progress_token().cloned() else {
        return Check::new(ID, Status::Fail, "no progress token was set", json!({}));
    };
    let t0 = pending.sent_at();
    let limit = t0 + Duration::from_secs(30) + p.step * STEPS as u32;
    if !w.until(limit, |s| has_response(s, &id)).await {
        drop(pending); // cancels it
        return Check::new(
            ID,
            Status::Fail,
            format!(
                "{} {{{}: {STEPS}}} gave no answer within 30 s",
                p.tool, p.steps_arg
            ),
            json!({}),
        );
    }
    let Some((t_resp, outcome)) = w.response_for(&id) else {
        return Check::new(ID, Status::Fail, "answer lost", json!({}));
    };
    drop(pending);
    w.pump_until(Instant::now() + AFTER).await;
    match &outcome {
        Err(e) => {
            return Check::new(
                ID,
                Status::Fail,
                format!("the slow tool failed: {e} (check --tool/--args)"),
                json!({"error": e.message}),
            );
        }
        Ok(r) if r["isError"] == true => {
            return Check::new(
                ID,
                Status::Fail,
                format!(
                    "the slow tool reported an error: {} (check --tool/--args)",
                    staunch_client::result::text_of(r)
                ),
                json!({}),
            );
        }
        Ok(_) => {}
    }
    let took = t_resp.saturating_duration_since(t0);
    p.step = (took / STEPS as u32).max(Duration::from_millis(1));
    let all = w.progress_for(&token);
    let (before, after): (Vec<_>, Vec<_>) = all.iter().partition(|(at, _)| *at <= t_resp);
    let values: Vec<f64> = before.iter().map(|(_, v)| *v).collect();
    let increasing = values.windows(2).all(|w| w[0] < w[1]);
    let rate = match (before.first(), before.last()) {
        (Some(a), Some(b)) if before.len() > 1 && b.0 > a.0 => {
            (before.len() - 1) as f64 / (b.0 - a.0).as_secs_f64()
        }
        _ => 0.0,
    };
    let data = json!({
        "steps": STEPS, "duration_ms": took.as_millis() as u64, "notifications": before.len(),
        "values": values, "after_result": after.len(), "rate_per_s": rate,
        "step_ms": p.step.as_secs_f64() * 1000.0,
    });
    if !after.is_empty() {
        return Check::new(
            ID,
            Status::Fail,
            format!(
                "{} progress notification(s) arrived after the result (they must stop at completion)",
                after.len()
            ),
            data,
        );
    }
    if !increasing {
        return Check::new(
            ID,
            Status::Fail,
            format!("progress values are not strictly increasing: {values:?}"),
            data,
        );
    }
    if values.is_empty() {
        return Check::new(
            ID,
            Status::Warn,
            format!(
                "no progress for a {} call with a token: clients cannot reset their timeouts",
                ms(took)
            ),
            data,
        );
    }
    Check::new(
        ID,
        Status::Pass,
        format!(
            "{} notifications in {}, strictly increasing ({}..{}), {:.1}/s, none after the result",
            values.len(),
            ms(took),
            values[0],
            values[values.len() - 1],
            rate
        ),
        data,
    )
}

pub(crate) async fn without_token(p: &Probe) -> Check {
    const ID: &str = "progress.no_token";
    const N: u64 = 5;
    let mut w = Watch::new(&p.client);
    let pending = match p.start_call(N, false) {
        Ok(x) => x,
        Err(e) => return Check::new(ID, Status::Fail, format!("could not call: {e}"), json!({})),
    };
    let id = pending.id().clone();
    let limit = pending.sent_at() + Duration::from_secs(30) + p.step * N as u32;
    let answered = w.until(limit, |s| has_response(s, &id)).await;
    drop(pending);
    w.pump_until(Instant::now() + AFTER).await;
    let stray = w.all_progress();
    let data =
        json!({"notifications": stray.len(), "examples": stray.iter().take(3).collect::<Vec<_>>()});
    if !stray.is_empty() {
        return Check::new(
            ID,
            Status::Fail,
            format!(
                "{} progress notification(s) for a call that sent no progressToken, e.g. {}",
                stray.len(),
                stray[0]
            ),
            data,
        );
    }
    if !answered {
        return Check::new(
            ID,
            Status::Warn,
            "the call gave no answer within 30 s",
            data,
        );
    }
    Check::new(
        ID,
        Status::Pass,
        "no progress notifications for a call without a progressToken",
        data,
    )
}
