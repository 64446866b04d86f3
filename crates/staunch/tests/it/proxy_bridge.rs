//! What `staunch proxy` bridges between an upstream written with an official SDK and its
//! clients:
//!
//! - log messages (`notifications/message`): the Python SDK peer's `log_echo` logs with
//!   FastMCP's `ctx.log`, and the message reaches the client that made the call unchanged, at
//!   that client's level — a 2025 session's `logging/setLevel`, a 2026-07-28 request's own
//!   `logLevel`;
//! - tools the upstream only runs as tasks (`taskSupport: "required"`: the TypeScript SDK's
//!   experimental 2025 tasks, and a 2026-07-28 upstream's tasks extension): called as a task
//!   and followed to its end, a cancel becoming `tasks/cancel`;
//! - the upstream's own tasks, held by a client of the same era under the proxy's ids: a 2025
//!   session's 2025 tasks (created, read, waited for and cancelled at the upstream, bound to
//!   the session that made them) and a 2026-07-28 client's tasks of the extension; a 2026
//!   upstream's task changes, heard on a listen upstream, and its end read when the task was
//!   over before that listen opened (a stdlib fixture that never tells of it);
//! - prompt list changes, announced to 2025 sessions and 2026-07-28 listen streams;
//! - resource subscriptions: a 2025 session's `resources/subscribe` and a 2026-07-28 listen
//!   stream's `resourceSubscriptions` subscribe at the upstream, its
//!   `notifications/resources/updated` reaches each subscriber, and the last one to go
//!   unsubscribes it there;
//! - tool results, whole: annotations and `_meta` on content items, `structuredContent`, keys
//!   of later protocol versions, as the upstream wrote them, to a 2025 session and to a
//!   2026-07-28 request;
//! - a 2025 upstream's question (elicitation) in the middle of a 2026-07-28 client's call:
//!   put to the client as an input-required round while the upstream call waits, parked, and
//!   answered to the upstream when the client's next round brings the answer.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client_support::Peers;
use crate::common::http::{HttpServer, call, rpc, stateless};

/// The steps file the TypeScript peer writes for `tag` (`PEER_STEPS_DIR`): steps done.
fn steps(dir: &Path, tag: &str) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join(tag)).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The steps the peer recorded under `tag`, once its work has stopped: the count is the same
/// `settle` from now and a second later (asserted).
async fn stopped(dir: &Path, tag: &str, settle: Duration) -> u64 {
    let (a, b) = steps_after(dir, tag, settle).await;
    assert_eq!(
        a, b,
        "the upstream's work under {tag:?} went on after the cancel: {a} then {b}"
    );
    b
}

/// Waits until the peer has recorded a step under `tag` (its work has started).
async fn started(dir: &Path, tag: &str) {
    let since = tokio::time::Instant::now();
    while steps(dir, tag).is_none() {
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "the peer's work under {tag:?} never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The steps the peer recorded under `tag` once `settle` has passed from now, and a second
/// later: equal when its work stopped.
async fn steps_after(dir: &Path, tag: &str, settle: Duration) -> (u64, u64) {
    let at = tokio::time::Instant::now();
    tokio::time::sleep_until(at + settle).await;
    let a = steps(dir, tag).expect("the peer recorded steps");
    tokio::time::sleep_until(at + settle + Duration::from_secs(1)).await;
    let b = steps(dir, tag).expect("the peer recorded steps");
    (a, b)
}

/// What the Python SDK sends for `ctx.log(level, text, logger_name="peer")`.
fn sent(level: &str, text: &str) -> Value {
    json!({"level": level, "logger": "peer", "data": text})
}

/// The `notifications/message` params among `messages`.
fn logs(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"].clone())
        .collect()
}

#[tokio::test]
async fn upstream_log_messages_reach_the_caller_unchanged_at_its_level() {
    let Some(peers) = Peers::find("upstream_log_messages_reach_the_caller") else {
        return;
    };
    let mut args = vec!["--".to_string()];
    args.extend(peers.py_stdio());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let proxy = HttpServer::launch("proxy", Some(":memory:"), &refs).await;

    // 2025 session at `info`: a warning passes, unchanged.
    let sid = proxy.initialize().await;
    let set = |id: u64, level: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "logging/setLevel",
               "params": {"level": level}})
    };
    let (_, ok) = proxy
        .post(Some(&sid), &set(10, "info"))
        .await
        .answer(Duration::from_secs(10))
        .await;
    assert!(ok.get("result").is_some(), "{ok}");
    let echo = |id: u64, level: &str, text: &str| {
        call(
            json!(id),
            "log_echo",
            json!({"text": text, "level": level}),
            None,
        )
    };
    let (messages, answer) = proxy
        .post(Some(&sid), &echo(11, "warning", "disk almost full"))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(answer["result"]["content"][0]["text"], "disk almost full");
    assert_eq!(
        logs(&messages),
        [sent("warning", "disk almost full")],
        "{messages:#?}"
    );
    // Below the session's level: not sent.
    let (messages, _) = proxy
        .post(Some(&sid), &echo(12, "debug", "noise"))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert!(logs(&messages).is_empty(), "{messages:#?}");
    // The client raises its level to `error`: the warning is held back too.
    proxy
        .post(Some(&sid), &set(13, "error"))
        .await
        .answer(Duration::from_secs(10))
        .await;
    let (messages, _) = proxy
        .post(Some(&sid), &echo(14, "warning", "held back"))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert!(logs(&messages).is_empty(), "{messages:#?}");

    // 2026-07-28: the request's own `logLevel`; none without it.
    let call_2026 = |id: u64, level: Option<&str>| {
        let mut params = json!({"name": "log_echo",
                                "arguments": {"text": "from 2026", "level": "info"}});
        if let Some(l) = level {
            params["_meta"] = json!({"io.modelcontextprotocol/logLevel": l});
        }
        stateless(json!(id), "tools/call", params)
    };
    let (messages, answer) = proxy
        .post_stateless(&call_2026(20, Some("debug")))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "from 2026",
        "{answer}"
    );
    assert_eq!(
        logs(&messages),
        [sent("info", "from 2026")],
        "{messages:#?}"
    );
    let (messages, _) = proxy
        .post_stateless(&call_2026(21, None))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert!(logs(&messages).is_empty(), "{messages:#?}");
}

/// `staunch proxy` in front of `staunch serve` (with `serve_args`), spoken to in 2026-07-28:
/// an upstream that offers the tasks extension.
async fn proxy_to_a_2026_staunch(serve_args: &[&str]) -> HttpServer {
    let mut args = vec![
        "--upstream-protocol",
        "2026-07-28",
        "--",
        crate::common::BIN,
        "serve",
    ];
    args.extend_from_slice(serve_args);
    args.extend(["--store", ":memory:", "--no-log"]);
    HttpServer::launch("proxy", Some(":memory:"), &args).await
}

/// The tokens file of two principals, alice and bob, in `dir`.
fn two_principals(dir: &Path) -> String {
    let tokens = dir.join("tokens");
    std::fs::write(
        &tokens,
        "alice-token-0123456789 alice\nbob-token-0123456789ab bob\n",
    )
    .unwrap();
    tokens.display().to_string()
}

/// A POST of `msg` with a bearer `token`, in session `sid` when given.
async fn bearer_post(
    proxy: &HttpServer,
    token: &str,
    sid: Option<String>,
    msg: Value,
) -> staunch_testkit::Resp {
    let auth = format!("Bearer {token}");
    let mut h = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", auth.as_str()),
    ];
    if let Some(sid) = &sid {
        h.push(("mcp-session-id", sid.as_str()));
        h.push(("mcp-protocol-version", "2025-11-25"));
    }
    proxy.send("POST", &h, &msg.to_string()).await
}

