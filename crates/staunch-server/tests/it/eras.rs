//! One scenario, three protocol revisions, one running server: a slow tool with progress, a
//! cancel, a dropped stream and a job tool, under 2025-06-18, 2025-11-25 (sessions) and
//! 2026-07-28 (stateless requests), each with the behaviour its revision requires:
//!
//! | step            | 2025-06-18 / 2025-11-25                      | 2026-07-28                         |
//! |-----------------|----------------------------------------------|------------------------------------|
//! | slow tool       | progress on the POST's stream, then result   | the same, on the request's stream  |
//! | cancel          | `notifications/cancelled`: stops, no answer  | close the stream: stops, no answer |
//! | drop the stream | keeps running; 2025-11-25 resumes by GET     | is the cancel                      |
//! | job tool        | the job outlives a dropped stream            | closing the stream cancels the job |

use std::time::Duration;

use serde_json::{Value, json};
use staunch_testkit::TestServer;
use staunch_testkit::http::{Resp, call, stateless};

const LIMIT: Duration = Duration::from_secs(15);
const ERAS: [&str; 3] = ["2025-06-18", "2025-11-25", "2026-07-28"];

/// How one client talks: in a session of a 2025 revision, or statelessly.
enum Era {
    Session { version: &'static str, sid: String },
    Stateless,
}

impl Era {
    async fn open(s: &TestServer, version: &'static str) -> Self {
        if version == "2026-07-28" {
            Era::Stateless
        } else {
            Era::Session {
                version,
                sid: s.initialize_as(version).await,
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Era::Session { version, .. } => version,
            Era::Stateless => "2026-07-28",
        }
    }

    async fn call(&self, s: &TestServer, id: &str, tool: &str, args: Value) -> Resp {
        let token = json!(format!("{id}-progress"));
        match self {
            Era::Session { version, sid } => {
                s.post_as(sid, version, &call(json!(id), tool, args, Some(token)))
                    .await
            }
            Era::Stateless => {
                let mut msg = stateless(
                    json!(id),
                    "tools/call",
                    json!({"name": tool, "arguments": args}),
                );
                msg["params"]["_meta"]["progressToken"] = token;
                s.post_stateless(&msg).await
            }
        }
    }

    /// The era's cancel of an in-flight call whose response is `resp`.
    async fn cancel(&self, s: &TestServer, id: &str, resp: Resp) -> Option<Resp> {
        match self {
            Era::Session { version, sid } => {
                let n = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "test cancel"}});
                assert_eq!(s.post_as(sid, version, &n).await.status, 202);
                Some(resp)
            }
            Era::Stateless => {
                drop(resp);
                None
            }
        }
    }

    /// A quick tool call's structured result.
    async fn structured(&self, s: &TestServer, id: &str, tool: &str, args: Value) -> Value {
        let (_, v) = self.call(s, id, tool, args).await.answer(LIMIT).await;
        let sc = &v["result"]["structuredContent"];
        assert!(sc.is_object(), "{}: {tool}: {v}", self.name());
        sc.clone()
    }

    async fn steps(&self, s: &TestServer, tag: &str) -> u64 {
        let id = format!("status-{tag}-{}", rand_suffix());
        self.structured(s, &id, "slow_count_status", json!({"tag": tag}))
            .await["steps"]
            .as_u64()
            .expect("steps")
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn is_progress(v: &Value) -> bool {
    v["method"] == "notifications/progress"
}

/// The request's last lifecycle line of `event` for request id `id` (ids are unique per test).
fn log_of(s: &TestServer, id: &str, event: &str) -> Option<Value> {
    s.log_lines()
        .into_iter()
        .rfind(|l| l["request_id"] == id && l["event"] == event)
}

async fn ended(s: &TestServer, id: &str) -> Value {
    s.log_until(|l| {
        l.iter()
            .any(|x| x["request_id"] == id && x["event"] == "request.end")
    })
    .await;
    log_of(s, id, "request.end").unwrap_or_else(|| panic!("{id} never ended"))
}

async fn slow_tool(s: &TestServer, era: &Era) {
    let id = format!("slow-{}", era.name());
    let (notes, v) = era
        .call(s, &id, "slow_count", json!({"steps": 5, "delay_ms": 20}))
        .await
        .answer(LIMIT)
        .await;
    let progress: Vec<f64> = notes
        .iter()
        .filter(|n| is_progress(n))
        .filter_map(|n| n["params"]["progress"].as_f64())
        .collect();
    assert_eq!(progress, vec![1.0, 2.0, 3.0, 4.0, 5.0], "{}", era.name());
    assert_eq!(
        v["result"]["content"][0]["text"],
        "counted 5",
        "{}",
        era.name()
    );
    let stateless = matches!(era, Era::Stateless);
    assert_eq!(
        v["result"]["resultType"] == "complete",
        stateless,
        "{}: resultType only in 2026: {v}",
        era.name()
    );
}

async fn cancel(s: &TestServer, era: &Era) {
    let id = format!("cancel-{}", era.name());
    let tag = id.clone();
    let mut r = era
        .call(
            s,
            &id,
            "slow_count",
            json!({"steps": 400, "delay_ms": 25, "tag": tag}),
        )
        .await;
    loop {
        let e = r
            .next_event(LIMIT)
            .await
            .expect("progress before the cancel");
        if is_progress(&e.json()) {
            break;
        }
    }
    if let Some(mut still) = era.cancel(s, &id, r).await {
        // 2025: the stream ends without a response.
        let rest = still.events_until_end(LIMIT).await;
        assert!(
            !rest.iter().any(|e| e.json()["id"] == id.as_str()),
            "{}: answered after its cancel: {rest:?}",
            era.name()
        );
    }
    let end = ended(s, &id).await;
    assert_eq!(end["outcome"], "cancelled", "{}: {end}", era.name());
    let got = log_of(s, &id, "request.cancel_received").expect("cancel line");
    let want = match era {
        Era::Stateless => "stream closed",
        Era::Session { .. } => "test cancel",
    };
    assert_eq!(got["reason"], want, "{}", era.name());
    let a = era.steps(s, &tag).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(era.steps(s, &tag).await, a, "{}: work went on", era.name());
}

async fn drop_stream(s: &TestServer, era: &Era) {
    let id = format!("drop-{}", era.name());
    let tag = id.clone();
    let steps = 12;
    let mut r = era
        .call(
            s,
            &id,
            "slow_count",
            json!({"steps": steps, "delay_ms": 25, "tag": tag}),
        )
        .await;
    let mut last_event_id = None;
    loop {
        let e = r.next_event(LIMIT).await.expect("progress before the drop");
        last_event_id = e.id.clone().or(last_event_id);
        if is_progress(&e.json()) {
            break;
        }
    }
    drop(r);
    let end = ended(s, &id).await;
    match era {
        Era::Stateless => {
            assert_eq!(end["outcome"], "cancelled", "2026: the drop is the cancel");
            assert!(era.steps(s, &tag).await < steps);
        }
        Era::Session { version, sid } => {
            assert_eq!(
                end["outcome"], "ok",
                "{version}: a drop is not a cancel: {end}"
            );
            assert_eq!(era.steps(s, &tag).await, steps);
            if *version == "2025-11-25" {
                // Resumable: the rest of the stream, the response included, from one GET.
                let last = last_event_id.expect("event ids on a resumable stream");
                let mut g = s.get(sid, Some(&last)).await;
                assert_eq!(g.status, 200);
                let rest = g.events_until_end(LIMIT).await;
                let answers: Vec<Value> = rest
                    .iter()
                    .map(|e| e.json())
                    .filter(|v| v["id"] == id.as_str())
                    .collect();
                assert_eq!(answers.len(), 1, "{rest:?}");
                assert_eq!(
                    answers[0]["result"]["content"][0]["text"],
                    format!("counted {steps}")
                );
            }
        }
    }
}

async fn job_tool(s: &TestServer, era: &Era) {
    let v = era.name();
    // The start/get faces: the same in every era.
    let start = era
        .structured(
            s,
            &format!("start-{v}"),
            "start_long_scan",
            json!({"steps": 4, "delay_ms": 20}),
        )
        .await;
    let job = start["job_id"].as_str().expect("job_id").to_string();
    let mut status = Value::Null;
    for n in 0..200 {
        status = era
            .structured(
                s,
                &format!("get-{v}-{n}"),
                "get_long_scan",
                json!({"job_id": job}),
            )
            .await;
        if status["status"] == "succeeded" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(status["status"], "succeeded", "{v}: {status}");

    // The run face, its stream dropped mid-job: found again by its idempotency key.
    let key = format!("run-{v}");
    let mut r = era
        .call(
            s,
            &format!("run-{v}"),
            "long_scan",
            json!({"steps": 40, "delay_ms": 25, "idempotency_key": key}),
        )
        .await;
    loop {
        let e = r.next_event(LIMIT).await.expect("job progress");
        if is_progress(&e.json()) {
            break;
        }
    }
    drop(r);
    ended(s, &format!("run-{v}")).await;
    let again = era
        .structured(
            s,
            &format!("again-{v}"),
            "start_long_scan",
            json!({"steps": 40, "delay_ms": 25, "idempotency_key": key}),
        )
        .await;
    assert_eq!(
        again["existing"], true,
        "{v}: the key found no job: {again}"
    );
    let id = again["job_id"].as_str().unwrap().to_string();
    let mut state = Value::Null;
    for n in 0..400 {
        state = era
            .structured(
                s,
                &format!("poll-{v}-{n}"),
                "get_long_scan",
                json!({"job_id": id}),
            )
            .await;
        if ["succeeded", "cancelled", "failed"].contains(&state["status"].as_str().unwrap_or("")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let want = match era {
        Era::Stateless => "cancelled",
        Era::Session { .. } => "succeeded",
    };
    assert_eq!(state["status"], want, "{v}: {state}");
}

#[tokio::test]
async fn the_same_scenario_under_each_revision() {
    let s = TestServer::start().await;
    for version in ERAS {
        let era = Era::open(&s, version).await;
        slow_tool(&s, &era).await;
        cancel(&s, &era).await;
        drop_stream(&s, &era).await;
        job_tool(&s, &era).await;
    }
    // Nothing the server wrote is unreadable to the audit, and nothing is left running (an
    // end line is written behind its answer: wait for every one, bounded).
    let count = |l: &[Value], event: &str| l.iter().filter(|x| x["event"] == event).count();
    s.log_until(|l| count(l, "request.start") == count(l, "request.end"))
        .await;
    let log = std::fs::read_to_string(&s.log_path).expect("the lifecycle log");
    let report = staunch_audit::audit_str(&log, &staunch_audit::AuditOptions::default());
    let report = serde_json::to_value(&report).expect("a report is JSON");
    assert_eq!(report["malformed"]["count"], 0, "{report}");
    assert_eq!(report["never_ended"], json!([]), "{report}");
    assert_eq!(report["orphaned"]["count"], 0, "{report}");
    assert_eq!(report["summary"]["clean"], true, "{report}");
}
