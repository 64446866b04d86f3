//! [`staunch_store::JobStore`] cases.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::broadcast;

use super::{Harness, SIGNAL_WAIT, T0};
use staunch_store::{
    CancelOutcome, CreateOutcome, FinishOutcome, Heartbeat, JobOutcome, JobRecord, JobState,
    JobStore, Lease, NewJob, REASON_CANCELLED, REASON_LEASE_LOST, ReapedJob, Signal, StoreError,
};

const LEASE: i64 = 30_000;

fn new_job(tool: &str, fingerprint: &str, now: i64) -> NewJob {
    NewJob::new(
        "alice",
        tool,
        format!(r#"{{"fp":"{fingerprint}"}}"#),
        fingerprint,
        now,
    )
}

fn created(out: CreateOutcome) -> JobRecord {
    match out {
        CreateOutcome::Created(j) => j,
        other => panic!("expected Created, got {other:?}"),
    }
}

fn existing(out: CreateOutcome) -> JobRecord {
    match out {
        CreateOutcome::Existing(j) => j,
        other => panic!("expected Existing, got {other:?}"),
    }
}

async fn create(jobs: &Arc<dyn JobStore>, job: NewJob) -> JobRecord {
    created(jobs.create(job).await.unwrap())
}

async fn claim(jobs: &Arc<dyn JobStore>, id: &str, owner: &str, now: i64) -> Lease {
    jobs.claim(id, owner, LEASE, now)
        .await
        .unwrap()
        .expect("job should be claimable")
}

async fn get(jobs: &Arc<dyn JobStore>, id: &str) -> JobRecord {
    jobs.get(id).await.unwrap().expect("job should exist")
}

fn sorted(mut v: Vec<ReapedJob>) -> Vec<ReapedJob> {
    v.sort_by(|a, b| a.id.cmp(&b.id));
    v
}

fn tools(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// Waits (bounded) for the first signal matching `pred`.
async fn wait_for(rx: &mut broadcast::Receiver<Signal>, pred: impl Fn(&Signal) -> bool) -> Signal {
    let wait = async {
        loop {
            match rx.recv().await {
                Ok(s) if pred(&s) => return s,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => panic!("signal channel closed"),
            }
        }
    };
    tokio::time::timeout(SIGNAL_WAIT, wait)
        .await
        .expect("signal did not arrive in time")
}

pub async fn jobs_lifecycle_success(h: Harness) {
    let jobs = &h.a.jobs;
    let mut nj = new_job("export", "fp1", T0);
    nj.session_id = Some("sess".into());
    let job = create(jobs, nj).await;
    assert_eq!(job.id.len(), 32, "128 random bits as hex");
    assert!(job.id.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(job.state, JobState::Queued);
    assert_eq!((job.attempt, job.lease_token, job.max_attempts), (0, 0, 1));
    assert!(!job.retry_safe);
    assert_eq!(job.session_id.as_deref(), Some("sess"));
    assert_eq!((job.created_ms, job.updated_ms), (T0, T0));
    assert_eq!(h.b.jobs.get(&job.id).await.unwrap(), Some(job.clone()));
    assert_eq!(jobs.get("nope").await.unwrap(), None);

    let lease = claim(jobs, &job.id, "inst/1", T0 + 10).await;
    assert_eq!(lease.token, 1);
    assert_eq!(lease.job.state, JobState::Running);
    assert_eq!(lease.job.attempt, 1);
    assert_eq!(lease.job.lease_owner.as_deref(), Some("inst/1"));
    assert_eq!(lease.job.lease_expires_ms, Some(T0 + 10 + LEASE));
    assert_eq!(lease.job.started_ms, Some(T0 + 10));
    // A running job cannot be claimed again.
    assert!(
        h.b.jobs
            .claim(&job.id, "inst/2", LEASE, T0 + 11)
            .await
            .unwrap()
            .is_none()
    );

    let progress = r#"{"progress":1,"total":3,"message":"one"}"#;
    let hb = jobs
        .heartbeat(
            &job.id,
            "inst/1",
            1,
            LEASE,
            T0 + 20,
            Some(progress.into()),
            Some("cp1".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        hb,
        Heartbeat::Held {
            cancel_requested: false
        }
    );
    // None keeps what is stored.
    jobs.heartbeat(&job.id, "inst/1", 1, LEASE, T0 + 30, None, None)
        .await
        .unwrap();
    let running = get(&h.b.jobs, &job.id).await;
    assert_eq!(running.progress_json.as_deref(), Some(progress));
    assert_eq!(running.checkpoint_json.as_deref(), Some("cp1"));
    assert_eq!(running.heartbeat_ms, Some(T0 + 30));
    assert_eq!(running.lease_expires_ms, Some(T0 + 30 + LEASE));

    let done = jobs
        .finish(
            &job.id,
            "inst/1",
            1,
            JobOutcome::Succeeded {
                result_json: "42".into(),
            },
            T0 + 40,
        )
        .await
        .unwrap();
    assert_eq!(done, FinishOutcome::Recorded);
    let job = get(jobs, &job.id).await;
    assert_eq!(job.state, JobState::Succeeded);
    assert_eq!(job.result_json.as_deref(), Some("42"));
    assert_eq!(job.finished_ms, Some(T0 + 40));
    assert_eq!(job.purge_after_ms, Some(T0 + 40 + job.ttl_ms));
    assert_eq!(
        job.progress_json.as_deref(),
        Some(progress),
        "progress kept for the record"
    );
}

pub async fn jobs_failure_and_cancel_paths(h: Harness) {
    let jobs = &h.a.jobs;
    // Running → failed with a reason.
    let job = create(jobs, new_job("t", "f1", T0)).await;
    let lease = claim(jobs, &job.id, "w/1", T0).await;
    let failed = JobOutcome::Failed {
        error_json: r#"{"message":"boom"}"#.into(),
        reason: "panic".into(),
    };
    assert_eq!(
        jobs.finish(&job.id, "w/1", lease.token, failed, T0 + 1)
            .await
            .unwrap(),
        FinishOutcome::Recorded
    );
    let j = get(jobs, &job.id).await;
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.error_reason.as_deref(), Some("panic"));
    assert_eq!(j.error_json.as_deref(), Some(r#"{"message":"boom"}"#));

    // Queued → cancelled directly, and it can never be claimed.
    let job = create(jobs, new_job("t", "f2", T0)).await;
    let CancelOutcome::CancelledQueued(j) =
        h.b.jobs
            .request_cancel(&job.id, "bob", T0 + 5)
            .await
            .unwrap()
    else {
        panic!("queued job should be cancelled at once");
    };
    assert_eq!(j.state, JobState::Cancelled);
    assert_eq!(j.cancel_requested_by.as_deref(), Some("bob"));
    assert_eq!(
        (j.cancel_requested_ms, j.finished_ms),
        (Some(T0 + 5), Some(T0 + 5))
    );
    assert_eq!(j.error_reason.as_deref(), Some(REASON_CANCELLED));
    assert!(
        jobs.claim(&job.id, "w/1", LEASE, T0 + 6)
            .await
            .unwrap()
            .is_none()
    );

    // Running → flag → the worker sees it at its heartbeat and ends cancelled.
    let job = create(jobs, new_job("t", "f3", T0)).await;
    let lease = claim(jobs, &job.id, "w/1", T0).await;
    let CancelOutcome::Requested(j) = jobs.request_cancel(&job.id, "bob", T0 + 7).await.unwrap()
    else {
        panic!("running job should get the flag");
    };
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.cancel_requested_ms, Some(T0 + 7));
    // A second request keeps the first timestamp.
    let CancelOutcome::Requested(j) = jobs.request_cancel(&job.id, "carol", T0 + 9).await.unwrap()
    else {
        panic!("still running");
    };
    assert_eq!(
        (j.cancel_requested_ms, j.cancel_requested_by.as_deref()),
        (Some(T0 + 7), Some("bob"))
    );
    assert_eq!(
        jobs.heartbeat(&job.id, "w/1", lease.token, LEASE, T0 + 10, None, None)
            .await
            .unwrap(),
        Heartbeat::Held {
            cancel_requested: true
        }
    );
    assert_eq!(
        jobs.finish(&job.id, "w/1", lease.token, JobOutcome::Cancelled, T0 + 11)
            .await
            .unwrap(),
        FinishOutcome::Recorded
    );
    let j = get(jobs, &job.id).await;
    assert_eq!(j.state, JobState::Cancelled);
    assert_eq!(j.error_reason.as_deref(), Some(REASON_CANCELLED));

    assert_eq!(
        jobs.request_cancel("nope", "bob", T0).await.unwrap(),
        CancelOutcome::NotFound
    );
}

pub async fn jobs_terminal_states_never_change(h: Harness) {
    let jobs = &h.a.jobs;
    let job = create(jobs, new_job("t", "f", T0)).await;
    let lease = claim(jobs, &job.id, "w/1", T0).await;
    let ok = JobOutcome::Succeeded {
        result_json: "1".into(),
    };
    jobs.finish(&job.id, "w/1", lease.token, ok, T0 + 1)
        .await
        .unwrap();
    let before = get(jobs, &job.id).await;

    let again = JobOutcome::Failed {
        error_json: "{}".into(),
        reason: "late".into(),
    };
    assert_eq!(
        jobs.finish(&job.id, "w/1", lease.token, again, T0 + 2)
            .await
            .unwrap(),
        FinishOutcome::AlreadyTerminal(JobState::Succeeded)
    );
    assert_eq!(
        jobs.heartbeat(
            &job.id,
            "w/1",
            lease.token,
            LEASE,
            T0 + 3,
            Some("p".into()),
            None
        )
        .await
        .unwrap(),
        Heartbeat::Lost
    );
    assert_eq!(
        jobs.request_cancel(&job.id, "bob", T0 + 4).await.unwrap(),
        CancelOutcome::AlreadyTerminal(before.clone())
    );
    assert!(
        jobs.claim(&job.id, "w/2", LEASE, T0 + 5)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        jobs.claim_next("w/2", LEASE, T0 + 5, &tools(&["t"]), u64::MAX)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        jobs.reap_expired(i64::MAX / 2, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(jobs.release_owner("w/", T0 + 6).await.unwrap().is_empty());
    assert_eq!(get(&h.b.jobs, &job.id).await, before, "nothing moved");
}

pub async fn jobs_stale_token_is_lost_and_changes_nothing(h: Harness) {
    let jobs = &h.a.jobs;
    let mut nj = new_job("t", "f", T0);
    nj.retry_safe = true;
    nj.max_attempts = 3;
    let job = create(jobs, nj).await;
    let first = claim(jobs, &job.id, "w/1", T0).await;
    assert_eq!(first.token, 1);
    // The lease expires; the reaper re-queues the retry-safe job; another worker claims it.
    let reaped = jobs.reap_expired(T0 + LEASE + 1, 10).await.unwrap();
    assert_eq!(
        reaped,
        vec![ReapedJob {
            id: job.id.clone(),
            new_state: JobState::Queued
        }]
    );
    let second = claim(&h.b.jobs, &job.id, "w/2", T0 + LEASE + 2).await;
    assert_eq!((second.token, second.job.attempt), (2, 2));
    let before = get(jobs, &job.id).await;

    // The first worker wakes up late: every write it tries is refused.
    assert_eq!(
        jobs.heartbeat(
            &job.id,
            "w/1",
            1,
            LEASE,
            T0 + LEASE + 3,
            Some("stale".into()),
            None
        )
        .await
        .unwrap(),
        Heartbeat::Lost
    );
    let ok = JobOutcome::Succeeded {
        result_json: "stale".into(),
    };
    assert_eq!(
        jobs.finish(&job.id, "w/1", 1, ok.clone(), T0 + LEASE + 4)
            .await
            .unwrap(),
        FinishOutcome::Lost
    );
    // Right token, wrong owner; right owner, future token.
    assert_eq!(
        jobs.finish(&job.id, "w/1", 2, ok.clone(), T0 + LEASE + 4)
            .await
            .unwrap(),
        FinishOutcome::Lost
    );
    assert_eq!(
        jobs.heartbeat(&job.id, "w/2", 3, LEASE, T0 + LEASE + 4, None, None)
            .await
            .unwrap(),
        Heartbeat::Lost
    );
    assert_eq!(
        get(jobs, &job.id).await,
        before,
        "stale writes changed nothing"
    );

    assert_eq!(
        h.b.jobs
            .finish(&job.id, "w/2", 2, ok, T0 + LEASE + 5)
            .await
            .unwrap(),
        FinishOutcome::Recorded
    );
    assert_eq!(
        get(jobs, &job.id).await.result_json.as_deref(),
        Some("stale")
    );
}

pub async fn jobs_reaper_transitions(h: Harness) {
    let jobs = &h.a.jobs;
    // Side-effecting (default): never re-run → failed(lease_lost).
    let side = create(jobs, new_job("t", "side", T0)).await;
    // Retry-safe with two attempts: re-queued once, then failed.
    let mut nj = new_job("t", "safe", T0);
    nj.retry_safe = true;
    nj.max_attempts = 2;
    let safe = create(jobs, nj).await;
    // Cancel requested while running: cancelled, even though it is retry-safe.
    let mut nj = new_job("t", "cancel", T0);
    nj.retry_safe = true;
    nj.max_attempts = 5;
    let cancel = create(jobs, nj).await;
    // Heartbeating: its lease is extended, so it is not reaped.
    let alive = create(jobs, new_job("t", "alive", T0)).await;

    for j in [&side, &safe, &cancel, &alive] {
        claim(jobs, &j.id, "w/1", T0).await;
    }
    jobs.request_cancel(&cancel.id, "bob", T0 + 1)
        .await
        .unwrap();
    let extended = jobs
        .heartbeat(&alive.id, "w/1", 1, LEASE, T0 + 20_000, None, None)
        .await
        .unwrap();
    assert_eq!(
        extended,
        Heartbeat::Held {
            cancel_requested: false
        }
    );

    // Not yet expired: nothing happens.
    assert!(
        jobs.reap_expired(T0 + LEASE - 1, 100)
            .await
            .unwrap()
            .is_empty()
    );

    let mut expected = vec![
        ReapedJob {
            id: side.id.clone(),
            new_state: JobState::Failed,
        },
        ReapedJob {
            id: safe.id.clone(),
            new_state: JobState::Queued,
        },
        ReapedJob {
            id: cancel.id.clone(),
            new_state: JobState::Cancelled,
        },
    ];
    expected.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        sorted(jobs.reap_expired(T0 + LEASE + 1, 100).await.unwrap()),
        expected
    );
    assert!(
        jobs.reap_expired(T0 + LEASE + 1, 100)
            .await
            .unwrap()
            .is_empty(),
        "idempotent"
    );

    let j = get(jobs, &side.id).await;
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.error_reason.as_deref(), Some(REASON_LEASE_LOST));
    assert!(j.error_json.is_some());
    assert_eq!(j.finished_ms, Some(T0 + LEASE + 1));
    let j = get(jobs, &cancel.id).await;
    assert_eq!(
        (j.state, j.error_reason.as_deref()),
        (JobState::Cancelled, Some(REASON_CANCELLED))
    );
    let j = get(jobs, &safe.id).await;
    assert_eq!(
        (j.state, j.lease_owner.as_deref(), j.finished_ms),
        (JobState::Queued, None, None)
    );
    assert_eq!(get(jobs, &alive.id).await.state, JobState::Running);

    // The late worker of the side-effecting job learns its attempt was ended.
    let ok = JobOutcome::Succeeded {
        result_json: "late".into(),
    };
    assert_eq!(
        jobs.finish(&side.id, "w/1", 1, ok, T0 + LEASE + 2)
            .await
            .unwrap(),
        FinishOutcome::AlreadyTerminal(JobState::Failed)
    );

    // The re-queued job is claimable again with the next fencing token, from any handle.
    let again =
        h.b.jobs
            .claim_next("w/2", LEASE, T0 + LEASE + 3, &tools(&["t"]), u64::MAX)
            .await
            .unwrap();
    let again = again.expect("re-queued job is claimable");
    assert_eq!(
        (again.job.id.as_str(), again.token, again.job.attempt),
        (safe.id.as_str(), 2, 2)
    );
    // Its second lease expires too: attempts are used up → failed(lease_lost).
    jobs.heartbeat(&alive.id, "w/1", 1, LEASE, T0 + 40_000, None, None)
        .await
        .unwrap();
    assert_eq!(
        jobs.reap_expired(T0 + 2 * LEASE + 10, 100).await.unwrap(),
        vec![ReapedJob {
            id: safe.id.clone(),
            new_state: JobState::Failed
        }]
    );
    assert_eq!(
        get(jobs, &safe.id).await.error_reason.as_deref(),
        Some(REASON_LEASE_LOST)
    );

    // Batches are honoured.
    for i in 0..5 {
        let j = create(jobs, new_job("b", &format!("batch{i}"), T0)).await;
        claim(jobs, &j.id, "w/1", T0).await;
    }
    assert_eq!(jobs.reap_expired(T0 + LEASE + 1, 2).await.unwrap().len(), 2);
    assert_eq!(
        jobs.reap_expired(T0 + LEASE + 1, 10).await.unwrap().len(),
        3
    );
}

pub async fn jobs_reaper_on_two_handles_moves_each_job_once(h: Harness) {
    const JOBS: usize = 30;
    let mut ids = HashSet::new();
    for i in 0..JOBS {
        let j = create(&h.a.jobs, new_job("t", &format!("f{i}"), T0)).await;
        claim(&h.a.jobs, &j.id, "dead/1", T0).await;
        ids.insert(j.id);
    }
    let mut tasks = Vec::new();
    for t in 0..6 {
        let jobs = if t % 2 == 0 {
            h.a.jobs.clone()
        } else {
            h.b.jobs.clone()
        };
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let batch = jobs.reap_expired(T0 + LEASE + 1, 4).await.unwrap();
                if batch.is_empty() {
                    return mine;
                }
                mine.extend(batch);
            }
        }));
    }
    let mut seen = HashSet::new();
    for t in tasks {
        for r in t.await.unwrap() {
            assert_eq!(r.new_state, JobState::Failed);
            assert!(seen.insert(r.id.clone()), "job {} reaped twice", r.id);
        }
    }
    assert_eq!(seen, ids);
}

