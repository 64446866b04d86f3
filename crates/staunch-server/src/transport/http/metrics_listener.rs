//! The metrics listener (`staunch serve --metrics ADDR`): `GET /metrics` served behind the
//! MCP endpoint's own acceptor (header-read timeout, connection cap) and Host check, so the
//! listener that asks for no token is no softer than the one that does.

use std::time::Duration;

use axum::http::header;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::accept::{ConnLimits, serve_router};
use super::guard::{Allow, guarded};
use crate::metrics::{CONTENT_TYPE, Metrics};

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
