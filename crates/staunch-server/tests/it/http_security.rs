//! Issue 12, hardening: one regression test per finding, each against the HTTP transport over
//! loopback. Work is bound to its owner scope (without auth: the session
//! that created it); every limit holds against a hostile client and says so clearly.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use staunch_testkit::TestServer;
use staunch_testkit::http::{call, rpc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(15);

fn req(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn text_of(resp: &Value) -> String {
    resp["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `start_import_rows` in a session; its job id, or the refusal text.
async fn start_import(s: &TestServer, sid: &str, id: i64, args: Value) -> Result<String, String> {
    let r = rpc(s, sid, call(json!(id), "start_import_rows", args, None)).await;
    if r["result"]["isError"] == true {
        return Err(text_of(&r));
    }
    Ok(r["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no job id: {r}"))
        .to_string())
}

async fn job_status(s: &TestServer, sid: &str, job: &str) -> Value {
    let r = rpc(
        s,
        sid,
        call(json!(900), "get_import_rows", json!({"job_id": job}), None),
    )
    .await;
    r["result"].clone()
}

/// Writes `request` on a fresh connection and reads until the server closes it (bounded).
async fn raw(port: u16, request: &[u8]) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.write_all(request).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(T, tcp.read_to_end(&mut buf)).await;
    String::from_utf8_lossy(&buf).into_owned()
}

fn status_line(resp: &str) -> &str {
    resp.lines().next().unwrap_or_default()
}

fn ping(id: i64) -> Value {
    req(id, "ping", json!({}))
}

/// Rows of a SQLite store's session table with this id.
fn stored_sessions(s: &TestServer, sid: &str) -> i64 {
    let c = rusqlite::Connection::open(s.dir().join("staunch.db")).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.query_row(
        "SELECT COUNT(*) FROM staunch_sessions WHERE id = ?1",
        [sid],
        |r| r.get(0),
    )
    .unwrap_or(-1)
}

// ---- 1. Binding ----------------------------------------------------------------------------

#[tokio::test]
async fn another_session_cannot_read_or_cancel_a_job() {
    let s = TestServer::setup().fast_jobs().start().await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    let job = start_import(&s, &a, 1, json!({"rows": 40, "delay_ms": 100}))
        .await
        .unwrap();

    let got = rpc(
        &s,
        &b,
        call(json!(2), "get_import_rows", json!({"job_id": job}), None),
    )
    .await;
    assert_eq!(got["result"]["isError"], true, "{got}");
    assert!(text_of(&got).contains("No import_rows job"), "{got}");
    // Exactly the answer an id that never existed gets.
    let never = rpc(
        &s,
        &b,
        call(
            json!(3),
            "get_import_rows",
            json!({"job_id": "0123456789abcdef0123456789abcdef"}),
            None,
        ),
    )
    .await;
    assert_eq!(
        text_of(&got).replace(&job, "ID"),
        text_of(&never).replace("0123456789abcdef0123456789abcdef", "ID")
    );

    let cancel = rpc(
        &s,
        &b,
        call(json!(4), "cancel_import_rows", json!({"job_id": job}), None),
    )
    .await;
    assert_eq!(cancel["result"]["isError"], true, "{cancel}");
    // A's job was not touched.
    let mine = job_status(&s, &a, &job).await;
    assert_ne!(mine["structuredContent"]["status"], "cancelled", "{mine}");
    assert!(
        mine["structuredContent"].get("cancel_requested").is_none()
            || mine["structuredContent"]["cancel_requested"] == false,
        "{mine}"
    );
    let own = rpc(
        &s,
        &a,
        call(json!(5), "cancel_import_rows", json!({"job_id": job}), None),
    )
    .await;
    assert_ne!(own["result"]["isError"], true, "{own}");
}

/// Without auth, keys are the server's (its clients cannot be told apart, and a client that
/// lost its session retries in a new one), so the same key in another session is the same key.
/// What it may learn is only what the same key with the same arguments implies: that job. The
/// key with other arguments is refused, and the refusal names no job.
#[tokio::test]
async fn a_reused_key_does_not_reveal_another_sessions_job() {
    let s = TestServer::setup().fast_jobs().start().await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    let job_a = start_import(
        &s,
        &a,
        1,
        json!({"rows": 2, "delay_ms": 10, "idempotency_key": "k-1"}),
    )
    .await
    .unwrap();
    // The same key with other arguments in B: refused, naming no job.
    let refusal = start_import(
        &s,
        &b,
        2,
        json!({"rows": 3, "delay_ms": 10, "idempotency_key": "k-1"}),
    )
    .await
    .expect_err("the key is in use with other arguments");
    assert!(!refusal.contains(&job_a), "{refusal}");
    assert!(refusal.contains("Nothing was started"), "{refusal}");
    // The same key with the same arguments in B is the same work: A's job, not a second one.
    let again_b = start_import(
        &s,
        &b,
        3,
        json!({"rows": 2, "delay_ms": 10, "idempotency_key": "k-1"}),
    )
    .await
    .unwrap();
    assert_eq!(again_b, job_a);
    // Within A the key still works: a replay returns A's job.
    let replay_a = start_import(
        &s,
        &a,
        4,
        json!({"rows": 2, "delay_ms": 10, "idempotency_key": "k-1"}),
    )
    .await
    .unwrap();
    assert_eq!(replay_a, job_a);
}

#[tokio::test]
async fn inflight_dedupe_does_not_hand_another_session_the_job() {
    let s = TestServer::setup().fast_jobs().start().await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    let args = json!({"rows": 40, "delay_ms": 100});
    let job_a = start_import(&s, &a, 1, args.clone()).await.unwrap();
    // Same arguments, no key, while A's runs: dedupe joins A's own calls...
    let again_a = start_import(&s, &a, 2, args.clone()).await.unwrap();
    assert_eq!(again_a, job_a);
    // ...but never B's.
    let job_b = start_import(&s, &b, 3, args).await.unwrap();
    assert_ne!(job_b, job_a);
}

#[tokio::test]
async fn another_session_cannot_cancel_a_task() {
    let s = TestServer::setup().fast_jobs().start().await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    let mut create = call(
        json!(1),
        "import_rows",
        json!({"rows": 40, "delay_ms": 100}),
        None,
    );
    create["params"]["task"] = json!({"ttl": 60000});
    let created = rpc(&s, &a, create).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_string();

    // Through the tool face...
    let via_tool = rpc(
        &s,
        &b,
        call(
            json!(2),
            "cancel_import_rows",
            json!({"job_id": task}),
            None,
        ),
    )
    .await;
    assert_eq!(via_tool["result"]["isError"], true, "{via_tool}");
    // ...and through tasks/cancel.
    let via_tasks = rpc(&s, &b, req(3, "tasks/cancel", json!({"taskId": task}))).await;
    assert_eq!(via_tasks["error"]["code"], -32602, "{via_tasks}");

    let status = rpc(&s, &a, req(4, "tasks/get", json!({"taskId": task}))).await;
    assert_eq!(status["result"]["status"], "working", "{status}");
}

#[tokio::test]
async fn replaying_another_sessions_stream_is_refused() {
    let s = TestServer::start().await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    let mut r = s
        .post(
            Some(&a),
            // A progress token: the answer is a resumable stream (not a plain JSON body).
            &call(
                json!(1),
                "echo",
                json!({"text": "secret"}),
                Some(json!("t")),
            ),
        )
        .await;
    let events = r.events_until_end(T).await;
    let first = events[0].id.clone().expect("an event id");
    let replay = s.get(&b, Some(&first)).await;
    assert_eq!(replay.status, 404);
    let own = s.get(&a, Some(&first)).await;
    assert_eq!(own.status, 200);
}

// ---- 2. Limits -----------------------------------------------------------------------------

#[tokio::test]
async fn an_oversized_initialize_is_refused_and_nothing_is_kept() {
    let s = TestServer::setup()
        .http(|h| h.max_client_info_bytes = 4096)
        .start()
        .await;
    let big = "x".repeat(10_000);
    let r = s
        .post(
            None,
            &req(
                0,
                "initialize",
                json!({"protocolVersion": "2025-11-25",
                       "capabilities": {"experimental": {"pad": big}},
                       "clientInfo": {"name": "big", "version": "0"}}),
            ),
        )
        .await;
    assert_eq!(r.status, 413);
    assert!(r.header("mcp-session-id").is_none());
    let body = r.json().await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-client-info-bytes"),
        "{body}"
    );
    let c = rusqlite::Connection::open(s.dir().join("staunch.db")).unwrap();
    let n: i64 = c
        .query_row("SELECT COUNT(*) FROM staunch_sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    // A normal one still works.
    s.initialize().await;
}

#[tokio::test]
async fn a_session_flood_does_not_lock_real_clients_out() {
    let s = TestServer::setup()
        .http(|h| h.max_sessions = 5)
        .start()
        .await;
    for _ in 0..5 {
        let r = s
            .post(
                None,
                &req(
                    0,
                    "initialize",
                    json!({"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "flood", "version": "0"}}),
                ),
            )
            .await;
        assert_eq!(r.status, 200);
    }
    // The table is full of sessions nobody uses: a real client still gets in.
    let real = s.initialize().await;
    let pong = rpc(&s, &real, ping(1)).await;
    assert!(pong.get("result").is_some(), "{pong}");

    // Only when every session is in use does an initialize get 503.
    let s = TestServer::setup()
        .http(|h| h.max_sessions = 3)
        .start()
        .await;
    for i in 0..3 {
        let sid = s.initialize().await;
        rpc(&s, &sid, ping(i)).await;
    }
    let r = s
        .post(
            None,
            &req(
                0,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "late", "version": "0"}}),
            ),
        )
        .await;
    assert_eq!(r.status, 503);
    let body = r.json().await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-sessions"),
        "{body}"
    );
}