/// A 2025-11-25 session of the principal with `token`, initialized.
async fn bearer_session(proxy: &HttpServer, token: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    let r = bearer_post(proxy, token, None, init).await;
    assert_eq!(r.status, 200);
    let sid = r.header("mcp-session-id").expect("a session");
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        bearer_post(proxy, token, Some(sid.clone()), done)
            .await
            .status,
        202
    );
    sid
}

/// bob's `tasks/list` (the request `list`) does not name task `id`.
async fn bob_does_not_list(proxy: &HttpServer, list: Value, id: &str) {
    let bob = bearer_session(proxy, "bob-token-0123456789ab").await;
    let (_, theirs) = bearer_post(proxy, "bob-token-0123456789ab", Some(bob), list)
        .await
        .answer(Duration::from_secs(20))
        .await;
    assert!(
        !theirs.to_string().contains(id),
        "another principal lists it: {theirs}"
    );
}

/// `staunch proxy` in front of the TypeScript SDK peer with its tasks, the peer recording its
/// steps in the returned directory; `None` (the test skipped, saying so) when the peer is not
/// installed.
async fn ts_tasks_proxy(test: &str) -> Option<(HttpServer, tempfile::TempDir)> {
    let peers = Peers::find(test)?;
    let dir = tempfile::tempdir().unwrap();
    let steps_dir = dir.path().display().to_string();
    let mut args = vec!["--".to_string()];
    args.extend(peers.ts_stdio());
    args.push("--tasks".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let proxy = HttpServer::launch_with_env(
        "proxy",
        Some(":memory:"),
        &refs,
        &[("PEER_STEPS_DIR", &steps_dir)],
    )
    .await;
    Some((proxy, dir))
}

#[tokio::test]
async fn a_tool_the_upstream_runs_only_as_a_task_is_called_and_cancelled_through_its_task() {
    let Some((proxy, dir)) = ts_tasks_proxy("a_tool_the_upstream_runs_only_as_a_task").await else {
        return;
    };
    let sid = proxy.initialize().await;

    // Called as an ordinary tool; the proxy makes the upstream task and waits for its result.
    let (_, answer) = proxy
        .post(
            Some(&sid),
            &call(
                json!(1),
                "slow_count_task_required",
                json!({"steps": 3, "delay_ms": 20}),
                None,
            ),
        )
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "counted 3",
        "{answer}"
    );
    // The same for a 2026-07-28 client.
    let (_, answer) = proxy
        .post_stateless(&stateless(
            json!(9),
            "tools/call",
            json!({"name": "slow_count_task_required",
                   "arguments": {"steps": 2, "delay_ms": 20}}),
        ))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "counted 2",
        "{answer}"
    );

    // A cancel reaches the upstream task: its steps stop.
    let _running = proxy
        .post(
            Some(&sid),
            &call(
                json!(2),
                "slow_count_task_required",
                json!({"steps": 400, "delay_ms": 50, "tag": "task"}),
                None,
            ),
        )
        .await;
    started(dir.path(), "task").await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 2, "reason": "the test gives up"}});
    assert_eq!(proxy.post(Some(&sid), &cancel).await.status.as_u16(), 202);
    let b = stopped(dir.path(), "task", Duration::from_millis(1500)).await;
    assert!(b < 400);
}

/// The upstream's own 2025 tasks, offered to a 2025 session: the TypeScript SDK peer's
/// `slow_count_task` is declared with `taskSupport`, a task-augmented call gets the upstream's
/// task under an id of the proxy's, and `tasks/get`, `tasks/result` and `tasks/cancel` reach
/// exactly that upstream task — for the session that made it; another session's ask is an
/// unknown task. The upstream's `notifications/tasks/status` reaches the session's standalone
/// stream with every field the upstream sent, under the proxy's id.
#[tokio::test]
async fn a_2025_session_holds_the_upstreams_own_task_under_the_proxys_id() {
    let Some((proxy, dir)) = ts_tasks_proxy("a_2025_session_holds_the_upstreams_own_task").await
    else {
        return;
    };
    let sid = proxy.initialize().await;
    let req = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let list = rpc(&proxy, &sid, req(1, "tools/list", json!({}))).await;
    let declared = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "slow_count_task")
        .cloned()
        .expect("slow_count_task is listed");
    assert_eq!(
        declared["execution"]["taskSupport"], "optional",
        "{declared}"
    );

    // Made at the upstream; the client holds it by the proxy's id.
    let task_call = |id: u64, steps: u64, tag: &str| {
        req(
            id,
            "tools/call",
            json!({"name": "slow_count_task",
                   "arguments": {"steps": steps, "delay_ms": 30, "tag": tag},
                   "task": {"ttl": 60000}}),
        )
    };
    let mut standalone = proxy.get(&sid, None).await;
    assert_eq!(standalone.status, 200);
    let created = rpc(&proxy, &sid, task_call(2, 3, "short")).await;
    let task = &created["result"]["task"];
    let id = task["taskId"].as_str().expect("a task id").to_string();
    assert!(id.starts_with("up-"), "{created}");
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(
        task["pollInterval"], 100,
        "the upstream's own fields: {created}"
    );
    // tasks/result blocks until the upstream task ends: the upstream's result, related to
    // the proxy's id.
    let result = rpc(&proxy, &sid, req(3, "tasks/result", json!({"taskId": id}))).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "counted 3",
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str(),
        "{result}"
    );
    let got = rpc(&proxy, &sid, req(4, "tasks/get", json!({"taskId": id}))).await;
    assert_eq!(got["result"]["taskId"], id.as_str(), "{got}");
    assert_eq!(got["result"]["status"], "completed", "{got}");
    // The upstream said so itself, and the session heard it under the proxy's id, with the
    // upstream's own fields (its poll interval, its timestamps).
    let told = wait_for_method(
        &mut standalone,
        "notifications/tasks/status",
        Duration::from_secs(10),
    )
    .await
    .expect("the upstream's task status reached the session");
    let params = &told["params"];
    assert_eq!(params["taskId"], id.as_str(), "{told}");
    assert_eq!(params["status"], "completed", "{told}");
    assert_eq!(params["pollInterval"], 100, "{told}");
    assert!(params["createdAt"].is_string(), "{told}");
    // Another session cannot see it.
    let other = proxy.initialize().await;
    let theirs = rpc(&proxy, &other, req(5, "tasks/get", json!({"taskId": id}))).await;
    assert_eq!(theirs["error"]["code"], -32602, "{theirs}");

    // tasks/cancel reaches the upstream task: its steps stop.
    let created = rpc(&proxy, &sid, task_call(6, 400, "bridged")).await;
    let long = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    started(dir.path(), "bridged").await;
    let cancelled = rpc(
        &proxy,
        &sid,
        req(7, "tasks/cancel", json!({"taskId": long})),
    )
    .await;
    assert_eq!(cancelled["result"]["taskId"], long.as_str(), "{cancelled}");
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let b = stopped(dir.path(), "bridged", Duration::from_millis(500)).await;
    assert!(b < 400);
}

/// An upstream 2025 task's progress after the call that made it: the TypeScript SDK peer
/// reports each step to the creating request's token; the proxy passes it on to the session
/// holding the task (over HTTP on its standalone stream) under the client's own token and with
/// the proxy's id as its related task, strictly increasing, and none once the task has ended.
#[tokio::test]
async fn an_upstream_tasks_progress_reaches_the_session_under_its_own_token() {
    let Some((proxy, _steps)) =
        ts_tasks_proxy("an_upstream_tasks_progress_reaches_the_session").await
    else {
        return;
    };
    let (sid, mut standalone) = session_with_stream(&proxy).await;
    let created = rpc(
        &proxy,
        &sid,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "slow_count_task",
            "arguments": {"steps": 5, "delay_ms": 80, "tag": "progress"},
            "task": {"ttl": 60000},
            "_meta": {"progressToken": "tok-7"}}}),
    )
    .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_string();
    let mut reported = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        let m = standalone
            .next_message(left)
            .await
            .unwrap_or_else(|| panic!("the task's end, after {reported:?}"));
        if m["method"] == "notifications/progress" {
            let p = &m["params"];
            assert_eq!(p["progressToken"], "tok-7", "{m}");
            assert_eq!(p["total"], 5, "{m}");
            assert_eq!(
                p["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                id.as_str(),
                "{m}"
            );
            reported.push(p["progress"].as_u64().unwrap_or_else(|| panic!("{m}")));
        }
        if m["method"] == "notifications/tasks/status" && m["params"]["status"] == "completed" {
            break;
        }
    }
    assert!(!reported.is_empty(), "no progress reached the session");
    assert!(reported.windows(2).all(|w| w[0] < w[1]), "{reported:?}");
    assert!(reported.iter().all(|&p| p <= 5), "{reported:?}");
    // Nothing after the end.
    let after = standalone.next_message(Duration::from_millis(500)).await;
    assert!(
        after
            .as_ref()
            .is_none_or(|m| m["method"] != "notifications/progress"),
        "{after:?}"
    );
}

