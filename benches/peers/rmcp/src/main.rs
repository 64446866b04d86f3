//! Benchmark peer: an MCP server on rmcp 3.11, written the way rmcp's docs and examples do it.
//!
//! ```text
//! rmcp-peer stdio          # `serve(stdio())`
//! rmcp-peer http PORT      # StreamableHttpService + LocalSessionManager on axum, /mcp
//! ```
//!
//! Tools (the same as the TS and Python peers):
//! - `echo {text}` → text content `text`;
//! - `slow_count {steps, delay_ms}` → cooperative: each step waits `delay_ms` or until
//!   `RequestContext.ct` fires (rmcp's cancel signal), then reports progress `step+1/steps`
//!   when the request carried a `progressToken`; returns `counted N`;
//! - `progress_flood {reports}` → reports progress `1..=reports` back to back through
//!   `Peer::notify_progress` (rmcp does not limit it); returns `reported N`.
//!
//! HTTP uses rmcp's defaults (stateful sessions, no event store): that is what its docs show,
//! and what the "result lost while the client was away" row measures. The accepted sockets get
//! `TCP_NODELAY` (hyper leaves Nagle on, which stalls every SSE response ~40 ms).

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ProgressNotificationParam, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
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
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct FloodArgs {
    /// How many progress reports to make, back to back.
    reports: u32,
}

#[derive(Debug, Clone)]
struct Peer {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Peer {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
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
        Parameters(CountArgs { steps, delay_ms }): Parameters<CountArgs>,
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
            if let Some(token) = &token {
                let p = ProgressNotificationParam::new(token.clone(), f64::from(step + 1))
                    .with_total(f64::from(steps));
                let _ = ctx.peer.notify_progress(p).await;
            }
        }
        Ok(format!("counted {steps}"))
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
    match args.first().map(String::as_str) {
        Some("stdio") | None => {
            let service = Peer::new().serve(rmcp::transport::stdio()).await?;
            service.waiting().await?;
        }
        Some("http") => {
            let port: u16 = args
                .get(1)
                .and_then(|p| p.parse().ok())
                .ok_or("usage: rmcp-peer http PORT")?;
            let service = StreamableHttpService::new(
                || Ok(Peer::new()),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            let router = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await?
                .tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
            eprintln!("[rmcp-peer] http ready on http://127.0.0.1:{port}/mcp");
            axum::serve(listener, router).await?;
        }
        Some(_) => return Err("usage: rmcp-peer stdio | http PORT".into()),
    }
    Ok(())
}