#[tokio::test]
async fn sessions_per_peer_are_limited() {
    let s = TestServer::setup()
        .http(|h| h.max_sessions_per_peer = 2)
        .start()
        .await;
    for i in 0..2 {
        let sid = s.initialize().await;
        rpc(&s, &sid, ping(i)).await;
    }
    let r = s
        .post(
            None,
            &req(
                0,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "third", "version": "0"}}),
            ),
        )
        .await;
    assert_eq!(r.status, 429);
    let body = r.json().await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-sessions-per-peer"),
        "{body}"
    );
}

#[tokio::test]
async fn a_session_never_used_after_initialize_expires() {
    let s = TestServer::setup()
        .http(|h| h.session_unused = Duration::from_secs(1))
        .start()
        .await;
    let r = s
        .post(
            None,
            &req(
                0,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "idle", "version": "0"}}),
            ),
        )
        .await;
    let unused = r.header("mcp-session-id").unwrap();
    let used = s.initialize().await;
    rpc(&s, &used, ping(1)).await;
    assert_eq!(stored_sessions(&s, &unused), 1);
    let mut gone = false;
    for _ in 0..150 {
        if stored_sessions(&s, &unused) == 0 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the unused session is still stored");
    assert_eq!(s.post(Some(&unused), &ping(2)).await.status, 404);
    // A session in use is not affected.
    let pong = rpc(&s, &used, ping(3)).await;
    assert!(pong.get("result").is_some(), "{pong}");
}