pub async fn jobs_release_owner(h: Harness) {
    let jobs = &h.a.jobs;
    let old = staunch_store::owner_id("inst-a");
    assert!(old.starts_with("inst-a/") && old.len() > "inst-a/".len());
    let new = staunch_store::owner_id("inst-a");
    assert_ne!(old, new, "every run gets a fresh owner id");
    let other = staunch_store::owner_id("inst-b");
    // "inst-ab" shares a textual prefix with "inst-a" but is another instance.
    let lookalike = staunch_store::owner_id("inst-ab");

    let mut nj = new_job("t", "safe", T0);
    nj.retry_safe = true;
    nj.max_attempts = 2;
    let safe = create(jobs, nj).await;
    let side = create(jobs, new_job("t", "side", T0)).await;
    let b1 = create(jobs, new_job("t", "b1", T0)).await;
    let ab = create(jobs, new_job("t", "ab", T0)).await;
    claim(jobs, &safe.id, &old, T0).await;
    claim(jobs, &side.id, &old, T0).await;
    claim(jobs, &b1.id, &other, T0).await;
    claim(jobs, &ab.id, &lookalike, T0).await;

    // At boot, long before the leases expire, inst-a releases what its last run held.
    let mut expected = vec![
        ReapedJob {
            id: safe.id.clone(),
            new_state: JobState::Queued,
        },
        ReapedJob {
            id: side.id.clone(),
            new_state: JobState::Failed,
        },
    ];
    expected.sort_by(|a, b| a.id.cmp(&b.id));
    let released =
        h.b.jobs
            .release_owner(&staunch_store::owner_prefix("inst-a"), T0 + 1)
            .await
            .unwrap();
    assert_eq!(sorted(released), expected);
    assert_eq!(
        get(jobs, &side.id).await.error_reason.as_deref(),
        Some(REASON_LEASE_LOST)
    );
    assert_eq!(get(jobs, &b1.id).await.state, JobState::Running);
    assert_eq!(get(jobs, &ab.id).await.state, JobState::Running);
    // The new run picks the retry-safe job up again.
    let lease = claim(jobs, &safe.id, &new, T0 + 2).await;
    assert_eq!(lease.token, 2);
    // A full owner id releases exactly that owner.
    assert_eq!(
        jobs.release_owner(&other, T0 + 3).await.unwrap(),
        vec![ReapedJob {
            id: b1.id.clone(),
            new_state: JobState::Failed
        }]
    );
    assert!(matches!(
        jobs.release_owner("", T0).await,
        Err(StoreError::InvalidInput(_))
    ));
}

