//! A real load balancer in front of two instances: nginx, run with exactly
//! `deploy/nginx/staunch.conf` (the book's recipe, `docs/src/operations/balancer.md`), round
//! robin without stickiness, in front of two `staunch serve --http` instances on one PostgreSQL
//! schema. Through it: requests are spread over both instances; a 2025 session's calls are
//! answered wherever they land; `staunch probe` passes; a dropped stream resumes with every
//! event exactly once; 2026-07-28 stateless calls work.
//!
//! Needs `STAUNCH_TEST_POSTGRES` and nginx (`scripts/setup-tools` unpacks it into
//! `.tools/nginx`; `STAUNCH_NGINX` names another binary). Without them the tests say they were
//! skipped — except that with `STAUNCH_REQUIRE_EXTERNAL=1` a missing nginx fails.

use crate::client_support;
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::http::{HttpServer, call, stateless};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::time::Instant;

/// The nginx binary: `STAUNCH_NGINX`, else the one `scripts/setup-tools` unpacked.
fn nginx() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STAUNCH_NGINX").map(PathBuf::from)
        && p.exists()
    {
        return Some(p);
    }
    common::external::tool(".tools/nginx/usr/sbin/nginx", "nginx (the load balancer)")
}

/// The placeholders of `deploy/nginx/staunch.conf`.
const PLACEHOLDERS: [&str; 4] = ["@PREFIX@", "@LISTEN@", "@UPSTREAM_A@", "@UPSTREAM_B@"];

/// nginx in front of two instances. `front` drives it like a server (the same requests, sent
/// to the balancer's port); dropping it stops nginx (SIGTERM to the master, which stops its
/// workers; SIGKILL if it is still there after 5 s).
struct Balancer {
    front: HttpServer,
    prefix: PathBuf,
}

