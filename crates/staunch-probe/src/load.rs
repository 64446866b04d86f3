//! Responsiveness: a server whose message loop runs tool code (or blocks in it) answers
//! `ping` only between tools. Several slow calls run while we time pings and `tools/list`.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_client::{CallOptions, ClientError};
use tokio::time::Instant;

use super::watch::{Watch, ms, progress_in};
use super::{Check, Probe, Status};

const ROUNDS: usize = 10;
const ANSWER_LIMIT: Duration = Duration::from_secs(5);
/// Median latency above which a loop looks congested.
const SLOW_P50: Duration = Duration::from_millis(250);

struct Timings {
    samples: Vec<Duration>,
    failure: Option<ClientError>,
}

impl Timings {
    fn p50(&self) -> Option<Duration> {
        let mut s = self.samples.clone();
        s.sort();
        s.get(s.len() / 2).copied()
    }
    fn max(&self) -> Option<Duration> {
        self.samples.iter().max().copied()
    }
    fn text(&self, what: &str) -> String {
        match (self.p50(), self.max()) {
            (Some(p), Some(m)) => format!("{what} p50 {} max {}", ms(p), ms(m)),
            _ => format!("{what}: no answer"),
        }
    }
    fn json(&self) -> Value {
        json!({
            "answered": self.samples.len(),
            "p50_ms": self.p50().map(|d| d.as_secs_f64() * 1000.0),
            "max_ms": self.max().map(|d| d.as_secs_f64() * 1000.0),
            "error": self.failure.as_ref().map(|e| e.to_string()),
        })
    }
}

async fn time(p: &Probe, method: &str) -> Timings {
    let opts = CallOptions::default()
        .timeout(ANSWER_LIMIT)
        .max_total(ANSWER_LIMIT)
        .progress(false);
    let mut t = Timings {
        samples: Vec::new(),
        failure: None,
    };
    for _ in 0..ROUNDS {
        let start = Instant::now();
        match p.client.request(method, None, &opts).await {
            Ok(_) => t.samples.push(start.elapsed()),
            Err(e) => {
                t.failure = Some(e);
                break;
            }
        }
    }
    t
}

pub(crate) async fn responsiveness(p: &Probe) -> Check {
    const ID: &str = "responsiveness";
    let k = p.concurrent;
    let mut w = Watch::new(&p.client);
    let mut calls = Vec::new();
    for _ in 0..k {
        match p.start_call(p.long_steps(), true) {
            Ok(c) => calls.push(c),
            Err(e) => {
                return Check::new(ID, Status::Fail, format!("could not call: {e}"), json!({}));
            }
        }
    }
    let tokens: Vec<Value> = calls
        .iter()
        .filter_map(|c| c.progress_token())
        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
        .collect();
    // Wait until every call has reported progress once (they are all running), bounded.
    let warm = (p.step * 10).clamp(Duration::from_secs(1), Duration::from_secs(5));
    w.until(Instant::now() + warm, |seen| {
        tokens.iter().all(|t| !progress_in(seen, t).is_empty())
    })
    .await;
    let running = tokens
        .iter()
        .filter(|t| !progress_in(&w.seen, t).is_empty())
        .count();
    let ping = time(p, p.ping_method()).await;
    // A loop that did not answer ping will not answer tools/list either; don't wait twice.
    let list = match &ping.failure {
        Some(e @ (ClientError::Timeout { .. } | ClientError::Closed(_))) => Timings {
            samples: Vec::new(),
            failure: Some(e.clone()),
        },
        _ => time(p, "tools/list").await,
    };
    for c in calls {
        c.cancel("staunch probe: responsiveness check done");
    }
    let data = json!({
        "slow_calls": k, "slow_calls_with_progress": running,
        "ping": ping.json(), "tools_list": list.json(),
    });
    let ping_missing = matches!(&ping.failure, Some(ClientError::Rpc(e)) if e.code == -32601);
    let blocked = [&ping, &list].iter().any(|t| {
        matches!(
            t.failure,
            Some(ClientError::Timeout { .. }) | Some(ClientError::Closed(_))
        )
    });
    let summary = format!(
        "{}; {} (while {k} slow calls ran, {running} of them reporting progress)",
        if ping_missing {
            "ping not supported".to_string()
        } else {
            ping.text(p.ping_method())
        },
        list.text("tools/list")
    );
    if blocked {
        return Check::new(
            ID,
            Status::Fail,
            format!(
                "no answer within {} while slow calls ran: the message loop is blocked; {summary}",
                ms(ANSWER_LIMIT)
            ),
            data,
        );
    }
    let slow = [ping.p50(), list.p50()]
        .into_iter()
        .flatten()
        .any(|d| d > SLOW_P50);
    if slow {
        return Check::new(ID, Status::Warn, format!("slow answers: {summary}"), data);
    }
    if running < k && !tokens.is_empty() {
        return Check::new(
            ID,
            Status::Warn,
            format!("only {running} of {k} concurrent slow calls made progress: {summary}"),
            data,
        );
    }
    Check::new(ID, Status::Pass, summary, data)
}
