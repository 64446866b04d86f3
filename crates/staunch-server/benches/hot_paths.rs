//! Micro-benchmarks of staunch's hot paths (divan): `cargo bench -p staunch-server`.
//!
//! - `parse_*`: one frame → `Message` (staunch-protocol's parser).
//! - `dispatch_ping`: `Session::handle_frame` of a ping, answered inline into a sink.
//! - `dispatch_echo_call`: `handle_frame` of `tools/call echo` → Registry start → the
//!   request's task → Registry finish → response serialised into the sink: the whole
//!   per-call cost of the runtime, without a transport.
//! - `progress_coalesced`: a handler reporting progress in a loop with the rate limit
//!   exhausted, so every report is coalesced (DESIGN target: < 100 ns each). Divan's
//!   per-item time is (one call + N reports) / N; the call's own cost is
//!   `dispatch_echo_call`, which makes the per-report figure exact to well under 1 ns.
//! - `progress_no_token`: the same loop when the client asked for no progress (a no-op).
//!
//! The Registry is internal to the crate, so it is measured through the public dispatch
//! path rather than in isolation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use divan::Bencher;
use schemars::JsonSchema;
use serde::Deserialize;
use staunch_server::{
    CallToolResult, Config, Context, Outbound, ProgressRate, Server, Session, Sink, ToolSpec,
};
use tokio::sync::Notify;

fn main() {
    divan::main();
}

/// Counts responses; wakes the benchmark when one arrives.
#[derive(Default)]
struct CountingSink {
    responses: AtomicU64,
    notify: Notify,
}

impl Sink for CountingSink {
    fn send(&self, msg: Outbound) {
        if msg.kind == staunch_server::OutboundKind::Response {
            self.responses.fetch_add(1, Ordering::Release);
            self.notify.notify_one();
        }
        divan::black_box(msg);
    }
}

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct LoopArgs {
    n: u32,
}

fn server() -> Server {
    let config = Config {
        // One notification goes out, then the bucket stays empty for the whole loop.
        progress_rate: ProgressRate {
            burst: 1,
            per_second: 0.001,
        },
        ..Config::default()
    };
    Server::builder("bench", "0")
        .config(config)
        .tool(
            ToolSpec::quick("echo", "echo"),
            |_ctx: Context, a: EchoArgs| async move { Ok(CallToolResult::text(a.text)) },
        )
        .tool(
            ToolSpec::streaming("report", "reports progress n times"),
            |ctx: Context, a: LoopArgs| async move {
                for i in 1..=a.n {
                    ctx.progress(f64::from(i), None, None);
                }
                Ok(CallToolResult::text("done"))
            },
        )
        .build()
}

struct Fixture {
    rt: tokio::runtime::Runtime,
    session: Session,
    sink: Arc<CountingSink>,
}

impl Fixture {
    fn new() -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let sink = Arc::new(CountingSink::default());
        let session = {
            let _guard = rt.enter();
            server().session("bench", sink.clone())
        };
        Self { rt, session, sink }
    }

    /// Handles `frame` and waits for its response.
    fn call(&self, frame: &[u8]) {
        let before = self.sink.responses.load(Ordering::Acquire);
        self.rt.block_on(async {
            let notified = self.sink.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.session.handle_frame(frame);
            while self.sink.responses.load(Ordering::Acquire) == before {
                notified.as_mut().await;
                notified.set(self.sink.notify.notified());
                notified.as_mut().enable();
            }
        });
    }
}

const PING: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
const ECHO: &[u8] =
    br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}"#;

#[divan::bench]
fn parse_ping(b: Bencher) {
    b.bench(|| staunch_server::protocol::parse_message(divan::black_box(PING)));
}

#[divan::bench]
fn parse_echo_call(b: Bencher) {
    b.bench(|| staunch_server::protocol::parse_message(divan::black_box(ECHO)));
}

#[divan::bench]
fn dispatch_ping(b: Bencher) {
    let f = Fixture::new();
    let _guard = f.rt.enter();
    b.bench_local(|| f.session.handle_frame(divan::black_box(PING)));
}

#[divan::bench]
fn dispatch_echo_call(b: Bencher) {
    let f = Fixture::new();
    b.bench_local(|| f.call(divan::black_box(ECHO)));
}

const REPORTS: u32 = 100_000;

#[divan::bench]
fn progress_coalesced(b: Bencher) {
    let f = Fixture::new();
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"report","arguments":{{"n":{REPORTS}}},"_meta":{{"progressToken":"t"}}}}}}"#
    );
    b.counter(divan::counter::ItemsCount::new(REPORTS))
        .bench_local(|| f.call(frame.as_bytes()));
}

#[divan::bench]
fn progress_no_token(b: Bencher) {
    let f = Fixture::new();
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"report","arguments":{{"n":{REPORTS}}}}}}}"#
    );
    b.counter(divan::counter::ItemsCount::new(REPORTS))
        .bench_local(|| f.call(frame.as_bytes()));
}
