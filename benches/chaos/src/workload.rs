//! The mixed workload: each worker holds one client connection (2025 sessions or 2026
//! stateless requests, alternating by worker) to one instance and runs, at random, quick calls,
//! streaming calls, cancels that race completion, side-effecting jobs started with an
//! idempotency key — re-sent with a new request id and the same key after a client timeout —
//! and MCP tasks (2025-11-25 `task` params on sessions, the 2026 tasks extension on stateless
//! requests), followed with `tasks/get` to the end or cancelled with `tasks/cancel`.
//! What happened is recorded for the checks; a failure is kept with its time so a fault can
//! explain it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use staunch_client::protocol::stateless::{TASKS_EXTENSION, keys};
use staunch_client::tasks::{TaskEvent, TaskOptions, TaskOutcome};
use staunch_client::{CallOptions, Client, ClientError, ConnectOptions, EraChoice};
use tokio_util::sync::CancellationToken;

/// A small deterministic PRNG (xorshift64*): runs are repeatable from their seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A call that failed, for the checks to explain or report.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The instance the client talked to.
    pub instance: usize,
    pub started: Instant,
    pub ended: Instant,
    pub what: String,
    pub error: String,
    /// A job whose worker lost its lease: the instance that ran it (its `lease_owner` in the
    /// store) may explain the failure too, besides the one the client talked to.
    pub job: Option<String>,
}

/// One idempotency key the workload used, and what the client saw of its starts.
#[derive(Clone, Debug)]
pub struct KeyRec {
    /// The instance the starts went to.
    pub instance: usize,
    pub rows: u32,
    /// Job (task) ids the answered starts returned.
    pub told: BTreeSet<String>,
    /// Starts sent with this key, and whether one was answered.
    pub sent: u32,
    pub answered: bool,
    /// The client cancelled the job (`tasks/cancel`): `cancelled` is an explained end.
    pub cancel_sent: bool,
    /// An MCP task (else a `start_import_rows` job).
    pub task: bool,
}

impl KeyRec {
    pub fn new(instance: usize, rows: u32, task: bool) -> Self {
        Self {
            instance,
            rows,
            told: BTreeSet::new(),
            sent: 0,
            answered: false,
            cancel_sent: false,
            task,
        }
    }
}

/// Something a client received about a request it had given up on (a session-era cancel:
/// `notifications/cancelled`, the stream kept open a while to see what still comes).
#[derive(Clone, Debug)]
pub struct LateSeen {
    pub instance: usize,
    /// The session the client held (the lifecycle log names it by its hash).
    pub session: Option<String>,
    /// The request's id (for progress, from its token: the client numbers both alike).
    pub request_id: Option<String>,
    /// How long after the client gave up, and when it arrived.
    pub since_abandoned: Duration,
    pub at: Instant,
    /// A response (else a progress notification).
    pub response: bool,
}

/// Everything the workers saw.
#[derive(Default)]
pub struct Record {
    pub calls: u64,
    pub answered: u64,
    /// Calls given up on by the client (its timeout sent the cancel).
    pub timed_out: u64,
    /// Cancels sent to race a completion, and how they came out.
    pub cancel_races: u64,
    pub cancel_races_won_by_result: u64,
    /// Starts re-sent with the same idempotency key after a timeout.
    pub resent_with_key: u64,
    /// Wrong answers (a result that is not the one asked for).
    pub wrong: Vec<String>,
    pub failures: Vec<Failure>,
    /// Every idempotency key used (job starts and tasks).
    pub keys: BTreeMap<String, KeyRec>,
    /// What arrived on the wire for requests the clients had given up on.
    pub late: Vec<LateSeen>,
    /// Latency of quick calls, ms, with when they ended.
    pub quick_ms: Vec<(Instant, f64)>,
    /// Stream resumptions the clients made (dropped streams resumed).
    pub resumes: u64,
    /// When a start answered "could not record the job … retry with the same key".
    pub store_errors: Vec<Instant>,
    /// MCP tasks created (their ids are also jobs, checked with the others under the key
    /// `task:<id>`).
    pub tasks: u64,
    /// Tasks followed to `completed` with their result (fetched once).
    pub tasks_completed: u64,
    /// Tasks the client cancelled (`tasks/cancel` acknowledged), and those a later
    /// `tasks/get` showed `cancelled` / `completed` (the work won the race; 2026 only).
    pub tasks_cancel_sent: u64,
    pub tasks_cancel_honoured: u64,
    pub tasks_cancel_raced: u64,
}