#[tokio::test]
async fn one_session_cannot_take_every_in_flight_slot() {
    let s = Arc::new(
        TestServer::setup()
            .config(|c| {
                c.max_in_flight = 16;
                c.max_in_flight_per_session = 3;
            })
            .start()
            .await,
    );
    let a = s.initialize().await;
    let b = s.initialize().await;
    let json_only = |sid: String, msg: Value| {
        let s = s.clone();
        async move {
            let h = [
                ("content-type", "application/json"),
                ("accept", "application/json"),
                ("mcp-session-id", sid.as_str()),
                ("mcp-protocol-version", "2025-11-25"),
            ];
            s.send("POST", &h, &msg.to_string()).await.json().await
        }
    };
    // Three slow JSON-only calls fill A's share...
    let mut slow = Vec::new();
    for i in 0..3 {
        slow.push(tokio::spawn(json_only(
            a.clone(),
            call(
                json!(i),
                "slow_count",
                json!({"steps": 100, "delay_ms": 100}),
                None,
            ),
        )));
    }
    let hash = staunch_server::session_hash(&a);
    s.log_until(|l| {
        l.iter()
            .filter(|x| x["session"] == hash.as_str() && x["event"] == "request.start")
            .count()
            >= 4 // initialize + three calls
    })
    .await;
    // ...so a fourth from A is refused at once, with a reason...
    let fourth = json_only(
        a.clone(),
        call(json!(9), "echo", json!({"text": "x"}), None),
    )
    .await;
    assert_eq!(fourth["error"]["code"], -32000, "{fourth}");
    assert!(
        fourth["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-in-flight-per-session"),
        "{fourth}"
    );
    // ...and B is served.
    let other = json_only(
        b.clone(),
        call(json!(1), "echo", json!({"text": "y"}), None),
    )
    .await;
    assert!(other.get("result").is_some(), "{other}");
    let del = s
        .send("DELETE", &[("mcp-session-id", a.as_str())], "")
        .await;
    assert_eq!(del.status, 200);
    for t in slow {
        let _ = tokio::time::timeout(T, t).await;
    }
}

