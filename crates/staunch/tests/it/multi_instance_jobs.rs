//! Two `staunch serve --http` instances on one PostgreSQL database, as users run them behind a
//! load balancer: the survivor's reaper ends the job of an instance killed while running it,
//! and the live page of either shows and cancels the other's jobs. Skipped (with a SKIPPED
//! line) unless `STAUNCH_TEST_POSTGRES` is set. Polling and cancelling across two live
//! instances, and one key's starts over both, are tested in-process
//! (`crates/staunch-jobs/tests/it/multi_instance.rs`).

use crate::common;

use common::http::{HttpServer, tool_structured};
use serde_json::json;
use staunch_testkit::jobs::get_until;
use tokio::time::Instant;

/// Two instances (`a`, `b`) on a fresh schema, sharing one import table file.
struct Pair {
    a: HttpServer,
    b: HttpServer,
    sa: String,
    sb: String,
    url: String,
    schema: String,
    _dir: tempfile::TempDir,
}

impl Pair {
    async fn start(test: &str, extra: &[&str]) -> Option<Self> {
        let (url, schema) = common::pg::fresh_schema(test)?;
        let dir = tempfile::tempdir().unwrap();
        let import = dir.path().join("import.db").display().to_string();
        let flags = |name: &'static str| {
            let mut f = vec![
                "--store-schema",
                schema.as_str(),
                "--instance-name",
                name,
                "--import-db",
                import.as_str(),
            ];
            f.extend_from_slice(extra);
            f.into_iter().map(String::from).collect::<Vec<_>>()
        };
        let fa = flags("a");
        let fb = flags("b");
        let a = HttpServer::start_on(
            Some(&url),
            &fa.iter().map(String::as_str).collect::<Vec<_>>(),
        )
        .await;
        let b = HttpServer::start_on(
            Some(&url),
            &fb.iter().map(String::as_str).collect::<Vec<_>>(),
        )
        .await;
        // One client behind a load balancer: its session reaches both instances (B adopts it
        // from the shared store). Work belongs to the session that created it, so a second
        // client would not see it at all.
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
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = self.a.child.start_kill();
        let _ = self.b.child.start_kill();
        common::pg::drop_schema(&self.url, &self.schema);
    }
}

/// The instance name holding a job's lease.
fn lease_owner(p: &Pair, job: &str) -> String {
    staunch_testkit::pg::lease_owner(&p.url, &p.schema, job)
}

#[cfg(unix)]
#[tokio::test]
async fn sigkill_the_instance_running_a_job_and_the_other_reaper_ends_it_within_the_lease() {
    let flags = [
        "--job-lease-ms",
        "1500",
        "--job-reap-ms",
        "300",
        "--job-heartbeat-ms",
        "300",
    ];
    let Some(mut p) = Pair::start("SIGKILL the runner, the other reaps", &flags).await else {
        return;
    };
    let imp = tool_structured(
        &p.a,
        &p.sa,
        "start_import_rows",
        json!({"rows": 100000, "delay_ms": 20}),
    )
    .await;
    let imp = imp["job_id"].as_str().unwrap().to_string();
    let scan = tool_structured(
        &p.a,
        &p.sa,
        "start_long_scan",
        json!({"steps": 30, "delay_ms": 40}),
    )
    .await;
    let scan = scan["job_id"].as_str().unwrap().to_string();
    get_until(&p.a, &p.sa, &imp, "import_rows", |v| {
        v["status"] == "running" && v["progress"]["done"].as_i64().unwrap_or(0) >= 2
    })
    .await;
    get_until(&p.a, &p.sa, &scan, "long_scan", |v| {
        v["status"] == "running"
    })
    .await;
    // Either instance may have claimed the import (a wake-up reaches both): kill its runner.
    let runner = lease_owner(&p, &imp);
    let scan_runner = lease_owner(&p, &scan);
    assert!(runner == "a" || runner == "b", "owner {runner:?}");
    let (victim, survivor, sid) = if runner == "a" {
        (&mut p.a, &p.b, p.sb.clone())
    } else {
        (&mut p.b, &p.a, p.sa.clone())
    };
    victim.child.start_kill().unwrap();
    victim.child.wait().await.unwrap();
    let killed = Instant::now();
    // Side-effecting: never re-run; the survivor's reaper ends it as failed(lease_lost).
    let v = get_until(survivor, &sid, &imp, "import_rows", |v| {
        v["status"] != "running" && v["status"] != "queued"
    })
    .await;
    eprintln!(
        "import_rows on {runner} resolved by the other instance {:?} after the SIGKILL (lease 1.5 s)",
        killed.elapsed()
    );
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["error"]["code"], "lease_lost", "{v}");
    let counted = tool_structured(survivor, &sid, "imported_rows", json!({"job_id": imp})).await;
    assert_eq!(
        counted["attempts"], 1,
        "a side-effecting job ran twice: {counted}"
    );
    // Retry-safe: if it ran on the killed instance it is re-queued and finished by the survivor.
    let s = get_until(survivor, &sid, &scan, "long_scan", |v| {
        v["status"] == "succeeded" || v["status"] == "failed"
    })
    .await;
    assert_eq!(s["status"], "succeeded", "{s}");
    if scan_runner == runner {
        assert_eq!(s["attempt"], 2, "re-run once by the survivor: {s}");
    }
}
/// The live page of either instance shows every instance's jobs with the instance that runs
/// each, and its Cancel reaches the job wherever it runs.
#[tokio::test]
async fn the_live_page_of_one_instance_shows_and_cancels_a_job_running_on_the_other() {
    let Some(p) = Pair::start(
        "live page across instances",
        &["--live-page", "/staunch", "--job-heartbeat-ms", "100"],
    )
    .await
    else {
        return;
    };
    let job = tool_structured(
        &p.a,
        &p.sa,
        "start_import_rows",
        json!({"rows": 400, "delay_ms": 25}),
    )
    .await["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    get_until(&p.a, &p.sa, &job, "import_rows", |v| {
        v["status"] == "running"
    })
    .await;
    let runner = lease_owner(&p, &job);
    let other = if runner == "a" { &p.b } else { &p.a };
    let host = format!("127.0.0.1:{}", other.port);
    let (code, head, page) =
        common::page::raw(other.port, "GET", "/staunch", &[("Host", &host)]).await;
    assert_eq!(code, 200, "{head}");
    let row_at = page
        .find(&format!("data-job-id=\"{job}\""))
        .unwrap_or_else(|| panic!("the job is on the other instance's page: {page}"));
    let row = &page[row_at
        ..page[row_at..]
            .find("</tr>")
            .map_or(page.len(), |e| row_at + e)];
    assert!(
        row.contains(&format!("<td>{runner}</td>")),
        "the row names the instance that runs it ({runner}): {row}"
    );
    let at = page.find("data-token=\"").expect("a token") + 12;
    let token = page[at..].split('"').next().unwrap().to_string();
    let origin = format!("http://{host}");
    let (code, _, body) = common::page::raw(
        other.port,
        "POST",
        &format!("/staunch/jobs/{job}/cancel"),
        &[
            ("Host", host.as_str()),
            ("Origin", origin.as_str()),
            ("x-staunch-page-token", token.as_str()),
        ],
    )
    .await;
    assert_eq!(code, 200, "{body}");
    get_until(&p.a, &p.sa, &job, "import_rows", |v| {
        v["status"] == "cancelled"
    })
    .await;
}
