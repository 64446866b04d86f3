//! Issue 12, what one owner may do to another: the job worker is shared fairly between owners,
//! stateless (2026-07-28) requests have a per-peer share of the in-flight slots, and the demo's
//! `imported_rows` answers only the job's owner. Over loopback HTTP, on a SQLite store
//! file.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_testkit::http::{Resp, call, rpc, stateless};
use staunch_testkit::{Setup, TestServer};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(20);

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

/// The demo server with static bearer tokens for alice and bob, set up further by `more`.
async fn bearer_server(more: impl FnOnce(Setup) -> Setup) -> TestServer {
    more(TestServer::setup().bearer(&format!("{ALICE} alice\n{BOB} bob\n")))
        .start()
        .await
}

fn text_of(resp: &Value) -> String {
    resp["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `start_import_rows` in a session; the job id.
async fn start_import(s: &TestServer, sid: &str, args: Value) -> String {
    let r = rpc(
        s,
        sid,
        call(json!("start"), "start_import_rows", args, None),
    )
    .await;
    r["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no job id: {r}"))
        .to_string()
}

/// Polls `get_import_rows` in the job's session until it is terminal (bounded).
async fn until_terminal(s: &TestServer, sid: &str, job: &str) -> Value {
    let end = Instant::now() + T;
    loop {
        let r = rpc(
            s,
            sid,
            call(
                json!("get"),
                "get_import_rows",
                json!({"job_id": job}),
                None,
            ),
        )
        .await;
        let v = r["result"]["structuredContent"].clone();
        if matches!(
            v["status"].as_str(),
            Some("succeeded" | "failed" | "cancelled")
        ) {
            return v;
        }
        assert!(Instant::now() < end, "job {job} not terminal in time: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// When each job started, from the store file (the record the worker wrote on its claim).
fn started_ms(s: &TestServer, jobs: &[&str]) -> Vec<i64> {
    let c = rusqlite::Connection::open(s.dir().join("staunch.db")).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    jobs.iter()
        .map(|id| {
            c.query_row(
                "SELECT started_ms FROM staunch_jobs WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
        })
        .collect()
}

/// Regression (issue 12): the worker claimed the oldest queued job of anyone, so a session
/// that queued a backlog first held every other session's job until the backlog drained. Now
/// the next free slot goes to the owner with the fewest jobs running (then the one served
/// longest ago): B's one job starts before A's third and fourth.
#[tokio::test]
async fn one_owners_backlog_does_not_hold_back_another_owners_job() {
    let s = TestServer::setup()
        .fast_jobs()
        .jobs(|j| j.workers = 2)
        .start()
        .await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    let mut backlog = Vec::new();
    // Different arguments, or the in-flight dedupe would join them into one job.
    for rows in 8..12 {
        backlog.push(start_import(&s, &a, json!({"rows": rows, "delay_ms": 100})).await);
    }
    let theirs = start_import(&s, &b, json!({"rows": 1, "delay_ms": 0})).await;
    for job in &backlog {
        assert_eq!(until_terminal(&s, &a, job).await["status"], "succeeded");
    }
    assert_eq!(until_terminal(&s, &b, &theirs).await["status"], "succeeded");
    let ids: Vec<&str> = backlog
        .iter()
        .map(String::as_str)
        .chain([theirs.as_str()])
        .collect();
    let t = started_ms(&s, &ids);
    let (a3, a4, b1) = (t[2], t[3], t[4]);
    // With two workers, A's first two jobs took both slots; the first slot to free went to B.
    assert!(
        b1 <= a3 && b1 < a4,
        "B's job started at {b1}, after A's backlog (A3 {a3}, A4 {a4}): {t:?}"
    );
}

/// A stateless `tools/call` as `token`.
async fn call_2026(s: &TestServer, token: &str, id: i64, tool: &str, args: Value) -> Resp {
    let msg = stateless(
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": args}),
    );
    let bearer = format!("Bearer {token}");
    s.post_stateless_with(&msg, &[("authorization", bearer.as_str())])
        .await
}

/// Regression (issue 12): stateless requests had no share but the server-wide limit, so one
/// client could hold every slot with slow calls. Now a peer (here: a bearer token's principal)
/// has at most `--max-in-flight-per-peer` in flight; the next is refused with 429, a
/// `Retry-After` and a JSON-RPC error naming the limit, while another principal is served, and
/// the place comes back when a call ends.
#[tokio::test]
async fn one_peer_cannot_take_every_stateless_slot() {
    let s = bearer_server(|s| s.config(|c| c.max_in_flight_per_peer = 2)).await;
    let slow = json!({"steps": 200, "delay_ms": 100});
    // Two slow calls fill Alice's share: each answer's head means it was admitted.
    let mut held = Vec::new();
    for id in 1..=2 {
        let r = call_2026(&s, ALICE, id, "slow_count", slow.clone()).await;
        assert_eq!(r.status, 200);
        held.push(r);
    }
    let refused = call_2026(&s, ALICE, 3, "echo", json!({"text": "x"})).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    let body = refused.json().await;
    assert_eq!(body["id"], 3, "{body}");
    assert_eq!(body["error"]["code"], -32000, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-in-flight-per-peer"), "{body}");
    // Bob is another peer with his own share.
    let bob = call_2026(&s, BOB, 4, "echo", json!({"text": "y"})).await;
    assert_eq!(bob.status, 200);
    let bob = bob.json().await;
    assert_eq!(bob["result"]["content"][0]["text"], "y", "{bob}");
    // Closing a stream cancels its call; once it has ended, Alice has a place again.
    drop(held.pop());
    let end = Instant::now() + T;
    loop {
        let r = call_2026(&s, ALICE, 5, "echo", json!({"text": "z"})).await;
        if r.status == 200 {
            let v = r.json().await;
            assert_eq!(v["result"]["content"][0]["text"], "z", "{v}");
            break;
        }
        assert_eq!(r.status, 429);
        assert!(Instant::now() < end, "Alice's place never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(held);
}

/// An `imported_rows` answer: its structured result, or its error text.
async fn imported_rows(s: &TestServer, sid: &str, job: &str) -> Result<Value, String> {
    let r = rpc(
        s,
        sid,
        call(
            json!("count"),
            "imported_rows",
            json!({"job_id": job}),
            None,
        ),
    )
    .await;
    if r["result"]["isError"] == true {
        return Err(text_of(&r));
    }
    Ok(r["result"]["structuredContent"].clone())
}

/// Regression (issue 12): the demo's `imported_rows` counted the rows of any job id for anyone.
/// Now only the job's owner gets the count; another session gets exactly what a job id that
/// never existed gets.
#[tokio::test]
async fn imported_rows_answers_only_the_jobs_owner() {
    let s = TestServer::setup().fast_jobs().start().await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    let job = start_import(&s, &a, json!({"rows": 3, "delay_ms": 0})).await;
    assert_eq!(until_terminal(&s, &a, &job).await["status"], "succeeded");
    let mine = imported_rows(&s, &a, &job).await.unwrap();
    assert_eq!(
        (mine["rows"].as_i64(), mine["attempts"].as_i64()),
        (Some(3), Some(1))
    );

    let theirs = imported_rows(&s, &b, &job).await.unwrap_err();
    let never = "j_0000000000000000000000000000000000";
    let unknown = imported_rows(&s, &b, never).await.unwrap_err();
    assert!(theirs.contains("is known here"), "{theirs}");
    assert_eq!(
        theirs.replace(&job, "ID"),
        unknown.replace(never, "ID"),
        "another owner's job must look like one that never existed"
    );
}

/// Opens a 2025 session as the bearer of `token`; its id.
async fn session_as(s: &TestServer, token: &str) -> Result<String, Resp> {
    let bearer = format!("Bearer {token}");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    let r = s
        .send(
            "POST",
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("authorization", bearer.as_str()),
            ],
            &init.to_string(),
        )
        .await;
    if r.status != 200 {
        return Err(r);
    }
    let sid = r.header("mcp-session-id").expect("session id");
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let n = post_in(s, token, &sid, &done).await;
    assert_eq!(n.status, 202);
    Ok(sid)
}

/// POSTs `msg` in session `sid` as the bearer of `token`.
async fn post_in(s: &TestServer, token: &str, sid: &str, msg: &Value) -> Resp {
    let bearer = format!("Bearer {token}");
    s.send(
        "POST",
        &[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("authorization", bearer.as_str()),
            ("mcp-session-id", sid),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        &msg.to_string(),
    )
    .await
}

/// A slow call in a session: `Ok(stream)` when admitted (the stream stays open), `Err(message)`
/// when refused at once.
async fn slow_call(s: &TestServer, token: &str, sid: &str, id: i64) -> Result<Resp, String> {
    let msg = call(
        json!(id),
        "slow_count",
        json!({"steps": 300, "delay_ms": 100}),
        Some(json!(format!("p{id}"))),
    );
    let mut r = post_in(s, token, sid, &msg).await;
    assert_eq!(r.status, 200);
    // Admitted: the first progress arrives; refused: the error is the only message.
    let first = r
        .next_message(T)
        .await
        .unwrap_or_else(|| panic!("call {id}: no message"));
    match first.get("error") {
        Some(e) => Err(e["message"].as_str().unwrap_or_default().to_string()),
        None => Ok(r),
    }
}

/// Regression (security review, second pass, finding 2): the fair share split the slots among
/// holders already busy, so a client alone took every slot (one peer with 5 sessions held all
/// 1,024; with `--max-in-flight 64` one session took 64) and a newcomer got "server busy".
/// Now a client — here a principal spread over two sessions — stops at three quarters of the
/// slots once it is the only busy one, and another client is served.
#[tokio::test]
async fn in_flight_fairness_keeps_room_when_one_client_is_alone() {
    let s = bearer_server(|s| s.config(|c| c.max_in_flight = 8)).await;
    let a1 = session_as(&s, ALICE).await.ok().expect("a session");
    let a2 = session_as(&s, ALICE).await.ok().expect("a session");
    let mut held = Vec::new();
    let mut refused = Vec::new();
    for id in 1..=8 {
        let sid = if id % 2 == 0 { &a1 } else { &a2 };
        match slow_call(&s, ALICE, sid, id).await {
            Ok(stream) => held.push(stream),
            Err(m) => refused.push(m),
        }
    }
    assert_eq!(
        held.len(),
        6,
        "alice alone holds 3/4 of 8; refused: {refused:?}"
    );
    assert!(
        refused.iter().all(|m| m.contains("fair share")),
        "{refused:?}"
    );
    // Bob, a newcomer, is served from the quarter kept free.
    let b = session_as(&s, BOB).await.ok().expect("a session");
    let r = rpc_as(
        &s,
        BOB,
        &b,
        call(json!(20), "echo", json!({"text": "hi"}), None),
    )
    .await;
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
    drop(held);
}

/// A request in a session as `token`; its answer.
async fn rpc_as(s: &TestServer, token: &str, sid: &str, msg: Value) -> Value {
    let mut r = post_in(s, token, sid, &msg).await;
    assert_eq!(r.status, 200);
    if r.header("content-type")
        .is_some_and(|c| c.starts_with("application/json"))
    {
        return r.json().await;
    }
    loop {
        let m = r.next_message(T).await.expect("an answer");
        if m.get("id").is_some() {
            return m;
        }
    }
}

/// Regression (finding 2): session traffic had no per-peer cap (stateless traffic had one), so a
/// client could multiply its share by opening sessions. Now `--max-in-flight-per-peer` counts a
/// client's requests in all its sessions (and its stateless requests) together.
#[tokio::test]
async fn the_per_peer_cap_counts_a_clients_sessions_together() {
    let s = bearer_server(|s| s.config(|c| c.max_in_flight_per_peer = 3)).await;
    let mut held = Vec::new();
    for id in 1..=3 {
        let sid = session_as(&s, ALICE).await.ok().expect("a session");
        held.push(slow_call(&s, ALICE, &sid, id).await.expect("admitted"));
    }
    let sid = session_as(&s, ALICE).await.ok().expect("a session");
    let Err(refused) = slow_call(&s, ALICE, &sid, 4).await else {
        panic!("a fourth call of alice's was admitted");
    };
    assert!(refused.contains("--max-in-flight-per-peer"), "{refused}");
    // A stateless request of the same principal counts in the same place.
    let r = call_2026(&s, ALICE, 5, "echo", json!({"text": "x"})).await;
    assert_eq!(r.status, 429);
    let bob = session_as(&s, BOB).await.ok().expect("a session");
    assert!(
        slow_call(&s, BOB, &bob, 6).await.is_ok(),
        "bob has his own count"
    );
    drop(held);
}

/// Regression (finding 4): with `--auth`, the session cap counted addresses, so behind a
/// reverse proxy (one address for everyone) one principal's sessions locked every other
/// principal out with 429. Now sessions count per principal when authenticated.
#[tokio::test]
async fn with_auth_the_session_cap_counts_principals_not_addresses() {
    let s = bearer_server(|s| s.http(|h| h.max_sessions_per_peer = 3)).await;
    for _ in 0..3 {
        let sid = session_as(&s, ALICE).await.ok().expect("a session");
        // Used sessions: none of them gives way to a new one.
        let r = rpc_as(
            &s,
            ALICE,
            &sid,
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        )
        .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let Err(refused) = session_as(&s, ALICE).await else {
        panic!("a fourth session of alice's was opened");
    };
    assert_eq!(refused.status, 429);
    let body = refused.json().await;
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("counted by principal"), "{body}");
    // Bob comes from the same address and is not refused.
    assert!(session_as(&s, BOB).await.is_ok());
}

/// Regression (security review, second pass, finding 3): fair claiming chose the next job well,
/// but nothing kept a worker free, so one owner's long jobs filled every worker and another
/// owner's short job stayed queued until one of them ended (up to `--job-max-runtime-secs`).
/// Now an owner may run three quarters of the workers: B's job runs while A's backlog waits.
#[tokio::test]
async fn one_owner_cannot_hold_every_job_worker() {
    let s = TestServer::setup()
        .fast_jobs()
        .jobs(|j| j.workers = 4)
        .start()
        .await;
    let a = s.initialize().await;
    let b = s.initialize().await;
    let mut long = Vec::new();
    // Different arguments, or the in-flight dedupe would join them into one job.
    for rows in 100..104 {
        long.push(start_import(&s, &a, json!({"rows": rows, "delay_ms": 400})).await);
    }
    let theirs = start_import(&s, &b, json!({"rows": 1, "delay_ms": 0})).await;
    let done = until_terminal(&s, &b, &theirs).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    // A's jobs are still at work: B did not wait for one of them to end.
    let r = rpc(
        &s,
        &a,
        call(
            json!("g"),
            "get_import_rows",
            json!({"job_id": long[0]}),
            None,
        ),
    )
    .await;
    assert_eq!(r["result"]["structuredContent"]["status"], "running", "{r}");
}

/// A stateless `greet` as `token`, carrying `state` and `name` as the answer when given.
async fn greet_2026(s: &TestServer, token: &str, id: i64, round: Option<(&str, &str)>) -> Value {
    let mut msg = stateless(
        json!(id),
        "tools/call",
        json!({"name": "greet", "arguments": {}}),
    );
    msg["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {"form": {}}});
    if let Some((state, name)) = round {
        msg["params"]["requestState"] = json!(state);
        msg["params"]["inputResponses"] =
            json!({"name": {"action": "accept", "content": {"name": name}}});
    }
    let bearer = format!("Bearer {token}");
    let (_, answer) = s
        .post_stateless_with(&msg, &[("authorization", bearer.as_str())])
        .await
        .answer(T)
        .await;
    answer
}

/// Regression (security review, second pass, finding 6): a 2026 `requestState` was signed,
/// not encrypted, and bound to the request but not to its caller: another principal replayed
/// it and continued the first caller's round, and whoever held it could read the answers in
/// it. Now it is encrypted, and another principal's replay does not open.
#[tokio::test]
async fn a_request_state_is_bound_to_its_caller_and_unreadable() {
    use base64::Engine as _;
    let s = bearer_server(|s| s).await;
    let first = greet_2026(&s, ALICE, 1, None).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().expect("a state");
    // Nothing of what it carries can be read (the tool's name, here) in any of its parts.
    for part in state.split('.') {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("greet"),
            "readable state: {part}"
        );
    }
    let bob = greet_2026(&s, BOB, 2, Some((state, "Mallory"))).await;
    assert_eq!(
        bob["error"]["code"], -32602,
        "bob continued alice's round: {bob}"
    );
    let alice = greet_2026(&s, ALICE, 3, Some((state, "Ada"))).await;
    assert_eq!(
        alice["result"]["content"][0]["text"], "Hello, Ada!",
        "{alice}"
    );
}