#[tokio::test]
async fn queued_and_running_jobs_per_owner_are_limited() {
    let s = TestServer::setup()
        .fast_jobs()
        .jobs(|j| {
            j.max_active_per_owner = Some(2);
            j.workers = 1;
        })
        .start()
        .await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    for rows in [40, 41] {
        start_import(
            &s,
            &a,
            i64::from(rows),
            json!({"rows": rows, "delay_ms": 100}),
        )
        .await
        .unwrap();
    }
    let refused = start_import(&s, &a, 3, json!({"rows": 42, "delay_ms": 100}))
        .await
        .unwrap_err();
    assert!(refused.contains("2 jobs queued or running"), "{refused}");
    // Another owner is not affected.
    start_import(&s, &b, 4, json!({"rows": 43, "delay_ms": 100}))
        .await
        .unwrap();
}

#[tokio::test]
async fn slowloris_connections_are_closed_by_the_header_read_timeout() {
    let s = TestServer::setup()
        .http(|h| h.header_read_timeout = Duration::from_millis(300))
        .start()
        .await;
    let mut held = Vec::new();
    for _ in 0..50 {
        let mut tcp = TcpStream::connect(("127.0.0.1", s.port)).await.unwrap();
        tcp.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        held.push(tcp);
    }
    let mut closed = 0;
    for mut tcp in held {
        let mut buf = [0u8; 1024];
        let end = tokio::time::Instant::now() + T;
        loop {
            match tokio::time::timeout_at(end, tcp.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => {
                    closed += 1;
                    break;
                }
                Ok(Ok(_)) => continue,
                Err(_) => break,
            }
        }
    }
    assert_eq!(closed, 50, "half-open connections still held");
    s.initialize().await;
}

