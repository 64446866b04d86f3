//! Two instances on one PostgreSQL database, in the test's process, as users run them behind a
//! load balancer: any instance answers for any job — polled and cancelled through the one that
//! does not run it, and a hundred starts with one key over both make one job. Skipped (with a
//! SKIPPED line) unless `STAUNCH_TEST_POSTGRES` is set.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_testkit::TestServer;
use staunch_testkit::http::tool_structured;
use staunch_testkit::jobs::get_until;
use staunch_testkit::pg::{drop_schema_async, fresh_schema, lease_owner};
use tokio::time::Instant;

/// Two instances (`a`, `b`) on a fresh schema, sharing one import table file, and one client's
/// session, which reaches both (B adopts it from the shared store, as behind a balancer).
struct Pair {
    a: TestServer,
    b: TestServer,
    sa: String,
    sb: String,
    url: String,
    schema: String,
    _dir: tempfile::TempDir,
}

impl Pair {
    async fn start(test: &str) -> Option<Self> {
        let (url, schema) = fresh_schema(test)?;
        let dir = tempfile::tempdir().unwrap();
        let import = dir.path().join("import.db");
        let instance = |name: &'static str| {
            TestServer::setup()
                .store(&url)
                .schema(&schema)
                .import_db(&import)
                .jobs(move |j| j.instance_name = Some(name.into()))
                .start()
        };
        let a = instance("a").await;
        let b = instance("b").await;
        let sa = a.initialize().await;
        let sb = sa.clone();
        Some(Self {
            a,
            b,
            sa,
            sb,
            url,
            schema,
            _dir: dir,
        })
    }

    /// Stops both and drops the schema.
    async fn end(self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        drop(self);
        drop_schema_async(&url, &schema).await;
    }
}

#[tokio::test]
async fn a_job_is_polled_and_cancelled_through_the_instance_that_does_not_run_it() {
    let Some(p) = Pair::start("cancel across instances").await else {
        return;
    };
    let mut latencies = Vec::new();
    for round in 0..5 {
        let s = tool_structured(
            &p.a,
            &p.sa,
            "start_import_rows",
            json!({"rows": 100000, "delay_ms": 30}),
        )
        .await;
        let job = s["job_id"].as_str().unwrap().to_string();
        get_until(&p.b, &p.sb, &job, "import_rows", |v| {
            v["progress"]["done"].as_i64().unwrap_or(0) >= 3
        })
        .await;
        // Poll and cancel through the instance that does not hold the lease.
        let runner = lease_owner(&p.url, &p.schema, &job);
        let (other, sid) = if runner == "a" {
            (&p.b, &p.sb)
        } else {
            (&p.a, &p.sa)
        };
        let t0 = Instant::now();
        let c = tool_structured(other, sid, "cancel_import_rows", json!({"job_id": job})).await;
        assert_eq!(c["status"], "cancelling", "{c}");
        let done = get_until(other, sid, &job, "import_rows", |v| {
            v["status"] == "cancelled"
        })
        .await;
        latencies.push(t0.elapsed());
        // The body stopped at its next unit: what it wrote is what it last reported, and
        // nothing is written afterwards.
        let counted = tool_structured(other, sid, "imported_rows", json!({"job_id": job})).await;
        assert_eq!(
            counted["rows"], done["progress"]["done"],
            "round {round}: {counted} vs {done}"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
        let later = tool_structured(other, sid, "imported_rows", json!({"job_id": job})).await;
        assert_eq!(
            later["rows"], counted["rows"],
            "rows written after the cancel"
        );
    }
    latencies.sort();
    eprintln!(
        "cross-instance cancel (cancel_x on one instance -> cancelled seen there, job on the other): \
         median {:?}, max {:?} over {} jobs",
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1],
        latencies.len()
    );
    p.end().await;
}

#[tokio::test]
async fn a_hundred_concurrent_starts_with_one_key_over_both_instances_make_one_job() {
    let Some(p) = Pair::start("100 starts, one key").await else {
        return;
    };
    let args = json!({"rows": 5, "delay_ms": 10, "idempotency_key": "order-42"});
    let mut calls = Vec::new();
    for i in 0..100 {
        let (s, sid) = if i % 2 == 0 {
            (&p.a, &p.sa)
        } else {
            (&p.b, &p.sb)
        };
        calls.push(tool_structured(s, sid, "start_import_rows", args.clone()));
    }
    let results = futures_join_all(calls).await;
    let mut ids: Vec<String> = results
        .iter()
        .map(|r| r["job_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 1, "one key, one job: {ids:?}");
    let job = &ids[0];
    get_until(&p.a, &p.sa, job, "import_rows", |v| {
        v["status"] == "succeeded"
    })
    .await;
    let counted = tool_structured(&p.b, &p.sb, "imported_rows", json!({"job_id": job})).await;
    assert_eq!(counted["rows"], 5, "{counted}");
    assert_eq!(counted["attempts"], 1, "{counted}");
    p.end().await;
}

/// Runs futures concurrently on this task (no extra dependency for join_all).
async fn futures_join_all<F: std::future::Future<Output = Value>>(futs: Vec<F>) -> Vec<Value> {
    let futs: Vec<_> = futs.into_iter().map(Box::pin).collect();
    // The futures borrow the pair, so they cannot be spawned; poll them together instead.
    let mut out = vec![Value::Null; futs.len()];
    let mut pending: Vec<_> = futs.into_iter().enumerate().collect();
    std::future::poll_fn(|cx| {
        pending.retain_mut(|(i, f)| match f.as_mut().poll(cx) {
            std::task::Poll::Ready(v) => {
                out[*i] = v;
                false
            }
            std::task::Poll::Pending => true,
        });
        if pending.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    out
}
