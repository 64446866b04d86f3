//! `staunch proxy` end to end: real processes over real transports — the proxy serving HTTP
//! (or stdio) in front of an upstream that is `staunch serve` (whose own lifecycle log shows
//! what reached it) or an official SDK peer.

use crate::client_support;
use crate::common;

use std::time::Duration;

use common::http::{HttpServer, call};
use common::{BIN, alive};
use serde_json::{Value, json};

fn read_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Lines of `event` in `session`.
fn events<'a>(lines: &'a [Value], event: &str, session: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["event"] == event && l["session"] == session)
        .collect()
}

async fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + limit;
    while !ok() {
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn cancelled(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
           "params": {"requestId": id, "reason": "test gives up"}})
}

/// Two downstream sessions share one upstream process and both use request id 1; one
/// cancels. Only its upstream request is cancelled (the upstream's own log says which id);
/// the other's result arrives.
#[tokio::test]
async fn two_sessions_with_the_same_id_cancel_only_their_own_upstream_request() {
    let up_dir = tempfile::tempdir().unwrap();
    let up_log = up_dir.path().join("upstream.jsonl");
    let up_log_arg = up_log.display().to_string();
    let proxy = HttpServer::launch(
        "proxy",
        None,
        &[
            "--tool",
            "slow_count=streaming",
            "--",
            BIN,
            "serve",
            "--store",
            ":memory:",
            "--log-file",
            &up_log_arg,
        ],
    )
    .await;
    let a = proxy.initialize().await;
    let b = proxy.initialize().await;
    assert_ne!(a, b);
    let mut stream_a = proxy
        .post(
            Some(&a),
            &call(
                json!(1),
                "slow_count",
                json!({"steps": 200, "delay_ms": 50, "tag": "A"}),
                Some(json!("pa")),
            ),
        )
        .await;
    let stream_b = proxy
        .post(
            Some(&b),
            &call(
                json!(1),
                "slow_count",
                json!({"steps": 20, "delay_ms": 50, "tag": "B"}),
                Some(json!("pb")),
            ),
        )
        .await;
    // A is running upstream (its progress came back through the proxy) before it cancels.
    let first = stream_a
        .next_message(Duration::from_secs(20))
        .await
        .expect("A's progress");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    assert_eq!(first["params"]["progressToken"], "pa");
    let ack = proxy.post(Some(&a), &cancelled(json!(1))).await;
    assert_eq!(ack.status.as_u16(), 202);

    // B's answer arrives, complete.
    let (_, answer_b) = stream_b.answer(Duration::from_secs(30)).await;
    assert_eq!(answer_b["id"], 1);
    assert_eq!(
        answer_b["result"]["content"][0]["text"], "counted 20",
        "{answer_b}"
    );
    // A's stream carries no answer.
    let rest = stream_a.events_until_end(Duration::from_secs(5)).await;
    assert!(
        rest.iter()
            .all(|e| !e.data.contains("\"result\"") && !e.data.contains("\"error\"")),
        "a cancelled request was answered: {rest:?}"
    );

    // The proxy's log maps each downstream request to its own upstream id.
    let (ha, hb) = (
        staunch_server::session_hash(&a),
        staunch_server::session_hash(&b),
    );
    let mut proxy_lines = Vec::new();
    wait_for(
        "the proxy's upstream lines",
        Duration::from_secs(10),
        || {
            proxy_lines = proxy.log_lines();
            !events(&proxy_lines, "upstream.cancel_sent", &ha).is_empty()
                && events(&proxy_lines, "upstream.sent", &hb).len() == 1
        },
    )
    .await;
    let sent_a = events(&proxy_lines, "upstream.sent", &ha);
    let sent_b = events(&proxy_lines, "upstream.sent", &hb);
    assert_eq!((sent_a.len(), sent_b.len()), (1, 1));
    assert_eq!(
        (
            sent_a[0]["request_id"].clone(),
            sent_b[0]["request_id"].clone()
        ),
        (json!(1), json!(1))
    );
    let (ua, ub) = (
        sent_a[0]["upstream_id"].clone(),
        sent_b[0]["upstream_id"].clone(),
    );
    assert_ne!(ua, ub, "two calls share an upstream id");
    let cancels_a = events(&proxy_lines, "upstream.cancel_sent", &ha);
    assert_eq!(cancels_a.len(), 1);
    assert_eq!(cancels_a[0]["upstream_id"], ua);
    assert!(events(&proxy_lines, "upstream.cancel_sent", &hb).is_empty());

    // The upstream's own log: exactly A's upstream request was cancelled; B's ended ok.
    let mut up_lines = Vec::new();
    wait_for("the upstream's end lines", Duration::from_secs(10), || {
        up_lines = read_lines(&up_log);
        let ended = |id: &Value| {
            up_lines
                .iter()
                .any(|l| l["event"] == "request.end" && &l["request_id"] == id)
        };
        ended(&ua) && ended(&ub)
    })
    .await;
    let of = |id: &Value, event: &str| -> Vec<Value> {
        up_lines
            .iter()
            .filter(|l| &l["request_id"] == id && l["event"] == event)
            .cloned()
            .collect()
    };
    assert_eq!(of(&ua, "request.cancel_received").len(), 1, "{up_lines:#?}");
    assert_eq!(of(&ua, "request.end")[0]["outcome"], "cancelled");
    assert!(of(&ub, "request.cancel_received").is_empty());
    assert_eq!(of(&ub, "request.end")[0]["outcome"], "ok");
    // Nothing else was cancelled upstream.
    let all_cancels = up_lines
        .iter()
        .filter(|l| l["event"] == "request.cancel_received")
        .count();
    assert_eq!(all_cancels, 1);
}