/// With bearer tokens (and a job-shaped tool, so that the job runtime lists tasks), a
/// principal's `tasks/list` lists the upstream tasks it holds under the proxy's ids, and
/// another principal's does not.
#[tokio::test]
async fn a_principals_task_list_holds_its_upstream_tasks() {
    let Some(peers) = Peers::find("a_principals_task_list_holds_its_upstream_tasks") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tokens = two_principals(dir.path());
    let steps_dir = dir.path().display().to_string();
    let mut args: Vec<String> = [
        "--auth",
        "bearer",
        "--auth-tokens",
        tokens.as_str(),
        "--tool",
        "slow_count=job",
        "--",
    ]
    .map(String::from)
    .to_vec();
    args.extend(peers.ts_stdio());
    args.push("--tasks".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let proxy = HttpServer::launch_with_env(
        "proxy",
        Some(":memory:"),
        &refs,
        &[("PEER_STEPS_DIR", &steps_dir)],
    )
    .await;
    let post = |token, sid, msg| bearer_post(&proxy, token, sid, msg);
    let open = |token| bearer_session(&proxy, token);
    let alice = open("alice-token-0123456789").await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "slow_count_task", "arguments": {"steps": 2, "delay_ms": 20},
        "task": {"ttl": 60000}}});
    let (_, created) = post("alice-token-0123456789", Some(alice.clone()), call)
        .await
        .answer(Duration::from_secs(20))
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_string();
    assert!(id.starts_with("up-"), "{created}");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/list", "params": {}});
    let (_, listed) = post("alice-token-0123456789", Some(alice), list.clone())
        .await
        .answer(Duration::from_secs(20))
        .await;
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert!(ids.contains(&id.as_str()), "{listed}");
    bob_does_not_list(&proxy, list, &id).await;
}

/// A 2026 upstream's extension task held by a 2025 session is listed by its principal's
/// `tasks/list`, under the proxy's id and written the 2025 way, and by no other principal's.
#[tokio::test]
async fn a_principals_task_list_holds_a_2026_upstreams_task_the_2025_way() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = two_principals(dir.path());
    let proxy = HttpServer::launch(
        "proxy",
        Some(":memory:"),
        &[
            "--auth",
            "bearer",
            "--auth-tokens",
            &tokens,
            // A job-shaped tool: the job runtime, which answers `tasks/list`.
            "--tool",
            "slow_count=job",
            "--upstream-protocol",
            "2026-07-28",
            "--",
            crate::common::BIN,
            "serve",
            "--store",
            ":memory:",
            "--no-log",
        ],
    )
    .await;
    let alice = bearer_session(&proxy, "alice-token-0123456789").await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "import_rows", "arguments": {"rows": 1000, "delay_ms": 20},
        "task": {"ttl": 60000}}});
    let (_, created) = bearer_post(&proxy, "alice-token-0123456789", Some(alice.clone()), call)
        .await
        .answer(Duration::from_secs(20))
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_string();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/list", "params": {}});
    let (_, listed) = bearer_post(&proxy, "alice-token-0123456789", Some(alice), list.clone())
        .await
        .answer(Duration::from_secs(20))
        .await;
    let held = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .find(|t| t["taskId"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} is not listed: {listed}"));
    assert_eq!(held["status"], "working", "{held}");
    assert!(held["ttl"].as_u64().is_some(), "{held}");
    assert!(
        held.get("ttlMs").is_none() && held.get("resultType").is_none(),
        "written the extension's way: {held}"
    );
    bob_does_not_list(&proxy, list, &id).await;
}

/// The tasks extension bridged: a 2026-07-28 client's call under the extension, to a 2026
/// upstream that offers it (`staunch serve`'s demo job tools), gets the upstream's own task
/// under an id of the proxy's; `tasks/get` follows it to its inlined result, `tasks/cancel`
/// stops it, and a request about it without the extension is -32021.
#[tokio::test]
async fn a_2026_client_holds_the_upstreams_extension_task_under_the_proxys_id() {
    use staunch_testkit::tasks::{create, get_until, send, terminal, with_ext};
    let proxy = proxy_to_a_2026_staunch(&[]).await;
    let id = create(&proxy, "long_scan", json!({"steps": 4, "delay_ms": 30})).await;
    assert!(id.starts_with("up-"), "{id}");
    let done = get_until(&proxy, &id, terminal).await;
    assert_eq!(done["taskId"], id.as_str(), "{done}");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["structuredContent"]["scanned"], 4, "{done}");
    // Without the extension: refused, as for staunch's own tasks.
    let bare = send(&proxy, "tasks/get", json!({"taskId": id}), json!({}), None).await;
    assert_eq!(bare.code(), -32021, "{}", bare.msg);

    let long = create(&proxy, "import_rows", json!({"rows": 1000, "delay_ms": 20})).await;
    let ack = send(
        &proxy,
        "tasks/cancel",
        json!({"taskId": long}),
        with_ext(),
        None,
    )
    .await;
    assert!(ack.msg.get("error").is_none(), "{}", ack.msg);
    let ended = get_until(&proxy, &long, terminal).await;
    assert_eq!(ended["status"], "cancelled", "{ended}");
}

/// A 2026-07-28 client listening through the proxy for a 2026 upstream's task it holds
/// (`subscriptions/listen` with its `taskIds`) hears what the upstream says of it, under the
/// proxy's id, the last note with the outcome inlined.
#[tokio::test]
async fn a_2026_listener_hears_a_2026_upstream_tasks_changes() {
    let proxy = proxy_to_a_2026_staunch(&[]).await;
    let id =
        staunch_testkit::tasks::create(&proxy, "long_scan", json!({"steps": 6, "delay_ms": 100}))
            .await;
    let last = heard_completed(&proxy, &id).await;
    assert_eq!(last["result"]["structuredContent"]["scanned"], 6, "{last}");
}

/// What a listen stream of the proxy's that names task `id` hears last of it: a note under
/// the proxy's id that says the task completed.
async fn heard_completed(proxy: &HttpServer, id: &str) -> Value {
    use staunch_testkit::tasks::{listen_tasks, task_notes_until_terminal};
    let mut stream = listen_tasks(proxy, &[id]).await;
    let notes = task_notes_until_terminal(&mut stream).await;
    let last = notes.last().expect("a terminal note").clone();
    assert_eq!(last["taskId"], id, "{notes:?}");
    assert_eq!(last["status"], "completed", "{notes:?}");
    last
}