impl Balancer {
    async fn start(nginx: &Path, a: &HttpServer, b: &HttpServer) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().to_path_buf();
        let template =
            std::fs::read_to_string(common::external::root().join("deploy/nginx/staunch.conf"))
                .expect("deploy/nginx/staunch.conf");
        for p in PLACEHOLDERS {
            assert!(template.contains(p), "staunch.conf has no {p}");
        }
        let port = client_support::free_port().await;
        let conf = template
            .replace("@PREFIX@", &prefix.display().to_string())
            .replace("@LISTEN@", &format!("127.0.0.1:{port}"))
            .replace("@UPSTREAM_A@", &format!("127.0.0.1:{}", a.port))
            .replace("@UPSTREAM_B@", &format!("127.0.0.1:{}", b.port));
        let conf_path = prefix.join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let error_log = prefix.join("error.log");
        let mut child = Command::new(nginx)
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf_path)
            .arg("-e")
            .arg(&error_log)
            // The test owns the process: in the foreground, stopped when the test ends.
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nginx");
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                panic!(
                    "nginx exited ({st}) before listening:\n{}",
                    std::fs::read_to_string(&error_log).unwrap_or_default()
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            assert!(
                Instant::now() < end,
                "nginx does not listen on {port} after 15 s:\n{}",
                std::fs::read_to_string(&error_log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self {
            front: HttpServer::of(child, dir, port, error_log),
            prefix,
        }
    }

    fn url(&self) -> String {
        self.front.url()
    }

    /// The access log: one `(request line, status, upstream address)` per request, in order.
    fn access(&self) -> Vec<(String, String, String)> {
        std::fs::read_to_string(self.prefix.join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let request = l.split('"').nth(1).unwrap_or_default().to_string();
                let after = l.split('"').nth(2).unwrap_or_default();
                let status = after.split_whitespace().next().unwrap_or_default();
                let upstream = l
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("upstream="))
                    .unwrap_or_default();
                (request, status.to_string(), upstream.to_string())
            })
            .collect()
    }

    /// The access log once it has at least `n` lines (bounded: 10 s).
    async fn access_until(&self, n: usize) -> Vec<(String, String, String)> {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.access();
            if lines.len() >= n || Instant::now() > end {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let Some(pid) = self.front.child.id() else {
            return;
        };
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        for _ in 0..100 {
            if matches!(self.front.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.front.child.start_kill();
    }
}

/// A test's schema, dropped when the test ends, failed or not (declared first, so that it is
/// dropped after the instances and the balancer).
struct Schema {
    url: String,
    name: String,
}

impl Drop for Schema {
    fn drop(&mut self) {
        common::pg::drop_schema(&self.url, &self.name);
    }
}

/// Two instances (`--instance-name a` and `b`) on a fresh schema, and nginx in front; `None`
/// (after saying why) when PostgreSQL or nginx is missing.
async fn setup(test: &str) -> Option<(Schema, Balancer, HttpServer, HttpServer)> {
    // nginx first: with STAUNCH_REQUIRE_EXTERNAL=1 its absence fails even without PostgreSQL.
    let nginx = nginx()?;
    let (url, name) = common::pg::fresh_schema(test)?;
    let a = HttpServer::start_on(
        Some(&url),
        &["--store-schema", &name, "--instance-name", "a"],
    )
    .await;
    let b = HttpServer::start_on(
        Some(&url),
        &["--store-schema", &name, "--instance-name", "b"],
    )
    .await;
    let lb = Balancer::start(&nginx, &a, &b).await;
    Some((Schema { url, name }, lb, a, b))
}

/// Which instance ended request `id`: `"a"`, `"b"`, or `""` if neither within 15 s.
async fn served_by(a: &HttpServer, b: &HttpServer, id: &Value) -> &'static str {
    let ended = |lines: &[Value]| {
        lines
            .iter()
            .any(|l| l["event"] == "request.end" && l["request_id"] == *id)
    };
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        if ended(&a.log_lines()) {
            return "a";
        }
        if ended(&b.log_lines()) {
            return "b";
        }
        if Instant::now() > end {
            return "";
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The response to `msg` posted in session `sid` through `front`, and the progress values
/// that came before it (SSE or a JSON body alike).
async fn call_in_session(front: &HttpServer, sid: &str, msg: &Value) -> (Vec<i64>, Value) {
    let r = front.post(Some(sid), msg).await;
    assert_eq!(r.status, 200, "{msg}");
    let (notes, resp) = r.answer(Duration::from_secs(20)).await;
    let progress = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .map(|n| n["params"]["progress"].as_i64().unwrap())
        .collect();
    (progress, resp)
}

#[tokio::test]
async fn a_2025_session_is_served_by_both_instances_through_the_balancer() {
    let Some((_schema, lb, a, b)) = setup("balancer: 2025 session").await else {
        return;
    };
    let front = &lb.front;
    // initialize and notifications/initialized already land on different instances.
    let sid = front.initialize().await;
    let mut by = Vec::new();
    for i in 0..8 {
        let id = json!(format!("call-{i}"));
        if i % 2 == 0 {
            let text = format!("hello {i}");
            let (_, resp) = call_in_session(
                front,
                &sid,
                &call(id.clone(), "echo", json!({"text": text}), None),
            )
            .await;
            assert_eq!(resp["result"]["content"][0]["text"], text, "{resp}");
        } else {
            let (progress, resp) = call_in_session(
                front,
                &sid,
                &call(
                    id.clone(),
                    "slow_count",
                    json!({"steps": 3, "delay_ms": 10}),
                    Some(json!(format!("p{i}"))),
                ),
            )
            .await;
            assert_eq!(resp["result"]["content"][0]["text"], "counted 3", "{resp}");
            assert_eq!(progress, vec![1, 2, 3], "{resp}");
        }
        by.push(served_by(&a, &b, &id).await);
    }
    eprintln!("calls served by: {by:?}");
    assert!(
        !by.contains(&""),
        "a call ended on neither instance: {by:?}"
    );
    for name in ["a", "b"] {
        assert!(
            by.iter().filter(|s| **s == name).count() >= 2,
            "round robin: instance {name} served fewer than 2 of 8 calls: {by:?}"
        );
    }
    // The balancer's own log agrees: both upstreams answered, every answer a 2xx.
    let access = lb.access_until(2 + 8).await;
    for up in [a.port, b.port] {
        let addr = format!("127.0.0.1:{up}");
        assert!(
            access.iter().any(|(_, _, u)| *u == addr),
            "{addr} answered nothing: {access:#?}"
        );
    }
    assert!(
        access.iter().all(|(_, s, _)| s.starts_with('2')),
        "{access:#?}"
    );
    drop((lb, a, b));
}

#[tokio::test]
async fn a_dropped_stream_resumes_through_the_balancer_exactly_once() {
    let Some((_schema, lb, a, b)) = setup("balancer: resume").await else {
        return;
    };
    let front = &lb.front;
    let sid = front.initialize().await;
    let id = json!("long");
    let mut r = front
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 12, "delay_ms": 60}),
                Some(json!(1)),
            ),
        )
        .await;
    assert_eq!(r.status, 200);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(r.next_event(Duration::from_secs(10)).await.expect("event"));
    }
    let last = seen.last().unwrap().id.clone().unwrap();
    // The client's connection drops: nginx closes its connection to the instance, which for a
    // 2025 session is not a cancel.
    drop(r);
    let mut g = front.get(&sid, Some(&last)).await;
    assert_eq!(g.status, 200);
    let rest = g.events_until_end(Duration::from_secs(20)).await;
    let messages: Vec<Value> = seen
        .iter()
        .chain(rest.iter())
        .map(|e| e.json())
        .filter(Value::is_object)
        .collect();
    let progress: Vec<i64> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_i64().unwrap())
        .collect();
    assert_eq!(
        progress,
        (1..=12).collect::<Vec<_>>(),
        "every event exactly once"
    );
    let responses: Vec<&Value> = messages.iter().filter(|m| m["id"] == id).collect();
    assert_eq!(responses.len(), 1, "{messages:#?}");
    assert_eq!(responses[0]["result"]["content"][0]["text"], "counted 12");
    // The call ran once, on one instance; the balancer says who served the POST and the GET.
    let ran = served_by(&a, &b, &id).await;
    assert!(!ran.is_empty(), "the call ended on neither instance");
    let access = lb.access_until(4).await;
    let upstream_of = |method: &str| {
        access
            .iter()
            .rev()
            .find(|(req, _, _)| req.starts_with(method))
            .map(|(_, _, u)| u.clone())
            .unwrap_or_default()
    };
    let (post, get) = (upstream_of("POST"), upstream_of("GET"));
    eprintln!("the call ran on {ran} ({post}); the resume was served by {get}");
    let ran_port = if ran == "a" { a.port } else { b.port };
    assert_eq!(post, format!("127.0.0.1:{ran_port}"), "{access:#?}");
    // Round robin with one client: initialize, notifications/initialized, the call, the
    // resume alternate, so the resume went to the instance that did not run the call.
    assert!(
        !get.is_empty() && get != post,
        "the resume was served by the instance running the call: {access:#?}"
    );
    drop((lb, a, b));
}