pub type Shared = Arc<Mutex<Record>>;

fn record(shared: &Shared) -> std::sync::MutexGuard<'_, Record> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long a session-era client keeps a cancelled request's stream open to see whether
/// anything still comes for it (longer than the servers' cancel grace of 500 ms).
const LINGER: Duration = Duration::from_secs(3);

async fn connect(url: &str, session_era: bool) -> Result<Client, ClientError> {
    let opts = ConnectOptions {
        http: staunch_client::HttpOptions {
            linger_after_cancel: LINGER,
            ..staunch_client::HttpOptions::default()
        },
        era: if session_era {
            EraChoice::Session
        } else {
            EraChoice::Stateless
        },
        init_timeout: Duration::from_secs(5),
        discover_timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    };
    Client::connect_http(url, &opts).await
}

fn text(v: &Value) -> String {
    v["content"]
        .as_array()
        .and_then(|c| c.first())
        .and_then(|c| c["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// One worker: runs operations against `urls[instance]` until `stop`.
pub async fn worker(
    id: usize,
    instance: usize,
    url: String,
    seed: u64,
    stop: Instant,
    shared: Shared,
) {
    let mut rng = Rng::new(seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let session_era = id.is_multiple_of(2);
    let mut client: Option<Client> = None;
    // What arrives for requests the client gave up on, and when it gave up on them.
    let mut late: Option<(Option<String>, LateFeed)> = None;
    let mut abandons: Vec<Instant> = Vec::new();
    let mut n = 0u64;
    while Instant::now() < stop {
        n += 1;
        let c = match &client {
            Some(c) => c.clone(),
            None => match connect(&url, session_era).await {
                Ok(c) => {
                    client = Some(c.clone());
                    drain_late(&shared, instance, late.as_mut(), &abandons);
                    late = Some((c.session_id(), c.late_feed()));
                    c
                }
                Err(_) => {
                    // The instance is down (a kill): try again shortly.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let started = Instant::now();
        let op = rng.below(12);
        let outcome = match op {
            0..=3 => quick(&c, &shared, id, n, started).await,
            4..=5 => streaming(&c, &shared, &mut rng).await,
            6..=7 => cancel_race(&c, &shared, &mut rng, &mut abandons).await,
            8..=9 => job_with_key(&c, &shared, &mut rng, instance, &mut abandons).await,
            _ => task(&c, &shared, &mut rng, instance, session_era).await,
        };
        record(&shared).calls += 1;
        if let Err((what, e)) = outcome {
            let lost_connection = matches!(
                e,
                ClientError::Connect(_)
                    | ClientError::Closed(_)
                    | ClientError::StreamLost(_)
                    | ClientError::SessionExpired
                    | ClientError::Http { .. }
            );
            record(&shared).failures.push(Failure {
                instance,
                started,
                ended: Instant::now(),
                what,
                error: e.to_string(),
                job: None,
            });
            if lost_connection && let Some(c) = client.take() {
                record(&shared).resumes += c.resumes();
                c.close().await;
            }
        }
    }
    if let Some(c) = client {
        // Past the linger: whatever was still to come for a cancelled request has come.
        tokio::time::sleep(LINGER + Duration::from_millis(200)).await;
        record(&shared).resumes += c.resumes();
        c.close().await;
    }
    drain_late(&shared, instance, late.as_mut(), &abandons);
}

type LateFeed = tokio::sync::mpsc::UnboundedReceiver<staunch_client::Late>;

/// Records what a client's late feed holds: answers to requests it gave up on, and progress
/// for none in flight (timed from the last time the client gave up on a request before it).
fn drain_late(
    shared: &Shared,
    instance: usize,
    feed: Option<&mut (Option<String>, LateFeed)>,
    abandons: &[Instant],
) {
    let Some((session, rx)) = feed else { return };
    while let Ok(l) = rx.try_recv() {
        let seen = match l {
            staunch_client::Late::Response(r) => LateSeen {
                instance,
                session: session.clone(),
                request_id: Some(r.id.to_string()),
                since_abandoned: r.since_abandoned,
                at: r.at.into_std(),
                response: true,
            },
            staunch_client::Late::Progress { at, token, .. } => {
                let at = at.into_std();
                let gave_up = abandons.iter().rev().find(|a| **a <= at).copied();
                LateSeen {
                    instance,
                    session: session.clone(),
                    // As `RequestId` prints it (the log's key): a number bare, a string quoted.
                    request_id: Some(match token {
                        staunch_client::protocol::mcp::ProgressToken::Number(n) => n.to_string(),
                        staunch_client::protocol::mcp::ProgressToken::String(s) => format!("{s:?}"),
                    }),
                    since_abandoned: gave_up.map_or(Duration::ZERO, |a| at - a),
                    at,
                    response: false,
                }
            }
        };
        record(shared).late.push(seen);
    }
}

type OpResult = Result<(), (String, ClientError)>;

async fn quick(c: &Client, shared: &Shared, worker: usize, n: u64, started: Instant) -> OpResult {
    let want = format!("w{worker}-{n}");
    let opts = CallOptions::default().timeout(Duration::from_secs(10));
    match c
        .call_tool("echo", json!({"text": want}), &opts, |_| {})
        .await
    {
        Ok(r) => {
            let mut rec = record(shared);
            rec.answered += 1;
            rec.quick_ms
                .push((Instant::now(), started.elapsed().as_secs_f64() * 1000.0));
            if text(&r) != want {
                rec.wrong.push(format!("echo {want} answered {}", text(&r)));
            }
            Ok(())
        }
        Err(e) => Err(("echo".into(), e)),
    }
}

async fn streaming(c: &Client, shared: &Shared, rng: &mut Rng) -> OpResult {
    let steps = 3 + rng.below(10);
    let opts = CallOptions::default()
        .timeout(Duration::from_secs(10))
        .progress(true);
    match c
        .call_tool(
            "slow_count",
            json!({"steps": steps, "delay_ms": 25}),
            &opts,
            |_| {},
        )
        .await
    {
        Ok(r) => {
            let mut rec = record(shared);
            rec.answered += 1;
            if !text(&r).contains(&steps.to_string()) {
                rec.wrong
                    .push(format!("slow_count {steps} answered {}", text(&r)));
            }
            Ok(())
        }
        Err(e) => Err(("slow_count".into(), e)),
    }
}

/// A call whose timeout lands about when it would finish: the cancel races the completion.
async fn cancel_race(
    c: &Client,
    shared: &Shared,
    rng: &mut Rng,
    abandons: &mut Vec<Instant>,
) -> OpResult {
    let steps = 4 + rng.below(8);
    let expected = steps * 15;
    let timeout = expected * (70 + rng.below(60)) / 100;
    // With progress: work that goes on after the cancel shows on the wire.
    let opts = CallOptions::default()
        .timeout(Duration::from_millis(timeout.max(1)))
        .progress(true)
        .reset_on_progress(false);
    record(shared).cancel_races += 1;
    match c
        .call_tool(
            "slow_count",
            json!({"steps": steps, "delay_ms": 15}),
            &opts,
            |_| {},
        )
        .await
    {
        Ok(_) => {
            let mut rec = record(shared);
            rec.answered += 1;
            rec.cancel_races_won_by_result += 1;
            Ok(())
        }
        Err(ClientError::Timeout { .. }) => {
            abandons.push(Instant::now());
            record(shared).timed_out += 1;
            Ok(())
        }
        Err(e) => Err(("cancel race".into(), e)),
    }
}

/// `start_import_rows` with a key; the first start often gets a timeout so short that it is
/// given up on (and cancelled), and is re-sent — new request id, same key — until answered.
async fn job_with_key(
    c: &Client,
    shared: &Shared,
    rng: &mut Rng,
    instance: usize,
    abandons: &mut Vec<Instant>,
) -> OpResult {
    let key = staunch_client::jobs::new_idempotency_key();
    let rows = 3 + rng.below(5) as u32;
    let args = json!({"rows": rows, "delay_ms": 20, "idempotency_key": key});
    record(shared)
        .keys
        .insert(key.clone(), KeyRec::new(instance, rows, false));
    let mut timeout = Duration::from_millis(1 + rng.below(20));
    let started = Instant::now();
    for attempt in 0..6 {
        let opts = CallOptions::default().timeout(timeout);
        if let Some(k) = record(shared).keys.get_mut(&key) {
            k.sent += 1;
        }
        match c
            .call_tool("start_import_rows", args.clone(), &opts, |_| {})
            .await
        {
            Ok(r) => {
                let job = r["structuredContent"]["job_id"]
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| {
                        serde_json::from_str::<Value>(&text(&r))
                            .ok()
                            .and_then(|v| v["job_id"].as_str().map(str::to_owned))
                    });
                let text_of = text(&r);
                if job.is_none() && text_of.contains("Retry with the same idempotency_key") {
                    // The store failed under the start (a PostgreSQL connection kill): the
                    // answer says to retry with the same key, which is what is tested next.
                    {
                        let mut rec = record(shared);
                        rec.store_errors.push(Instant::now());
                        rec.resent_with_key += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                let mut rec = record(shared);
                rec.answered += 1;
                match job {
                    Some(j) => {
                        if let Some(k) = rec.keys.get_mut(&key) {
                            k.told.insert(j);
                            k.answered = true;
                        }
                    }
                    None => rec.wrong.push(format!("start_import_rows answered {r}")),
                }
                return Ok(());
            }
            Err(ClientError::Timeout { .. }) => {
                abandons.push(Instant::now());
                let mut rec = record(shared);
                rec.timed_out += 1;
                if attempt > 0 || timeout < Duration::from_secs(1) {
                    rec.resent_with_key += 1;
                }
                timeout = Duration::from_secs(5);
            }
            Err(e) => return Err(("start_import_rows".into(), e)),
        }
    }
    // Never answered: the store says whether a job was made (checked by key), and a fault
    // must explain why six starts went unanswered.
    record(shared).failures.push(Failure {
        instance,
        started,
        ended: Instant::now(),
        what: format!("start_import_rows with key {key}"),
        error: "six starts with the same key, none answered".into(),
        job: None,
    });
    Ok(())
}

/// An `import_rows` MCP task: followed to the end (its result fetched once and checked), or —
/// one time in three — cancelled with `tasks/cancel` after a short while, then read with
/// `tasks/get` until terminal: a 2025 task must stay `cancelled`; a 2026 one is `cancelled`
/// or, when the work finished first, `completed`.
async fn task(
    c: &Client,
    shared: &Shared,
    rng: &mut Rng,
    instance: usize,
    session_era: bool,
) -> OpResult {
    let rows = 2 + rng.below(4) as u32;
    // A key of its own: without one, in-flight dedupe would let two workers asking for the
    // same import share one task (and one's cancel end the other's).
    let key = staunch_client::jobs::new_idempotency_key();
    let args = json!({"rows": rows, "delay_ms": 20, "idempotency_key": key});
    {
        let mut k = KeyRec::new(instance, rows, true);
        k.sent = 1;
        record(shared).keys.insert(key.clone(), k);
    }
    let cancel = CancellationToken::new();
    let cancel_after = (rng.below(3) == 0).then(|| Duration::from_millis(10 + rng.below(60)));
    let mut opts = CallOptions::default()
        .timeout(Duration::from_secs(10))
        .max_total(Duration::from_secs(20));
    if cancel_after.is_some() {
        opts = opts.cancel_on(cancel.clone());
    }
    let topts = TaskOptions {
        default_poll: Duration::from_millis(50),
        min_poll: Duration::from_millis(20),
        max_poll: Duration::from_millis(200),
        request_timeout: Duration::from_secs(10),
        ..TaskOptions::default()
    };
    let created = Arc::new(Mutex::new(None::<String>));
    let seen = created.clone();
    // Whether `tasks/cancel` was acknowledged (a task that had already finished refuses it).
    let acked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ack = acked.clone();
    let armed = cancel_after.map(|d| {
        let (cancel, seen) = (cancel.clone(), created.clone());
        tokio::spawn(async move {
            // Cancel only once the task exists: a cancelled *call* is another test.
            let until = Instant::now() + Duration::from_secs(10);
            while seen.lock().unwrap_or_else(|p| p.into_inner()).is_none() && Instant::now() < until
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(d).await;
            cancel.cancel();
        })
    });
    let on_event = move |e: TaskEvent<'_>| match e {
        TaskEvent::Created(t) => {
            *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(t.task_id.clone());
        }
        TaskEvent::CancelSent(_) => ack.store(true, std::sync::atomic::Ordering::SeqCst),
        _ => {}
    };
    let started = Instant::now();
    let answer = staunch_client::input::no_answers;
    let outcome = c
        .call_tool_task("import_rows", args, &opts, &topts, answer, on_event)
        .await;
    if let Some(a) = armed {
        a.abort();
    }
    let id = created.lock().unwrap_or_else(|p| p.into_inner()).clone();
    {
        let mut rec = record(shared);
        if id.is_some() {
            rec.tasks += 1;
        }
        let cancel_sent = acked.load(std::sync::atomic::Ordering::SeqCst)
            || matches!(outcome, Err(ClientError::Cancelled));
        if let Some(k) = rec.keys.get_mut(&key) {
            k.told.extend(id.clone());
            k.answered = id.is_some();
            k.cancel_sent = cancel_sent;
        }
    }
    match outcome {
        Ok(TaskOutcome::Finished { task, result }) => {
            let mut rec = record(shared);
            rec.answered += 1;
            match result {
                Ok(r) if task.status.as_str() == "completed" => {
                    rec.tasks_completed += 1;
                    if r["structuredContent"]["imported"] != json!(rows) {
                        rec.wrong.push(format!(
                            "task {}: import of {rows} answered {r}",
                            task.task_id
                        ));
                    }
                }
                // 2025: a result with isError; 2026: the task's error.
                Ok(r) if r["structuredContent"]["error"]["code"] == "lease_lost" => {
                    lease_lost(&mut rec, instance, started, &task.task_id);
                }
                Err(e) if e.data.as_ref().is_some_and(|d| d["reason"] == "lease_lost") => {
                    lease_lost(&mut rec, instance, started, &task.task_id);
                }
                other => rec.wrong.push(format!(
                    "task {} ended {} with {other:?}",
                    task.task_id,
                    task.status.as_str()
                )),
            }
            Ok(())
        }
        Ok(TaskOutcome::Cancelled(t)) => {
            record(shared)
                .wrong
                .push(format!("task {} cancelled without a cancel", t.task_id));
            Ok(())
        }
        Ok(TaskOutcome::Immediate(r)) => {
            record(shared)
                .wrong
                .push(format!("import_rows as a task answered at once: {r}"));
            Ok(())
        }
        Err(ClientError::Cancelled) => {
            let Some(id) = id else { return Ok(()) };
            let acked = acked.load(std::sync::atomic::Ordering::SeqCst);
            record(shared).tasks_cancel_sent += 1;
            follow_cancelled(c, shared, &id, session_era, acked, (instance, started)).await
        }
        Err(e) => Err(("import_rows task".into(), e)),
    }
}

/// After `tasks/cancel`: `tasks/get` until the task is terminal (bounded). A 2025 task whose
/// cancel was acknowledged must end `cancelled`; one that had finished first refused the
/// cancel and keeps its result; a 2026 task may finish first either way (the ack is empty).
async fn follow_cancelled(
    c: &Client,
    shared: &Shared,
    id: &str,
    session_era: bool,
    acked: bool,
    (instance, started): (usize, Instant),
) -> OpResult {
    let opts = CallOptions::default().timeout(Duration::from_secs(10));
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let mut params = json!({"taskId": id});
        if !session_era {
            // A stateless request names the extension each time (-32021 otherwise).
            params["_meta"] = json!({(keys::CLIENT_CAPABILITIES): {
                "extensions": {(TASKS_EXTENSION): {}}}});
        }
        let got = c.request("tasks/get", Some(params), &opts).await;
        let status = match got {
            Ok(v) => v["status"].as_str().unwrap_or_default().to_string(),
            Err(e) => return Err(("tasks/get after tasks/cancel".into(), e)),
        };
        let mut rec = record(shared);
        match status.as_str() {
            "cancelled" => {
                rec.tasks_cancel_honoured += 1;
                return Ok(());
            }
            // The work ended before the cancel reached it: the task keeps its result.
            "completed" if !session_era || !acked => {
                rec.tasks_cancel_raced += 1;
                return Ok(());
            }
            "working" | "input_required" if Instant::now() < until => {}
            // Its worker lost the lease before the cancel took (a kill, a pause, the store
            // restarting under its heartbeats): a fault must explain it.
            "failed" => {
                rec.failures.push(Failure {
                    instance,
                    started,
                    ended: Instant::now(),
                    what: format!("task {id} (cancelled)"),
                    error: "failed after tasks/cancel".into(),
                    job: Some(id.to_string()),
                });
                return Ok(());
            }
            other => {
                rec.wrong.push(format!(
                    "task {id}: {other} after tasks/cancel was acknowledged"
                ));
                return Ok(());
            }
        }
        drop(rec);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A task that ended `failed(lease_lost)`: its worker was killed or paused past its lease, or
/// could not renew it; kept as a failure for a fault to explain.
fn lease_lost(rec: &mut Record, instance: usize, started: Instant, id: &str) {
    rec.failures.push(Failure {
        instance,
        started,
        ended: Instant::now(),
        what: format!("task {id}"),
        error: "failed: lease_lost".into(),
        job: Some(id.to_string()),
    });
}
