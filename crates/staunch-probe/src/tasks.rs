//! Tasks (2025-11-25): `tasks/cancel` must leave the task `cancelled` for good, and should
//! stop the work. Progress (the creating request's token stays valid) and status
//! notifications are what we can see of the work from outside.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_client::CallOptions;
use staunch_client::protocol::Message;
use tokio::time::Instant;

use super::watch::{Watch, ms};
use super::{Check, Probe, Status};

const ID: &str = "tasks.cancel";

fn pick_tool(p: &Probe) -> Option<String> {
    let ok = |name: &str| matches!(p.task_support(name), Some("optional" | "required"));
    if let Some(t) = &p.task_tool {
        return Some(t.clone());
    }
    if ok(&p.tool) {
        return Some(p.tool.clone());
    }
    let alt = format!("{}_task", p.tool);
    ok(&alt).then_some(alt)
}

pub(crate) async fn cancel(p: &Probe) -> Check {
    if p.era() == staunch_client::era::Era::Stateless {
        return Check::new(
            ID,
            Status::Skip,
            "2026-07-28: the tasks extension is not probed (2025-11-25 tasks need --protocol 2025-11-25)",
            json!({}),
        );
    }
    if !p.client.server().supports_tool_tasks() {
        return Check::new(
            ID,
            Status::Skip,
            "the server does not advertise tasks",
            json!({}),
        );
    }
    let Some(tool) = pick_tool(p) else {
        return Check::new(
            ID,
            Status::Skip,
            format!(
                "tasks are advertised but neither {0} nor {0}_task allows them (use --task-tool)",
                p.tool
            ),
            json!({}),
        );
    };
    let quick = CallOptions::default()
        .timeout(Duration::from_secs(10))
        .max_total(Duration::from_secs(10))
        .progress(false);
    let steps = p.steps_for(Duration::from_secs(3), 10, 1_000_000);
    let expected = p.step * steps as u32;
    let mut w = Watch::new(&p.client);
    let created = p.client.start_request(
        "tools/call",
        Some(json!({"name": tool, "arguments": p.arguments(steps), "task": {"ttl": 60_000}})),
        true,
    );
    let pending = match created {
        Ok(x) => x,
        Err(e) => return Check::new(ID, Status::Fail, format!("could not call: {e}"), json!({})),
    };
    let token = pending.progress_token().cloned();
    let t0 = pending.sent_at();
    let r = pending.wait(&quick, |_| {}).await;
    let task_id = match &r {
        Ok(v) => v
            .pointer("/task/taskId")
            .and_then(Value::as_str)
            .map(str::to_string),
        Err(_) => None,
    };
    let Some(task_id) = task_id else {
        return Check::new(
            ID,
            Status::Fail,
            format!("{tool} with `task` did not create a task: {r:?}"),
            json!({}),
        );
    };
    // Let it run a little, then cancel.
    let run = (p.step * 4).clamp(Duration::from_millis(200), Duration::from_secs(2));
    w.pump_until(Instant::now() + run).await;
    let t_cancel = Instant::now();
    let answer = p
        .client
        .request("tasks/cancel", Some(json!({"taskId": task_id})), &quick)
        .await;
    let mut data = json!({"tool": tool, "task_id": task_id, "steps": steps,
                          "expected_ms": expected.as_millis() as u64});
    match &answer {
        Ok(v) if v["status"] == "cancelled" => {}
        Ok(v) => {
            return Check::new(
                ID,
                Status::Fail,
                format!(
                    "tasks/cancel answered status {}; it must be cancelled",
                    v["status"]
                ),
                data,
            );
        }
        Err(e) => return Check::new(ID, Status::Fail, format!("tasks/cancel failed: {e}"), data),
    }
    // Stay until the work would have finished, then ask again: cancelled must stick.
    let until = (t0 + expected + Duration::from_millis(500))
        .max(t_cancel + Duration::from_secs(1))
        .min(t_cancel + Duration::from_secs(6));
    w.pump_until(until).await;
    let later = p
        .client
        .request("tasks/get", Some(json!({"taskId": task_id})), &quick)
        .await;
    let status_later = later
        .as_ref()
        .ok()
        .and_then(|v| v["status"].as_str())
        .unwrap_or("?")
        .to_string();
    let prog = token
        .as_ref()
        .map(|t| w.progress_for(t))
        .unwrap_or_default();
    let before = prog.iter().filter(|(at, _)| *at <= t_cancel).count();
    let after = prog.iter().filter(|(at, _)| *at > t_cancel).count();
    let working_after = w
        .seen
        .iter()
        .filter(|o| o.at > t_cancel)
        .filter(|o| {
            matches!(&o.msg, Message::Notification(n)
            if n.method == "notifications/tasks/status"
            && n.params.as_ref().is_some_and(|p| p["status"] == "working"))
        })
        .count();
    data["status_after"] = json!(status_later);
    data["progress_before_cancel"] = json!(before);
    data["progress_after_cancel"] = json!(after);
    data["working_status_after_cancel"] = json!(working_after);
    let waited = ms(until.saturating_duration_since(t_cancel));
    if status_later != "cancelled" {
        return Check::new(
            ID,
            Status::Fail,
            format!(
                "the task was {status_later} {waited} after tasks/cancel; cancelled must stick"
            ),
            data,
        );
    }
    if after > 1 || working_after > 0 {
        return Check::new(
            ID,
            Status::Fail,
            format!(
                "the task is marked cancelled but its work goes on: {after} progress and \
                 {working_after} `working` status notifications after tasks/cancel"
            ),
            data,
        );
    }
    if before == 0 {
        return Check::new(
            ID,
            Status::Warn,
            format!(
                "{tool}: status cancelled at once and still {waited} later, but the task reports \
                 no progress, so whether its work stopped cannot be seen"
            ),
            data,
        );
    }
    Check::new(
        ID,
        Status::Pass,
        format!(
            "{tool}: cancelled and still cancelled {waited} later; progress stopped ({before} before, {after} after)"
        ),
        data,
    )
}
