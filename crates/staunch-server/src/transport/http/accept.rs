//! Accepting connections, with the limits a hostile client cannot hold open: hyper's own
//! HTTP/1 server (not `axum::serve`, which sets no timer, so hyper's header-read timeout never
//! runs) with
//!
//! - hyper's header-read timeout: a connection that has not sent a whole request head within
//!   it — a slowloris, or an idle keep-alive connection — is closed by hyper;
//! - a cap on open connections: one more is answered `503` with a JSON-RPC error body and
//!   closed, instead of being held;
//! - `TCP_NODELAY` on every socket (without it every small SSE write waits ~40 ms for the
//!   peer's delayed ACK);
//! - the peer's address on every request ([`PeerAddr`]), for the per-peer session limit.
//!
//! Shutdown stops accepting, then lets every connection finish its response (hyper's graceful
//! shutdown; the transport has already ended the work behind open streams).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use std::convert::Infallible;

use axum::Router;
use futures_util::future::Either;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{HttpState, handlers};

/// The address a request's connection came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerAddr(pub(crate) SocketAddr);

/// Limits on connections.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnLimits {
    pub(crate) max_connections: usize,
    pub(crate) header_read_timeout: Duration,
}

/// Serves on `listener` until `shutdown` fires, then waits for open connections to end: the
/// MCP endpoint's path straight to its handler, every other path through `app` (the router,
/// with the metadata and extra routes; its answer for an unknown path).
pub(crate) async fn serve(
    listener: TcpListener,
    state: Arc<HttpState>,
    app: Router,
    limits: ConnLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let hyper_app = TowerToHyperService::new(app);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "could not set TCP_NODELAY");
        }
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tokio::spawn(refuse(tcp, limits.max_connections));
            continue;
        };
        let svc = hyper_app.clone();
        let state = state.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            // The router matches a path and boxes the handler's future per request: ~4k
            // instructions of a 90k echo call, spent on the one path every call takes. The
            // endpoint gets the peer's address as an argument (an extension is a map, three
            // allocations) and hyper's body as it is.
            if req.uri().path() == state.cfg.endpoint {
                let state = state.clone();
                // Boxed per request: inline, the endpoint's 3 KiB future sized the state of
                // every connection, and an in-flight 2026 stream (a connection each) cost
                // 17.3 KiB instead of 14.4 (staunch-bench --only modern, memory).
                Either::Left(Box::pin(async move {
                    let r = handlers::serve_endpoint(state, req, Some(peer)).await;
                    Ok::<_, Infallible>(r)
                }))
            } else {
                req.extensions_mut().insert(PeerAddr(peer));
                Either::Right(hyper::service::Service::call(&svc, req))
            }
        });
        let conn = http.serve_connection(TokioIo::new(tcp), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Answers a connection over the limit with a 503 and closes it (at most a second spent).
async fn refuse(mut tcp: TcpStream, limit: usize) {
    tracing::warn!(limit, "connection refused: too many open connections");
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{{\"code\":-32000,\"message\":\"server \
         busy: {limit} connections are open (the limit, --max-connections); retry later\"}}}}"
    );
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: \
         {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let answer = async {
        tcp.write_all(head.as_bytes()).await?;
        tcp.write_all(body.as_bytes()).await?;
        tcp.shutdown().await?;
        // Read what the client sent before closing: closing with unread bytes makes the
        // kernel reset the connection, and the client may lose the answer.
        let mut sink = [0u8; 4096];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}
