//! What an operator sees of a job (`staunch jobs`, the live page): everything the `get_<tool>`
//! reply says — status, progress, result or error, and the `next` sentence — plus what only an
//! operator needs: who owns it, the session that started it (by the hash the lifecycle log
//! shows), which instance holds its lease, its attempts, who asked for a cancel, and its age.

use serde_json::{Value, json};
use staunch_store::JobRecord;

use crate::view::{iso, job_view, progress_of};

/// The instance that runs a job, or for a finished one the instance that ran it last: the part
/// of its lease owner id before the `/` (`"{instance}/{run}"`); `None` when no instance has
/// claimed it.
pub fn owning_instance(job: &JobRecord) -> Option<&str> {
    let owner = job.lease_owner.as_deref()?;
    Some(
        owner
            .split_once('/')
            .map_or(owner, |(instance, _)| instance),
    )
}

/// Completed fraction of the job's progress (0.0 ..= 1.0), when it reported a total.
pub fn progress_fraction(job: &JobRecord) -> Option<f64> {
    let (done, total, _) = progress_of(job)?;
    let total = total.filter(|t| *t > 0.0)?;
    Some((done / total).clamp(0.0, 1.0))
}

/// A short age: `850ms`, `42s`, `5m`, `3h`, `2d`.
pub fn short_age(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{}s", ms / 1_000),
        60_000..3_600_000 => format!("{}m", ms / 60_000),
        3_600_000..86_400_000 => format!("{}h", ms / 3_600_000),
        _ => format!("{}d", ms / 86_400_000),
    }
}

/// How the operator sees the session that started a job: as the lifecycle log names it
/// ([`staunch_server::session_hash`]), never by its id, which is a credential. The store keeps
/// that hash; a row recorded before it did holds the raw id (32 hex digits), hashed here.
fn shown_session(stored: &str) -> String {
    let is_hash = stored.len() == 12
        && stored
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if is_hash {
        stored.to_string()
    } else {
        staunch_server::session_hash(stored)
    }
}

/// The operator's view of a job at `now_ms`: the `get_<tool>` reply (with its `next`
/// sentence, `poll_ms` as the suggested interval) plus ownership, attempts, cancel and age.
pub fn operator_view(job: &JobRecord, now_ms: i64, poll_ms: u64) -> Value {
    let mut v = job_view(job, poll_ms);
    v["principal"] = json!(job.principal);
    v["session"] = json!(job.session_id.as_deref().map(shown_session));
    v["arguments"] = serde_json::from_str(&job.args_json).unwrap_or(Value::Null);
    v["idempotency_key"] = json!(job.idem_key);
    v["max_attempts"] = json!(job.max_attempts);
    v["retry_safe"] = json!(job.retry_safe);
    v["instance"] = json!(owning_instance(job));
    v["lease_owner"] = json!(job.lease_owner);
    if let Some(ms) = job.lease_expires_ms {
        v["lease_expires_at"] = iso(ms).into();
    }
    if let Some(ms) = job.heartbeat_ms {
        v["heartbeat_at"] = iso(ms).into();
    }
    if let Some(by) = &job.cancel_requested_by {
        v["cancel_requested_by"] = json!(by);
    }
    if let Some(reason) = &job.error_reason {
        v["error_reason"] = json!(reason);
    }
    if let Some(f) = progress_fraction(job) {
        v["progress_fraction"] = json!(f);
    }
    v["updated_at"] = iso(job.updated_ms).into();
    v["age_ms"] = json!(now_ms.saturating_sub(job.created_ms).max(0));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use staunch_store::JobState;

    fn job() -> JobRecord {
        JobRecord {
            id: "j1".into(),
            principal: "alice".into(),
            session_id: Some("s1".into()),
            tool: "import_rows".into(),
            args_json: r#"{"rows":40}"#.into(),
            args_fingerprint: "f".into(),
            idem_key: Some("k".into()),
            idem_expires_ms: None,
            state: JobState::Running,
            cancel_requested_ms: Some(1_764_000_001_000),
            cancel_requested_by: Some("staunch jobs cancel".into()),
            attempt: 1,
            max_attempts: 2,
            retry_safe: true,
            lease_owner: Some("host-a/0123abcd".into()),
            lease_token: 1,
            lease_expires_ms: Some(1_764_000_030_000),
            heartbeat_ms: Some(1_764_000_000_900),
            progress_json: Some(r#"{"progress":10.0,"total":40.0,"message":null}"#.into()),
            checkpoint_json: None,
            result_json: None,
            error_json: None,
            error_reason: None,
            created_ms: 1_764_000_000_000,
            started_ms: Some(1_764_000_000_100),
            finished_ms: None,
            updated_ms: 1_764_000_001_000,
            ttl_ms: 60_000,
            purge_after_ms: None,
            trace_parent: None,
        }
    }

    #[test]
    fn the_operator_view_adds_ownership_and_keeps_the_next_sentence() {
        let v = operator_view(&job(), 1_764_000_065_000, 1000);
        assert_eq!(v["instance"], "host-a");
        assert_eq!(v["principal"], "alice");
        assert_eq!(v["arguments"]["rows"], 40);
        assert_eq!(v["max_attempts"], 2);
        assert_eq!(v["progress_fraction"], 0.25);
        assert_eq!(v["age_ms"], 65_000);
        assert_eq!(v["cancel_requested_by"], "staunch jobs cancel");
        assert!(
            v["next"]
                .as_str()
                .unwrap()
                .contains("Cancellation was requested")
        );
    }

    #[test]
    fn a_finished_job_names_the_instance_that_ran_it() {
        let mut j = job();
        j.state = JobState::Succeeded;
        assert_eq!(
            operator_view(&j, 1_764_000_065_000, 1000)["instance"],
            "host-a"
        );
        j.lease_owner = None;
        assert_eq!(
            operator_view(&j, 1_764_000_065_000, 1000)["instance"],
            Value::Null
        );
    }

    #[test]
    fn the_session_is_shown_as_the_log_names_it() {
        let raw = "0123456789abcdef0123456789abcdef";
        let hash = staunch_server::session_hash(raw);
        let mut j = job();
        j.session_id = Some(hash.clone());
        assert_eq!(operator_view(&j, 0, 1000)["session"], hash.as_str());
        // A row recorded before the store kept the hash.
        j.session_id = Some(raw.into());
        let v = operator_view(&j, 0, 1000);
        assert_eq!(v["session"], hash.as_str());
        assert!(!v.to_string().contains(raw), "{v}");
        j.session_id = None;
        assert_eq!(operator_view(&j, 0, 1000)["session"], Value::Null);
    }

    #[test]
    fn an_owner_without_a_run_part_is_its_instance() {
        let mut j = job();
        j.lease_owner = Some("plain".into());
        assert_eq!(owning_instance(&j), Some("plain"));
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(short_age(850), "850ms");
        assert_eq!(short_age(42_000), "42s");
        assert_eq!(short_age(5 * 60_000 + 1), "5m");
        assert_eq!(short_age(3 * 3_600_000), "3h");
        assert_eq!(short_age(2 * 86_400_000), "2d");
        assert_eq!(short_age(-5), "0ms");
    }
}
