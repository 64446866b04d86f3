//! The metrics listener (`staunch serve --metrics ADDR`): `GET /metrics` served behind the
//! MCP endpoint's own acceptor (header-read timeout, connection cap) and Host check, so the
//! listener that asks for no token is no softer than the one that does. Jobs by state are
//! read from the store at each scrape, so every instance reports the whole store's jobs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::header;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::accept::{ConnLimits, serve_router};
use super::guard::{Allow, guarded};
use crate::metrics::{CONTENT_TYPE, Metrics};
use staunch_store::JobStore;

/// What guards the metrics listener: the endpoint's Host allow-list, header-read timeout and
/// connection cap.
#[derive(Clone, Debug)]
pub struct ListenerConfig {
    /// Hosts a request may name (DNS rebinding).
    pub allow: Allow,
    /// Connections open at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// A connection that has not sent a whole request head within this is closed.
    pub header_read_timeout: Duration,
}

/// Serves `GET /metrics` on `listener` until `shutdown` fires.
pub async fn serve_metrics(
    listener: TcpListener,
    metrics: Metrics,
    cfg: ListenerConfig,
    shutdown: CancellationToken,
) {
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], m.scrape().await) }
        }),
    );
    let limits = ConnLimits {
        max_connections: cfg.max_connections,
        header_read_timeout: cfg.header_read_timeout,
    };
    serve_router(listener, guarded(app, cfg.allow), limits, shutdown).await;
}

/// Binds `addr` and serves `GET /metrics` until `shutdown`; with `jobs`, each scrape counts
/// that store's jobs by state. Returns the bound address (port 0 picks a free one).
pub async fn bind_metrics(
    addr: SocketAddr,
    metrics: &Metrics,
    jobs: Option<Arc<dyn JobStore>>,
    cfg: ListenerConfig,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    if let Some(jobs) = jobs {
        metrics.on_scrape(Arc::new(move |m: Metrics| {
            let jobs = jobs.clone();
            Box::pin(async move {
                match jobs.count_by_state().await {
                    Ok(counts) => m.set_jobs_by_state(counts.iter().map(|(s, n)| (s.as_str(), *n))),
                    Err(e) => tracing::warn!(error = %e, "metrics: could not count jobs by state"),
                }
            })
        }));
    }
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "serving metrics on a non-loopback address");
    }
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(serve_metrics(listener, metrics.clone(), cfg, shutdown));
    Ok(bound)
}
