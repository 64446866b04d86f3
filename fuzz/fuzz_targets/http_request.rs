//! The Streamable HTTP endpoint, called through the axum router without a socket: arbitrary
//! methods, headers (Host, Origin, Accept, Content-Type, `Mcp-Session-Id`, `Last-Event-ID`,
//! `MCP-Protocol-Version`, `Mcp-Method`, …) and bodies, several requests in a row so that
//! sessions and resumption are reached. Never panics, never answers 500, and every JSON body
//! it sends parses.
//!
//! Input: requests separated by a line `===`. In each, the first line is the method, then
//! `Name: value` header lines up to an empty line, then the body. In header values `$SID` is
//! replaced by the last `Mcp-Session-Id` the server gave and `$EID` by the last SSE event id
//! it sent. An input whose first byte is odd runs on the SQLite stores (a file in the
//! process's temporary directory, as `--store` opens it), an even one on the memory stores:
//! the fuzzer reaches the real write-behind, replay and session paths of both.
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use staunch_server::transport::http::{HttpConfig, HttpTransport};
use staunch_server::{CallToolResult, Config, Context, Server, ToolError, ToolSpec};
use staunch_store::{EventStore, MemoryEventStore, MemorySessionStore, SessionStore};
use tower::ServiceExt;

#[derive(Deserialize, schemars::JsonSchema)]
struct Steps {
    steps: u32,
}

fn server() -> Server {
    let config = Config {
        cancel_grace: Duration::from_millis(100),
        drain_timeout: Duration::from_secs(1),
        ..Config::default()
    };
    Server::builder("fuzz", "0")
        .config(config)
        .tool(
            ToolSpec::streaming("counts", "counts with progress"),
            |ctx: Context, a: Steps| async move {
                for step in 1..=a.steps.min(20) {
                    ctx.sleep(Duration::from_millis(5)).await?;
                    ctx.progress(f64::from(step), Some(f64::from(a.steps)), None);
                }
                Ok::<_, ToolError>(CallToolResult::text("counted"))
            },
        )
        .build()
}

/// The stores the endpoint runs on for one input: memory, or SQLite in a file shared by the
/// process's inputs (opened as `staunch serve --store FILE` opens it).
async fn stores(sqlite: bool) -> (Arc<dyn EventStore>, Arc<dyn SessionStore>) {
    if !sqlite {
        return (
            Arc::new(MemoryEventStore::new()),
            Arc::new(MemorySessionStore::new()),
        );
    }
    let dir = std::env::temp_dir().join(format!("staunch-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("store.db");
    let s = staunch_store::open(path.to_str().expect("a UTF-8 temporary path"))
        .await
        .expect("the SQLite store opens");
    (s.events, s.sessions)
}

struct Parsed<'a> {
    method: &'a [u8],
    headers: Vec<(&'a [u8], &'a [u8])>,
    body: &'a [u8],
}

fn parse(chunk: &[u8]) -> Parsed<'_> {
    let mut lines = chunk.splitn(2, |&b| b == b'\n');
    let method = lines.next().unwrap_or_default();
    let mut rest = lines.next().unwrap_or_default();
    let mut headers = Vec::new();
    loop {
        let mut split = rest.splitn(2, |&b| b == b'\n');
        let line = split.next().unwrap_or_default();
        let after = split.next();
        if line.is_empty() {
            rest = after.unwrap_or_default();
            break;
        }
        if let Some(colon) = line.iter().position(|&b| b == b':') {
            let value = &line[colon + 1..];
            let value = value.strip_prefix(b" ").unwrap_or(value);
            headers.push((&line[..colon], value));
        }
        match after {
            Some(a) => rest = a,
            None => {
                rest = &[];
                break;
            }
        }
    }
    Parsed {
        method,
        headers,
        body: rest,
    }
}

fn split_requests(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 4 <= data.len() {
        if &data[i..i + 4] == b"===\n" && (i == 0 || data[i - 1] == b'\n') {
            out.push(&data[start..i]);
            start = i + 4;
            i = start;
        } else {
            i += 1;
        }
    }
    out.push(&data[start..]);
    out
}

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let cfg = HttpConfig {
            max_body_bytes: 64 * 1024,
            ..HttpConfig::default()
        };
        let (events, sessions) = stores(data.first().is_some_and(|b| b % 2 == 1)).await;
        let transport = HttpTransport::new(server(), events, sessions, cfg);
        let mut sid = String::new();
        let mut eid = String::new();
        for chunk in split_requests(data).into_iter().take(8) {
            let p = parse(chunk);
            let Ok(method) = Method::from_bytes(p.method) else {
                continue;
            };
            let mut req = Request::builder().method(method).uri("/mcp");
            for (name, value) in &p.headers {
                let value = String::from_utf8_lossy(value)
                    .replace("$SID", &sid)
                    .replace("$EID", &eid);
                let (Ok(name), Ok(value)) = (
                    HeaderName::from_bytes(name),
                    HeaderValue::from_bytes(value.as_bytes()),
                ) else {
                    continue;
                };
                req = req.header(name, value);
            }
            let Ok(req) = req.body(Body::from(p.body.to_vec())) else {
                continue;
            };
            let resp = transport
                .router()
                .oneshot(req)
                .await
                .expect("the router is infallible");
            assert!(
                !resp.status().is_server_error() || resp.status().as_u16() == 503,
                "server error {}",
                resp.status()
            );
            if let Some(s) = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                sid = s.to_string();
            }
            let json = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|c| c.starts_with("application/json"));
            let body = read_some(resp.into_body()).await;
            if json && !body.is_empty() {
                serde_json::from_slice::<serde_json::Value>(&body)
                    .expect("a JSON response body parses");
            }
            for line in body.split(|&b| b == b'\n') {
                if let Some(id) = line.strip_prefix(b"id: ") {
                    eid = String::from_utf8_lossy(id).into_owned();
                }
            }
        }
    });
});

/// The body's frames until it ends, stays silent for 50 ms (an open SSE stream), or passes
/// 64 KiB.
async fn read_some(mut body: Body) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < 64 * 1024 {
        match tokio::time::timeout(Duration::from_millis(50), body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            _ => break,
        }
    }
    out
}