use client_support::{Peers, check, probe, status};

fn argv_refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The Python SDK 1.30 peer answers a cancelled request (`code: 0`, python-sdk#2493) and, over
/// HTTP, loses a result whose stream dropped (no event store). Behind the proxy both checks
/// pass: the late answer is dropped (and logged), the proxy's event store replays the result.
/// The late answer is an error ("Request cancelled"): the peer stopped, and said so late. It is
/// logged and counted as such, but it is not work that went on, so neither `staunch audit` nor
/// the probe (which hears what the proxy tells the session) reports orphaned work.
#[tokio::test]
async fn python_peer_fails_directly_and_passes_behind_the_proxy() {
    let Some(peers) = Peers::find("python_peer_fails_directly_and_passes_behind_the_proxy") else {
        return;
    };
    let py = peers.py_stdio();
    // stdio, directly.
    let mut direct = vec!["--"];
    direct.extend(argv_refs(&py));
    let (_, report) = probe(&direct).await;
    assert_eq!(status(&report, "cancel.no_response"), "FAIL");
    // stdio, behind the proxy (stdio downstream too).
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("proxy.jsonl").display().to_string();
    let mut via = vec![
        "--",
        BIN,
        "proxy",
        "--store",
        ":memory:",
        "--log-file",
        &log,
        "--",
    ];
    via.extend(argv_refs(&py));
    let (code, report) = probe(&via).await;
    for id in [
        "cancel.routed",
        "cancel.no_response",
        "responsiveness",
        "progress.token",
    ] {
        assert_eq!(
            status(&report, id),
            "PASS",
            "{id}: {:#}",
            check(&report, id)
        );
    }
    assert_eq!(code, 0, "{report:#}");
    // The peer's answer to the cancelled request reached the proxy and stopped there.
    let lines = read_lines(std::path::Path::new(&log));
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "upstream.late" && l["late"] == "error"),
        "no upstream.late line for the error answer: {lines:#?}"
    );
    // `staunch audit` of the proxy's log: the upstream stopped, so no orphaned upstream work.
    let audit = std::process::Command::new(BIN)
        .args(["audit", "--json", &log])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(report["orphaned_upstream"]["count"], 0, "{report:#}");

    // HTTP, directly: a dropped stream loses the result.
    let peer = peers.py_http().await;
    let (_, report) = probe(&[&peer.url()]).await;
    assert_eq!(status(&report, "http.resume"), "FAIL");
    assert_eq!(status(&report, "cancel.no_response"), "FAIL");
    // HTTP, behind the proxy (2025 sessions downstream, the peer's URL upstream).
    let up = peer.url();
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let proxy =
        HttpServer::launch("proxy", None, &["--upstream", &up, "--metrics", &metrics]).await;
    let (_, report) = probe(&["--protocol", "2025-11-25", &proxy.url()]).await;
    for id in [
        "http.resume",
        "cancel.no_response",
        "cancel.routed",
        "http.bad_origin",
    ] {
        assert_eq!(
            status(&report, id),
            "PASS",
            "{id}: {:#}",
            check(&report, id)
        );
    }
    // The late answer is counted per upstream and tool, where operators look.
    let scrape = common::http_get(&metrics, "/metrics").await;
    assert!(
        scrape
            .lines()
            .any(|l| l.starts_with("staunch_upstream_late_total{")
                && l.contains("upstream=\"upstream\"")
                && l.contains("tool=\"slow_count\"")
                && l.contains("kind=\"error\"")),
        "{scrape}"
    );
}

