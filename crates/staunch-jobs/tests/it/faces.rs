//! The faces through a real `staunch_server::Server`, in process (the stdio transport over an
//! in-memory pipe): what `tools/list` shows, and how tasks are bound when requests carry an
//! auth context (principal) — the one case where `tasks/list` is offered.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use staunch_jobs::{JobConfig, JobContext, JobError, JobRuntime, JobTool, JobsExt, PrincipalFn};
use staunch_server::Server;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, WriteHalf};

const LIMIT: Duration = Duration::from_secs(10);

#[derive(Serialize, Deserialize, JsonSchema)]
struct Args {
    /// Units of work.
    n: u32,
}

fn tool() -> JobTool {
    JobTool::new(
        "work",
        "Does n units of work.",
        |ctx: JobContext, a: Args| async move {
            for _ in 0..a.n {
                ctx.sleep(Duration::from_millis(5)).await?;
            }
            Ok::<_, JobError>(json!({"done": a.n}))
        },
    )
}

/// One client connection to the in-process server.
struct Conn {
    w: WriteHalf<DuplexStream>,
    lines: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    next: i64,
    /// The `initialize` response.
    init: Value,
}

impl Conn {
    async fn open(server: &Server, session: &str) -> Self {
        let (client, server_side) = tokio::io::duplex(1 << 16);
        let (sr, sw) = tokio::io::split(server_side);
        let (server, session) = (server.clone(), session.to_string());
        tokio::spawn(async move {
            let _ = staunch_server::transport::stdio::serve(&server, sr, sw, &session).await;
        });
        let (r, w) = tokio::io::split(client);
        let mut c = Self {
            w,
            lines: BufReader::new(r).lines(),
            next: 0,
            init: Value::Null,
        };
        let init = c
            .rpc(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}),
            )
            .await;
        assert!(init.get("result").is_some(), "{init}");
        c.init = init;
        c
    }

    async fn rpc(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.w
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        tokio::time::timeout(LIMIT, async {
            loop {
                let line = self.lines.next_line().await.unwrap().expect("open");
                let v: Value = serde_json::from_str(&line).unwrap();
                if v.get("method").is_none() && v["id"] == id {
                    return v;
                }
            }
        })
        .await
        .expect("a response")
    }
}

fn fast(principal: Option<PrincipalFn>) -> JobConfig {
    JobConfig {
        lease: Duration::from_millis(600),
        heartbeat: Some(Duration::from_millis(100)),
        claim_poll: Duration::from_millis(50),
        poll_after: Duration::from_millis(50),
        principal,
        ..JobConfig::default()
    }
}

async fn server(principal: Option<PrincipalFn>) -> (Server, JobRuntime, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let stores = staunch_store::open(&dir.path().join("s.db").display().to_string())
        .await
        .unwrap();
    let rt = JobRuntime::new(stores.jobs, fast(principal)).unwrap();
    let server = Server::builder("t", "0").job_tool(&rt, tool()).build();
    rt.start().await.unwrap();
    (server, rt, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_auth_context_tasks_list_is_neither_offered_nor_answered() {
    let (server, rt, _dir) = server(None).await;
    let mut c = Conn::open(&server, "s1").await;
    let caps = &c.init["result"]["capabilities"]["tasks"];
    assert_eq!(
        caps,
        &json!({"cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    let list = c.rpc("tasks/list", json!({})).await;
    assert_eq!(list["error"]["code"], -32601);
    let tools = c.rpc("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["work", "start_work", "get_work", "cancel_work"]);
    rt.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_auth_context_tasks_belong_to_the_principal_and_are_listed_for_it() {
    // The test's "authentication": the session id names its principal (`alice-1` is alice).
    let principal: PrincipalFn = Arc::new(|ctx: &staunch_server::Context| {
        ctx.session_id().split('-').next().map(String::from)
    });
    let (server, rt, _dir) = server(Some(principal)).await;
    let mut alice = Conn::open(&server, "alice-1").await;
    let mut alice_again = Conn::open(&server, "alice-2").await;
    let mut bob = Conn::open(&server, "bob-1").await;

    assert_eq!(
        alice.init["result"]["capabilities"]["tasks"]["list"],
        json!({})
    );

    let created = alice
        .rpc(
            "tools/call",
            json!({"name": "work", "arguments": {"n": 2}, "task": {"ttl": 60000}}),
        )
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_string();

    // Another session of the same principal sees it, waits for it and lists it.
    let result = alice_again.rpc("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["result"]["structuredContent"]["done"], 2, "{result}");
    let listed = alice_again.rpc("tasks/list", json!({})).await;
    let tasks = listed["result"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{listed}");
    assert_eq!(tasks[0]["taskId"], id.as_str());
    assert_eq!(tasks[0]["status"], "completed");

    // Another principal does not: not by id, not in its list, not through the tool face.
    let got = bob.rpc("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["error"]["code"], -32602);
    let listed = bob.rpc("tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"], json!([]));
    let via_tool = bob
        .rpc(
            "tools/call",
            json!({"name": "get_work", "arguments": {"job_id": id}}),
        )
        .await;
    assert_eq!(via_tool["result"]["isError"], true);
    let bad_cursor = alice.rpc("tasks/list", json!({"cursor": "nonsense"})).await;
    assert_eq!(bad_cursor["error"]["code"], -32602);
    rt.shutdown(Duration::from_secs(1)).await;
}
