//! `staunch serve --http … --live-page /staunch`: the page's access rules over plain HTTP, and
//! the whole page end to end in Debian's headless Chromium (driven by playwright-core from
//! `scripts/setup-tools`): a job's progress bar moves, its Cancel button stops it, the row ends
//! `cancelled`, and a screenshot is saved to `target/artifacts/live-page.png`. The page behind
//! `--auth` is tested in `live_page_auth.rs`.

use crate::common;

use std::time::Duration;

use common::http::{HttpServer, call, tool_structured};
use common::page::{browser, raw};
use serde_json::{Value, json};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(20);

async fn wait_status(s: &HttpServer, sid: &str, job: &str, want: &str) {
    let end = Instant::now() + T;
    loop {
        let v = tool_structured(s, sid, "get_import_rows", json!({"job_id": job})).await;
        if v["status"] == want {
            return;
        }
        assert!(Instant::now() < end, "job never reached {want}: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn token_of(page: &str) -> String {
    let at = page
        .find("data-token=\"")
        .expect("the page carries its token")
        + 12;
    page[at..].split('"').next().unwrap().to_string()
}

#[tokio::test]
async fn the_page_refuses_foreign_hosts_origins_and_tokenless_cancels() {
    let s = HttpServer::start(&["--live-page", "/staunch", "--job-heartbeat-ms", "100"]).await;
    let sid = s.initialize().await;
    let job = tool_structured(
        &s,
        &sid,
        "start_import_rows",
        json!({"rows": 400, "delay_ms": 25}),
    )
    .await["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let host = format!("127.0.0.1:{}", s.port);
    let origin = format!("http://{host}");
    let cancel_path = format!("/staunch/jobs/{job}/cancel");

    // The page, with the running job in it.
    let (code, head, page) = raw(s.port, "GET", "/staunch", &[("Host", &host)]).await;
    assert_eq!(code, 200, "{head}");
    assert!(
        head.to_ascii_lowercase().contains("x-frame-options: deny"),
        "{head}"
    );
    assert!(page.contains(&format!("data-job-id=\"{job}\"")), "{page}");
    let token = token_of(&page);
    assert_eq!(token.len(), 32);

    // DNS rebinding: another Host is refused, for the page and its events.
    assert_eq!(
        raw(s.port, "GET", "/staunch", &[("Host", "evil.example")])
            .await
            .0,
        403
    );
    assert_eq!(
        raw(
            s.port,
            "GET",
            "/staunch/events",
            &[("Host", "evil.example")]
        )
        .await
        .0,
        403
    );
    // Regression (security review, second pass, finding 8): a second Host header got past the
    // check, which read only the first; the page now checks them as the endpoint does.
    assert_eq!(
        raw(
            s.port,
            "GET",
            "/staunch",
            &[("Host", &host), ("Host", "evil.example")]
        )
        .await
        .0,
        403
    );
    // The event stream sends snapshots.
    let (code, _, events) = raw(s.port, "GET", "/staunch/events", &[("Host", &host)]).await;
    assert_eq!(code, 200);
    assert!(
        events.contains("data: {") && events.contains(&job),
        "{events}"
    );

    // Cancels: no Origin, a foreign Origin, no token, a made-up token — all refused, and the
    // job runs on.
    for headers in [
        vec![
            ("Host", host.as_str()),
            ("x-staunch-page-token", token.as_str()),
        ],
        vec![
            ("Host", host.as_str()),
            ("Origin", "http://evil.example"),
            ("x-staunch-page-token", token.as_str()),
        ],
        vec![("Host", host.as_str()), ("Origin", origin.as_str())],
        vec![
            ("Host", host.as_str()),
            ("Origin", origin.as_str()),
            ("x-staunch-page-token", "0123456789abcdef0123456789abcdef"),
        ],
    ] {
        let (code, _, body) = raw(s.port, "POST", &cancel_path, &headers).await;
        assert_eq!(code, 403, "{headers:?}: {body}");
    }
    assert_eq!(
        tool_structured(&s, &sid, "get_import_rows", json!({"job_id": job})).await["status"],
        "running"
    );
    // A GET cannot cancel.
    assert_eq!(
        raw(s.port, "GET", &cancel_path, &[("Host", &host)]).await.0,
        405
    );

    // Same origin with the page's token: cancelled through the store, the worker stops.
    let good = [
        ("Host", host.as_str()),
        ("Origin", origin.as_str()),
        ("x-staunch-page-token", token.as_str()),
    ];
    let (code, _, body) = raw(s.port, "POST", &cancel_path, &good).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("cancelling"), "{body}");
    wait_status(&s, &sid, &job, "cancelled").await;
    let (code, _, body) = raw(s.port, "POST", "/staunch/jobs/nope/cancel", &good).await;
    assert_eq!(code, 404, "{body}");
    // The MCP endpoint still answers beside the page's routes (a GET without
    // `Accept: text/event-stream` is its own 406, not a 404).
    assert_eq!(raw(s.port, "GET", "/mcp", &[("Host", &host)]).await.0, 406);
}

#[tokio::test]
async fn the_page_is_refused_on_a_public_address() {
    let out = tokio::process::Command::new(common::BIN)
        .args([
            "serve",
            "--http",
            "0.0.0.0:0",
            "--store",
            ":memory:",
            "--no-log",
            "--live-page",
            "/staunch",
        ])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("loopback"), "{err}");
}

#[tokio::test]
async fn in_chromium_the_bar_moves_and_cancel_ends_the_job() {
    let Some((node, script, chromium)) = browser() else {
        return;
    };
    let s = HttpServer::start(&[
        "--live-page",
        "/staunch",
        "--instance-name",
        "demo-a",
        "--job-heartbeat-ms",
        "100",
    ])
    .await;
    let sid = s.initialize().await;
    // Something in flight for the requests table, and a finished job for contrast.
    let mut counting = s
        .post(
            Some(&sid),
            &call(
                json!("count-1"),
                "slow_count",
                json!({"steps": 600, "delay_ms": 100}),
                Some(json!("p")),
            ),
        )
        .await;
    counting.next_event(T).await.expect("priming");
    let quick = tool_structured(
        &s,
        &sid,
        "start_long_scan",
        json!({"steps": 3, "delay_ms": 5}),
    )
    .await["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let end = Instant::now() + T;
    while tool_structured(&s, &sid, "get_long_scan", json!({"job_id": quick})).await["status"]
        != "succeeded"
    {
        assert!(Instant::now() < end);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let job = tool_structured(
        &s,
        &sid,
        "start_import_rows",
        json!({"rows": 300, "delay_ms": 60}),
    )
    .await["job_id"]
        .as_str()
        .unwrap()
        .to_string();

    let artifacts = common::external::root().join("target/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("live-page.png");
    let _ = std::fs::remove_file(&shot);
    let url = format!("http://127.0.0.1:{}/staunch", s.port);
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(&node)
            .arg(&script)
            .args([url.as_str(), job.as_str()])
            .arg(&shot)
            .env("CHROMIUM", &chromium)
            .output(),
    )
    .await
    .expect("the browser run finishes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "browser run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    assert!(seen["second"].as_f64() > seen["first"].as_f64(), "{seen}");
    assert_eq!(seen["state"], "cancelled", "{seen}");
    assert_eq!(seen["live"], "live", "{seen}");
    assert!(
        seen["status"]
            .as_str()
            .unwrap()
            .contains("Cancel requested"),
        "{seen}"
    );
    assert!(seen["requests"].as_u64().unwrap() >= 1, "{seen}");

    // The server agrees: the job was cancelled and stopped writing rows.
    wait_status(&s, &sid, &job, "cancelled").await;
    let rows = tool_structured(&s, &sid, "imported_rows", json!({"job_id": job})).await["rows"]
        .as_i64()
        .unwrap();
    assert!(rows > 0 && rows < 300, "{rows}");
    let png = std::fs::read(&shot).expect("the screenshot was saved");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    drop(counting);
}

#[tokio::test]
async fn the_page_shows_requests_in_flight_and_their_cancel_state() {
    let s = HttpServer::start(&["--live-page", "/staunch", "--cancel-grace-ms", "5000"]).await;
    let sid = s.initialize().await;
    let host = format!("127.0.0.1:{}", s.port);
    // A count that ignores its cancel: after the cancel it runs on until the grace period.
    let mut stubborn = s
        .post(
            Some(&sid),
            &call(
                json!("st-1"),
                "stubborn_count",
                json!({"steps": 400, "delay_ms": 50}),
                Some(json!("p")),
            ),
        )
        .await;
    stubborn.next_event(T).await.expect("priming");
    let (_, _, page) = raw(s.port, "GET", "/staunch", &[("Host", &host)]).await;
    let row = page
        .split("<tr")
        .find(|r| r.contains("data-request-id=\"&quot;st-1&quot;\""))
        .unwrap_or_else(|| panic!("the request is not listed: {page}"));
    assert!(
        // The page names the session as the logs do: by its hash (the id is a credential).
        row.contains("stubborn_count")
            && row.contains(&staunch_server::session_hash(&sid))
            && !row.contains(&sid),
        "{row}"
    );
    assert!(!row.contains("cancelled"), "{row}");

    let r = s
        .post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": "st-1", "reason": "operator test"}}),
        )
        .await;
    assert_eq!(r.status, 202);
    let (_, _, page) = raw(s.port, "GET", "/staunch", &[("Host", &host)]).await;
    let row = page
        .split("<tr")
        .find(|r| r.contains("data-request-id=\"&quot;st-1&quot;\""))
        .unwrap_or_else(|| panic!("the cancelled request is not listed: {page}"));
    // Cancelled, with the client's reason, and not (yet) orphaned: it is within its grace.
    assert!(row.starts_with(" class=\"cancelled\""), "{row}");
    assert!(row.contains("operator test"), "{row}");
    assert!(!row.contains("ORPHANED"), "{row}");
    drop(stubborn);
}