/// The TypeScript SDK 1.32 peer serves a foreign Origin (createMcpExpressApp checks only
/// Host); behind the proxy the Origin is refused with 403 before anything reaches it.
#[tokio::test]
async fn typescript_peer_serves_a_foreign_origin_directly_but_not_behind_the_proxy() {
    let Some(peers) = Peers::find("typescript_peer_serves_a_foreign_origin") else {
        return;
    };
    let peer = peers.ts_http().await;
    let (_, report) = probe(&[&peer.url()]).await;
    assert_eq!(status(&report, "http.bad_origin"), "FAIL");
    let up = peer.url();
    let proxy = HttpServer::launch("proxy", None, &["--upstream", &up]).await;
    let (_, report) = probe(&["--protocol", "2025-11-25", &proxy.url()]).await;
    for id in [
        "http.bad_origin",
        "http.resume",
        "cancel.routed",
        "cancel.no_response",
    ] {
        assert_eq!(
            status(&report, id),
            "PASS",
            "{id}: {:#}",
            check(&report, id)
        );
    }
}

/// Era bridge: a 2026-07-28 client (Python `mcp` 2.x, stateless) → the proxy → the TypeScript
/// SDK 1.32 server over stdio (2025 only). Progress passes; closing the stream (the 2026
/// cancel) becomes a `notifications/cancelled` for the right upstream id, and the work stops.
#[tokio::test]
async fn a_2026_client_closing_its_stream_cancels_the_2025_upstream_request() {
    let Some(peers) = Peers::find("era_bridge") else {
        return;
    };
    let Some(py2) = common::external::python2() else {
        return;
    };
    let ts = peers.ts_stdio();
    let mut extra = vec!["--tool", "slow_count=streaming", "--"];
    extra.extend(argv_refs(&ts));
    let proxy = HttpServer::launch("proxy", None, &extra).await;
    let v = run_py2(&py2, &proxy.url(), &["--no-greet", "--tag", "bridge"]).await;
    assert_eq!(v["protocolVersion"], "2026-07-28", "{v}");
    assert_eq!(v["progress"], json!([1, 2, 3, 4, 5]), "{v}");
    assert_eq!(v["slow_result"], "counted 5");
    let c = &v["cancel"];
    assert!(c["progress_before"].as_u64().unwrap() >= 1, "{v}");
    // The upstream's side effects stopped: the count does not move after the close.
    assert!(c["steps_at_close"].as_u64().unwrap() < 400, "{v}");
    assert_eq!(
        c["steps_later"], c["steps_later_still"],
        "the upstream went on: {v}"
    );
    // The proxy saw the closed stream and cancelled exactly that upstream request.
    let closed =
        |l: &&Value| l["event"] == "request.cancel_received" && l["reason"] == "stream closed";
    let lines = proxy.log_until(|ls| ls.iter().any(|l| closed(&l))).await;
    let cancel = lines
        .iter()
        .find(closed)
        .unwrap_or_else(|| panic!("no stream-closed cancel: {lines:#?}"));
    let (session, id) = (&cancel["session"], &cancel["request_id"]);
    let of = |event: &str| {
        lines
            .iter()
            .filter(|l| l["event"] == event && &l["session"] == session && &l["request_id"] == id)
            .collect::<Vec<_>>()
    };
    let sent = of("upstream.sent");
    let cancelled = of("upstream.cancel_sent");
    assert_eq!((sent.len(), cancelled.len()), (1, 1), "{lines:#?}");
    assert_eq!(sent[0]["upstream_id"], cancelled[0]["upstream_id"]);
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["event"] == "upstream.cancel_sent")
            .count(),
        1
    );
}

/// Runs `tests-external/py2_client.py URL --mode auto EXTRA…` (Python `mcp` 2.x) and returns
/// the JSON it prints; fails the test if it does not succeed within 90 s.
pub(crate) async fn run_py2(py2: &std::path::Path, url: &str, extra: &[&str]) -> Value {
    let driver = common::external::root().join("tests-external/py2_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(py2)
            .arg(&driver)
            .args([url, "--mode", "auto"])
            .args(extra)
            .output(),
    )
    .await
    .expect("the Python client finishes")
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The tool names `tools/list` shows in `session`.
async fn tool_names(proxy: &HttpServer, session: &str) -> Vec<String> {
    let list = answer(
        proxy,
        session,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// Processes whose command line contains `marker`.
pub(crate) fn pids_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd);
        // The proxy's own command line names its upstream's too.
        if cmd.contains(marker) && !cmd.contains("proxy") {
            out.push(pid);
        }
    }
    out
}