pub async fn jobs_idempotency_rules(h: Harness) {
    let jobs = &h.a.jobs;
    let keyed = |tool: &str, fp: &str, principal: &str| {
        let mut nj = new_job(tool, fp, T0);
        nj.principal = principal.into();
        nj.idem_key = Some("key-1".into());
        nj
    };
    let first = create(jobs, keyed("pay", "fp-a", "alice")).await;
    assert_eq!(first.idem_key.as_deref(), Some("key-1"));
    assert_eq!(
        first.idem_expires_ms,
        Some(T0 + staunch_store::DEFAULT_IDEM_TTL_MS)
    );

    // Same key, same arguments: the same job, from any instance.
    assert_eq!(
        existing(
            h.b.jobs
                .create(keyed("pay", "fp-a", "alice"))
                .await
                .unwrap()
        )
        .id,
        first.id
    );
    // Whatever its state: finish it and ask again.
    let lease = claim(jobs, &first.id, "w/1", T0).await;
    let ok = JobOutcome::Succeeded {
        result_json: "paid".into(),
    };
    jobs.finish(&first.id, "w/1", lease.token, ok, T0 + 1)
        .await
        .unwrap();
    let again = existing(jobs.create(keyed("pay", "fp-a", "alice")).await.unwrap());
    assert_eq!(
        (again.id.as_str(), again.state),
        (first.id.as_str(), JobState::Succeeded)
    );
    assert_eq!(again.result_json.as_deref(), Some("paid"));

    // Same key, other arguments: refused, pointing at the original.
    assert_eq!(
        jobs.create(keyed("pay", "fp-b", "alice")).await.unwrap(),
        CreateOutcome::KeyReused {
            existing_job_id: first.id.clone()
        }
    );
    // The scope is (principal, tool, key).
    let bob = create(jobs, keyed("pay", "fp-b", "bob")).await;
    let refund = create(jobs, keyed("refund", "fp-b", "alice")).await;
    assert_ne!(bob.id, first.id);
    assert_ne!(refund.id, first.id);
    // No key: every call is a new job.
    let a = create(jobs, new_job("pay", "fp-a", T0)).await;
    let b = create(jobs, new_job("pay", "fp-a", T0)).await;
    assert_ne!(a.id, b.id);
    // A 255-character key is fine.
    let mut long = new_job("pay", "fp-c", T0);
    long.idem_key = Some("k".repeat(staunch_store::MAX_IDEM_KEY_CHARS));
    create(jobs, long).await;
}