#[tokio::test]
async fn stateless_2026_calls_work_through_the_balancer() {
    let Some((_schema, lb, a, b)) = setup("balancer: 2026 stateless").await else {
        return;
    };
    let mut by = Vec::new();
    for i in 0..6 {
        let id = json!(format!("s{i}"));
        let text = format!("stateless {i}");
        let r = lb
            .front
            .post_stateless(&stateless(
                id.clone(),
                "tools/call",
                json!({"name": "echo", "arguments": {"text": text}}),
            ))
            .await;
        assert_eq!(r.status, 200);
        let (_, resp) = r.answer(Duration::from_secs(20)).await;
        assert_eq!(resp["id"], id, "{resp}");
        assert_eq!(resp["result"]["content"][0]["text"], text, "{resp}");
        by.push(served_by(&a, &b, &id).await);
    }
    eprintln!("stateless calls served by: {by:?}");
    assert!(by.contains(&"a") && by.contains(&"b"), "{by:?}");
    // A slow one with progress, streamed through the balancer as it happens.
    let r = lb
        .front
        .post_stateless(&stateless(
            json!("slow"),
            "tools/call",
            json!({"name": "slow_count", "arguments": {"steps": 4, "delay_ms": 20},
                   "_meta": {"progressToken": "t"}}),
        ))
        .await;
    assert_eq!(r.status, 200);
    let (notes, resp) = r.answer(Duration::from_secs(20)).await;
    assert_eq!(resp["result"]["content"][0]["text"], "counted 4", "{resp}");
    let progress: Vec<i64> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .map(|n| n["params"]["progress"].as_i64().unwrap())
        .collect();
    assert_eq!(progress, vec![1, 2, 3, 4], "{notes:#?}");
    // Closing a response stream is the 2026 cancel: nginx closes its connection to the
    // instance, and the instance running the call stops it.
    let id = json!("closed");
    let mut r = lb
        .front
        .post_stateless(&stateless(
            id.clone(),
            "tools/call",
            json!({"name": "slow_count", "arguments": {"steps": 200, "delay_ms": 50},
                   "_meta": {"progressToken": "c"}}),
        ))
        .await;
    assert_eq!(r.status, 200);
    for _ in 0..2 {
        let m = r
            .next_message(Duration::from_secs(10))
            .await
            .expect("progress");
        assert_eq!(m["method"], "notifications/progress", "{m}");
    }
    drop(r);
    let stopped = |lines: &[Value]| {
        lines.iter().any(|l| {
            l["request_id"] == id
                && l["event"] == "request.cancel_received"
                && l["reason"] == "stream closed"
        }) && lines.iter().any(|l| {
            l["request_id"] == id && l["event"] == "request.end" && l["outcome"] == "cancelled"
        })
    };
    let end = Instant::now() + Duration::from_secs(15);
    while !stopped(&a.log_lines()) && !stopped(&b.log_lines()) {
        assert!(
            Instant::now() < end,
            "the call whose stream closed at the balancer was not cancelled within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop((lb, a, b));
}

#[tokio::test]
async fn staunch_probe_passes_through_the_balancer() {
    let Some((_schema, lb, a, b)) = setup("balancer: probe").await else {
        return;
    };
    let target = lb.url();
    let (code, report) = client_support::probe(&[&target]).await;
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["server"]["protocol_version"], "2026-07-28");
    // The probe reads its evidence for this check from `slow_count_status`, a record kept by
    // the process that ran the count, on whichever instance the balancer picks: when it reads
    // the other one it says it cannot tell (WARN), never a verdict from an empty count. The
    // cancel itself is shown by the instances' logs in
    // `stateless_2026_calls_work_through_the_balancer`.
    let close = client_support::check(&report, "cancel.stream_close");
    match client_support::status(&report, "cancel.stream_close") {
        "PASS" => {}
        "WARN" => assert_eq!(close["data"]["verdict"], "unknown", "{close:#}"),
        other => panic!("cancel.stream_close {other}: {close:#}"),
    }
    // Both instances answered some of the probe's requests.
    let access = lb.access();
    for up in [a.port, b.port] {
        let addr = format!("127.0.0.1:{up}");
        assert!(
            access.iter().any(|(_, _, u)| *u == addr),
            "{addr} answered nothing: {access:#?}"
        );
    }
    drop((lb, a, b));
}

/// A 2025 client's `notifications/cancelled` lands on whichever instance is next; the call it
/// names may run on the other, which stops it (the cancel is passed on through the store).
#[tokio::test]
async fn a_2025_cancel_that_lands_on_the_other_instance_stops_the_call() {
    let Some((_schema, lb, a, b)) = setup("balancer: 2025 cancel").await else {
        return;
    };
    let front = &lb.front;
    let sid = front.initialize().await;
    let id = json!("to-cancel");
    let mut r = front
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 200, "delay_ms": 50}),
                Some(json!("k")),
            ),
        )
        .await;
    assert_eq!(r.status, 200);
    r.next_message(Duration::from_secs(10))
        .await
        .expect("progress");
    let n = front
        .post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "balancer test"}}),
        )
        .await;
    assert_eq!(n.status, 202);
    let ran = served_by_start(&a, &b, &id).await;
    let runner = if ran == "a" { &a } else { &b };
    let cancelled = |lines: &[Value]| {
        lines.iter().any(|l| {
            l["request_id"] == id && l["event"] == "request.end" && l["outcome"] == "cancelled"
        })
    };
    let lines = runner.log_until(cancelled).await;
    assert!(
        cancelled(&lines),
        "instance {ran} ran the call and did not stop it; the cancel went to the other: {:#?}",
        if ran == "a" {
            b.log_lines()
        } else {
            a.log_lines()
        }
    );
    drop(r);
    drop((lb, a, b));
}