/// An upstream tool as a job: 50 concurrent starts with one key make one upstream call; a
/// SIGKILL of the proxy mid-job takes the upstream process with it (parent-death signal) and
/// the restarted proxy ends the job `failed(lease_lost)`.
#[tokio::test]
async fn an_upstream_job_runs_once_per_key_and_ends_lease_lost_after_the_proxy_dies() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("proxy.db").display().to_string();
    let up_log = dir.path().join("upstream.jsonl");
    let up_log_arg = up_log.display().to_string();
    let marker = format!("job-upstream-marker-{}", std::process::id());
    let flags = [
        "--tool",
        "slow_count=job",
        "--instance-name",
        "proxy-job-test",
        "--job-lease-ms",
        "1000",
        "--job-reap-ms",
        "300",
        "--",
        BIN,
        "serve",
        "--store",
        ":memory:",
        "--instance-name",
        &marker,
        "--log-file",
        &up_log_arg,
    ];
    let mut proxy = HttpServer::launch("proxy", Some(&store), &flags).await;
    let sid = proxy.initialize().await;
    let args = json!({"steps": 400, "delay_ms": 50, "tag": "job", "idempotency_key": "one-key"});
    let starts = (0..50).map(|i| {
        let msg = call(json!(100 + i), "start_slow_count", args.clone(), None);
        let (p, sid) = (&proxy, sid.clone());
        async move {
            let (_, answer) = p
                .post(Some(&sid), &msg)
                .await
                .answer(Duration::from_secs(30))
                .await;
            answer["result"]["structuredContent"]["job_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{answer}"))
                .to_string()
        }
    });
    let ids: std::collections::BTreeSet<String> = futures_util::future::join_all(starts)
        .await
        .into_iter()
        .collect();
    assert_eq!(ids.len(), 1, "one key, one job: {ids:?}");
    let job_id = ids.into_iter().next().unwrap();
    // The job's upstream call is running: exactly one tools/call reached the upstream.
    let calls = || {
        read_lines(&up_log)
            .into_iter()
            .filter(|l| l["event"] == "request.start" && l["tool"] == "slow_count")
            .count()
    };
    wait_for("the upstream call", Duration::from_secs(20), || {
        calls() >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(calls(), 1, "the upstream ran the job's call more than once");
    let upstream = pids_with(&marker);
    assert_eq!(upstream.len(), 1, "{upstream:?}");

    proxy.child.start_kill().unwrap(); // SIGKILL
    proxy.child.wait().await.unwrap();
    wait_for(
        "the upstream to die with the proxy",
        Duration::from_secs(10),
        || {
            !std::path::Path::new(&format!("/proc/{}", upstream[0])).exists()
                || std::fs::read_to_string(format!("/proc/{}/stat", upstream[0]))
                    .is_ok_and(|s| s.contains(") Z "))
        },
    )
    .await;

    // A restarted proxy on the same store ends the job failed(lease_lost), never re-running it.
    let _again = HttpServer::launch("proxy", Some(&store), &flags).await;
    let mut shown = Value::Null;
    for _ in 0..100 {
        let out = tokio::process::Command::new(BIN)
            .args(["jobs", "--store", &store, "--json", "show", &job_id])
            .output()
            .await
            .unwrap();
        shown = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if shown.to_string().contains("lease_lost") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(shown.to_string().contains("lease_lost"), "{shown:#}");
    assert!(shown.to_string().contains("\"failed\""), "{shown:#}");
}

/// The answer to `msg` posted in `session`.
async fn answer(proxy: &HttpServer, session: &str, msg: &Value) -> Value {
    proxy
        .post(Some(session), msg)
        .await
        .answer(Duration::from_secs(30))
        .await
        .1
}

/// An upstream that dies mid-call: the call gets a clear tool error (not a hang, not a
/// silent retry), and the next call is served by a restarted upstream.
#[tokio::test]
async fn an_upstream_crash_fails_its_calls_clearly_and_the_next_call_restarts_it() {
    let marker = format!("crash-upstream-marker-{}", std::process::id());
    let proxy = HttpServer::launch(
        "proxy",
        None,
        &[
            "--",
            BIN,
            "serve",
            "--store",
            ":memory:",
            "--no-log",
            "--instance-name",
            &marker,
        ],
    )
    .await;
    let sid = proxy.initialize().await;
    let mut long = proxy
        .post(
            Some(&sid),
            &call(
                json!(7),
                "slow_count",
                json!({"steps": 400, "delay_ms": 50}),
                Some(json!("t")),
            ),
        )
        .await;
    // Running upstream: its first progress came through (not just the stream's priming
    // event, which comes before the call reaches the upstream).
    let progress = long
        .next_message(Duration::from_secs(20))
        .await
        .expect("progress");
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    let first = pids_with(&marker);
    assert_eq!(first.len(), 1, "{first:?}");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(first[0] as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let (_, died) = long.answer(Duration::from_secs(20)).await;
    assert_eq!(died["result"]["isError"], true, "{died}");
    let text = died["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("went away"), "{text}");
    assert!(
        text.contains("unknown"),
        "says the outcome is unknown: {text}"
    );
    // The next call restarts it.
    let again = answer(
        &proxy,
        &sid,
        &call(json!(8), "echo", json!({"text": "back"}), None),
    )
    .await;
    assert_eq!(again["result"]["content"][0]["text"], "back", "{again}");
    let second = pids_with(&marker);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(first, second, "a new process serves the call");
}

/// `--isolate`: each downstream session gets its own upstream process.
#[tokio::test]
async fn isolate_gives_each_session_its_own_upstream_process() {
    let marker = format!("isolate-upstream-marker-{}", std::process::id());
    let proxy = HttpServer::launch(
        "proxy",
        None,
        &[
            "--isolate",
            "--",
            BIN,
            "serve",
            "--store",
            ":memory:",
            "--no-log",
            "--instance-name",
            &marker,
        ],
    )
    .await;
    // The shared connection lists the tools at start.
    assert_eq!(pids_with(&marker).len(), 1);
    for i in 0..2 {
        let sid = proxy.initialize().await;
        let r = answer(
            &proxy,
            &sid,
            &call(json!(1), "echo", json!({"text": format!("s{i}")}), None),
        )
        .await;
        assert_eq!(r["result"]["content"][0]["text"], format!("s{i}"), "{r}");
        // A second call of the same session reuses its process.
        answer(
            &proxy,
            &sid,
            &call(json!(2), "echo", json!({"text": "again"}), None),
        )
        .await;
    }
    assert_eq!(pids_with(&marker).len(), 3, "one shared + one per session");
}

/// The pids the upstream wrapper wrote into `dir`, one file each.
fn written_pids(dir: &std::path::Path) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// Security review, second pass: with `--isolate`, 12 sessions made 13 upstream processes and
/// all 13 still ran after the 12 sessions were DELETEd (the only reaper ran after the session
/// idle time). A session's end stops its upstream at once; the shared one stays.
#[tokio::test]
async fn proxy_isolate_stops_upstream_when_session_ends() {
    const SESSIONS: usize = 4;
    let pids = tempfile::tempdir().unwrap();
    // The wrapper writes its pid (kept by `exec`) to a file of its own, then becomes the
    // upstream.
    let wrapper = format!(
        "echo $$ > '{}'/pid.$$ && exec '{BIN}' serve --store :memory: --no-log",
        pids.path().display()
    );
    let proxy = HttpServer::launch("proxy", None, &["--isolate", "--", "sh", "-c", &wrapper]).await;
    // The shared connection lists the tools at start.
    let shared = written_pids(pids.path());
    assert_eq!(shared.len(), 1, "{shared:?}");
    let mut sessions = Vec::new();
    for i in 0..SESSIONS {
        let sid = proxy.initialize().await;
        let r = answer(
            &proxy,
            &sid,
            &call(json!(1), "echo", json!({"text": format!("s{i}")}), None),
        )
        .await;
        assert_eq!(r["result"]["content"][0]["text"], format!("s{i}"), "{r}");
        sessions.push(sid);
    }
    let all = written_pids(pids.path());
    assert_eq!(
        all.len(),
        SESSIONS + 1,
        "one shared + one per session: {all:?}"
    );
    let own: Vec<u32> = all.into_iter().filter(|p| !shared.contains(p)).collect();
    assert!(own.iter().all(|p| alive(*p)), "{own:?}");
    for sid in &sessions {
        let r = proxy
            .send("DELETE", &[("mcp-session-id", sid.as_str())], "")
            .await;
        assert_eq!(r.status, 200);
    }
    // Bounded: stdin closed, then SIGTERM and SIGKILL after their graces (5 s in all).
    wait_for(
        "every session's upstream to exit",
        Duration::from_secs(15),
        || own.iter().all(|p| !alive(*p)),
    )
    .await;
    assert!(alive(shared[0]), "the shared upstream stays");
}

/// A client's `mcpServers` JSON moves over in one command: each server an upstream, tools
/// prefixed with the server's name when there are several.
#[tokio::test]
async fn mcp_servers_json_imports_every_server_with_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("claude_desktop_config.json");
    let server = json!({"command": BIN, "args": ["serve", "--store", ":memory:", "--no-log"]});
    std::fs::write(
        &file,
        json!({"mcpServers": {"one": server, "two": server}}).to_string(),
    )
    .unwrap();
    let f = file.display().to_string();
    let proxy = HttpServer::launch("proxy", None, &["--mcp-servers", &f]).await;
    let sid = proxy.initialize().await;
    let names = tool_names(&proxy, &sid).await;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert!(
        names.contains(&"one_echo") && names.contains(&"two_echo"),
        "{names:?}"
    );
    assert!(!names.contains(&"echo"), "{names:?}");
    let r = answer(
        &proxy,
        &sid,
        &call(json!(2), "two_echo", json!({"text": "hi"}), None),
    )
    .await;
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");

    // An unreachable upstream, a rule for a tool the upstream lacks, and a job shape whose
    // start_/get_/cancel_ faces clash with the upstream's own tools: each refuses to start.
    let refused = |args: Vec<&'static str>| async move {
        let out = tokio::process::Command::new(BIN)
            .args(["proxy", "--store", ":memory:", "--no-log"])
            .args(&args)
            .output()
            .await
            .unwrap();
        assert!(!out.status.success(), "{args:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let up = ["--", BIN, "serve", "--store", ":memory:", "--no-log"];
    let e = refused(vec!["--upstream", "http://127.0.0.1:1/mcp"]).await;
    assert!(e.contains("cannot connect"), "{e}");
    let mut a = vec!["--tool", "no_such_tool=job"];
    a.extend(up);
    let e = refused(a).await;
    assert!(e.contains("has no tool \"no_such_tool\""), "{e}");
    // The demo server has both `import_rows` and its own `start_import_rows`.
    let mut a = vec!["--tool", "import_rows=job"];
    a.extend(up);
    let e = refused(a).await;
    assert!(
        e.contains("start_import_rows") && e.contains("prefix"),
        "{e}"
    );
}

/// `[[upstream]]` in `staunch.toml`: `staunch check` names the line and field of each mistake,
/// and `staunch proxy --config` serves the upstream with the shapes the file gives.
#[tokio::test]
async fn upstreams_in_staunch_toml_are_checked_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "version = 1\n\n[[upstream]]\nname = \"files\"\ncommand = [\"x\"]\nurl = \"http://h/mcp\"\n\n[upstream.tools.export]\nshape = \"jobb\"\n",
    )
    .unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(":6:") && err.contains("either command or url"),
        "{err}"
    );
    assert!(
        err.contains(":9:") && err.contains("upstream[0] \"files\".tools.export.shape"),
        "{err}"
    );

    let good = dir.path().join("staunch.toml");
    let upstream = format!("[\"{BIN}\", \"serve\", \"--store\", \":memory:\", \"--no-log\"]");
    std::fs::write(
        &good,
        format!(
            "version = 1\n\n[[upstream]]\nname = \"demo\"\ncommand = {upstream}\nprefix = \"d_\"\n\n[upstream.tools.slow_count]\nshape = \"job\"\n"
        ),
    )
    .unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(&good)
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("upstream demo"));
    let cfg = good.display().to_string();
    let proxy = HttpServer::launch("proxy", None, &["--config", &cfg]).await;
    let sid = proxy.initialize().await;
    let names = tool_names(&proxy, &sid).await;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for n in [
        "d_echo",
        "d_slow_count",
        "start_d_slow_count",
        "get_d_slow_count",
        "cancel_d_slow_count",
    ] {
        assert!(names.contains(&n), "{n} missing: {names:?}");
    }
    let r = answer(
        &proxy,
        &sid,
        &call(json!(2), "d_echo", json!({"text": "via toml"}), None),
    )
    .await;
    assert_eq!(r["result"]["content"][0]["text"], "via toml", "{r}");
}

