//! The HTTP transport against a scripted HTTP/1.1 server on loopback: headers it must send,
//! JSON and SSE answers, resumption with `Last-Event-ID` after the server's `retry`, and what
//! happens when resuming is impossible (the call fails; it is never sent twice).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use staunch_client::{CallOptions, Client, ClientError, ConnectOptions, HttpOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    headers: Vec<(String, String)>,
    body: Value,
    at: Instant,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn rpc_method(&self) -> &str {
        self.body["method"].as_str().unwrap_or("")
    }
}

enum Reply {
    Json(u16, Value),
    Empty(u16),
    /// SSE events, then the connection is cut without ending the stream.
    SseCut(Vec<String>),
    /// SSE events, then the stream ends properly.
    Sse(Vec<String>),
    /// SSE events, and the stream's end a moment later (in a packet of its own).
    SseEndLater(Vec<String>, Duration),
    /// SSE events, then the stream is held open until the client closes the connection; the
    /// close is recorded as a request with method `CLOSED`.
    SseHold(Vec<String>),
}

type Script = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

struct Fake {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<std::sync::atomic::AtomicUsize>,
}

impl Fake {
    async fn start(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Script = Arc::new(script);
        let s = seen.clone();
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = connections.clone();
        tokio::spawn(async move {
            for _ in 0..100 {
                let Ok((sock, _)) = l.accept().await else {
                    return;
                };
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(serve(sock, script.clone(), s.clone()));
            }
        });
        Self {
            port,
            seen,
            connections,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve(mut sock: TcpStream, script: Script, seen: Arc<Mutex<Vec<Seen>>>) {
    let mut buf = Vec::new();
    // Several requests per connection (keep-alive), bounded.
    for _ in 0..100 {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let mut chunk = [0u8; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let mut lines = head.split("\r\n");
        let method = lines
            .next()
            .unwrap_or("")
            .split(' ')
            .next()
            .unwrap_or("")
            .to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let start = head_end + 4;
        while buf.len() < start + len {
            let mut chunk = [0u8; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = serde_json::from_slice(&buf[start..start + len]).unwrap_or(Value::Null);
        buf.drain(..start + len);
        let req = Seen {
            method,
            headers,
            body,
            at: Instant::now(),
        };
        seen.lock().unwrap().push(req.clone());
        let ok = match script(&req) {
            Reply::Json(status, v) => {
                let b = v.to_string();
                let mut h = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
                    b.len()
                );
                if req.rpc_method() == "initialize" {
                    h.push_str("mcp-session-id: S-1\r\n");
                }
                sock.write_all(format!("{h}\r\n{b}").as_bytes())
                    .await
                    .is_ok()
            }
            Reply::Empty(status) => sock
                .write_all(format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n").as_bytes())
                .await
                .is_ok(),
            Reply::SseHold(events) => {
                let out = sse_head_and_events(events);
                if sock.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
                let mut chunk = [0u8; 64];
                while let Ok(n) = sock.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                }
                seen.lock().unwrap().push(Seen {
                    method: "CLOSED".into(),
                    headers: Vec::new(),
                    body: Value::Null,
                    at: Instant::now(),
                });
                return;
            }
            Reply::SseEndLater(events, after) => {
                let out = sse_head_and_events(events);
                if sock.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
                tokio::time::sleep(after).await;
                sock.write_all(b"0\r\n\r\n").await.is_ok()
            }
            Reply::Sse(events) | Reply::SseCut(events) if events.is_empty() => false,
            r @ (Reply::Sse(_) | Reply::SseCut(_)) => {
                let (events, cut) = match r {
                    Reply::Sse(e) => (e, false),
                    Reply::SseCut(e) => (e, true),
                    _ => unreachable!(),
                };
                let mut out = sse_head_and_events(events);
                if cut {
                    let _ = sock.write_all(out.as_bytes()).await;
                    let _ = sock.flush().await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    return; // drop the connection mid-stream
                }
                out.push_str("0\r\n\r\n");
                sock.write_all(out.as_bytes()).await.is_ok()
            }
        };
        if !ok {
            return;
        }
    }
}

/// An SSE response's head and `events`, each in a chunk of its own (the stream not ended).
fn sse_head_and_events(events: Vec<String>) -> String {
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    for e in events {
        out.push_str(&format!("{:x}\r\n{e}\r\n", e.len()));
    }
    out
}

fn init_reply(req: &Seen) -> Option<Reply> {
    match req.rpc_method() {
        "initialize" => Some(Reply::Json(
            200,
            json!({"jsonrpc":"2.0","id":req.body["id"],"result":{
                "protocolVersion":"2025-11-25","capabilities":{"tools":{}},
                "serverInfo":{"name":"fake-http","version":"0"}}}),
        )),
        "notifications/initialized" | "notifications/cancelled" => Some(Reply::Empty(202)),
        _ if req.method == "DELETE" => Some(Reply::Empty(200)),
        _ => None,
    }
}

fn event(id: &str, msg: &Value) -> String {
    format!("id: {id}\ndata: {msg}\n\n")
}

fn progress(req: &Seen, n: u32) -> Value {
    json!({"jsonrpc":"2.0","method":"notifications/progress",
           "params":{"progressToken":req.body["params"]["_meta"]["progressToken"],"progress":n}})
}

/// Our own resumption delay is a minute: a test that finishes followed the server's `retry`
/// (the calls give up after 30 s).
fn opts() -> ConnectOptions {
    ConnectOptions {
        // The fake speaks the session era (resumption is a 2025 feature).
        era: staunch_client::EraChoice::Session,
        http: HttpOptions {
            default_retry: Duration::from_secs(60),
            ..HttpOptions::default()
        },
        ..ConnectOptions::default()
    }
}

fn call_opts() -> CallOptions {
    CallOptions::default()
        .timeout(Duration::from_secs(20))
        .max_total(Duration::from_secs(30))
}

#[tokio::test]
async fn a_dropped_stream_is_resumed_after_retry_with_last_event_id() {
    let call_id = Arc::new(Mutex::new(Value::Null));
    let cid = call_id.clone();
    let fake = Fake::start(move |req| {
        if let Some(r) = init_reply(req) {
            return r;
        }
        match (req.method.as_str(), req.rpc_method()) {
            ("POST", "tools/call") => {
                *cid.lock().unwrap() = req.body["id"].clone();
                // Priming event with a retry, one progress, then the connection is cut.
                Reply::SseCut(vec![
                    "id: e1\nretry: 150\ndata:\n\n".into(),
                    event("e2", &progress(req, 1)),
                ])
            }
            ("GET", _) => {
                let id = cid.lock().unwrap().clone();
                Reply::Sse(vec![
                    event(
                        "e3",
                        &json!({"jsonrpc":"2.0","method":"notifications/progress",
                        "params":{"progressToken":id,"progress":2}}),
                    ),
                    event(
                        "e4",
                        &json!({"jsonrpc":"2.0","id":id,"result":{
                        "content":[{"type":"text","text":"done"}]}}),
                    ),
                ])
            }
            _ => Reply::Empty(400),
        }
    })
    .await;
    let client = Client::connect_http(&fake.url(), &opts()).await.unwrap();
    let mut seen = Vec::new();
    let r = client
        .call_tool("slow", json!({}), &call_opts(), |p| seen.push(p.progress))
        .await
        .expect("resumed");
    assert_eq!(r["content"][0]["text"], "done");
    assert_eq!(seen, [1.0, 2.0]);
    assert_eq!(client.resumes(), 1);
    client.close().await;

    let reqs = fake.seen();
    let calls: Vec<_> = reqs
        .iter()
        .filter(|r| r.rpc_method() == "tools/call")
        .collect();
    assert_eq!(calls.len(), 1, "never sent twice");
    let get = reqs
        .iter()
        .find(|r| r.method == "GET")
        .expect("a resumption GET");
    assert_eq!(get.header("last-event-id"), Some("e2"));
    assert_eq!(get.header("accept"), Some("text/event-stream"));
    assert_eq!(get.header("mcp-session-id"), Some("S-1"));
    assert_eq!(get.header("mcp-protocol-version"), Some("2025-11-25"));
    // The server's retry (150 ms) was waited for, and it replaced our one-minute default.
    let waited = get.at.duration_since(calls[0].at);
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    assert!(
        reqs.iter()
            .any(|r| r.method == "DELETE" && r.header("mcp-session-id") == Some("S-1"))
    );
}

#[tokio::test]
async fn headers_on_every_request() {
    let fake = Fake::start(|req| {
        if let Some(r) = init_reply(req) {
            return r;
        }
        Reply::Json(
            200,
            json!({"jsonrpc":"2.0","id":req.body["id"],"result":{}}),
        )
    })
    .await;
    let client = Client::connect_http(&fake.url(), &opts()).await.unwrap();
    client
        .request("ping", None, &call_opts().progress(false))
        .await
        .unwrap();
    client.close().await;
    let reqs = fake.seen();
    let init = &reqs[0];
    assert_eq!(init.rpc_method(), "initialize");
    assert_eq!(
        init.header("accept"),
        Some("application/json, text/event-stream")
    );
    assert_eq!(init.header("mcp-session-id"), None);
    assert_eq!(init.header("mcp-protocol-version"), None);
    for r in &reqs[1..] {
        assert_eq!(r.header("mcp-session-id"), Some("S-1"), "{r:?}");
        assert_eq!(
            r.header("mcp-protocol-version"),
            Some("2025-11-25"),
            "{r:?}"
        );
    }
    assert!(
        reqs.iter()
            .any(|r| r.rpc_method() == "notifications/initialized")
    );
    assert!(reqs.iter().any(|r| r.rpc_method() == "ping"));
}

/// A server ends a response stream just after its answer, often in a packet of its own: the
/// client reads on to that end, so the connection serves later requests too (dropped before its
/// end, the stream's connection would be closed and each call would connect again).
#[tokio::test]
async fn a_stream_read_to_its_end_after_the_answer_keeps_its_connection() {
    let fake = Fake::start(|req| {
        if let Some(r) = init_reply(req) {
            return r;
        }
        let answer = json!({"jsonrpc":"2.0","id":req.body["id"],"result":{"n":req.body["id"]}});
        Reply::SseEndLater(vec![event("e1", &answer)], Duration::from_millis(10))
    })
    .await;
    let client = Client::connect_http(&fake.url(), &opts()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    let after_handshake = fake.connections();
    for _ in 0..3 {
        let r = client
            .request("ping", None, &call_opts().progress(false))
            .await
            .unwrap();
        assert!(r["n"].is_i64(), "{r}");
        // Past the stream's end: the connection is back by the next call.
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    assert_eq!(
        fake.connections(),
        after_handshake,
        "the calls connected again: {:#?}",
        fake.seen()
    );
    client.close().await;
}

#[tokio::test]
async fn no_event_id_means_the_call_is_lost_not_repeated() {
    let fake = Fake::start(|req| {
        if let Some(r) = init_reply(req) {
            return r;
        }
        match req.rpc_method() {
            "tools/call" => Reply::SseCut(vec![format!("data: {}\n\n", progress(req, 1))]),
            _ => Reply::Empty(405),
        }
    })
    .await;
    let client = Client::connect_http(&fake.url(), &opts()).await.unwrap();
    let r = client
        .call_tool("slow", json!({}), &call_opts(), |_| {})
        .await;
    assert!(matches!(r, Err(ClientError::StreamLost(_))), "{r:?}");
    let reqs = fake.seen();
    assert_eq!(
        reqs.iter()
            .filter(|r| r.rpc_method() == "tools/call")
            .count(),
        1
    );
    assert!(
        !reqs.iter().any(|r| r.method == "GET"),
        "nothing to resume from"
    );
}

#[tokio::test]
async fn a_refused_resume_is_reported_and_not_repeated() {
    let fake = Fake::start(|req| {
        if let Some(r) = init_reply(req) {
            return r;
        }
        match (req.method.as_str(), req.rpc_method()) {
            ("POST", "tools/call") => Reply::SseCut(vec!["id: e1\nretry: 10\ndata:\n\n".into()]),
            _ => Reply::Empty(405),
        }
    })
    .await;
    let client = Client::connect_http(&fake.url(), &opts()).await.unwrap();
    let r = client
        .call_tool("slow", json!({}), &call_opts(), |_| {})
        .await;
    match r {
        Err(ClientError::StreamLost(why)) => assert!(why.contains("405"), "{why}"),
        other => panic!("{other:?}"),
    }
    let reqs = fake.seen();
    assert_eq!(
        reqs.iter()
            .filter(|r| r.rpc_method() == "tools/call")
            .count(),
        1
    );
    assert_eq!(reqs.iter().filter(|r| r.method == "GET").count(), 1);
}

#[tokio::test]
async fn a_forgotten_session_is_session_expired() {
    let fake = Fake::start(|req| {
        if let Some(r) = init_reply(req) {
            return r;
        }
        Reply::Json(404, json!({"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}))
    })
    .await;
    let client = Client::connect_http(&fake.url(), &opts()).await.unwrap();
    let r = client
        .request("tools/list", None, &call_opts().progress(false))
        .await;
    assert!(matches!(r, Err(ClientError::SessionExpired)), "{r:?}");
}

/// With `listen`, the session's standalone stream is opened after `initialize`: what the
/// server sends there reaches the notification handler; when it drops, it is opened again
/// from its last event id after the server's `retry`; a 405 ends it for good.
#[tokio::test]
async fn the_standalone_stream_is_read_resumed_and_given_up_on_405() {
    let gets = Arc::new(Mutex::new(0u32));
    let g = gets.clone();
    let fake = Fake::start(move |req| {
        if let Some(r) = init_reply(req) {
            return r;
        }
        if req.method != "GET" {
            return Reply::Empty(400);
        }
        let mut n = g.lock().unwrap();
        *n += 1;
        let log = |text: &str| {
            json!({"jsonrpc":"2.0","method":"notifications/message",
                   "params":{"level":"warning","logger":"fake","data":text}})
        };
        match *n {
            1 => Reply::SseCut(vec![
                "id: s1\nretry: 100\ndata:\n\n".into(),
                event("s2", &log("first")),
            ]),
            2 => Reply::Sse(vec![event("s3", &log("second"))]),
            _ => Reply::Empty(405),
        }
    })
    .await;
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = heard.clone();
    let mut o = opts();
    o.http.listen = true;
    o.notifications = Some(staunch_client::NotificationHandler::new(
        move |method, params| {
            if method == "notifications/message" {
                let text = params.and_then(|p| p["data"].as_str()).unwrap_or("");
                h.lock().unwrap().push(text.to_string());
            }
        },
    ));
    let client = Client::connect_http(&fake.url(), &o).await.unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while *gets.lock().unwrap() < 3 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(*heard.lock().unwrap(), ["first", "second"]);
    let reqs: Vec<Seen> = fake
        .seen()
        .into_iter()
        .filter(|r| r.method == "GET")
        .collect();
    assert_eq!(reqs.len(), 3, "opened, resumed, refused; then left alone");
    assert_eq!(reqs[0].header("last-event-id"), None);
    assert_eq!(reqs[0].header("mcp-session-id"), Some("S-1"));
    assert_eq!(reqs[1].header("last-event-id"), Some("s2"));
    assert_eq!(reqs[2].header("last-event-id"), Some("s3"));
    let waited = reqs[1].at.duration_since(reqs[0].at);
    assert!(
        waited >= Duration::from_millis(100),
        "the server's retry: {waited:?}"
    );
    client.close().await;
}

/// Without `listen` (the default) no GET is sent.
#[tokio::test]
async fn no_standalone_stream_unless_asked() {
    let fake = Fake::start(|req| init_reply(req).unwrap_or(Reply::Empty(400))).await;
    let client = Client::connect_http(&fake.url(), &opts()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    client.close().await;
    assert!(fake.seen().iter().all(|r| r.method != "GET"));
}

/// A client dropped without `close` lets go of its standalone stream: the reader would
/// otherwise hold the connection for as long as the server keeps the session.
#[tokio::test]
async fn a_dropped_client_closes_its_standalone_stream() {
    let fake = Fake::start(|req| {
        if let Some(r) = init_reply(req) {
            return r;
        }
        if req.method == "GET" {
            return Reply::SseHold(vec!["id: s1\nretry: 100\ndata:\n\n".into()]);
        }
        Reply::Empty(400)
    })
    .await;
    let mut o = opts();
    o.http.listen = true;
    let client = Client::connect_http(&fake.url(), &o).await.unwrap();
    let open = |fake: &Fake| fake.seen().iter().any(|r| r.method == "GET");
    let closed = |fake: &Fake| fake.seen().iter().any(|r| r.method == "CLOSED");
    let until = Instant::now() + Duration::from_secs(5);
    while !open(&fake) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(open(&fake), "the standalone stream was opened");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!closed(&fake), "held open while the client lives");
    drop(client);
    let until = Instant::now() + Duration::from_secs(5);
    while !closed(&fake) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        closed(&fake),
        "the connection was closed after the client was dropped"
    );
}
