//! The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) over real HTTP on
//! loopback against `staunch serve`: stateless requests carrying their version and
//! capabilities in `_meta`, tasks backed by durable jobs — created, polled to their inlined
//! result, cancelled, answered through `tasks/update`, refused with -32021 without the
//! extension, surviving a SIGKILL of a single SQLite-backed instance, and (with
//! `STAUNCH_TEST_POSTGRES`) created on one instance and read, answered and cancelled on another.

use crate::common;

use std::time::Duration;

use common::http::HttpServer;
use serde_json::{Value, json};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(20);
const EXT: &str = "io.modelcontextprotocol/tasks";

use common::job_flags as flags;

/// A stateless request's answer: HTTP status and the JSON-RPC response.
struct Answer {
    status: u16,
    msg: Value,
}

impl Answer {
    fn result(&self) -> &Value {
        assert!(self.msg.get("error").is_none(), "error: {}", self.msg);
        &self.msg["result"]
    }

    fn code(&self) -> i64 {
        self.msg["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("expected an error: {}", self.msg))
    }
}

static NEXT_ID: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1);

/// Sends one stateless request: `_meta` with the version and `caps`, headers mirroring the
/// body (`Mcp-Name` = tool name or task id unless `name` overrides it).
async fn send(
    s: &HttpServer,
    method: &str,
    mut params: Value,
    caps: Value,
    name: Option<&str>,
) -> Answer {
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let meta = params
        .as_object_mut()
        .unwrap()
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
    meta["io.modelcontextprotocol/clientCapabilities"] = caps;
    meta["io.modelcontextprotocol/clientInfo"] = json!({"name": "tasks-test", "version": "1"});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let derived = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .map(String::from);
    let mcp_name = name.map(String::from).or(derived);
    let mut h = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(n) = &mcp_name {
        h.push(("mcp-name", n.as_str()));
    }
    let mut r = s.send("POST", &h, &body.to_string()).await;
    let status = r.status.as_u16();
    if r.header("content-type").as_deref() == Some("application/json") {
        return Answer {
            status,
            msg: r.json().await,
        };
    }
    for e in r.events_until_end(T).await {
        let m = e.json();
        if m.get("method").is_none() && m["id"] == json!(id) {
            return Answer { status, msg: m };
        }
    }
    panic!("no answer to {method}");
}

fn with_ext() -> Value {
    json!({"elicitation": {}, "extensions": {EXT: {}}})
}

async fn call_tool(s: &HttpServer, tool: &str, args: Value, caps: Value) -> Answer {
    send(
        s,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        caps,
        None,
    )
    .await
}

async fn task_get(s: &HttpServer, id: &str) -> Value {
    send(s, "tasks/get", json!({"taskId": id}), with_ext(), None)
        .await
        .result()
        .clone()
}