/// The instance running a 2025 call is killed while its client is away; the client resumes
/// through the balancer and lands on the survivor. The survivor replays the stored events and
/// follows the stream until the dead writer has been silent too long, then ends it — within a
/// bound, never an open stream of keep-alives.
#[tokio::test]
async fn a_resumed_stream_whose_instance_died_ends() {
    let Some((_schema, lb, mut a, mut b)) = setup("balancer: instance died").await else {
        return;
    };
    let front = &lb.front;
    let sid = front.initialize().await;
    let id = json!("orphan");
    let mut r = front
        .post(
            Some(&sid),
            &call(
                id.clone(),
                "slow_count",
                json!({"steps": 600, "delay_ms": 50}),
                Some(json!("o")),
            ),
        )
        .await;
    assert_eq!(r.status, 200);
    let mut last = None;
    let mut messages = 0;
    while messages < 3 {
        let e = r.next_event(Duration::from_secs(10)).await.expect("event");
        last = e.id.clone().or(last);
        messages += usize::from(!e.data.is_empty());
    }
    drop(r);
    let ran = served_by_start(&a, &b, &id).await;
    let runner = if ran == "a" { &mut a } else { &mut b };
    runner.child.kill().await.unwrap();
    let mut g = front.get(&sid, last.as_deref()).await;
    assert_eq!(g.status, 200);
    let end = Instant::now() + Duration::from_secs(40);
    let mut answered = None;
    while let Some(m) = g
        .next_message(end.saturating_duration_since(Instant::now()))
        .await
    {
        if m["id"] == id {
            answered = Some(m);
            break;
        }
    }
    let ended = answered.is_some() || g.ends_within(Duration::from_millis(100)).await;
    eprintln!(
        "after {:?}: answered {answered:?}, ended {ended}",
        Duration::from_secs(40) - end.saturating_duration_since(Instant::now())
    );
    assert!(
        ended,
        "instance {ran} died running the call; 40 s after the resume its stream is still open \
         with no response"
    );
    drop(g);
    drop((lb, a, b));
}

