//! `staunch probe` against staunch itself (stdio and HTTP: everything passes), against the
//! official SDK peers (what each gets wrong is reported with its evidence), and against a
//! server that ignores cancellation (the probe must say the work goes on).

use crate::client_support;

use client_support::{BIN, Peers, check, probe, root, status};
use serde_json::Value;

fn statuses(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().into(),
                c["status"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn assert_all_pass(report: &Value, skipped: &[&str]) {
    for (id, st) in statuses(report) {
        let want = if skipped.contains(&id.as_str()) {
            "SKIP"
        } else {
            "PASS"
        };
        assert_eq!(st, want, "{id}: {:#}", check(report, &id));
    }
}

#[tokio::test]
async fn staunch_over_stdio_passes_every_check() {
    let (code, report) = probe(&["--", BIN, "serve", "--no-log", "--store", ":memory:"]).await;
    assert_eq!(code, 0);
    assert_all_pass(&report, &["tasks.cancel"]);
    for id in [
        "progress.token",
        "progress.no_token",
        "cancel.routed",
        "cancel.no_response",
        "responsiveness",
    ] {
        check(&report, id);
    }
    assert_eq!(report["transport"], "stdio");
    assert_eq!(
        check(&report, "cancel.routed")["data"]["progress_after_cancel"],
        0
    );
}

#[tokio::test]
async fn staunch_over_http_passes_every_check() {
    let server = client_support::staunch(&[]).await;
    let url = server.url();
    // The session era's checks (resumption, session guards); probe_2026.rs has the other era.
    let (code, report) = probe(&["--protocol", "2025-11-25", &url]).await;
    assert_eq!(code, 0);
    assert_all_pass(&report, &["tasks.cancel"]);
    let resume = check(&report, "http.resume");
    assert_eq!(resume["data"]["priming_event"], true);
    assert!(resume["data"]["replayed_events"].as_u64().unwrap() >= 1);
}

#[tokio::test]
async fn typescript_sdk_peer() {
    let Some(peers) = Peers::find("typescript_sdk_peer") else {
        return;
    };
    let argv = peers.ts_stdio();
    let mut args = vec!["--"];
    args.extend(argv.iter().map(String::as_str));
    let (code, report) = probe(&args).await;
    assert_eq!(
        code, 0,
        "stdio: TS stops cancelled work and does not answer it"
    );
    assert_all_pass(&report, &["tasks.cancel"]);

    let server = peers.ts_http().await;
    let url = server.url();
    let (code, report) = probe(&[&url]).await;
    for id in [
        "cancel.routed",
        "cancel.no_response",
        "responsiveness",
        "http.resume",
        "http.unknown_session",
        "http.missing_session",
    ] {
        assert_eq!(status(&report, id), "PASS", "{id}");
    }
    // The peer's event store replays a result that finished while the client was away.
    assert!(
        check(&report, "http.resume")["evidence"]
            .as_str()
            .unwrap()
            .contains("replayed")
    );
    // createMcpExpressApp validates Host, not Origin: a foreign Origin is served (MUST be 403).
    assert_eq!(status(&report, "http.bad_origin"), "FAIL");
    assert_eq!(check(&report, "http.bad_origin")["data"]["status"], 200);
    // Its experimental tasks go `cancelled` and stay so; the task reports no progress, so
    // whether the work stopped is not observable from outside: a warning, not a pass.
    assert_eq!(status(&report, "tasks.cancel"), "WARN");
    assert_eq!(
        check(&report, "tasks.cancel")["data"]["status_after"],
        "cancelled"
    );
    assert_eq!(code, 1);
}

#[tokio::test]
async fn python_sdk_peer() {
    let Some(peers) = Peers::find("python_sdk_peer") else {
        return;
    };
    for http in [false, true] {
        let server;
        let argv = peers.py_stdio();
        let mut args: Vec<&str> = Vec::new();
        let url;
        if http {
            server = peers.py_http().await;
            url = server.url();
            args.push(&url);
        } else {
            args.push("--");
            args.extend(argv.iter().map(String::as_str));
        }
        let (code, report) = probe(&args).await;
        assert_eq!(code, 1, "http={http}");
        // Work stops (anyio cancels the handler's scope) ...
        assert_eq!(status(&report, "cancel.routed"), "PASS", "http={http}");
        // ... but the cancelled request is answered with `code: 0` (python-sdk#2493).
        let c = check(&report, "cancel.no_response");
        assert_eq!(c["status"], "FAIL", "http={http}");
        assert!(
            c["evidence"].as_str().unwrap().contains("\"code\":0"),
            "{c:#}"
        );
        assert_eq!(c["data"]["late_response"]["error"]["code"], 0);
        if http {
            // No event store: no ids, nothing to resume from; a dropped stream loses the result.
            let r = check(&report, "http.resume");
            assert_eq!(r["status"], "FAIL");
            assert!(r["evidence"].as_str().unwrap().contains("lost"), "{r:#}");
            assert_eq!(status(&report, "http.bad_origin"), "PASS");
        }
    }
}

#[tokio::test]
async fn a_server_that_ignores_cancellation_is_caught() {
    let fixture = root().join("tests-external/ignores_cancel_server.py");
    let python = match std::process::Command::new("python3")
        .arg("--version")
        .output()
    {
        Ok(o) if o.status.success() => "python3",
        _ => {
            if std::env::var("STAUNCH_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
                panic!("python3 is required");
            }
            eprintln!("SKIPPED: a_server_that_ignores_cancellation_is_caught: no python3");
            return;
        }
    };
    let f = fixture.display().to_string();
    let (code, report) = probe(&["--", python, &f]).await;
    assert_eq!(code, 1);
    let routed = check(&report, "cancel.routed");
    assert_eq!(routed["status"], "FAIL", "{routed:#}");
    assert!(routed["evidence"].as_str().unwrap().contains("goes on"));
    assert!(routed["data"]["progress_after_cancel"].as_u64().unwrap() >= 5);
    // Its one-minute call does not answer within the window, so that part passes, and each
    // call has its own thread, so the loop stays responsive.
    assert_eq!(status(&report, "cancel.no_response"), "PASS");
    assert_eq!(status(&report, "responsiveness"), "PASS");

    // The same server running tools on its message loop: ping waits behind the tool.
    let (code, report) = probe(&["--", python, &f, "--inline"]).await;
    assert_eq!(code, 1);
    let r = check(&report, "responsiveness");
    assert_eq!(r["status"], "FAIL", "{r:#}");
    assert!(r["evidence"].as_str().unwrap().contains("blocked"));
}

#[tokio::test]
async fn usage_and_connection_errors_exit_2() {
    let out = tokio::process::Command::new(BIN)
        .args(["probe"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = tokio::process::Command::new(BIN)
        .args(["probe", "http://127.0.0.1:1/mcp"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = tokio::process::Command::new(BIN)
        .args([
            "probe",
            "--tool",
            "no_such_tool",
            "--",
            BIN,
            "serve",
            "--no-log",
            "--store",
            ":memory:",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no tool"));
}

/// An upstream written with the Python SDK that ignores cancels (`stubborn_count`): directly
/// the probe fails it (its progress goes on); behind `staunch proxy` the client sees nothing
/// late, yet the probe still says the work went on (read from the upstream's
/// `slow_count_status`), and `staunch audit` of the proxy's log lists the orphaned work.
/// Without a status tool, the probe learns it from the proxy itself: `staunch proxy` tells a
/// 2025 session (a warning from logger `staunch.proxy`) when a cancelled call's upstream went
/// on, so `cancel.routed` is a WARN with the proxy's figures, not a PASS.
#[tokio::test]
async fn without_a_status_tool_the_proxy_tells_the_probe_its_upstream_went_on() {
    let Some(peers) = Peers::find("without_a_status_tool_the_proxy_tells_the_probe") else {
        return;
    };
    // A 2025 session: the stateless era has no session to tell.
    let mut proxied = vec![
        "--protocol",
        "2025-11-25",
        "--tool",
        "stubborn_count",
        "--status-tool",
        "no_such_status_tool",
        "--",
        BIN,
        "proxy",
        "--store",
        ":memory:",
        "--no-log",
        "--",
    ];
    let upstream = peers.py_stdio();
    proxied.extend(upstream.iter().map(String::as_str));
    let (code, report) = probe(&proxied).await;
    let routed = check(&report, "cancel.routed");
    assert_eq!(routed["status"], "WARN", "{routed:#}");
    assert_eq!(
        routed["data"]["steps_after_cancel"],
        Value::Null,
        "{routed:#}"
    );
    let first = &routed["data"]["proxy_reports"][0];
    assert_eq!(first["upstream"], "upstream", "{routed:#}");
    assert_eq!(first["tool"], "stubborn_count", "{routed:#}");
    assert!(first["afterCancelMs"].as_u64().is_some(), "{routed:#}");
    assert!(
        routed["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("the proxy says the work went on upstream")),
        "{routed:#}"
    );
    assert_eq!(code, 0, "a WARN is not a failure");
}

/// The same over HTTP: the proxy's report belongs to no request any more, so it travels on the
/// session's standalone stream, which the probe opens.
#[tokio::test]
async fn over_http_the_proxy_tells_the_probe_on_the_sessions_own_stream() {
    let Some(peers) = Peers::find("over_http_the_proxy_tells_the_probe") else {
        return;
    };
    let mut extra = vec!["--"];
    let upstream = peers.py_stdio();
    extra.extend(upstream.iter().map(String::as_str));
    let proxy = crate::common::http::HttpServer::launch("proxy", Some(":memory:"), &extra).await;
    let url = proxy.url();
    let (code, report) = probe(&[
        "--protocol",
        "2025-11-25",
        "--tool",
        "stubborn_count",
        "--status-tool",
        "no_such_status_tool",
        &url,
    ])
    .await;
    let routed = check(&report, "cancel.routed");
    assert_eq!(routed["status"], "WARN", "{routed:#}");
    let first = &routed["data"]["proxy_reports"][0];
    assert_eq!(first["upstream"], "upstream", "{routed:#}");
    assert_eq!(first["tool"], "stubborn_count", "{routed:#}");
    assert!(first["afterCancelMs"].as_u64().is_some(), "{routed:#}");
    assert_eq!(code, 0, "a WARN is not a failure");
}

#[tokio::test]
async fn an_sdk_upstream_that_ignores_cancels_is_reported_through_the_proxy() {
    let Some(peers) = Peers::find("an_sdk_upstream_that_ignores_cancels_is_reported") else {
        return;
    };
    let upstream = peers.py_stdio();
    let mut direct = vec!["--tool", "stubborn_count", "--"];
    direct.extend(upstream.iter().map(String::as_str));
    let (_, report) = probe(&direct).await;
    let routed = check(&report, "cancel.routed");
    assert_eq!(routed["status"], "FAIL", "{routed:#}");

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("proxy.jsonl");
    let log_arg = log.display().to_string();
    let mut proxied = vec![
        "--tool",
        "stubborn_count",
        "--",
        BIN,
        "proxy",
        "--store",
        ":memory:",
        "--log-file",
        &log_arg,
        "--",
    ];
    proxied.extend(upstream.iter().map(String::as_str));
    let (code, report) = probe(&proxied).await;
    let routed = check(&report, "cancel.routed");
    assert_eq!(routed["status"], "WARN", "{routed:#}");
    assert_eq!(routed["data"]["progress_after_cancel"], 0, "{routed:#}");
    assert!(
        routed["data"]["steps_after_cancel"].as_u64() > Some(2),
        "{routed:#}"
    );
    assert_eq!(status(&report, "cancel.no_response"), "PASS");
    assert_eq!(code, 0, "a WARN is not a failure");

    let audit = tokio::process::Command::new(BIN)
        .args(["audit", "--json", &log_arg])
        .output()
        .await
        .unwrap();
    let audit: Value = serde_json::from_slice(&audit.stdout).expect("audit --json");
    assert!(
        audit["orphaned_upstream"]["count"].as_u64() >= Some(1),
        "{audit:#}"
    );
}