/// Polls `tasks/get` until `pred` holds.
async fn get_until(s: &HttpServer, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + T;
    loop {
        let t = task_get(s, id).await;
        if pred(&t) {
            return t;
        }
        assert!(Instant::now() < end, "timed out; last: {t}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn terminal(t: &Value) -> bool {
    matches!(
        t["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

/// Starts a task and returns its id, checking the `CreateTaskResult` shape.
async fn create(s: &HttpServer, tool: &str, args: Value) -> String {
    let a = call_tool(s, tool, args, with_ext()).await;
    let r = a.result();
    assert_eq!(r["resultType"], "task", "{r}");
    assert!(r.get("task").is_none() && r.get("result").is_none() && r.get("ttl").is_none());
    assert!(r["ttlMs"].as_i64().unwrap() > 0, "{r}");
    assert!(r["pollIntervalMs"].as_i64().unwrap() > 0, "{r}");
    r["taskId"].as_str().unwrap().to_string()
}

fn rows(db: &std::path::Path, job_id: &str) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.query_row(
        "SELECT COUNT(*) FROM demo_import_rows WHERE job_id = ?1",
        [job_id],
        |r| r.get(0),
    )
    .unwrap_or(0)
}

#[tokio::test]
async fn a_task_is_durable_at_once_and_its_result_is_inlined_when_it_completes() {
    let s = HttpServer::start(&flags(&[])).await;
    let d = send(&s, "server/discover", json!({}), json!({}), None).await;
    let caps = &d.result()["capabilities"];
    assert!(caps["extensions"][EXT].is_object(), "{caps}");
    assert!(
        caps.get("tasks").is_none(),
        "never beside the legacy capability: {caps}"
    );

    let id = create(&s, "long_scan", json!({"steps": 5, "delay_ms": 40})).await;
    // Durable before the answer: the very next request resolves it.
    let first = task_get(&s, &id).await;
    assert_eq!(first["taskId"], id.as_str());
    assert_eq!(first["resultType"], "complete");
    let done = get_until(&s, &id, terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["structuredContent"]["scanned"], 5, "{done}");
    assert!(done["result"]["content"][0]["text"].is_string());
    assert!(done.get("error").is_none() && done.get("requestState").is_none());

    // The session era's methods that the extension removed.
    for m in ["tasks/result", "tasks/list"] {
        let a = send(&s, m, json!({"taskId": id}), with_ext(), Some(&id)).await;
        assert_eq!((a.status, a.code()), (404, -32601), "{m}: {}", a.msg);
    }
    // Mcp-Name is the task id.
    let a = send(
        &s,
        "tasks/get",
        json!({"taskId": id}),
        with_ext(),
        Some("another-task"),
    )
    .await;
    assert_eq!((a.status, a.code()), (400, -32020), "{}", a.msg);
    // Unknown ids are -32602.
    let a = send(&s, "tasks/get", json!({"taskId": "0000"}), with_ext(), None).await;
    assert_eq!(a.code(), -32602);
}

#[tokio::test]
async fn without_the_extension_there_are_no_tasks() {
    let s = HttpServer::start(&flags(&["--profile", "conformance"])).await;
    let plain = json!({"elicitation": {}});
    // A task-capable tool runs as a plain call and waits for its job.
    let a = call_tool(
        &s,
        "slow_compute",
        json!({"seconds": 0, "label": "plain"}),
        plain.clone(),
    )
    .await;
    let r = a.result();
    assert_eq!(r["resultType"], "complete", "{r}");
    assert!(r.get("taskId").is_none());
    assert_eq!(r["structuredContent"]["label"], "plain");
    // A tool that runs only as a task: -32021 naming the extension.
    let a = call_tool(&s, "failing_job", json!({}), plain.clone()).await;
    assert_eq!((a.status, a.code()), (400, -32021), "{}", a.msg);
    assert!(a.msg["error"]["data"]["requiredCapabilities"]["extensions"][EXT].is_object());
    // The tasks methods: -32021, even for an id that exists.
    let id = create(&s, "slow_compute", json!({"seconds": 30})).await;
    for (m, p) in [
        ("tasks/get", json!({"taskId": id})),
        ("tasks/cancel", json!({"taskId": id})),
        ("tasks/update", json!({"taskId": id, "inputResponses": {}})),
    ] {
        let a = send(&s, m, p, plain.clone(), None).await;
        assert_eq!(a.code(), -32021, "{m}: {}", a.msg);
    }
    send(&s, "tasks/cancel", json!({"taskId": id}), with_ext(), None).await;
}

#[tokio::test]
async fn cancel_is_an_empty_ack_and_the_job_stops_at_its_next_unit() {
    let s = HttpServer::start(&flags(&[])).await;
    let db = s.dir.path().join("staunch.db");
    let id = create(&s, "import_rows", json!({"rows": 1000, "delay_ms": 20})).await;
    get_until(&s, &id, |_| rows(&db, &id) >= 3).await;
    let ack = send(&s, "tasks/cancel", json!({"taskId": id}), with_ext(), None).await;
    let ack = ack.result();
    assert_eq!(ack["resultType"], "complete");
    for f in ["taskId", "status", "result", "error"] {
        assert!(ack.get(f).is_none(), "{ack}");
    }
    let done = get_until(&s, &id, terminal).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    let n = rows(&db, &id);
    assert!((3..1000).contains(&n), "{n} rows");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(rows(&db, &id), n, "no row after the job ended");
    // Cancelling a terminal task is the same empty ack.
    let again = send(&s, "tasks/cancel", json!({"taskId": id}), with_ext(), None).await;
    assert_eq!(again.result()["resultType"], "complete");
}

#[tokio::test]
async fn input_required_until_every_question_is_answered_through_tasks_update() {
    let s = HttpServer::start(&flags(&["--profile", "conformance"])).await;
    let id = create(&s, "multi_input", json!({})).await;
    let parked = get_until(&s, &id, |t| {
        t["inputRequests"].as_object().is_some_and(|m| m.len() == 2)
    })
    .await;
    assert_eq!(parked["status"], "input_required");
    let keys: Vec<String> = parked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        parked["inputRequests"][&keys[0]]["method"],
        "elicitation/create"
    );
    let answer = |v: &str| json!({"action": "accept", "content": {"name": v}});

    // One answer (and an unknown key, ignored): still input_required, one question left.
    let ack = send(
        &s,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {keys[0].clone(): answer("first"), "nope": {}}}),
        with_ext(),
        None,
    )
    .await;
    assert_eq!(ack.result()["resultType"], "complete");
    assert!(ack.result().get("status").is_none());
    let half = task_get(&s, &id).await;
    assert_eq!(half["status"], "input_required", "{half}");
    let left: Vec<&String> = half["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(left, vec![&keys[1]]);

    send(
        &s,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {keys[1].clone(): answer("second")}}),
        with_ext(),
        None,
    )
    .await;
    let done = get_until(&s, &id, terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    let answers = &done["result"]["structuredContent"]["answers"];
    assert_eq!(answers[0]["content"]["name"], "first", "{done}");
    assert_eq!(answers[1]["content"]["name"], "second", "{done}");
}

#[tokio::test]
async fn a_reissued_call_with_its_idempotency_key_is_one_task_and_runs_once() {
    let s = HttpServer::start(&flags(&[])).await;
    let db = s.dir.path().join("staunch.db");
    let args = json!({"rows": 4, "delay_ms": 20, "idempotency_key": "import-2026-0001"});
    let first = create(&s, "import_rows", args.clone()).await;
    // The stream broke; the client re-issues with a new request id.
    let second = create(&s, "import_rows", args).await;
    assert_eq!(first, second);
    let done = get_until(&s, &first, terminal).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(rows(&db, &first), 4);
}

#[tokio::test]
async fn a_single_sqlite_instance_restarted_mid_task_answers_for_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.db").display().to_string();
    let f = flags(&["--instance-name", "solo"]);
    let mut s = HttpServer::start_on(Some(&store), &f).await;
    let side = create(&s, "import_rows", json!({"rows": 1000, "delay_ms": 20})).await;
    let safe = create(&s, "long_scan", json!({"steps": 40, "delay_ms": 25})).await;
    get_until(&s, &safe, |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("of"))
    })
    .await;
    // SIGKILL: no shutdown, no release of leases.
    s.child.start_kill().unwrap();
    s.child.wait().await.unwrap();

    let s = HttpServer::start_on(Some(&store), &f).await;
    // The side-effecting job is never re-run: it failed with its lease (a protocol-level
    // failure, no tool result).
    let t = get_until(&s, &side, terminal).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"]["code"], -32603);
    assert_eq!(t["error"]["data"]["reason"], "lease_lost");
    assert!(t.get("result").is_none());
    // The retry-safe one runs again and completes.
    let t = get_until(&s, &safe, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["structuredContent"]["scanned"], 40, "{t}");
    assert_eq!(t["result"]["structuredContent"]["attempt"], 2, "{t}");
}