/// Which instance started request `id`: `"a"` or `"b"` (waits at most 15 s; `""` if neither).
async fn served_by_start(a: &HttpServer, b: &HttpServer, id: &Value) -> &'static str {
    let started = |lines: &[Value]| {
        lines
            .iter()
            .any(|l| l["event"] == "request.start" && l["request_id"] == *id)
    };
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        if started(&a.log_lines()) {
            return "a";
        }
        if started(&b.log_lines()) {
            return "b";
        }
        if Instant::now() > end {
            return "";
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `GET /healthz` through the balancer, on both instances: 200 `{"status":"ok"}` while the
/// store answers.
#[tokio::test]
async fn healthz_answers_through_the_balancer() {
    let Some((_schema, lb, a, b)) = setup("balancer: healthz").await else {
        return;
    };
    for _ in 0..2 {
        let (status, body) = raw_get(lb.front.port, "/healthz").await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(v["status"], "ok", "{body}");
    }
    drop((lb, a, b));
}

/// A plain `GET path` on its own connection: (status, body).
async fn raw_get(port: u16, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .expect("an answer within 10 s")
        .unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    (status, body.to_string())
}

/// The book's recipe shows the configuration these tests run, byte for byte.
#[test]
fn the_book_shows_the_tested_config() {
    let root = common::external::root();
    let file = std::fs::read_to_string(root.join("deploy/nginx/staunch.conf")).unwrap();
    let page = std::fs::read_to_string(root.join("docs/src/operations/balancer.md")).unwrap();
    assert!(
        page.contains(&format!("```nginx\n{file}```\n")),
        "docs/src/operations/balancer.md must show deploy/nginx/staunch.conf unchanged in its \
         nginx block (copy the file into it)"
    );
}