pub async fn jobs_idempotency_key_expiry(h: Harness) {
    let jobs = &h.a.jobs;
    let keyed = |fp: &str, now: i64| {
        let mut nj = new_job("pay", fp, now);
        nj.idem_key = Some("key-x".into());
        nj.idem_ttl_ms = 1_000;
        nj
    };
    let first = create(jobs, keyed("fp-a", T0)).await;
    assert_eq!(first.idem_expires_ms, Some(T0 + 1_000));
    // Still honoured just before expiry.
    assert_eq!(
        existing(jobs.create(keyed("fp-a", T0 + 999)).await.unwrap()).id,
        first.id
    );
    assert!(matches!(
        jobs.create(keyed("fp-b", T0 + 999)).await.unwrap(),
        CreateOutcome::KeyReused { .. }
    ));
    // Expired: the key starts a new job (even with other arguments); the old row stays.
    let second = create(&h.b.jobs, keyed("fp-b", T0 + 1_000)).await;
    assert_ne!(second.id, first.id);
    let old = get(jobs, &first.id).await;
    assert_eq!(old.idem_key, None, "the expired key was released");
    assert_eq!(
        existing(jobs.create(keyed("fp-b", T0 + 1_001)).await.unwrap()).id,
        second.id
    );

    // purge() clears expired keys without deleting live jobs.
    let mut third = new_job("other", "fp", T0);
    third.idem_key = Some("key-y".into());
    third.idem_ttl_ms = 10;
    let third = create(jobs, third).await;
    assert_eq!(jobs.purge(T0 + 10).await.unwrap(), 0);
    let third = get(jobs, &third.id).await;
    assert_eq!((third.idem_key, third.state), (None, JobState::Queued));
}