/// Two instances on one fresh PostgreSQL schema, with the conformance profile (whose task
/// fixtures are durable jobs, some of which ask questions).
async fn pg_pair(test: &str) -> Option<(HttpServer, HttpServer, String, String)> {
    let (url, schema) = common::pg::fresh_schema(test)?;
    let args = |name: &'static str| -> Vec<&str> {
        let mut f = flags(&["--profile", "conformance", "--instance-name", name]);
        f.extend(["--store-schema", schema.as_str()]);
        f
    };
    let a = HttpServer::start_on(Some(&url), &args("a")).await;
    let b = HttpServer::start_on(Some(&url), &args("b")).await;
    Some((a, b, url, schema))
}

#[tokio::test]
async fn postgres_a_task_made_on_one_instance_is_read_answered_and_cancelled_on_another() {
    let Some((mut a, mut b, url, schema)) = pg_pair("tasks 2026 on two instances").await else {
        return;
    };
    // Questions asked by a body running on A, answered on B.
    let q = create(&a, "confirm_delete", json!({"filename": "x.txt"})).await;
    let parked = get_until(&b, &q, |t| t["status"] == "input_required").await;
    let key = parked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    send(
        &b,
        "tasks/update",
        json!({"taskId": q, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
        with_ext(),
        None,
    )
    .await;
    let done = get_until(&a, &q, terminal).await;
    assert_eq!(
        done["result"]["structuredContent"]["deleted"], true,
        "{done}"
    );

    // Cancelled on B while it runs on A.
    let c = create(&a, "slow_compute", json!({"seconds": 60})).await;
    get_until(&b, &c, |t| t["statusMessage"] == "Running.").await;
    send(&b, "tasks/cancel", json!({"taskId": c}), with_ext(), None).await;
    assert_eq!(get_until(&a, &c, terminal).await["status"], "cancelled");

    // Created on A; the instance whose worker claimed it is SIGKILLed; the other one reads it:
    // its reaper ends it within the lease, never re-running this side-effect-free but not
    // retry-safe job.
    let k = create(&a, "slow_compute", json!({"seconds": 60})).await;
    get_until(&b, &k, |t| t["statusMessage"] == "Running.").await;
    let owner = lease_owner(&url, &schema, &k);
    let (victim, survivor) = if owner == "a" {
        (&mut a, &b)
    } else {
        (&mut b, &a)
    };
    victim.child.start_kill().unwrap();
    victim.child.wait().await.unwrap();
    let t = get_until(survivor, &k, terminal).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"]["data"]["reason"], "lease_lost", "{t}");
    drop((a, b));
    common::pg::drop_schema(&url, &schema);
}

/// The instance name holding a job's lease.
fn lease_owner(url: &str, schema: &str, job: &str) -> String {
    let out = std::process::Command::new("psql")
        .arg(url)
        .arg("-tAc")
        .arg(format!(
            "SELECT lease_owner FROM {schema}.staunch_jobs WHERE id = '{job}'"
        ))
        .output()
        .expect("psql");
    let owner = String::from_utf8_lossy(&out.stdout).trim().to_string();
    owner.split('/').next().unwrap_or_default().to_string()
}

/// Opens `subscriptions/listen` for `task_ids` on `s` and waits for its acknowledgement.
async fn listen_tasks(s: &HttpServer, task_ids: &[&str]) -> common::http::Resp {
    let body = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": task_ids}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": with_ext(),
            "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"}}}});
    let h = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "subscriptions/listen"),
    ];
    let mut stream = s.send("POST", &h, &body.to_string()).await;
    assert_eq!(stream.status, 200);
    let ack = stream.next_event(T).await.expect("an ack").json();
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!(task_ids),
        "{ack}"
    );
    stream
}

