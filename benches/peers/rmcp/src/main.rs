//! Benchmark peer: an MCP server on rmcp 3.11, written the way rmcp's docs and examples do it.
//!
//! ```text
//! rmcp-peer stdio          # `serve(stdio())`
//! rmcp-peer http PORT      # StreamableHttpService + LocalSessionManager on axum, /mcp
//! rmcp-peer http PORT --stateless   # NeverSessionManager, legacy_session_mode off, JSON answers
//! ```
//!
//! Tools (the same as the other peers):
//! - `echo {text}` → text content `text`;
//! - `slow_count {steps, delay_ms, tag?}` → cooperative: each step waits `delay_ms` or until
//!   `RequestContext.ct` fires (rmcp's cancel signal), records the step under `tag`, then
//!   reports progress `step+1/steps` when the request carried a `progressToken`; returns
//!   `counted N`;
//! - `slow_count_status {tag?}` → `{"tag","steps","last_step_unix_ms"}` as structured content
//!   and JSON text (`CallToolResult::structured`): did the work go on after a cancel?
//! - `progress_flood {reports}` → reports progress `1..=reports` back to back through
//!   `Peer::notify_progress` (rmcp does not limit it); returns `reported N`.
//!
//! HTTP uses rmcp's defaults (stateful sessions, no event store): that is what its docs show,
//! and what the "result lost while the client was away" row measures. A 2026-07-28 request is
//! served statelessly either way (rmcp 3.x routes it by its `_meta`), with a cancellation token
//! of its own that rmcp cancels when the response stream is dropped (the client went away).
//! `--stateless` is rmcp's stateless mode for 2025 traffic too: `NeverSessionManager` (its docs:
//! "disables sessions entirely") and `legacy_session_mode: false`, with `json_response: true`
//! (a plain JSON body when the handler sends nothing before its result; SSE otherwise). The
//! accepted sockets get `TCP_NODELAY` (hyper leaves Nagle on, which stalls every SSE response
//! ~40 ms).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::serve::ListenerExt;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ProgressNotificationParam, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router,
};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct CountArgs {
    /// Number of steps.
    steps: u32,
    /// Milliseconds to sleep per step.
    delay_ms: u64,
    /// Records each step under this tag (read back with `slow_count_status`).
    #[serde(default)]
    tag: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct StatusArgs {
    /// The tag a count was started with; absent reads the untagged counter.
    #[serde(default)]
    tag: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct FloodArgs {
    /// How many progress reports to make, back to back.
    reports: u32,
}

/// Steps done per tag (count, unix ms of the last one): the side effects `slow_count_status`
/// reads. Shared by every service instance (rmcp builds one per session or per request).
type Steps = Arc<Mutex<HashMap<String, (u64, u64)>>>;

#[derive(Debug, Clone)]
struct Peer {
    tool_router: ToolRouter<Self>,
    steps: Steps,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[tool_router]
impl Peer {
    fn new(steps: Steps) -> Self {
        Self {
            tool_router: Self::tool_router(),
            steps,
        }
    }

    fn record(&self, tag: Option<&str>) {
        let mut map = self.steps.lock().unwrap_or_else(|p| p.into_inner());
        let e = map.entry(tag.unwrap_or_default().to_owned()).or_default();
        e.0 += 1;
        e.1 = unix_ms();
    }

    #[tool(description = "Echo the given text back")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(
        description = "Count to `steps`, sleeping `delay_ms` per step, reporting progress; honours cancellation"
    )]
    async fn slow_count(
        &self,
        Parameters(CountArgs {
            steps,
            delay_ms,
            tag,
        }): Parameters<CountArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<String, ErrorData> {
        let token = ctx.meta.get_progress_token();
        for step in 0..steps {
            tokio::select! {
                _ = ctx.ct.cancelled() => {
                    return Err(ErrorData::internal_error("cancelled", None));
                }
                _ = tokio::time::sleep(Duration::from_millis(delay_ms)) => {}
            }
            self.record(tag.as_deref());
            if let Some(token) = &token {
                let p = ProgressNotificationParam::new(token.clone(), f64::from(step + 1))
                    .with_total(f64::from(steps));
                let _ = ctx.peer.notify_progress(p).await;
            }
        }
        Ok(format!("counted {steps}"))
    }

    #[tool(
        description = "Steps slow_count has done for `tag` and when the last one happened (unix ms)"
    )]
    fn slow_count_status(
        &self,
        Parameters(StatusArgs { tag }): Parameters<StatusArgs>,
    ) -> CallToolResult {
        let tag = tag.unwrap_or_default();
        let (steps, last) = self
            .steps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&tag)
            .copied()
            .unwrap_or_default();
        CallToolResult::structured(serde_json::json!({
            "tag": tag, "steps": steps, "last_step_unix_ms": last,
        }))
    }

    #[tool(description = "Report progress `reports` times as fast as possible")]
    async fn progress_flood(
        &self,
        Parameters(FloodArgs { reports }): Parameters<FloodArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<String, ErrorData> {
        if let Some(token) = ctx.meta.get_progress_token() {
            for i in 1..=reports {
                if ctx.ct.is_cancelled() {
                    return Err(ErrorData::internal_error("cancelled", None));
                }
                let p = ProgressNotificationParam::new(token.clone(), f64::from(i))
                    .with_total(f64::from(reports));
                let _ = ctx.peer.notify_progress(p).await;
            }
        }
        Ok(format!("reported {reports}"))
    }
}

// The router is built once and stored (rmcp's counter example); the macro's default,
// `Self::tool_router()`, would rebuild it — schemas included — on every call.
#[tool_handler(router = self.tool_router)]
impl ServerHandler for Peer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let steps = Steps::default();
    match args.first().map(String::as_str) {
        Some("stdio") | None => {
            let service = Peer::new(steps).serve(rmcp::transport::stdio()).await?;
            service.waiting().await?;
        }
        Some("http") => {
            let port: u16 = args
                .get(1)
                .and_then(|p| p.parse().ok())
                .ok_or("usage: rmcp-peer http PORT [--stateless]")?;
            let factory = move || Ok(Peer::new(steps.clone()));
            let router = if args.iter().any(|a| a == "--stateless") {
                let config = StreamableHttpServerConfig::default()
                    .with_legacy_session_mode(false)
                    .with_json_response(true);
                let service = StreamableHttpService::new(
                    factory,
                    Arc::new(NeverSessionManager::default()),
                    config,
                );
                axum::Router::new().nest_service("/mcp", service)
            } else {
                let service = StreamableHttpService::new(
                    factory,
                    Arc::new(LocalSessionManager::default()),
                    StreamableHttpServerConfig::default(),
                );
                axum::Router::new().nest_service("/mcp", service)
            };
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await?
                .tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
            eprintln!("[rmcp-peer] http ready on http://127.0.0.1:{port}/mcp");
            axum::serve(listener, router).await?;
        }
        Some(_) => return Err("usage: rmcp-peer stdio | http PORT [--stateless]".into()),
    }
    Ok(())
}