/// Across eras: a client of the 2026-07-28 tasks extension calling a tool the TypeScript SDK
/// upstream runs as a 2025-11-25 task gets that task the extension's way — a flat task under
/// the proxy's id with the upstream's poll interval as `pollIntervalMs`, a `tasks/get` that
/// carries the upstream's result once it ends — and its `tasks/cancel` stops the upstream's
/// work. `tasks/update` is refused: such a task asks its questions on a session.
#[tokio::test]
async fn a_2026_client_holds_a_2025_upstreams_task_the_extensions_way() {
    use staunch_testkit::tasks::{create, get_until, send, terminal, with_ext};
    let Some((proxy, dir)) = ts_tasks_proxy("a_2026_client_holds_a_2025_upstreams_task").await
    else {
        return;
    };
    let args = |steps: u64, tag: &str| json!({"steps": steps, "delay_ms": 30, "tag": tag});
    let id = create(&proxy, "slow_count_task", args(3, "short")).await;
    assert!(id.starts_with("up-"), "{id}");
    let done = get_until(&proxy, &id, terminal).await;
    assert_eq!(done["taskId"], id.as_str(), "{done}");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["pollIntervalMs"], 100,
        "the upstream's own interval: {done}"
    );
    assert!(done.get("pollInterval").is_none(), "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "counted 3", "{done}");
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str(),
        "the inlined result names the proxy's id: {done}"
    );
    let update = json!({"taskId": id, "inputResponses": {}});
    let refused = send(&proxy, "tasks/update", update, with_ext(), None).await;
    assert_eq!(refused.code(), -32602, "{}", refused.msg);

    let long = create(&proxy, "slow_count_task", args(1000, "long")).await;
    started(dir.path(), "long").await;
    let ack = send(
        &proxy,
        "tasks/cancel",
        json!({"taskId": long}),
        with_ext(),
        None,
    )
    .await;
    assert!(ack.msg.get("error").is_none(), "{}", ack.msg);
    let ended = get_until(&proxy, &long, terminal).await;
    assert_eq!(ended["status"], "cancelled", "{ended}");
    let b = stopped(dir.path(), "long", Duration::from_millis(500)).await;
    assert!(b < 1000);
}

/// A 2026-07-28 client listening for a 2025 upstream task it holds across eras
/// (`subscriptions/listen` with its `taskIds`) hears the upstream's status changes written the
/// extension's way, under the proxy's id, the last with the outcome inlined.
#[tokio::test]
async fn a_2026_listener_hears_a_2025_upstream_tasks_changes() {
    let Some((proxy, _steps)) =
        ts_tasks_proxy("a_2026_listener_hears_a_2025_upstream_tasks_changes").await
    else {
        return;
    };
    let args = json!({"steps": 8, "delay_ms": 100, "tag": "heard"});
    let id = staunch_testkit::tasks::create(&proxy, "slow_count_task", args).await;
    let last = heard_completed(&proxy, &id).await;
    assert_eq!(last["result"]["content"][0]["text"], "counted 8", "{last}");
    assert_eq!(
        last["pollIntervalMs"], 100,
        "written the extension's way: {last}"
    );
    assert!(last.get("pollInterval").is_none(), "{last}");
}

/// Across eras, the other way: a 2025 session's task-augmented call of a tool an upstream runs
/// under the tasks extension only (`staunch serve`, spoken to in 2026-07-28) gets that task
/// written the 2025-11-25 way, under the proxy's id. `tasks/get` reads it so, `tasks/result`
/// waits for its end and answers the upstream's result related to the proxy's id, and
/// `tasks/cancel` stops it.
#[tokio::test]
async fn a_2025_session_holds_a_2026_upstreams_task_the_2025_way() {
    let proxy = proxy_to_a_2026_staunch(&[]).await;
    let sid = proxy.initialize().await;
    let req = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let list = rpc(&proxy, &sid, req(1, "tools/list", json!({}))).await;
    let scan = list["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "long_scan"))
        .unwrap_or_else(|| panic!("long_scan is listed: {list}"));
    assert_eq!(scan["execution"]["taskSupport"], "optional", "{scan}");
    let created = rpc(
        &proxy,
        &sid,
        call_as_task(2, "long_scan", json!({"steps": 4, "delay_ms": 30})),
    )
    .await;
    let task = &created["result"]["task"];
    let id = task["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"));
    assert!(id.starts_with("up-"), "{created}");
    assert!(task["pollInterval"].as_u64().is_some(), "{created}");
    assert!(task["ttl"].as_u64().is_some(), "{created}");
    assert!(
        task.get("pollIntervalMs").is_none() && task.get("resultType").is_none(),
        "{created}"
    );
    let result = rpc(&proxy, &sid, req(3, "tasks/result", json!({"taskId": id}))).await;
    assert_eq!(
        result["result"]["structuredContent"]["scanned"], 4,
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id,
        "{result}"
    );
    let got = rpc(&proxy, &sid, req(4, "tasks/get", json!({"taskId": id}))).await;
    assert_eq!(got["result"]["taskId"], id, "{got}");
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert!(
        got["result"].get("result").is_none(),
        "the outcome is tasks/result's: {got}"
    );

    let long = rpc(
        &proxy,
        &sid,
        call_as_task(5, "import_rows", json!({"rows": 1000, "delay_ms": 20})),
    )
    .await;
    let long = long["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{long}"))
        .to_string();
    let cancelled = rpc(
        &proxy,
        &sid,
        req(6, "tasks/cancel", json!({"taskId": long})),
    )
    .await;
    assert_eq!(cancelled["result"]["taskId"], long.as_str(), "{cancelled}");
    reaches_status(&proxy, &sid, &long, "cancelled").await;
}

/// A 2025 `tools/call` of `tool` with `args`, asking for a task.
fn call_as_task(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args, "task": {"ttl": 60000}}})
}

/// The id of the task a 2025 `tools/call` answer made.
fn made_task(created: &Value) -> String {
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_string()
}