/// A question from the upstream reaches the client whose call caused it: a 2025 client
/// (a session that declared elicitation) calls `greet` on an upstream that asks in 2026
/// input-required rounds (`staunch serve` over stdio); the proxy asks on the call's own stream
/// and calls the upstream again with the answer.
#[tokio::test]
async fn an_upstream_question_reaches_the_client_that_made_the_call() {
    let proxy = HttpServer::launch(
        "proxy",
        None,
        &["--", BIN, "serve", "--store", ":memory:", "--no-log"],
    )
    .await;
    let sid = proxy
        .initialize_declaring(json!({"elicitation": {}}), &[])
        .await;
    let mut stream = proxy
        .post(Some(&sid), &call(json!(5), "greet", json!({}), None))
        .await;
    let question = loop {
        let m = stream
            .next_message(Duration::from_secs(20))
            .await
            .expect("the question");
        if m["method"] == "elicitation/create" {
            break m;
        }
    };
    assert_eq!(question["params"]["message"], "What is your name?");
    let reply = json!({"jsonrpc": "2.0", "id": question["id"],
                       "result": {"action": "accept", "content": {"name": "Ada"}}});
    assert_eq!(proxy.post(Some(&sid), &reply).await.status.as_u16(), 202);
    let (_, answer) = stream.answer(Duration::from_secs(20)).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "Hello, Ada!",
        "{answer}"
    );
}

