//! The mixed workload: each worker holds one client connection (2025 sessions or 2026
//! stateless requests, alternating by worker) to one instance and runs, at random, quick calls,
//! streaming calls, cancels that race completion, and side-effecting jobs started with an
//! idempotency key — re-sent with a new request id and the same key after a client timeout.
//! What happened is recorded for the checks; a failure is kept with its time so a fault can
//! explain it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use staunch_client::{CallOptions, Client, ClientError, ConnectOptions, EraChoice};

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
    pub instance: usize,
    pub started: Instant,
    pub ended: Instant,
    pub what: String,
    pub error: String,
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
    /// Idempotency key → (instance that started it, rows asked, job ids the starts returned).
    pub keys: BTreeMap<String, (usize, u32, BTreeSet<String>)>,
    /// Latency of quick calls, ms, with when they ended.
    pub quick_ms: Vec<(Instant, f64)>,
    /// Stream resumptions the clients made (dropped streams resumed).
    pub resumes: u64,
    /// When a start answered "could not record the job … retry with the same key".
    pub store_errors: Vec<Instant>,
}

pub type Shared = Arc<Mutex<Record>>;

fn record(shared: &Shared) -> std::sync::MutexGuard<'_, Record> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

async fn connect(url: &str, session_era: bool) -> Result<Client, ClientError> {
    let opts = ConnectOptions {
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
    let mut n = 0u64;
    while Instant::now() < stop {
        n += 1;
        let c = match &client {
            Some(c) => c.clone(),
            None => match connect(&url, session_era).await {
                Ok(c) => {
                    client = Some(c.clone());
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
        let op = rng.below(10);
        let outcome = match op {
            0..=3 => quick(&c, &shared, id, n, started).await,
            4..=5 => streaming(&c, &shared, &mut rng).await,
            6..=7 => cancel_race(&c, &shared, &mut rng).await,
            _ => job_with_key(&c, &shared, &mut rng, instance).await,
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
            });
            if lost_connection && let Some(c) = client.take() {
                record(&shared).resumes += c.resumes();
                c.close().await;
            }
        }
    }
    if let Some(c) = client {
        record(&shared).resumes += c.resumes();
        c.close().await;
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
async fn cancel_race(c: &Client, shared: &Shared, rng: &mut Rng) -> OpResult {
    let steps = 4 + rng.below(8);
    let expected = steps * 15;
    let timeout = expected * (70 + rng.below(60)) / 100;
    let opts = CallOptions::default()
        .timeout(Duration::from_millis(timeout.max(1)))
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
            record(shared).timed_out += 1;
            Ok(())
        }
        Err(e) => Err(("cancel race".into(), e)),
    }
}

/// `start_import_rows` with a key; the first start often gets a timeout so short that it is
/// given up on (and cancelled), and is re-sent — new request id, same key — until answered.
async fn job_with_key(c: &Client, shared: &Shared, rng: &mut Rng, instance: usize) -> OpResult {
    let key = staunch_client::jobs::new_idempotency_key();
    let rows = 3 + rng.below(5) as u32;
    let args = json!({"rows": rows, "delay_ms": 20, "idempotency_key": key});
    record(shared)
        .keys
        .insert(key.clone(), (instance, rows, BTreeSet::new()));
    let mut timeout = Duration::from_millis(1 + rng.below(20));
    for attempt in 0..6 {
        let opts = CallOptions::default().timeout(timeout);
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
                            k.2.insert(j);
                        }
                    }
                    None => rec.wrong.push(format!("start_import_rows answered {r}")),
                }
                return Ok(());
            }
            Err(ClientError::Timeout { .. }) => {
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
    Ok(())
}