/// Reads task `id` with the session's `tasks/get` until it is in `status` (20 s at most).
async fn reaches_status(proxy: &HttpServer, sid: &str, id: &str, status: &str) {
    let started = tokio::time::Instant::now();
    loop {
        let get =
            json!({"jsonrpc": "2.0", "id": 900, "method": "tasks/get", "params": {"taskId": id}});
        let got = rpc(proxy, sid, get).await;
        if got["result"]["status"] == status {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never {status}: {got}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A new session of `proxy` with its standalone stream open, where the session hears of the
/// tasks it holds.
async fn session_with_stream(proxy: &HttpServer) -> (String, crate::common::http::Resp) {
    let sid = proxy.initialize().await;
    let standalone = proxy.get(&sid, None).await;
    assert_eq!(standalone.status, 200);
    (sid, standalone)
}

/// A 2026 upstream's task held by a 2025 session: the proxy listens upstream for its changes,
/// and the session hears each on its standalone stream as `notifications/tasks/status`, under
/// the proxy's id and written the 2025-11-25 way (`pollInterval`, no inlined outcome).
#[tokio::test]
async fn a_2025_session_hears_a_2026_upstream_tasks_changes() {
    let proxy = proxy_to_a_2026_staunch(&[]).await;
    let (sid, mut standalone) = session_with_stream(&proxy).await;
    let args = json!({"steps": 4, "delay_ms": 100});
    let id = made_task(&rpc(&proxy, &sid, call_as_task(1, "long_scan", args)).await);
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut heard = Vec::new();
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        let told = wait_for_method(&mut standalone, "notifications/tasks/status", left)
            .await
            .unwrap_or_else(|| panic!("no terminal status reached the session: {heard:?}"));
        let params = told["params"].clone();
        assert_eq!(params["taskId"], id.as_str(), "{told}");
        for extension_only in ["pollIntervalMs", "ttlMs", "result", "resultType"] {
            assert!(params.get(extension_only).is_none(), "{told}");
        }
        heard.push(params["status"].clone());
        if params["status"] == "completed" {
            assert!(params["pollInterval"].is_u64(), "{told}");
            break;
        }
    }
}

/// A 2026 upstream's task that is over before the proxy's listen for it opens: the upstream
/// never tells that listen of it (the fixture acknowledges and then says nothing), so the proxy
/// reads the task once the listen is open, and the 2025 session holding it hears it completed.
#[tokio::test]
async fn a_task_over_before_its_upstream_listen_opens_still_reaches_its_session() {
    let Some(python) = staunch_testkit::peers::python() else {
        if std::env::var("STAUNCH_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
            panic!("python3 is required");
        }
        eprintln!(
            "SKIPPED: a_task_over_before_its_upstream_listen_opens_still_reaches_its_session: no python3"
        );
        return;
    };
    let port = staunch_testkit::peers::free_port().await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/task_ended_before_listen.py"
    );
    let _upstream = tokio::process::Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the fixture");
    staunch_testkit::peers::wait_listening(port).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let args = [
        "--upstream-protocol",
        "2026-07-28",
        "--upstream",
        url.as_str(),
    ];
    let proxy = HttpServer::launch("proxy", Some(":memory:"), &args).await;
    let (sid, mut standalone) = session_with_stream(&proxy).await;
    let id = made_task(&rpc(&proxy, &sid, call_as_task(1, "instant", json!({}))).await);
    let told = wait_for_method(
        &mut standalone,
        "notifications/tasks/status",
        Duration::from_secs(10),
    )
    .await
    .expect("the task's end reached the session");
    assert_eq!(told["params"]["taskId"], id.as_str(), "{told}");
    assert_eq!(told["params"]["status"], "completed", "{told}");
}

/// The proxy listens upstream for at most 64 tasks at once (each listen of an HTTP upstream
/// holds a connection): with 64 long tasks held, a 65th is not listened for — its end is read
/// with `tasks/get`, and no status note of it reaches the session.
#[tokio::test]
async fn upstream_task_listens_are_bounded() {
    // Workers for all 65 at once: the quick one must not wait behind the others.
    let workers = ["--job-workers", "80", "--job-max-running-per-owner", "80"];
    let proxy = proxy_to_a_2026_staunch(&workers).await;
    let (sid, mut standalone) = session_with_stream(&proxy).await;
    let mut long = Vec::new();
    for n in 0..64 {
        let args = json!({"steps": 1000, "delay_ms": 20});
        let created = rpc(&proxy, &sid, call_as_task(n, "long_scan", args)).await;
        long.push(made_task(&created));
    }
    let args = json!({"steps": 1, "delay_ms": 0});
    let quick = made_task(&rpc(&proxy, &sid, call_as_task(100, "long_scan", args)).await);
    reaches_status(&proxy, &sid, &quick, "completed").await;
    let quiet_until = tokio::time::Instant::now() + Duration::from_millis(1500);
    while let Some(m) = standalone
        .next_message(quiet_until.saturating_duration_since(tokio::time::Instant::now()))
        .await
    {
        assert_ne!(
            m["params"]["taskId"],
            quick.as_str(),
            "a task past the 64 listened for was told of: {m}"
        );
    }
    for (n, id) in long.iter().enumerate() {
        let cancel = json!({"jsonrpc": "2.0", "id": 200 + n, "method": "tasks/cancel",
                            "params": {"taskId": id}});
        rpc(&proxy, &sid, cancel).await;
    }
}

/// The questions of a 2026 upstream's task held by a 2025 session: while the session waits in
/// `tasks/result`, the question the task asks (`input_required`) reaches it as an
/// `elicitation/create` of the proxy's, and its answer goes back with `tasks/update`.
#[tokio::test]
async fn a_2026_upstreams_task_asks_the_2025_session_waiting_for_its_result() {
    let proxy = proxy_to_a_2026_staunch(&["--profile", "conformance"]).await;
    let sid = proxy
        .initialize_declaring(json!({"elicitation": {}}), &[])
        .await;
    let created = rpc(
        &proxy,
        &sid,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "confirm_delete", "arguments": {"filename": "notes.txt"}, "task": {}}}),
    )
    .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_string();
    let mut stream = proxy
        .post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": id}}),
        )
        .await;
    let question = wait_for_method(&mut stream, "elicitation/create", Duration::from_secs(20))
        .await
        .expect("the question");
    assert_eq!(
        question["params"]["message"], "Delete notes.txt?",
        "{question}"
    );
    let reply = json!({"jsonrpc": "2.0", "id": question["id"],
                       "result": {"action": "accept", "content": {"confirm": true}}});
    assert_eq!(proxy.post(Some(&sid), &reply).await.status.as_u16(), 202);
    let (_, answer) = stream.answer(Duration::from_secs(20)).await;
    assert_eq!(
        answer["result"]["structuredContent"]["deleted"], true,
        "{answer}"
    );
}

/// A 2026 upstream that asks before it makes its task: the question reaches the client as an
/// input-required round of its own, the answer goes back to the upstream, and the task it
/// then makes is the client's under an id of the proxy's.
#[tokio::test]
async fn an_upstream_that_asks_before_its_task_is_answered_then_its_task_is_bridged() {
    use staunch_testkit::tasks::{get_until, send, terminal, with_ext};
    let proxy = proxy_to_a_2026_staunch(&["--profile", "conformance"]).await;
    let call = json!({"name": "test_tool_with_task", "arguments": {}});
    let asked = send(&proxy, "tools/call", call.clone(), with_ext(), None).await;
    let asked = asked.result();
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    assert_eq!(
        asked["inputRequests"]["user_name"]["method"], "elicitation/create",
        "{asked}"
    );
    let mut again = call;
    again["inputResponses"] =
        json!({"user_name": {"action": "accept", "content": {"name": "Ada"}}});
    again["requestState"] = asked["requestState"].clone();
    let made = send(&proxy, "tools/call", again, with_ext(), None).await;
    let made = made.result();
    assert_eq!(made["resultType"], "task", "{made}");
    let id = made["taskId"].as_str().expect("a task id").to_string();
    assert!(id.starts_with("up-"), "{made}");
    let done = get_until(&proxy, &id, terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["greeting"], "Hello, Ada!",
        "{done}"
    );
}

/// The next message on `stream` with `method`, within `limit`.
async fn wait_for_method(
    stream: &mut crate::common::http::Resp,
    method: &str,
    limit: Duration,
) -> Option<Value> {
    let until = tokio::time::Instant::now() + limit;
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        let m = stream.next_message(left).await?;
        if m["method"] == method {
            return Some(m);
        }
    }
}

#[tokio::test]
async fn an_upstream_prompt_list_change_reaches_sessions_and_listeners() {
    let Some(peers) = Peers::find("an_upstream_prompt_list_change_reaches") else {
        return;
    };
    let mut args = vec!["--".to_string()];
    args.extend(peers.ts_stdio());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    prompt_list_change_reaches_sessions_and_listeners(&refs).await;
}

/// The same with the upstream over Streamable HTTP, where its SDK sends the change on the
/// session's standalone stream: only there once the proxy opens it.
#[tokio::test]
async fn an_http_upstreams_prompt_list_change_reaches_sessions_and_listeners() {
    let Some(peers) = Peers::find("an_http_upstreams_prompt_list_change_reaches") else {
        return;
    };
    let upstream = peers.ts_http().await;
    let url = upstream.url();
    prompt_list_change_reaches_sessions_and_listeners(&["--upstream", &url]).await;
}

