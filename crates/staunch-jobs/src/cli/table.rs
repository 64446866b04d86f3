//! The plain-text faces of `staunch jobs`: a column-aligned list and a detail block.

use std::fmt::Write as _;

use crate::{owning_instance, progress_of, short_age};
use serde_json::Value;
use staunch_store::{JobRecord, JobState};

/// `12/40 (30%)`, `12`, or `-`.
fn progress_cell(job: &JobRecord) -> String {
    match progress_of(job) {
        Some((done, Some(total), _)) if total > 0.0 => {
            format!(
                "{done}/{total} ({:.0}%)",
                (done / total * 100.0).clamp(0.0, 100.0)
            )
        }
        Some((done, _, _)) => format!("{done}"),
        None => "-".into(),
    }
}

fn state_cell(job: &JobRecord) -> String {
    if job.state == JobState::Running && job.cancel_requested_ms.is_some() {
        "cancelling".into()
    } else {
        job.state.to_string()
    }
}

/// One line per job under a header; "no jobs" when the list is empty.
pub(super) fn jobs_table(jobs: &[JobRecord], now_ms: i64) -> String {
    if jobs.is_empty() {
        return "no jobs\n".into();
    }
    let header = [
        "ID", "STATE", "TOOL", "PROGRESS", "ATTEMPT", "AGE", "INSTANCE",
    ];
    let rows: Vec<[String; 7]> = jobs
        .iter()
        .map(|j| {
            [
                j.id.clone(),
                state_cell(j),
                j.tool.clone(),
                progress_cell(j),
                format!("{}/{}", j.attempt, j.max_attempts),
                short_age(now_ms - j.created_ms),
                owning_instance(j).unwrap_or("-").to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                let _ = write!(l, "{cell:<w$}  ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&header);
    for r in &rows {
        line(&r.iter().map(String::as_str).collect::<Vec<_>>());
    }
    out
}

/// `key: value` lines for `staunch jobs show`, from the operator view `v`.
pub(super) fn job_details(job: &JobRecord, v: &Value) -> String {
    let mut out = String::new();
    let mut kv = |k: &str, val: String| {
        let _ = writeln!(out, "{k:<18}{val}");
    };
    kv("job", job.id.clone());
    kv("tool", job.tool.clone());
    kv("state", state_cell(job));
    kv(
        "attempt",
        format!("{} of {}", job.attempt, job.max_attempts),
    );
    kv("progress", progress_cell(job));
    if let Some((_, _, Some(m))) = progress_of(job) {
        kv("progress message", m);
    }
    kv(
        "principal",
        if job.principal.is_empty() {
            "-".into()
        } else {
            job.principal.clone()
        },
    );
    kv("session", v["session"].as_str().unwrap_or("-").to_string());
    kv("instance", owning_instance(job).unwrap_or("-").to_string());
    for (k, field) in [
        ("created", "created_at"),
        ("started", "started_at"),
        ("finished", "finished_at"),
        ("cancel requested", "cancel_requested_at"),
        ("cancel asked by", "cancel_requested_by"),
        ("heartbeat", "heartbeat_at"),
        ("lease expires", "lease_expires_at"),
        ("idempotency key", "idempotency_key"),
    ] {
        if let Some(s) = v[field].as_str() {
            kv(k, s.to_string());
        }
    }
    kv("arguments", v["arguments"].to_string());
    if let Some(e) = v.get("error") {
        kv(
            "error",
            format!(
                "{} ({})",
                e["message"].as_str().unwrap_or(""),
                e["code"].as_str().unwrap_or("")
            ),
        );
    }
    if let Some(r) = v.get("result") {
        kv("result", r.to_string());
    }
    if let Some(q) = v.get("questions").and_then(Value::as_array) {
        kv(
            "questions",
            format!(
                "{} asked, {} answered",
                q.len(),
                q.iter().filter(|x| x["answered"] == true).count()
            ),
        );
    }
    kv("next", v["next"].as_str().unwrap_or_default().to_string());
    out
}