pub async fn jobs_fifty_concurrent_creates_one_key_make_one_job(h: Harness) {
    const CALLS: usize = 50;
    let mut tasks = Vec::new();
    for i in 0..CALLS {
        // Half the calls through each handle: two connections race for one key.
        let jobs = if i % 2 == 0 {
            h.a.jobs.clone()
        } else {
            h.b.jobs.clone()
        };
        tasks.push(tokio::spawn(async move {
            let mut nj = new_job("charge", "same-args", T0 + i as i64);
            nj.idem_key = Some("retry-storm".into());
            jobs.create(nj).await.unwrap()
        }));
    }
    let mut ids = HashSet::new();
    let mut created_count = 0;
    for t in tasks {
        match t.await.unwrap() {
            CreateOutcome::Created(j) => {
                created_count += 1;
                ids.insert(j.id);
            }
            CreateOutcome::Existing(j) => {
                ids.insert(j.id);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(created_count, 1, "exactly one call creates the job");
    assert_eq!(ids.len(), 1, "every call gets the same job");
    let (all, _) = h.a.jobs.list("alice", None, 1000).await.unwrap();
    assert_eq!(all.len(), 1, "exactly one row");
}

pub async fn jobs_inflight_dedupe(h: Harness) {
    let jobs = &h.a.jobs;
    let dedupe = |fp: &str| {
        let mut nj = new_job("sync", fp, T0);
        nj.dedupe_inflight = true;
        nj
    };
    let first = create(jobs, dedupe("fp")).await;
    assert_eq!(
        existing(h.b.jobs.create(dedupe("fp")).await.unwrap()).id,
        first.id
    );
    // Running still counts as in flight.
    let lease = claim(jobs, &first.id, "w/1", T0).await;
    assert_eq!(
        existing(jobs.create(dedupe("fp")).await.unwrap()).id,
        first.id
    );
    // Other arguments are another job; so is a create that does not ask for dedupe.
    let other = create(jobs, dedupe("fp-other")).await;
    assert_ne!(other.id, first.id);
    let plain = create(jobs, new_job("sync", "fp", T0)).await;
    assert_ne!(plain.id, first.id);
    // Once it ended, a new one starts.
    let ok = JobOutcome::Succeeded {
        result_json: "{}".into(),
    };
    jobs.finish(&first.id, "w/1", lease.token, ok, T0 + 1)
        .await
        .unwrap();
    jobs.request_cancel(&plain.id, "alice", T0 + 1)
        .await
        .unwrap();
    let next = create(jobs, dedupe("fp")).await;
    assert_ne!(next.id, first.id);

    // Concurrent dedupe creates make one job.
    let mut tasks = Vec::new();
    for i in 0..20 {
        let jobs = if i % 2 == 0 {
            h.a.jobs.clone()
        } else {
            h.b.jobs.clone()
        };
        tasks.push(tokio::spawn(async move {
            let mut nj = NewJob::new("alice", "sync", "{}", "burst", T0);
            nj.dedupe_inflight = true;
            jobs.create(nj).await.unwrap()
        }));
    }
    let mut ids = HashSet::new();
    for t in tasks {
        match t.await.unwrap() {
            CreateOutcome::Created(j) | CreateOutcome::Existing(j) => ids.insert(j.id),
            other => panic!("unexpected {other:?}"),
        };
    }
    assert_eq!(ids.len(), 1);
}

pub async fn jobs_claim_next_order_and_tools(h: Harness) {
    let jobs = &h.a.jobs;
    let a1 = create(jobs, new_job("a", "1", T0 + 2)).await;
    let b1 = create(jobs, new_job("b", "1", T0 + 1)).await;
    let a2 = create(jobs, new_job("a", "2", T0 + 3)).await;
    let c1 = create(jobs, new_job("c", "1", T0)).await;
    jobs.request_cancel(&c1.id, "alice", T0).await.unwrap();

    assert!(
        jobs.claim_next("w/1", LEASE, T0 + 10, &[], u64::MAX)
            .await
            .unwrap()
            .is_none(),
        "no tools"
    );
    assert!(
        jobs.claim_next("w/1", LEASE, T0 + 10, &tools(&["c"]), u64::MAX)
            .await
            .unwrap()
            .is_none()
    );
    let ab = tools(&["a", "b"]);
    let order: Vec<String> = [
        jobs.claim_next("w/1", LEASE, T0 + 10, &ab, u64::MAX)
            .await
            .unwrap(),
        h.b.jobs
            .claim_next("w/2", LEASE, T0 + 10, &ab, u64::MAX)
            .await
            .unwrap(),
        jobs.claim_next("w/1", LEASE, T0 + 10, &ab, u64::MAX)
            .await
            .unwrap(),
    ]
    .into_iter()
    .map(|l| {
        let l = l.expect("a job");
        assert_eq!((l.token, l.job.state), (1, JobState::Running));
        l.job.id
    })
    .collect();
    assert_eq!(order, vec![b1.id, a1.id, a2.id], "oldest first");
    assert!(
        jobs.claim_next("w/1", LEASE, T0 + 10, &ab, u64::MAX)
            .await
            .unwrap()
            .is_none()
    );
}

/// The per-owner cap on running jobs: an owner at the cap gets nothing more, on any handle,
/// while another owner's queued job is claimed; one of its jobs freed, it is served again.
pub async fn jobs_claim_next_keeps_workers_for_other_owners(h: Harness) {
    let jobs = &h.a.jobs;
    let t = tools(&["t"]);
    for i in 0..4 {
        create(jobs, owned_job("alice", "t", &format!("a{i}"), T0 + i)).await;
    }
    let claim = |store: &Arc<dyn JobStore>, now: i64| {
        let store = store.clone();
        let t = t.clone();
        async move { store.claim_next("w/1", LEASE, now, &t, 2).await.unwrap() }
    };
    let first = claim(jobs, T0 + 10).await.expect("alice's first");
    claim(&h.b.jobs, T0 + 11).await.expect("alice's second");
    assert!(claim(jobs, T0 + 12).await.is_none(), "alice is at the cap");
    assert!(claim(&h.b.jobs, T0 + 12).await.is_none(), "on every handle");
    let bob = create(jobs, owned_job("bob", "t", "b", T0 + 13)).await;
    let next = claim(&h.b.jobs, T0 + 14).await.expect("bob's job");
    assert_eq!(next.job.id, bob.id);
    jobs.finish(
        &first.job.id,
        "w/1",
        first.token,
        JobOutcome::Succeeded {
            result_json: "{}".into(),
        },
        T0 + 15,
    )
    .await
    .unwrap();
    let again = claim(jobs, T0 + 16)
        .await
        .expect("alice again, below the cap");
    assert_eq!(again.job.principal, "alice");
}

fn owned_job(principal: &str, tool: &str, fingerprint: &str, now: i64) -> NewJob {
    let mut nj = new_job(tool, fingerprint, now);
    nj.principal = principal.to_owned();
    nj
}

/// Claims the next job of tool `t` at `now` and returns its id (panics if none).
async fn claim_next_id(jobs: &Arc<dyn JobStore>, owner: &str, now: i64) -> String {
    jobs.claim_next(owner, LEASE, now, &tools(&["t"]), u64::MAX)
        .await
        .unwrap()
        .expect("a job to claim")
        .job
        .id
}

async fn succeed(jobs: &Arc<dyn JobStore>, id: &str, now: i64) {
    let lease = jobs.get(id).await.unwrap().expect("job");
    let ok = JobOutcome::Succeeded {
        result_json: "{}".into(),
    };
    let out = jobs
        .finish(
            id,
            lease.lease_owner.as_deref().unwrap(),
            lease.lease_token,
            ok,
            now,
        )
        .await
        .unwrap();
    assert_eq!(out, FinishOutcome::Recorded);
}

/// Regression (issue 12): one owner's backlog queued first no longer holds back another
/// owner's job until it drains. The claim prefers the owner with the fewest jobs running, then
/// the owner served longest ago, and takes that owner's oldest job.
pub async fn jobs_claim_next_is_fair_between_owners(h: Harness) {
    let (a, b) = (&h.a.jobs, &h.b.jobs);
    let a1 = create(a, owned_job("alice", "t", "1", T0)).await;
    let a2 = create(a, owned_job("alice", "t", "2", T0 + 1)).await;
    let a3 = create(a, owned_job("alice", "t", "3", T0 + 2)).await;
    let b1 = create(a, owned_job("bob", "t", "1", T0 + 3)).await;
    // Dave's only job is of a tool this worker does not serve: he is never chosen.
    let d1 = create(a, owned_job("dave", "other", "1", T0 - 10)).await;

    // Shares: nobody runs anything, so the oldest job goes first; then Bob, who runs nothing,
    // before Alice's second job although it is older.
    assert_eq!(claim_next_id(a, "w/1", T0 + 10).await, a1.id);
    assert_eq!(claim_next_id(b, "w/2", T0 + 11).await, b1.id);
    assert_eq!(claim_next_id(a, "w/1", T0 + 12).await, a2.id);

    // Round-robin with one free slot at a time: with nothing running, the owner served
    // longest ago goes first (never served: first of all).
    for id in [&a1.id, &b1.id, &a2.id] {
        succeed(a, id, T0 + 20).await;
    }
    let b2 = create(a, owned_job("bob", "t", "2", T0 + 21)).await;
    let c1 = create(b, owned_job("carol", "t", "1", T0 + 22)).await;
    assert_eq!(
        claim_next_id(a, "w/1", T0 + 30).await,
        c1.id,
        "never served"
    );
    succeed(a, &c1.id, T0 + 31).await;
    assert_eq!(
        claim_next_id(b, "w/2", T0 + 32).await,
        b2.id,
        "Bob was last served before Alice"
    );
    succeed(a, &b2.id, T0 + 33).await;
    assert_eq!(claim_next_id(a, "w/1", T0 + 34).await, a3.id);
    assert!(
        a.claim_next("w/1", LEASE, T0 + 35, &tools(&["t"]), u64::MAX)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(get(a, &d1.id).await.state, JobState::Queued);
}

pub async fn jobs_concurrent_claim_next_claims_each_job_once(h: Harness) {
    const JOBS: usize = 24;
    let mut ids = HashSet::new();
    for i in 0..JOBS {
        ids.insert(
            create(
                &h.a.jobs,
                // Several owners, so the fair claim's per-owner tries race too.
                owned_job(
                    ["alice", "bob", "carol"][i % 3],
                    "work",
                    &format!("{i}"),
                    T0 + i as i64,
                ),
            )
            .await
            .id,
        );
    }
    let mut tasks = Vec::new();
    for t in 0..8 {
        let jobs = if t % 2 == 0 {
            h.a.jobs.clone()
        } else {
            h.b.jobs.clone()
        };
        tasks.push(tokio::spawn(async move {
            let owner = format!("w/{t}");
            let mut mine = Vec::new();
            while let Some(l) = jobs
                .claim_next(&owner, LEASE, T0 + 100, &tools(&["work"]), u64::MAX)
                .await
                .unwrap()
            {
                assert_eq!(l.job.lease_owner.as_deref(), Some(owner.as_str()));
                mine.push(l.job.id);
            }
            mine
        }));
    }
    let mut seen = HashSet::new();
    for t in tasks {
        for id in t.await.unwrap() {
            assert!(seen.insert(id.clone()), "job {id} claimed twice");
        }
    }
    assert_eq!(seen, ids);
}

pub async fn jobs_ttl_purge(h: Harness) {
    let jobs = &h.a.jobs;
    let mut nj = new_job("t", "done", T0);
    nj.ttl_ms = 5_000;
    let done = create(jobs, nj).await;
    let lease = claim(jobs, &done.id, "w/1", T0).await;
    let ok = JobOutcome::Succeeded {
        result_json: "{}".into(),
    };
    jobs.finish(&done.id, "w/1", lease.token, ok, T0 + 100)
        .await
        .unwrap();
    let mut nj = new_job("t", "cancelled", T0);
    nj.ttl_ms = 1_000;
    let cancelled = create(jobs, nj).await;
    jobs.request_cancel(&cancelled.id, "alice", T0 + 100)
        .await
        .unwrap();
    // Non-terminal jobs are never purged, however old.
    let mut nj = new_job("t", "queued", T0);
    nj.ttl_ms = 0;
    let queued = create(jobs, nj).await;
    let mut nj = new_job("t", "running", T0);
    nj.ttl_ms = 0;
    let running = create(jobs, nj).await;
    claim(jobs, &running.id, "w/1", T0).await;

    assert_eq!(jobs.purge(T0 + 1_099).await.unwrap(), 0);
    assert_eq!(jobs.purge(T0 + 1_100).await.unwrap(), 1);
    assert_eq!(jobs.get(&cancelled.id).await.unwrap(), None);
    assert!(jobs.get(&done.id).await.unwrap().is_some());
    assert_eq!(h.b.jobs.purge(T0 + 5_100).await.unwrap(), 1);
    assert_eq!(jobs.get(&done.id).await.unwrap(), None);
    assert_eq!(jobs.purge(T0 + 1_000_000_000).await.unwrap(), 0);
    assert!(jobs.get(&queued.id).await.unwrap().is_some());
    assert!(jobs.get(&running.id).await.unwrap().is_some());
}

pub async fn jobs_success_racing_cancel_is_recorded_as_success(h: Harness) {
    let jobs = &h.a.jobs;
    let job = create(jobs, new_job("t", "f", T0)).await;
    let lease = claim(jobs, &job.id, "w/1", T0).await;
    // The cancel lands (on another instance) after the work finished but before the result
    // was written: the side effects happened, so the success is what gets recorded.
    assert!(matches!(
        h.b.jobs
            .request_cancel(&job.id, "bob", T0 + 1)
            .await
            .unwrap(),
        CancelOutcome::Requested(_)
    ));
    let ok = JobOutcome::Succeeded {
        result_json: "done".into(),
    };
    assert_eq!(
        jobs.finish(&job.id, "w/1", lease.token, ok, T0 + 2)
            .await
            .unwrap(),
        FinishOutcome::Recorded
    );
    let j = get(jobs, &job.id).await;
    assert_eq!(j.state, JobState::Succeeded);
    assert_eq!(j.result_json.as_deref(), Some("done"));
    assert_eq!(
        j.cancel_requested_ms,
        Some(T0 + 1),
        "the request stays on record"
    );
}

pub async fn jobs_list_pages(h: Harness) {
    let jobs = &h.a.jobs;
    let mut mine = Vec::new();
    for i in 0..5 {
        // Two jobs share a created_ms: the id breaks the tie.
        mine.push(create(jobs, new_job("t", &format!("{i}"), T0 + (i / 2) as i64)).await);
    }
    for i in 0..2 {
        let mut nj = new_job("t", &format!("q{i}"), T0);
        nj.principal = "bob".into();
        create(jobs, nj).await;
    }
    mine.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));

    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (page, next) = h.b.jobs.list("alice", cursor.as_deref(), 2).await.unwrap();
        assert!(page.len() <= 2);
        listed.extend(page);
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let ids = |v: &[JobRecord]| v.iter().map(|j| j.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&listed), ids(&mine));
    let (bobs, next) = jobs.list("bob", None, 10).await.unwrap();
    assert_eq!((bobs.len(), next), (2, None));
    assert!(bobs.iter().all(|j| j.principal == "bob"));
    assert_eq!(jobs.list("nobody", None, 10).await.unwrap(), (vec![], None));
    assert!(matches!(
        jobs.list("alice", Some("garbage"), 10).await,
        Err(StoreError::InvalidInput(_))
    ));
}

pub async fn jobs_signals(h: Harness) {
    let jobs = &h.a.jobs;
    let mut rx = jobs.subscribe_signals();
    // The subscription is live once the first Wake arrives.
    wait_for(&mut rx, |s| *s == Signal::Wake).await;

    let job = create(jobs, new_job("t", "f", T0)).await;
    claim(jobs, &job.id, "w/1", T0).await;
    jobs.request_cancel(&job.id, "bob", T0 + 1).await.unwrap();
    let want = Signal::Cancel(job.id.clone());
    assert_eq!(wait_for(&mut rx, |s| *s == want).await, want);

    jobs.notify_cancel("some-other-job").await.unwrap();
    let want = Signal::Cancel("some-other-job".into());
    assert_eq!(wait_for(&mut rx, |s| *s == want).await, want);

    // A second subscriber also gets its Wake.
    let mut rx2 = jobs.subscribe_signals();
    wait_for(&mut rx2, |s| *s == Signal::Wake).await;
}

pub async fn jobs_input_validation(h: Harness) {
    let jobs = &h.a.jobs;
    let mut nj = new_job("t", "f", T0);
    nj.idem_key = Some("k".repeat(staunch_store::MAX_IDEM_KEY_CHARS + 1));
    assert!(matches!(
        jobs.create(nj).await,
        Err(StoreError::InvalidInput(_))
    ));
    let mut nj = new_job("t", "f", T0);
    nj.idem_key = Some(String::new());
    assert!(matches!(
        jobs.create(nj).await,
        Err(StoreError::InvalidInput(_))
    ));
    let mut nj = new_job("t", "f", T0);
    nj.max_attempts = 0;
    assert!(matches!(
        jobs.create(nj).await,
        Err(StoreError::InvalidInput(_))
    ));
    assert!(matches!(
        jobs.create(new_job("", "f", T0)).await,
        Err(StoreError::InvalidInput(_))
    ));
    // Nothing was written.
    assert_eq!(jobs.list("alice", None, 10).await.unwrap(), (vec![], None));
}

pub async fn jobs_inputs_asked_by_the_lease_holder_answered_anywhere(h: Harness) {
    let jobs = &h.a.jobs;
    let job = create(jobs, new_job("t", "ask", T0)).await;
    let q = |k: &str| {
        (
            k.to_owned(),
            format!(r#"{{"method":"elicitation/create","k":"{k}"}}"#),
        )
    };
    // Not running yet: nobody holds a lease, nothing is recorded.
    assert!(
        !jobs
            .ask_inputs(&job.id, "w/1", 1, vec![q("a")], T0)
            .await
            .unwrap()
    );
    let lease = claim(jobs, &job.id, "w/1", T0).await;
    // A stale token is fenced off.
    assert!(
        !jobs
            .ask_inputs(&job.id, "w/1", lease.token + 1, vec![q("a")], T0)
            .await
            .unwrap()
    );
    assert!(
        jobs.ask_inputs(&job.id, "w/1", lease.token, vec![q("a"), q("b")], T0 + 1)
            .await
            .unwrap()
    );
    // Asking again keeps the first request.
    let again = ("a".to_owned(), "{\"changed\":true}".to_owned());
    assert!(
        jobs.ask_inputs(&job.id, "w/1", lease.token, vec![again], T0 + 2)
            .await
            .unwrap()
    );
    let inputs = h.b.jobs.inputs(&job.id).await.unwrap();
    assert_eq!(inputs.len(), 2);
    assert_eq!(inputs[0].key, "a");
    assert!(inputs[0].request_json.contains("elicitation/create"));
    assert!(inputs.iter().all(|i| i.response_json.is_none()));
    assert_eq!(get(jobs, &job.id).await.updated_ms, T0 + 2);

    // Answered on the other handle (another instance): unknown keys are ignored, an answer is
    // never replaced.
    let ans = |k: &str, v: &str| (k.to_owned(), format!(r#"{{"v":"{v}"}}"#));
    let done =
        h.b.jobs
            .answer_inputs(&job.id, vec![ans("a", "1"), ans("zzz", "x")], T0 + 10)
            .await
            .unwrap();
    assert_eq!(done, vec!["a".to_owned()]);
    let done = jobs
        .answer_inputs(&job.id, vec![ans("a", "2"), ans("b", "3")], T0 + 11)
        .await
        .unwrap();
    assert_eq!(done, vec!["b".to_owned()]);
    let inputs = jobs.inputs(&job.id).await.unwrap();
    assert_eq!(inputs[0].response_json.as_deref(), Some(r#"{"v":"1"}"#));
    assert_eq!(inputs[0].answered_ms, Some(T0 + 10));
    assert_eq!(inputs[1].response_json.as_deref(), Some(r#"{"v":"3"}"#));
    assert!(jobs.inputs("no-such-job").await.unwrap().is_empty());

    // The questions go when the job is purged.
    let ok = JobOutcome::Succeeded {
        result_json: "{}".into(),
    };
    jobs.finish(&job.id, "w/1", lease.token, ok, T0 + 20)
        .await
        .unwrap();
    let ttl = get(jobs, &job.id).await.ttl_ms;
    assert_eq!(jobs.purge(T0 + 20 + ttl).await.unwrap(), 1);
    assert!(jobs.inputs(&job.id).await.unwrap().is_empty());
}

/// `max_active`: a principal with that many queued or running jobs gets `TooManyActive` and
/// nothing is recorded; a key replay still returns its job; another principal, or a finished
/// job making room, lets creates through again.
pub async fn jobs_max_active_per_principal(h: Harness) {
    let jobs = &h.a.jobs;
    let limited = |fp: &str| {
        let mut nj = new_job("scan", fp, T0);
        nj.max_active = Some(2);
        nj
    };
    let mut keyed = limited("k");
    keyed.idem_key = Some("key-1".into());
    let first = create(jobs, keyed.clone()).await;
    create(jobs, limited("b")).await;
    assert_eq!(
        jobs.create(limited("c")).await.unwrap(),
        CreateOutcome::TooManyActive { limit: 2 }
    );
    // The replay of a key is not a new job.
    assert_eq!(existing(jobs.create(keyed).await.unwrap()).id, first.id);
    // Another principal has its own count.
    let mut bob = limited("c");
    bob.principal = "bob".into();
    create(jobs, bob).await;
    // A job that ends makes room.
    let out = jobs
        .request_cancel(&first.id, "test", T0 + 1)
        .await
        .unwrap();
    assert!(matches!(out, CancelOutcome::CancelledQueued(_)), "{out:?}");
    create(jobs, limited("d")).await;
}