/// A real 2026-07-28 client (Python `mcp` 2.x) through the proxy to a 2026 upstream: progress,
/// the upstream's question answered by the client's elicitation callback (input-required
/// rounds on both sides), and a closed stream that stops the upstream's work.
#[tokio::test]
async fn python_2026_client_through_the_proxy_to_a_2026_upstream() {
    let Some(py2) = common::external::python2() else {
        return;
    };
    let proxy = HttpServer::launch(
        "proxy",
        None,
        &[
            "--tool",
            "slow_count=streaming",
            "--",
            BIN,
            "serve",
            "--store",
            ":memory:",
            "--no-log",
        ],
    )
    .await;
    let v = run_py2(&py2, &proxy.url(), &["--tag", "py2-proxy"]).await;
    assert_eq!(v["protocolVersion"], "2026-07-28", "{v}");
    assert_eq!(v["progress"], json!([1, 2, 3, 4, 5]), "{v}");
    assert_eq!(v["greeting"], "Hello, Ada!", "{v}");
    let c = &v["cancel"];
    assert_eq!(
        c["steps_later"], c["steps_later_still"],
        "the upstream went on: {v}"
    );
}

/// An upstream whose tools change at run time (`staunch serve` with command tools, reloaded by
/// SIGHUP, announces `tools/list_changed`): the proxy lists them again and tells its own
/// sessions; the added tool is served through it, the removed one is refused.
#[tokio::test]
async fn upstream_tool_changes_reach_the_proxys_sessions() {
    const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/command");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("staunch.toml");
    let tool = |name: &str, args: &str| {
        format!(
            "[[tool]]\nname = \"{name}\"\ndescription = \"{name}\"\nprogram = \"{FIX}/argv.py\"\n\
             args = [{args}]\nparams.who.type = \"string\"\n"
        )
    };
    let say = tool("say", r#""{who}""#);
    let greet = tool("greet", r#""hello", "{who}""#);
    std::fs::write(&config, format!("{say}\n{}", tool("gone", r#""{who}""#))).unwrap();
    let cfg = config.to_str().unwrap();
    let mut p =
        common::Proc::spawn_sub("proxy", &["--", BIN, "serve", "--no-log", "--config", cfg]).await;
    let init = p.initialize("2025-11-25").await;
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"], true,
        "{init}"
    );
    p.notify("notifications/initialized", json!({})).await;
    let names = common::sorted_tool_names;
    p.request(json!("l1"), "tools/list", json!({})).await;
    assert_eq!(names(&p.response(&json!("l1")).await), ["gone", "say"]);

    std::fs::write(&config, format!("{say}\n{greet}")).unwrap();
    let upstream = pids_with(cfg);
    assert_eq!(upstream.len(), 1, "one upstream process: {upstream:?}");
    let pid = rustix::process::Pid::from_raw(upstream[0] as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    p.wait_for(Duration::from_secs(30), |m| {
        m["method"] == "notifications/tools/list_changed"
    })
    .await
    .expect("the proxy's session heard tools/list_changed");
    p.request(json!("l2"), "tools/list", json!({})).await;
    assert_eq!(names(&p.response(&json!("l2")).await), ["greet", "say"]);
    p.call(json!(3), "greet", json!({"who": "world"}), None)
        .await;
    let r = p.response(&json!(3)).await;
    assert_eq!(
        r["result"]["content"][0]["text"], "[\"hello\", \"world\"]\n",
        "{r}"
    );
    p.call(json!(4), "gone", json!({"who": "x"}), None).await;
    let refused = p.response(&json!(4)).await;
    assert_eq!(
        refused["error"]["message"], "unknown tool: gone",
        "{refused}"
    );
}

/// The protocol spoken upstream is the proxy's choice, per upstream: `auto` takes the newest
/// era the upstream speaks (2026-07-28 for `staunch serve`), `--upstream-protocol 2025-11-25`
/// a session. The upstream's own lifecycle log shows which era each call came in, and both
/// answer the same downstream client. A protocol the client does not speak is refused at
/// start, on the command line and in `staunch.toml` (with its line).
#[tokio::test]
async fn the_upstream_protocol_is_chosen_per_upstream() {
    let upstream = HttpServer::start(&[]).await;
    let up = upstream.url();
    for (n, (flag, want)) in [(None, "2026-07-28"), (Some("2025-11-25"), "2025-11-25")]
        .into_iter()
        .enumerate()
    {
        let mut extra = vec!["--upstream", up.as_str()];
        if let Some(p) = flag {
            extra.extend(["--upstream-protocol", p]);
        }
        let proxy = HttpServer::launch("proxy", None, &extra).await;
        let sid = proxy.initialize().await;
        let text = format!("era {want}");
        let r = answer(
            &proxy,
            &sid,
            &call(json!(7), "echo", json!({"text": text}), None),
        )
        .await;
        assert_eq!(r["result"]["content"][0]["text"], text.as_str(), "{r}");
        let mut seen = None;
        wait_for("the upstream's start line", Duration::from_secs(10), || {
            let starts: Vec<Value> = upstream
                .log_lines()
                .into_iter()
                .filter(|l| l["event"] == "request.start" && l["tool"] == "echo")
                .collect();
            seen = starts.get(n).map(|l| l["protocol_version"].clone());
            seen.is_some()
        })
        .await;
        assert_eq!(seen, Some(json!(want)), "{flag:?}");
    }

    let out = tokio::process::Command::new(BIN)
        .args([
            "proxy",
            "--upstream",
            &up,
            "--upstream-protocol",
            "2024-01-01",
        ])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown protocol \"2024-01-01\""), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!("version = 1\n\n[[upstream]]\nname = \"up\"\nurl = \"{up}\"\nprotocol = \"2024-01-01\"\n"),
    )
    .unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(":6:") && err.contains("upstream[0] \"up\".protocol"),
        "{err}"
    );
}

/// An upstream tool that may not be safe to repeat is answered on a stored, resumable
/// stream (a 2025 client that loses the answer resumes instead of calling again); one the
/// upstream marks read-only, or one given `--retry-safe`, is answered as plain JSON.
#[tokio::test]
async fn retry_safe_upstream_tools_are_answered_plainly_the_rest_on_resumable_streams() {
    let upstream = ["--", BIN, "serve", "--store", ":memory:", "--no-log"];
    let fail = json!({"how": "tool_error"});
    for retry_safe in [false, true] {
        let mut extra: Vec<&str> = Vec::new();
        if retry_safe {
            extra.extend(["--tool", "fail=quick", "--retry-safe"]);
        }
        extra.extend(upstream);
        let proxy = HttpServer::launch("proxy", None, &extra).await;
        let sid = proxy.initialize().await;

        let listed = answer(
            &proxy,
            &sid,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
        let tools = listed["result"]["tools"].as_array().expect("tools").clone();
        let annotations = |name: &str| {
            tools
                .iter()
                .find(|t| t["name"] == name)
                .map(|t| t["annotations"].clone())
                .unwrap_or_else(|| panic!("{name} not listed: {listed}"))
        };
        assert_eq!(annotations("echo")["readOnlyHint"], true);
        assert_eq!(
            annotations("fail")["idempotentHint"].as_bool(),
            retry_safe.then_some(true),
            "retry_safe {retry_safe}"
        );

        // The upstream's read-only tool: plain JSON either way.
        let echo = proxy
            .post(
                Some(&sid),
                &call(json!(2), "echo", json!({"text": "hi"}), None),
            )
            .await;
        assert_eq!(
            echo.header("content-type").as_deref(),
            Some("application/json")
        );
        assert_eq!(echo.json().await["result"]["content"][0]["text"], "hi");

        let r = proxy
            .post(Some(&sid), &call(json!(3), "fail", fail.clone(), None))
            .await;
        let kind = r.header("content-type").unwrap_or_default();
        if retry_safe {
            assert_eq!(kind, "application/json");
            let body = r.json().await;
            assert_eq!(body["result"]["isError"], true, "{body}");
        } else {
            // A stream whose first event carries an id to resume from, then the answer.
            assert!(kind.starts_with("text/event-stream"), "{kind}");
            let mut r = r;
            let first = r
                .next_event(Duration::from_secs(10))
                .await
                .expect("priming event");
            let last_id = first.id.clone().expect("the priming event has an id");
            let (_, body) = r.answer(Duration::from_secs(10)).await;
            assert_eq!(body["result"]["isError"], true, "{body}");
            // Resumable: the stream replays its answer from the store after the priming id.
            let mut again = proxy.get(&sid, Some(&last_id)).await;
            assert_eq!(again.status, 200);
            let replayed = again
                .next_message(Duration::from_secs(10))
                .await
                .expect("the answer replayed");
            assert_eq!(replayed["id"], 3, "{replayed}");
        }
    }
}
