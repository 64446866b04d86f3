//! The proxy's stop policy (`--kill-after-cancel`, `kill_after_cancel` in `[[upstream]]`) with
//! upstreams written with the official SDKs whose `stubborn_count` ignores cancels: the
//! TypeScript one (it also outlives its stdin: its timers keep Node running, so it must be
//! killed) and the Python one (a shielded cancel scope; it exits when its stdin closes). Each
//! records its steps in a file outside its process (`PEER_STEPS_DIR`), so the test sees the
//! work go on or stop whatever the proxy reports.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client_support::Peers;
use crate::common::http::{HttpServer, call};
use crate::common::{BIN, alive, http_get};

/// The steps file of `tag`: (steps done, the pid that did them).
fn steps(dir: &Path, tag: &str) -> Option<(u64, u32)> {
    let text = std::fs::read_to_string(dir.join(tag)).ok()?;
    let (n, pid) = text.trim().split_once(' ')?;
    Some((n.parse().ok()?, pid.parse().ok()?))
}

/// `GET /metrics` on `addr`: the exposition text.
async fn scrape(addr: &str) -> String {
    http_get(addr, "/metrics").await
}

/// The live page's "upstream work after its cancel" rows.
async fn live_upstream_rows(proxy: &HttpServer) -> String {
    let page = http_get(&format!("127.0.0.1:{}", proxy.port), "/staunch").await;
    let start = page
        .find("<tbody id=\"upstream\">")
        .expect("the upstream section");
    let rows = &page[start..];
    rows[..rows.find("</tbody>").unwrap()].to_string()
}

