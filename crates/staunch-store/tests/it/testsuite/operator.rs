//! [`staunch_store::JobStore`] cases for the operator's calls: `list_all`, `count_by_state`,
//! `ids_starting_with` and `purge_finished_before` (`staunch jobs`, metrics, the live page).

use std::sync::Arc;

use super::{Harness, T0};
use staunch_store::{CreateOutcome, JobFilter, JobOutcome, JobRecord, JobState, JobStore, NewJob};

const LEASE: i64 = 30_000;

async fn make(
    jobs: &Arc<dyn JobStore>,
    principal: &str,
    tool: &str,
    fp: &str,
    now: i64,
) -> JobRecord {
    let mut nj = NewJob::new(principal, tool, format!(r#"{{"fp":"{fp}"}}"#), fp, now);
    nj.ttl_ms = 1_000_000_000;
    match jobs.create(nj).await.unwrap() {
        CreateOutcome::Created(j) => j,
        other => panic!("expected Created, got {other:?}"),
    }
}

async fn run_to(jobs: &Arc<dyn JobStore>, id: &str, outcome: JobOutcome, now: i64) {
    let lease = jobs
        .claim(id, "w/1", LEASE, now)
        .await
        .unwrap()
        .expect("claimable");
    jobs.finish(id, "w/1", lease.token, outcome, now + 1)
        .await
        .unwrap();
}

fn ids(v: &[JobRecord]) -> Vec<&str> {
    v.iter().map(|j| j.id.as_str()).collect()
}

/// Five jobs of two principals and two tools in four states, created one second apart.
async fn fixture(jobs: &Arc<dyn JobStore>) -> [JobRecord; 5] {
    let queued = make(jobs, "alice", "scan", "1", T0).await;
    let running = make(jobs, "bob", "scan", "2", T0 + 1_000).await;
    jobs.claim(&running.id, "w/1", LEASE, T0 + 1_000)
        .await
        .unwrap()
        .unwrap();
    let ok = make(jobs, "alice", "import", "3", T0 + 2_000).await;
    run_to(
        jobs,
        &ok.id,
        JobOutcome::Succeeded {
            result_json: "{}".into(),
        },
        T0 + 2_000,
    )
    .await;
    let failed = make(jobs, "", "import", "4", T0 + 3_000).await;
    let error = JobOutcome::Failed {
        error_json: "{}".into(),
        reason: "error".into(),
    };
    run_to(jobs, &failed.id, error, T0 + 3_000).await;
    let cancelled = make(jobs, "bob", "scan", "5", T0 + 4_000).await;
    jobs.request_cancel(&cancelled.id, "op", T0 + 4_500)
        .await
        .unwrap();
    let get = |id: String| async move { jobs.get(&id).await.unwrap().unwrap() };
    [
        get(queued.id).await,
        get(running.id).await,
        get(ok.id).await,
        get(failed.id).await,
        get(cancelled.id).await,
    ]
}

pub async fn jobs_operator_list_all_filters(h: Harness) {
    let [queued, running, ok, failed, cancelled] = fixture(&h.a.jobs).await;
    let list = |f: JobFilter| {
        let jobs = h.b.jobs.clone();
        async move { jobs.list_all(&f).await.unwrap() }
    };
    // Every principal, newest first.
    let all = list(JobFilter::default()).await;
    assert_eq!(
        ids(&all),
        ids(&[
            cancelled.clone(),
            failed.clone(),
            ok.clone(),
            running.clone(),
            queued.clone()
        ])
    );
    assert_eq!(all[1], failed, "rows come back whole");
    let by_state = list(JobFilter {
        states: vec![JobState::Running, JobState::Queued],
        ..JobFilter::default()
    })
    .await;
    assert_eq!(ids(&by_state), ids(&[running.clone(), queued.clone()]));
    let by_tool = list(JobFilter {
        tool: Some("import".into()),
        ..JobFilter::default()
    })
    .await;
    assert_eq!(ids(&by_tool), ids(&[failed.clone(), ok.clone()]));
    // Age: created in [T0 + 1 s, T0 + 3 s).
    let window = list(JobFilter {
        created_from_ms: Some(T0 + 1_000),
        created_before_ms: Some(T0 + 3_000),
        ..JobFilter::default()
    })
    .await;
    assert_eq!(ids(&window), ids(&[ok.clone(), running.clone()]));
    let combined = list(JobFilter {
        states: vec![JobState::Cancelled, JobState::Queued],
        tool: Some("scan".into()),
        created_from_ms: Some(T0 + 1),
        ..JobFilter::default()
    })
    .await;
    assert_eq!(ids(&combined), ids(std::slice::from_ref(&cancelled)));
    let limited = list(JobFilter {
        limit: 2,
        ..JobFilter::default()
    })
    .await;
    assert_eq!(ids(&limited), ids(&[cancelled, failed]));
    let none = list(JobFilter {
        tool: Some("nothing".into()),
        ..JobFilter::default()
    })
    .await;
    assert!(none.is_empty());
}

pub async fn jobs_operator_count_by_state(h: Harness) {
    assert!(h.a.jobs.count_by_state().await.unwrap().is_empty());
    fixture(&h.a.jobs).await;
    make(&h.a.jobs, "carol", "scan", "6", T0).await;
    let mut counts = h.b.jobs.count_by_state().await.unwrap();
    counts.sort_by_key(|(s, _)| s.as_str());
    assert_eq!(
        counts,
        vec![
            (JobState::Cancelled, 1),
            (JobState::Failed, 1),
            (JobState::Queued, 2),
            (JobState::Running, 1),
            (JobState::Succeeded, 1),
        ]
    );
}

pub async fn jobs_operator_ids_starting_with(h: Harness) {
    let a = make(&h.a.jobs, "alice", "scan", "1", T0).await;
    let b = make(&h.a.jobs, "bob", "scan", "2", T0).await;
    let mut both = [a.id.clone(), b.id.clone()];
    both.sort();
    assert_eq!(h.b.jobs.ids_starting_with("", 10).await.unwrap(), both);
    assert_eq!(h.b.jobs.ids_starting_with("", 1).await.unwrap(), both[..1]);
    assert_eq!(
        h.b.jobs.ids_starting_with(&a.id, 10).await.unwrap(),
        std::slice::from_ref(&a.id)
    );
    // The shortest prefix that tells them apart names one.
    let common =
        a.id.chars()
            .zip(b.id.chars())
            .take_while(|(x, y)| x == y)
            .count();
    let ids =
        h.b.jobs
            .ids_starting_with(&a.id[..=common], 10)
            .await
            .unwrap();
    assert_eq!(ids, std::slice::from_ref(&a.id));
    assert!(
        h.b.jobs
            .ids_starting_with("zz", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        h.b.jobs
            .ids_starting_with("%", 10)
            .await
            .unwrap()
            .is_empty(),
        "no pattern"
    );
}

pub async fn jobs_operator_purge_finished_before(h: Harness) {
    let jobs = &h.a.jobs;
    let [queued, running, ok, failed, cancelled] = fixture(jobs).await;
    jobs.ask_inputs(
        &running.id,
        "w/1",
        running.lease_token,
        vec![("q".into(), "{}".into())],
        T0 + 1_500,
    )
    .await
    .unwrap();
    // ok finished at T0 + 2001, failed at T0 + 3001, cancelled at T0 + 4500.
    assert_eq!(jobs.purge_finished_before(T0 + 2_001).await.unwrap(), 0);
    assert_eq!(h.b.jobs.purge_finished_before(T0 + 3_002).await.unwrap(), 2);
    assert_eq!(jobs.get(&ok.id).await.unwrap(), None);
    assert_eq!(jobs.get(&failed.id).await.unwrap(), None);
    assert!(jobs.get(&cancelled.id).await.unwrap().is_some());
    // However far the cutoff, queued and running jobs stay (and keep their questions).
    assert_eq!(jobs.purge_finished_before(i64::MAX).await.unwrap(), 1);
    assert!(jobs.get(&queued.id).await.unwrap().is_some());
    assert!(jobs.get(&running.id).await.unwrap().is_some());
    assert_eq!(jobs.inputs(&running.id).await.unwrap().len(), 1);
    assert_eq!(jobs.purge_finished_before(i64::MAX).await.unwrap(), 0);
}

/// The starting request's `traceparent` is kept with the job (and read back by every
/// handle: the attempt that links to it may run on another instance); none stays none.
pub async fn jobs_trace_parent_round_trips(h: Harness) {
    let jobs = &h.a.jobs;
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut nj = NewJob::new("alice", "scan", "{}", "tp", T0);
    nj.trace_parent = Some(tp.into());
    let with = match jobs.create(nj).await.unwrap() {
        CreateOutcome::Created(j) => j,
        other => panic!("expected Created, got {other:?}"),
    };
    assert_eq!(with.trace_parent.as_deref(), Some(tp));
    let lease =
        h.b.jobs
            .claim_next("w/2", LEASE, T0 + 1, &["scan".to_string()], u64::MAX)
            .await
            .unwrap()
            .expect("claimable");
    assert_eq!(lease.job.id, with.id);
    assert_eq!(lease.job.trace_parent.as_deref(), Some(tp));
    let without = make(jobs, "alice", "scan", "no-tp", T0 + 2).await;
    assert_eq!(
        h.b.jobs
            .get(&without.id)
            .await
            .unwrap()
            .unwrap()
            .trace_parent,
        None
    );
}
