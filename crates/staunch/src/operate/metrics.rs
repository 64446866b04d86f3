//! `staunch serve --metrics ADDR`: the metrics handle shared by the server and the job
//! runtime, and the `GET /metrics` listener. Jobs by state are read from the store at each
//! scrape, so every instance reports the whole store's jobs.
//!
//! The listener is as hard as the MCP endpoint: the same acceptor (header-read timeout,
//! connection cap) and the same Host check, on the endpoint's allow-list plus the address the
//! listener is bound to (a scraper on another machine names it; an address literal cannot be
//! rebound by DNS).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use staunch_server::Metrics;
use staunch_server::transport::http::Allow;
use staunch_server::transport::http::{ListenerConfig, serve_metrics};
use staunch_store::JobStore;
use tokio_util::sync::CancellationToken;

/// Enabled when `--metrics` is given, otherwise a no-op handle.
pub fn handle(addr: Option<SocketAddr>) -> Metrics {
    if addr.is_some() {
        Metrics::enabled()
    } else {
        Metrics::disabled()
    }
}

/// The hosts a scrape may name: loopback, `--allow-host`, and `addr`'s own IP when it is a
/// specific one.
pub fn allow(addr: SocketAddr, allow_hosts: &[String]) -> Allow {
    let mut allow = Allow::loopback();
    for h in allow_hosts {
        allow = allow.with_host(h.clone());
    }
    let ip = addr.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        allow = match ip {
            std::net::IpAddr::V4(v4) => allow.with_host(v4.to_string()),
            std::net::IpAddr::V6(v6) => allow.with_host(format!("[{v6}]")),
        };
    }
    allow
}

/// Binds `addr` and serves `/metrics` until `shutdown`. Prints the bound address (port 0
/// picks a free one) to stderr.
pub async fn start(
    addr: SocketAddr,
    metrics: &Metrics,
    jobs: Option<Arc<dyn JobStore>>,
    listener_cfg: ListenerConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
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
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics address {addr}"))?;
    // Not written as a URL: tools that read the MCP endpoint's URL from stderr take the first.
    eprintln!(
        "staunch: serving metrics at {} path /metrics",
        listener.local_addr()?
    );
    let metrics = metrics.clone();
    tokio::spawn(serve_metrics(listener, metrics, listener_cfg, shutdown));
    Ok(())
}