/// Starts the proxy in front of the `upstream` command, with `policy` flags.
async fn proxy(upstream: &[String], steps_dir: &Path, policy: &[&str]) -> HttpServer {
    let dir = steps_dir.display().to_string();
    let mut args: Vec<String> = policy.iter().map(|s| s.to_string()).collect();
    args.extend(["--tool".into(), "stubborn_count=streaming".into()]);
    args.push("--".into());
    args.extend(upstream.iter().cloned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    HttpServer::launch_with_env(
        "proxy",
        Some(":memory:"),
        &refs,
        &[("PEER_STEPS_DIR", &dir)],
    )
    .await
}

/// Starts a long `stubborn_count` under `tag`, waits until the upstream is working, cancels
/// it, and returns the pid that worked and the steps counted 2 s and 3 s after the cancel.
async fn cancel_a_stubborn_call(proxy: &HttpServer, dir: &Path, tag: &str) -> (u32, u64, u64) {
    let sid = proxy.initialize().await;
    let _stream = start_stubborn(proxy, &sid, 1, 400, tag).await;
    let (_, pid) = steps(dir, tag).expect("the upstream recorded a step");
    cancel(proxy, &sid, 1).await;
    let (at_2s, at_3s) = steps_after_cancel(dir, tag).await;
    (pid, at_2s, at_3s)
}

/// The steps of `tag` counted 2 s and 3 s after now (a cancel just sent): equal when the work
/// stopped within a grace of 1 s + 1 s.
async fn steps_after_cancel(dir: &Path, tag: &str) -> (u64, u64) {
    let cancelled_at = tokio::time::Instant::now();
    tokio::time::sleep_until(cancelled_at + Duration::from_secs(2)).await;
    let (at_2s, _) = steps(dir, tag).unwrap();
    tokio::time::sleep_until(cancelled_at + Duration::from_secs(3)).await;
    let (at_3s, _) = steps(dir, tag).unwrap();
    (at_2s, at_3s)
}

/// The TypeScript SDK upstream: without the policy the cancelled work goes on (the defect);
/// with `--kill-after-cancel 1s` it stops within the grace + 1 s because its process group is
/// killed, the stop is logged, counted and audited, and the next call gets a fresh process.
#[tokio::test]
async fn kill_after_cancel_kills_a_typescript_upstream_that_ignores_cancels() {
    let Some(peers) = Peers::find("kill_after_cancel_kills_a_typescript_upstream") else {
        return;
    };
    let upstream = peers.ts_stdio();
    let dir = tempfile::tempdir().unwrap();

    // Off: the shared upstream process goes on counting after the cancel. (It goes on in
    // silence: the SDK sends nothing for an aborted request, so only its side effects show.)
    let plain = proxy(&upstream, dir.path(), &[]).await;
    let (pid, at_2s, at_3s) = cancel_a_stubborn_call(&plain, dir.path(), "off").await;
    assert!(
        at_3s > at_2s,
        "without the policy the work goes on: {at_2s} then {at_3s} steps"
    );
    assert!(alive(pid), "the shared upstream process serves on");
    drop(plain);

    // On: the call's own process is killed after its grace.
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let stopping = proxy(
        &upstream,
        dir.path(),
        &[
            "--kill-after-cancel",
            "1s",
            "--metrics",
            &metrics,
            "--live-page",
            "/staunch",
        ],
    )
    .await;
    let (pid, at_2s, at_3s) = cancel_a_stubborn_call(&stopping, dir.path(), "on").await;
    assert_eq!(
        at_2s, at_3s,
        "the work stopped within grace + 1 s ({at_2s} then {at_3s} steps)"
    );
    assert!(!alive(pid), "the call's upstream process {pid} is gone");
    let next_pid = next_call_pid(&stopping, dir.path()).await;
    assert_ne!(next_pid, pid, "a fresh process served the next call");

    // Logged on the cancelled request, and counted.
    let stopped = stopped_lines(&stopping).await;
    assert_eq!(stopped.len(), 1, "{stopped:#?}");
    assert_eq!(stopped[0]["killed"], true, "{:#}", stopped[0]);
    assert_eq!(stopped[0]["grace_ms"], 1000);
    assert_eq!(stopped[0]["request_id"], 1);
    let scrape = scrape(&metrics).await;
    assert!(
        scrape
            .lines()
            .any(|l| l.starts_with("staunch_upstream_stopped_total{")
                && l.contains("tool=\"stubborn_count\"")
                && l.contains("how=\"killed\"")
                && l.ends_with(" 1")),
        "{scrape}"
    );

    let rows = live_upstream_rows(&stopping).await;
    assert!(
        rows.contains("<td>stubborn_count</td>") && rows.contains("killed after the grace"),
        "{rows}"
    );

    // The audit says the upstream process was killed.
    let audit = tokio::process::Command::new(BIN)
        .args(["audit", "--json"])
        .arg(&stopping.log_path)
        .output()
        .await
        .unwrap();
    let audit: Value = serde_json::from_slice(&audit.stdout).expect("audit --json");
    assert_eq!(audit["orphaned_upstream"]["stopped"], 1, "{audit:#}");
}

/// The Python SDK upstream ignores the cancel, and says so: without the policy the live page
/// lists its late work. It exits when its stdin closes: the policy's first step is enough, the
/// work stops, and the line says it was not killed.
#[tokio::test]
async fn kill_after_cancel_lets_a_python_upstream_exit_when_its_stdin_closes() {
    let Some(peers) = Peers::find("kill_after_cancel_lets_a_python_upstream_exit") else {
        return;
    };
    let upstream = peers.py_stdio();
    let dir = tempfile::tempdir().unwrap();

    // Off: it goes on, and says so (late progress, dropped): the live page lists the call.
    let plain = proxy(&upstream, dir.path(), &["--live-page", "/staunch"]).await;
    let (_, at_2s, at_3s) = cancel_a_stubborn_call(&plain, dir.path(), "off").await;
    assert!(
        at_3s > at_2s,
        "the work goes on: {at_2s} then {at_3s} steps"
    );
    let rows = live_upstream_rows(&plain).await;
    assert!(
        rows.contains("<td>stubborn_count</td>") && rows.ends_with("<td>—</td></tr>"),
        "the page lists the call whose upstream went on, not stopped: {rows}"
    );
    drop(plain);

    // A grace the interpreter's exit fits in even on a loaded machine: the line must say it
    // exited, not that it was killed.
    let stopping = proxy(&upstream, dir.path(), &["--kill-after-cancel", "5s"]).await;
    let (pid, at_2s, at_3s) = cancel_a_stubborn_call(&stopping, dir.path(), "py").await;
    assert_eq!(
        at_2s, at_3s,
        "the work stopped ({at_2s} then {at_3s} steps)"
    );
    assert!(!alive(pid), "the call's upstream process {pid} is gone");
    assert_ne!(next_call_pid(&stopping, dir.path()).await, pid);
    let stopped = stopped_lines(&stopping).await;
    assert_eq!(stopped.len(), 1, "{stopped:#?}");
    assert_eq!(stopped[0]["killed"], false, "{:#}", stopped[0]);
}

/// A short tagged call after the cancelled one: the pid of the process that served it.
async fn next_call_pid(proxy: &HttpServer, dir: &Path) -> u32 {
    let sid = proxy.initialize().await;
    let next = proxy
        .post(
            Some(&sid),
            &call(
                json!(2),
                "stubborn_count",
                json!({"steps": 1, "delay_ms": 10, "tag": "next"}),
                None,
            ),
        )
        .await
        .answer(Duration::from_secs(30))
        .await
        .1;
    assert_eq!(next["result"]["content"][0]["text"], "counted 1", "{next}");
    steps(dir, "next").expect("the next call's step").1
}

/// The proxy's `upstream.stopped` lines, once the first is written (the stop runs after the
/// cancelled call's grace, off the call's path, and its line may come after the next call).
async fn stopped_lines(proxy: &HttpServer) -> Vec<Value> {
    let stopped = |l: &Value| l["event"] == "upstream.stopped";
    proxy
        .log_until(|lines| lines.iter().any(stopped))
        .await
        .into_iter()
        .filter(stopped)
        .collect()
}

/// The policy needs a process to stop: an HTTP upstream with it is refused at start, clearly.
#[tokio::test]
async fn kill_after_cancel_on_a_url_upstream_is_refused() {
    let out = tokio::process::Command::new(BIN)
        .args([
            "proxy",
            "--store",
            ":memory:",
            "--no-log",
            "--kill-after-cancel",
            "1s",
            "--upstream",
            "http://127.0.0.1:9/mcp",
        ])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("kill_after_cancel needs a command upstream"),
        "{err}"
    );
}