#[tokio::test]
async fn connections_over_the_limit_get_503() {
    let s = TestServer::setup()
        .http(|h| {
            h.max_connections = 4;
            h.header_read_timeout = Duration::from_secs(60);
        })
        .start()
        .await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(("127.0.0.1", s.port)).await.unwrap());
    }
    // The accept loop sees them in order; the fifth is over the limit.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let resp = raw(
        s.port,
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(status_line(&resp).contains("503"), "{resp}");
    assert!(resp.contains("--max-connections"), "{resp}");
    drop(held);
    // Once they are gone, connections are served again.
    let mut ok = false;
    for _ in 0..50 {
        let r = raw(
            s.port,
            b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await;
        if status_line(&r).contains("400") {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok);
}

#[tokio::test]
async fn a_body_that_never_arrives_gets_408() {
    let s = TestServer::setup()
        .http(|h| h.body_read_timeout = Duration::from_millis(300))
        .start()
        .await;
    let resp = raw(
        s.port,
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Content-Length: 100\r\nConnection: close\r\n\r\n{\"jsonrpc\"",
    )
    .await;
    assert!(status_line(&resp).contains("408"), "{resp}");
    assert!(resp.contains("--body-read-timeout-ms"), "{resp}");
}

/// A complete `initialize` POST with these extra header lines: served (200) unless a header
/// check refuses it.
fn initialize_with(headers: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    format!(
        "POST /mcp HTTP/1.1\r\n{headers}Content-Type: application/json\r\nAccept: \
         application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: \
         close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn duplicate_host_or_origin_headers_are_refused() {
    let s = TestServer::start().await;
    let ok = raw(s.port, initialize_with("Host: 127.0.0.1\r\n").as_bytes()).await;
    assert!(status_line(&ok).contains("200"), "{ok}");
    let r = raw(
        s.port,
        initialize_with("Host: 127.0.0.1\r\nHost: evil.example\r\n").as_bytes(),
    )
    .await;
    assert!(status_line(&r).contains("400"), "{r}");
    assert!(r.contains("more than one host header"), "{r}");
    let r = raw(
        s.port,
        initialize_with(
            "Host: 127.0.0.1\r\nOrigin: http://localhost\r\nOrigin: http://evil.example\r\n",
        )
        .as_bytes(),
    )
    .await;
    assert!(status_line(&r).contains("400"), "{r}");
    assert!(r.contains("more than one origin header"), "{r}");
}

#[tokio::test]
async fn host_and_origin_ports_are_range_checked() {
    let s = TestServer::start().await;
    let ok = raw(
        s.port,
        initialize_with("Host: localhost:65535\r\n").as_bytes(),
    )
    .await;
    assert!(status_line(&ok).contains("200"), "{ok}");
    let r = raw(
        s.port,
        initialize_with("Host: localhost:99999\r\n").as_bytes(),
    )
    .await;
    assert!(status_line(&r).contains("403"), "{r}");
    let r = raw(
        s.port,
        initialize_with("Host: localhost:8080\r\nOrigin: http://localhost:70000\r\n").as_bytes(),
    )
    .await;
    assert!(status_line(&r).contains("403"), "{r}");
}

#[tokio::test]
async fn a_last_event_id_at_the_top_of_u64_is_404_not_a_wrap() {
    let s = TestServer::start().await;
    let sid = s.initialize().await;
    let mut r = s
        .post(
            Some(&sid),
            &call(
                json!(1),
                "slow_count",
                json!({"steps": 50, "delay_ms": 100}),
                None,
            ),
        )
        .await;
    let prime = r.next_event(T).await.expect("priming event");
    let stream = prime.id.unwrap().rsplit_once(':').unwrap().0.to_string();
    for seq in [u64::MAX, (i64::MAX as u64) + 1, 1_000_000] {
        let resumed = s.get(&sid, Some(&format!("{stream}:{seq}"))).await;
        assert_eq!(resumed.status, 404, "seq {seq}");
    }
    let fine = s.get(&sid, Some(&format!("{stream}:0"))).await;
    assert_eq!(fine.status, 200);
}

// ---- 3. Logs -------------------------------------------------------------------------------

#[tokio::test]
async fn session_ids_are_hashed_in_the_lifecycle_log_and_the_file_is_private() {
    let s = TestServer::start().await;
    let sid = s.initialize().await;
    rpc(
        &s,
        &sid,
        call(json!(1), "echo", json!({"text": "hi"}), None),
    )
    .await;
    let hash = staunch_server::session_hash(&sid);
    let lines = s
        .log_until(|l| {
            l.iter()
                .any(|x| x["session"] == hash.as_str() && x["event"] == "request.end")
        })
        .await;
    assert!(
        lines
            .iter()
            .any(|x| x["session"] == hash.as_str() && x["event"] == "request.end")
    );
    let raw_log = std::fs::read_to_string(&s.log_path).unwrap();
    assert!(!raw_log.contains(&sid), "the session id is in the log");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&s.log_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}