/// The `notifications/tasks` a listen stream carries, until one with a terminal status.
async fn task_notes_until_terminal(stream: &mut common::http::Resp) -> Vec<Value> {
    let mut notes = Vec::new();
    let end = Instant::now() + T;
    while Instant::now() < end {
        let Some(e) = stream.next_event(end - Instant::now()).await else {
            break;
        };
        let m = e.json();
        if m["method"] == "notifications/tasks" {
            let done = terminal(&m["params"]);
            notes.push(m["params"].clone());
            if done {
                return notes;
            }
        }
    }
    panic!("no terminal task status on the listen stream; heard {notes:?}");
}

/// A 2026 client's listen stream on one instance hears a task that runs on the other, each
/// status change in order (a round-robin balancer sends the listen and the work to different
/// instances); and the instance that runs it tells its own listeners while it works, not only
/// when it ends.
#[tokio::test]
async fn postgres_a_listener_on_either_instance_hears_every_status_of_a_task_in_order() {
    let Some((a, b, url, schema)) = pg_pair("task pushes across instances").await else {
        return;
    };
    let q = create(&a, "confirm_delete", json!({"filename": "x.txt"})).await;
    let parked = get_until(&b, &q, |t| t["status"] == "input_required").await;
    let owner = lease_owner(&url, &schema, &q);
    let (runs, other) = if owner == "a" { (&a, &b) } else { (&b, &a) };
    let mut there = listen_tasks(other, &[&q]).await;
    let mut here = listen_tasks(runs, &[&q]).await;
    let key = parked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    send(
        other,
        "tasks/update",
        json!({"taskId": q, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
        with_ext(),
        None,
    )
    .await;
    for (name, stream) in [
        ("the other instance", &mut there),
        ("its own instance", &mut here),
    ] {
        let notes = task_notes_until_terminal(stream).await;
        let statuses: Vec<&str> = notes
            .iter()
            .map(|n| n["status"].as_str().unwrap())
            .collect();
        // Once answered the task works again, then completes. A listener hears what the row
        // says when it reads it, so a step that passed quickly may be folded into the next;
        // but nothing older comes after something newer, and the end is said once, last,
        // with the result.
        let rank = |s: &str| match s {
            "input_required" => 0,
            "working" => 1,
            "completed" => 2,
            other => panic!("{name}: unexpected status {other}: {notes:?}"),
        };
        assert!(
            statuses.windows(2).all(|w| rank(w[0]) <= rank(w[1])),
            "{name}: out of order: {notes:?}"
        );
        assert_eq!(
            statuses.iter().filter(|s| **s == "completed").count(),
            1,
            "{name}: {notes:?}"
        );
        assert!(
            notes.iter().all(|n| n["taskId"] == q.as_str()),
            "{name}: {notes:?}"
        );
        let last = notes.last().unwrap();
        assert_eq!(
            last["result"]["structuredContent"]["deleted"], true,
            "{name}: {last}"
        );
    }

    // While a long task works, a listener on the instance that does not run it hears it
    // start and hears it end when it is cancelled there.
    let c = create(&a, "slow_compute", json!({"seconds": 60})).await;
    get_until(&b, &c, |t| t["statusMessage"] == "Running.").await;
    let owner = lease_owner(&url, &schema, &c);
    let other = if owner == "a" { &b } else { &a };
    let mut there = listen_tasks(other, &[&c]).await;
    send(
        other,
        "tasks/cancel",
        json!({"taskId": c}),
        with_ext(),
        None,
    )
    .await;
    let notes = task_notes_until_terminal(&mut there).await;
    assert_eq!(notes.last().unwrap()["status"], "cancelled", "{notes:?}");
    drop((a, b));
    common::pg::drop_schema(&url, &schema);
}