/// A short tagged call in session `sid`: the pid of the process that served it.
async fn pid_serving(proxy: &HttpServer, sid: &str, id: u64, dir: &Path, tag: &str) -> u32 {
    let (_, done) = proxy
        .post(
            Some(sid),
            &call(
                json!(id),
                "stubborn_count",
                json!({"steps": 1, "delay_ms": 10, "tag": tag}),
                None,
            ),
        )
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(done["result"]["content"][0]["text"], "counted 1", "{done}");
    steps(dir, tag).expect("the call's step").1
}

/// Starts a long `stubborn_count` as request `id` of `sid` and returns its stream once the
/// upstream reported progress on it.
async fn start_stubborn(
    proxy: &HttpServer,
    sid: &str,
    id: u64,
    steps: u64,
    tag: &str,
) -> crate::common::http::Resp {
    let mut stream = proxy
        .post(
            Some(sid),
            &call(
                json!(id),
                "stubborn_count",
                json!({"steps": steps, "delay_ms": 50, "tag": tag}),
                Some(json!(format!("p{id}"))),
            ),
        )
        .await;
    let first = stream
        .next_message(Duration::from_secs(30))
        .await
        .expect("progress: the upstream is working");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    stream
}

async fn cancel(proxy: &HttpServer, sid: &str, id: u64) {
    let msg = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": id, "reason": "the test gives up"}});
    assert_eq!(proxy.post(Some(sid), &msg).await.status.as_u16(), 202);
}

/// With `--isolate` the policy stops the session's own process. A cancel while another call
/// of the session runs on it stops nothing, and that call ends as usual; a cancel of the only
/// call stops the process (its work ends within grace + 1 s) and the session's next call is
/// served by a fresh one.
#[tokio::test]
async fn with_isolate_the_stop_policy_stops_the_sessions_own_process() {
    let Some(peers) = Peers::find("with_isolate_the_stop_policy_stops_the_sessions_own_process")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(
        &peers.ts_stdio(),
        dir.path(),
        &["--isolate", "--kill-after-cancel", "1s"],
    )
    .await;
    let sid = proxy.initialize().await;
    let pid = pid_serving(&proxy, &sid, 1, dir.path(), "first").await;
    assert_eq!(
        pid_serving(&proxy, &sid, 2, dir.path(), "again").await,
        pid,
        "one process serves the session's calls"
    );

    // Two calls on the session's process; one is cancelled: the process serves the other.
    let busy = start_stubborn(&proxy, &sid, 3, 30, "busy").await;
    let _ignored = start_stubborn(&proxy, &sid, 4, 400, "ignored").await;
    cancel(&proxy, &sid, 4).await;
    let (_, done) = busy.answer(Duration::from_secs(30)).await;
    assert_eq!(done["result"]["content"][0]["text"], "counted 30", "{done}");
    assert!(alive(pid), "a process serving another call is not stopped");

    // The only call is cancelled: the process is stopped, the work with it.
    let _alone = start_stubborn(&proxy, &sid, 5, 400, "alone").await;
    cancel(&proxy, &sid, 5).await;
    let (at_2s, at_3s) = steps_after_cancel(dir.path(), "alone").await;
    assert_eq!(
        at_2s, at_3s,
        "the work stopped ({at_2s} then {at_3s} steps)"
    );
    assert!(!alive(pid), "the session's process {pid} is gone");
    let next = pid_serving(&proxy, &sid, 6, dir.path(), "next").await;
    assert_ne!(next, pid, "the session's next call gets a fresh process");
    let stopped = stopped_lines(&proxy).await;
    assert_eq!(stopped.len(), 1, "{stopped:#?}");
    assert_eq!(stopped[0]["killed"], true, "{:#}", stopped[0]);
}