/// The upstream (after `proxy_args`) adds a prompt; a 2025 session's standalone stream and a
/// 2026-07-28 listener on the proxy both hear that the list changed, and the list has it.
async fn prompt_list_change_reaches_sessions_and_listeners(proxy_args: &[&str]) {
    let proxy = HttpServer::launch("proxy", Some(":memory:"), proxy_args).await;

    // A 2025 session's standalone stream, and a 2026-07-28 listener.
    let sid = proxy.initialize().await;
    let mut standalone = proxy.get(&sid, None).await;
    assert_eq!(standalone.status.as_u16(), 200);
    let listen = stateless(
        json!("listen"),
        "subscriptions/listen",
        json!({"notifications": {"promptsListChanged": true}}),
    );
    let mut listener = proxy.post_stateless(&listen).await;
    assert_eq!(listener.status.as_u16(), 200);

    let prompts = |id: &str| json!({"jsonrpc": "2.0", "id": id, "method": "prompts/list"});
    let names = |v: &Value| -> Vec<String> {
        v["result"]["prompts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (_, before) = proxy
        .post(Some(&sid), &prompts("p1"))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(names(&before), ["greeting"], "{before}");

    // The upstream adds a prompt; its SDK announces the change.
    let (_, added) = proxy
        .post(
            Some(&sid),
            &call(json!("a"), "add_prompt", json!({"name": "farewell"}), None),
        )
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(
        added["result"]["content"][0]["text"], "added farewell",
        "{added}"
    );
    let heard = wait_for_method(
        &mut standalone,
        "notifications/prompts/list_changed",
        Duration::from_secs(10),
    )
    .await;
    assert!(heard.is_some(), "the 2025 session heard the change");
    let heard = wait_for_method(
        &mut listener,
        "notifications/prompts/list_changed",
        Duration::from_secs(10),
    )
    .await;
    assert!(heard.is_some(), "the 2026-07-28 listener heard the change");
    let (_, after) = proxy
        .post(Some(&sid), &prompts("p2"))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(names(&after), ["greeting", "farewell"], "{after}");
}

/// A 2026-07-28 upstream (staunch itself, its conformance profile) whose tool runs only as a
/// task of the tasks extension: the proxy makes the task and follows it, and the client gets
/// the task's own result — here the job's tool error — instead of "runs only as a task".
#[tokio::test]
async fn a_2026_upstreams_task_only_tool_is_followed_through_the_tasks_extension() {
    let proxy = proxy_to_a_2026_staunch(&["--profile", "conformance"]).await;
    let sid = proxy.initialize().await;
    let (_, answer) = proxy
        .post(Some(&sid), &call(json!(1), "failing_job", json!({}), None))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("failing_job always reports a tool execution error"),
        "the task's own result: {answer}"
    );
}

/// Whether the TypeScript peer says `note://counter` is subscribed there: its `touch_resource`
/// bumps the resource and, if it is, sends `notifications/resources/updated`.
async fn touch(proxy: &HttpServer, sid: &str, id: &str) -> String {
    let (_, r) = proxy
        .post(
            Some(sid),
            &call(json!(id), "touch_resource", json!({"uri": COUNTER}), None),
        )
        .await
        .answer(Duration::from_secs(30))
        .await;
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string()
}

const COUNTER: &str = "note://counter";

/// An upstream written with the TypeScript SDK that takes subscriptions: two 2025 sessions and
/// a 2026-07-28 listener subscribe through the proxy, each hears the upstream's update (the
/// sessions with its params unchanged, `_meta` included), and once the last of them goes the
/// upstream is unsubscribed.
#[tokio::test]
async fn resource_subscriptions_reach_the_upstream_and_its_updates_every_subscriber() {
    let Some(peers) = Peers::find("resource_subscriptions_reach_the_upstream") else {
        return;
    };
    let mut args = vec!["--".to_string()];
    args.extend(peers.ts_stdio());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let proxy = HttpServer::launch("proxy", Some(":memory:"), &refs).await;

    let a = proxy.initialize().await;
    let b = proxy.initialize().await;
    let init = proxy
        .post(
            None,
            &json!({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "caps", "version": "0"}}}),
        )
        .await
        .answer(Duration::from_secs(10))
        .await
        .1;
    assert_eq!(
        init["result"]["capabilities"]["resources"]["subscribe"], true,
        "the proxy offers what its upstream offers: {init}"
    );
    let list = rpc(
        &proxy,
        &a,
        json!({"jsonrpc": "2.0", "id": "l", "method": "resources/list"}),
    )
    .await;
    assert_eq!(list["result"]["resources"][0]["uri"], COUNTER, "{list}");
    assert_eq!(
        touch(&proxy, &a, "t0").await,
        format!("not subscribed {COUNTER}")
    );

    let subscribe = |id: &str| json!({"jsonrpc": "2.0", "id": id, "method": "resources/subscribe", "params": {"uri": COUNTER}});
    let mut stream_a = proxy.get(&a, None).await;
    let mut stream_b = proxy.get(&b, None).await;
    for (sid, id) in [(&a, "sa"), (&b, "sb")] {
        let r = rpc(&proxy, sid, subscribe(id)).await;
        assert_eq!(r["result"], json!({}), "{r}");
    }
    let updated = touch(&proxy, &a, "t1").await;
    assert!(updated.starts_with("updated"), "{updated}");
    for (stream, who) in [(&mut stream_a, "a"), (&mut stream_b, "b")] {
        let heard = wait_for_method(
            stream,
            "notifications/resources/updated",
            Duration::from_secs(10),
        )
        .await
        .unwrap_or_else(|| panic!("session {who} heard no update"));
        let revision = updated.rsplit(' ').next().unwrap().parse::<u64>().unwrap();
        assert_eq!(
            heard["params"],
            json!({"uri": COUNTER, "_meta": {"peer/revision": revision}}),
            "session {who} hears the upstream's params unchanged"
        );
    }

    // A unsubscribes: B still hears, A does not.
    let r = rpc(
        &proxy,
        &a,
        json!({"jsonrpc": "2.0", "id": "ua", "method": "resources/unsubscribe",
        "params": {"uri": COUNTER}}),
    )
    .await;
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(touch(&proxy, &b, "t2").await.starts_with("updated"));
    assert!(
        wait_for_method(
            &mut stream_b,
            "notifications/resources/updated",
            Duration::from_secs(10)
        )
        .await
        .is_some()
    );
    assert!(
        wait_for_method(
            &mut stream_a,
            "notifications/resources/updated",
            Duration::from_millis(500)
        )
        .await
        .is_none(),
        "an unsubscribed session hears nothing"
    );

    // A 2026-07-28 listener asks for the resource; B's session ends: the upstream stays
    // subscribed for the listener, which hears the update.
    let listen = stateless(
        json!("listen"),
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": [COUNTER]}}),
    );
    let mut listener = proxy.post_stateless(&listen).await;
    assert_eq!(listener.status.as_u16(), 200);
    let ack = wait_for_method(
        &mut listener,
        "notifications/subscriptions/acknowledged",
        Duration::from_secs(10),
    )
    .await
    .expect("acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([COUNTER]),
        "{ack}"
    );
    let gone = proxy
        .send(
            "DELETE",
            &[
                ("mcp-session-id", b.as_str()),
                ("mcp-protocol-version", "2025-11-25"),
            ],
            "",
        )
        .await;
    assert!(gone.status.is_success(), "{}", gone.status);
    // The listener's subscription is made in the background: touch until it is there.
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while !touch(&proxy, &a, "t3").await.starts_with("updated") {
        assert!(
            tokio::time::Instant::now() < until,
            "the listener's subscription never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let heard = wait_for_method(
        &mut listener,
        "notifications/resources/updated",
        Duration::from_secs(10),
    )
    .await
    .expect("the listener heard the update");
    assert_eq!(heard["params"]["uri"], COUNTER, "{heard}");

    // The listener goes too: nobody wants the resource, and the upstream is unsubscribed.
    drop(listener);
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while !touch(&proxy, &a, "t4").await.starts_with("not subscribed") {
        assert!(
            tokio::time::Instant::now() < until,
            "the upstream stayed subscribed with nobody listening"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The upstream's process dies and the proxy starts a new one, which knows no subscription:
/// the proxy subscribes it again, and the session keeps hearing updates.
#[tokio::test]
async fn a_restarted_upstream_is_subscribed_again() {
    let Some(peers) = Peers::find("a_restarted_upstream_is_subscribed_again") else {
        return;
    };
    let marker = format!("resubscribe-marker-{}", std::process::id());
    let mut args = vec!["--".to_string()];
    args.extend(peers.ts_stdio());
    // The peer ignores a second word in stdio mode; it names the process here.
    args.push(marker.clone());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let proxy = HttpServer::launch("proxy", Some(":memory:"), &refs).await;
    let sid = proxy.initialize().await;
    rpc(
        &proxy,
        &sid,
        json!({"jsonrpc": "2.0", "id": "l", "method": "resources/list"}),
    )
    .await;
    let mut stream = proxy.get(&sid, None).await;
    let r = rpc(
        &proxy,
        &sid,
        json!({"jsonrpc": "2.0", "id": "s", "method": "resources/subscribe",
               "params": {"uri": COUNTER}}),
    )
    .await;
    assert_eq!(r["result"], json!({}), "{r}");

    let first = crate::proxy::pids_with(&marker);
    assert_eq!(first.len(), 1, "{first:?}");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(first[0] as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    // The next calls start a new process; the subscription is made there in the background.
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    loop {
        n += 1;
        let text = touch(&proxy, &sid, &format!("t{n}")).await;
        if text.starts_with("updated") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the new process was never subscribed: {text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = crate::proxy::pids_with(&marker);
    assert!(second.len() == 1 && second != first, "{first:?} {second:?}");
    let heard = wait_for_method(
        &mut stream,
        "notifications/resources/updated",
        Duration::from_secs(10),
    )
    .await
    .expect("the session heard the new process's update");
    assert_eq!(heard["params"]["uri"], COUNTER, "{heard}");
}

/// With `--isolate` each session has its own upstream process, whose resources are its own: a
/// session's subscription is made on its process, and it hears the updates its process sends;
/// another session's process is not subscribed.
#[tokio::test]
async fn with_isolate_a_session_subscribes_on_its_own_process() {
    let Some(peers) = Peers::find("with_isolate_a_session_subscribes_on_its_own_process") else {
        return;
    };
    let mut args = vec!["--isolate".to_string(), "--".to_string()];
    args.extend(peers.ts_stdio());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let proxy = HttpServer::launch("proxy", Some(":memory:"), &refs).await;
    let (a, b) = (proxy.initialize().await, proxy.initialize().await);
    let mut stream = proxy.get(&a, None).await;
    let r = rpc(
        &proxy,
        &a,
        json!({"jsonrpc": "2.0", "id": "s", "method": "resources/subscribe",
               "params": {"uri": COUNTER}}),
    )
    .await;
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(
        touch(&proxy, &b, "tb").await.starts_with("not subscribed"),
        "the other session's process is not subscribed"
    );
    let updated = touch(&proxy, &a, "ta").await;
    assert!(updated.starts_with("updated"), "{updated}");
    let heard = wait_for_method(
        &mut stream,
        "notifications/resources/updated",
        Duration::from_secs(10),
    )
    .await
    .expect("the session heard its own process's update");
    assert_eq!(heard["params"]["uri"], COUNTER, "{heard}");
}

/// The TypeScript peer over stdio behind the proxy, spoken to in 2025-11-25 (it asks within
/// the call), questions parked at most `wait`; `extra` proxy flags.
async fn proxy_to_a_2025_upstream(peers: &Peers, wait: &str, extra: &[&str]) -> HttpServer {
    let mut args: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
    args.extend([
        "--upstream-protocol".to_string(),
        "2025-11-25".into(),
        "--question-wait".into(),
        wait.into(),
        "--tool".into(),
        "slow_count=streaming".into(),
        "--".into(),
    ]);
    args.extend(peers.ts_stdio());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    HttpServer::launch("proxy", Some(":memory:"), &refs).await
}

/// A tool result written by the TypeScript SDK upstream (its `rich` tool answers with the
/// object it is given) reaches a 2025 session and a 2026-07-28 request with every field it
/// carried, a key of the result's own included; the 2026 answer has the era's own keys beside
/// the upstream's. (The SDK itself refuses a content type it does not know and drops unknown
/// keys of content items before it sends, so those cases are the request core's and
/// `tool_result`'s tests.)
#[tokio::test]
async fn an_upstream_tool_result_reaches_the_client_with_every_field() {
    let Some(peers) = Peers::find("an_upstream_tool_result_reaches_the_client") else {
        return;
    };
    let proxy = proxy_to_a_2025_upstream(&peers, "10m", &[]).await;
    let result = json!({
        "content": [
            {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.5},
             "_meta": {"x.example/item": 1}},
            {"type": "resource_link", "uri": "note://counter", "name": "counter",
             "title": "Counter", "size": 12}
        ],
        "structuredContent": {"n": 1, "nested": {"deep": [null, "x"]}},
        "x.example/field": {"later": true},
        "_meta": {"x.example/trace": "t1"}
    });

    let sid = proxy.initialize().await;
    let answer = rpc(
        &proxy,
        &sid,
        call(json!(1), "rich", json!({"result": result}), None),
    )
    .await;
    assert_eq!(answer["result"], result, "{answer}");

    let params = json!({"name": "rich", "arguments": {"result": result}});
    let answer = answer_2026(&proxy, &stateless(json!(2), "tools/call", params)).await;
    let mut want = result.clone();
    want["resultType"] = json!("complete");
    want["_meta"]["io.modelcontextprotocol/serverInfo"] =
        answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"].clone();
    assert_eq!(answer["result"], want, "{answer}");
    assert_eq!(
        answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "staunch",
        "the proxy's identity, not the upstream's: {answer}"
    );
}

/// A Python SDK upstream's result reaches the client as the upstream wrote it, in both eras:
/// its keys in its own order and an integer beyond 64 bits (2**70 + 1) to the digit. The proxy
/// passes the result's text on; a value tree of it would sort the keys and make the integer a
/// float.
#[tokio::test]
async fn an_upstream_result_reaches_the_client_as_the_upstream_wrote_it() {
    let Some(peers) = Peers::find("an_upstream_result_reaches_the_client_as_the_upstream_wrote_it")
    else {
        return;
    };
    let mut args = vec!["--".to_string()];
    args.extend(peers.py_stdio());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let proxy = HttpServer::launch("proxy", Some(":memory:"), &refs).await;
    const WRITTEN: &str =
        r#""structuredContent":{"zeta":1,"alpha":2,"big":1180591620717411303425}"#;

    let sid = proxy.initialize().await;
    let msg = call(json!(1), "exact_numbers", json!({}), None);
    let text = proxy
        .post(Some(&sid), &msg)
        .await
        .answer_text(Duration::from_secs(20))
        .await;
    assert!(text.contains(WRITTEN), "2025-11-25: {text}");

    let params = json!({"name": "exact_numbers", "arguments": {}});
    let text = proxy
        .post_stateless(&stateless(json!(2), "tools/call", params))
        .await
        .answer_text(Duration::from_secs(20))
        .await;
    assert!(text.contains(WRITTEN), "2026-07-28: {text}");
}

/// An upstream's progress notifications reach the client with every field they carried
/// (`_meta`, keys staunch does not know), under the client's own token, in both eras.
#[tokio::test]
async fn upstream_progress_reaches_the_client_with_every_field() {
    let Some(peers) = Peers::find("upstream_progress_reaches_the_client_with_every_field") else {
        return;
    };
    let proxy = proxy_to_a_2025_upstream(&peers, "10m", &[]).await;
    let sent = json!([
        {"_meta": {"x.example/step": "fetch"}, "message": "fetching", "total": 2},
        {"x.example/later": [1, 2], "_meta": {"x.example/step": "store"}}
    ]);
    let args = json!({"result": {"content": [{"type": "text", "text": "done"}]}, "progress": sent});
    // The fields the upstream added, each notification's own; the token is the client's.
    let extras = |notes: &[Value]| -> Vec<Value> {
        notes
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .map(|n| {
                let mut p = n["params"].clone();
                let token = p.as_object_mut().and_then(|o| o.remove("progressToken"));
                assert_eq!(token, Some(json!("client-token")), "{n}");
                p
            })
            .collect()
    };
    let want = json!([
        {"_meta": {"x.example/step": "fetch"}, "message": "fetching", "total": 2, "progress": 1},
        {"x.example/later": [1, 2], "_meta": {"x.example/step": "store"}, "progress": 2}
    ]);

    let sid = proxy.initialize().await;
    let msg = call(json!(1), "rich", args.clone(), Some(json!("client-token")));
    let (notes, answer) = proxy
        .post(Some(&sid), &msg)
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");
    assert_eq!(Value::from(extras(&notes)), want, "2025 session: {notes:?}");

    let mut params = json!({"name": "rich", "arguments": args});
    params["_meta"] = json!({"progressToken": "client-token"});
    let (notes, answer) = proxy
        .post_stateless(&stateless(json!(2), "tools/call", params))
        .await
        .answer(Duration::from_secs(30))
        .await;
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");
    assert_eq!(Value::from(extras(&notes)), want, "2026-07-28: {notes:?}");
}

/// A 2026-07-28 `greet` call from a client that declares elicitation, with `extra` params
/// (`inputResponses`, `requestState`).
fn greet_2026(id: &str, extra: Value) -> Value {
    let mut params = json!({"name": "greet", "arguments": {}, "_meta": {
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        params[k] = v.clone();
    }
    stateless(json!(id), "tools/call", params)
}

/// The key of the first question an input-required answer asks.
fn question_key(answer: &Value) -> String {
    answer["result"]["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .unwrap_or_else(|| panic!("{answer}"))
}

/// The answer to a 2026-07-28 request `msg`.
async fn answer_2026(proxy: &HttpServer, msg: &Value) -> Value {
    let (_, answer) = proxy
        .post_stateless(msg)
        .await
        .answer(Duration::from_secs(30))
        .await;
    answer
}

/// The params of a round that answers `input_required`'s one question with the name `name`.
fn answering(input_required: &Value, name: &str) -> Value {
    json!({
        "inputResponses": {question_key(input_required):
                           {"action": "accept", "content": {"name": name}}},
        "requestState": input_required["result"]["requestState"],
    })
}

/// How often the TypeScript peer's `greet` ran (it records a step under tag `greet`).
async fn greet_runs(proxy: &HttpServer) -> u64 {
    let answer = answer_2026(
        proxy,
        &stateless(
            json!("runs"),
            "tools/call",
            json!({"name": "slow_count_status", "arguments": {"tag": "greet"}}),
        ),
    )
    .await;
    answer["result"]["structuredContent"]["steps"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"))
}

/// A real 2026-07-28 client (Python `mcp` 2.x) through the proxy to a 2025 upstream written
/// with the TypeScript SDK: progress, the upstream's `elicitation/create` answered by the
/// client's elicitation callback in an input-required round (the upstream call runs once,
/// parked while the client answers), and a closed stream that stops the upstream's work.
#[tokio::test]
async fn a_2026_client_answers_a_2025_upstreams_question_in_a_round_of_its_own() {
    let Some(peers) = Peers::find("a_2026_client_answers_a_2025_upstreams_question") else {
        return;
    };
    let Some(py2) = crate::common::external::python2() else {
        return;
    };
    let proxy = proxy_to_a_2025_upstream(&peers, "10m", &[]).await;
    let v = crate::proxy::run_py2(&py2, &proxy.url(), &["--tag", "py2ts"]).await;
    assert_eq!(v["protocolVersion"], "2026-07-28", "{v}");
    assert_eq!(v["progress"], json!([1, 2, 3, 4, 5]), "{v}");
    assert_eq!(v["greeting"], "Hello, Ada!", "{v}");
    assert_eq!(greet_runs(&proxy).await, 1, "greet ran once upstream: {v}");
    let c = &v["cancel"];
    assert_eq!(
        c["steps_later"], c["steps_later_still"],
        "the upstream went on: {v}"
    );
}

/// The rounds on the wire: the question goes out under a key naming the parked call, the
/// answer reaches the upstream call that asked (it runs once), an answer for a call no longer
/// parked is refused with a tool error, a client without the capability is not asked (the
/// upstream hears why), and a call whose client does not come back within `--question-wait`
/// is cancelled upstream.
#[tokio::test]
async fn a_parked_call_goes_on_with_its_answer_and_is_cancelled_unanswered() {
    let Some(peers) = Peers::find("a_parked_call_goes_on_with_its_answer") else {
        return;
    };
    let metrics = format!("127.0.0.1:{}", crate::client_support::free_port().await);
    let proxy = proxy_to_a_2025_upstream(&peers, "2s", &["--metrics", &metrics]).await;
    let series = |name: &'static str| {
        let metrics = metrics.clone();
        async move {
            let text = crate::common::http_get(&metrics, "/metrics").await;
            text.lines()
                .find(|l| l.starts_with(name))
                .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
                .unwrap_or_default()
        }
    };

    // Round 1: the question, under a key that names the parked call.
    let first = answer_2026(&proxy, &greet_2026("g1", json!({}))).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{first}");
    let (key, question) = requests.iter().next().unwrap();
    assert!(key.starts_with("staunch-proxy-"), "{key}");
    assert_eq!(question["method"], "elicitation/create", "{first}");
    assert_eq!(
        question["params"]["message"], "What is your name?",
        "{first}"
    );
    let answered = answering(&first, "Ada");

    // Round 2: the answer reaches the call that asked.
    let second = answer_2026(&proxy, &greet_2026("g2", answered.clone())).await;
    assert_eq!(
        second["result"]["content"][0]["text"], "Hello, Ada!",
        "{second}"
    );
    assert_eq!(
        greet_runs(&proxy).await,
        1,
        "one upstream call for two rounds"
    );

    // The same answer again: its call is done, and is not started again.
    let again = answer_2026(&proxy, &greet_2026("g3", answered)).await;
    assert_eq!(again["result"]["isError"], true, "{again}");
    let text = again["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("no longer waits"), "{again}");
    assert_eq!(greet_runs(&proxy).await, 1, "not started again");

    // A client without the elicitation capability is not asked: the upstream hears why.
    let refused = answer_2026(
        &proxy,
        &stateless(
            json!("g4"),
            "tools/call",
            json!({"name": "greet", "arguments": {}}),
        ),
    )
    .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        refused["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("elicitation"),
        "{refused}"
    );

    // Unanswered for longer than --question-wait (2 s): cancelled upstream; its answer is
    // refused.
    let before = proxy.log_lines().len();
    let parked = answer_2026(&proxy, &greet_2026("g5", json!({}))).await;
    assert_eq!(
        series("staunch_upstream_parked{").await,
        "1",
        "one call parked"
    );
    let lines = proxy
        .log_until(|l| {
            l[before..]
                .iter()
                .any(|l| l["event"] == "upstream.cancel_sent")
        })
        .await;
    assert!(
        lines[before..]
            .iter()
            .any(|l| l["event"] == "upstream.cancel_sent"),
        "the parked call is cancelled upstream: {:#?}",
        &lines[before..]
    );
    assert_eq!(series("staunch_upstream_parked{").await, "0");
    assert_eq!(
        series("staunch_upstream_unanswered_total{").await,
        "1",
        "counted"
    );
    let late = answer_2026(&proxy, &greet_2026("g6", answering(&parked, "Bo"))).await;
    assert_eq!(late["result"]["isError"], true, "{late}");
    assert!(
        late["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("no longer waits"),
        "{late}"
    );
}

/// Under the stop policy each call has an upstream process of its own: a parked call keeps
/// its process until the client's next round, which gets its answer through to it.
#[tokio::test]
async fn a_parked_call_keeps_its_own_process_under_the_stop_policy() {
    let Some(peers) = Peers::find("a_parked_call_keeps_its_own_process") else {
        return;
    };
    let proxy = proxy_to_a_2025_upstream(&peers, "10m", &["--kill-after-cancel", "1s"]).await;
    let first = answer_2026(&proxy, &greet_2026("k1", json!({}))).await;
    let second = answer_2026(&proxy, &greet_2026("k2", answering(&first, "Ada"))).await;
    assert_eq!(
        second["result"]["content"][0]["text"], "Hello, Ada!",
        "{second}"
    );
}
