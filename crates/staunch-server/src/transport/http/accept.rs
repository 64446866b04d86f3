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
//! With `conn_workers` set (`--http-workers N`), connections are served on threads of their
//! own, each a single-threaded runtime ([`ConnWorkers`]), so that a request's task and its
//! connection stay on one thread; by default they are tasks of the caller's runtime.
//!
//! Shutdown stops accepting, then lets every connection finish its response (hyper's graceful
//! shutdown; the transport has already ended the work behind open streams).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use std::convert::Infallible;

use axum::Router;
use futures_util::FutureExt;
use futures_util::future::Either;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::head::PeerAddr;
use super::{HttpState, handlers};

/// Limits on connections.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnLimits {
    pub(crate) max_connections: usize,
    pub(crate) header_read_timeout: Duration,
}

/// One accepted connection, handed to a worker.
struct AcceptedConn {
    tcp: std::net::TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    tracked: TaskTrackerToken,
}

/// What a worker serves connections with.
#[derive(Clone)]
struct ConnService {
    http: hyper::server::conn::http1::Builder,
    hyper_app: TowerToHyperService<Router>,
    /// The MCP endpoint's state; `None` on a listener that serves only `hyper_app`.
    state: Option<Arc<HttpState>>,
    shutdown: CancellationToken,
}

impl ConnService {
    fn new(
        state: Option<Arc<HttpState>>,
        app: Router,
        limits: ConnLimits,
        shutdown: CancellationToken,
    ) -> Self {
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .keep_alive(true);
        ConnService {
            http,
            hyper_app: TowerToHyperService::new(app),
            state,
            shutdown,
        }
    }
}

impl ConnService {
    /// Serves one connection on the current runtime until it ends; at shutdown it finishes the
    /// response in progress and closes (hyper's graceful shutdown).
    async fn serve(self, a: AcceptedConn) {
        let AcceptedConn {
            tcp,
            peer,
            permit,
            tracked,
        } = a;
        let tcp = match TcpStream::from_std(tcp) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "could not take over an accepted connection");
                return;
            }
        };
        let state = self.state;
        let svc = self.hyper_app;
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            // The router matches a path and boxes the handler's future per request: ~4k
            // instructions of a 90k echo call, spent on the one path every call takes. The
            // endpoint gets the peer's address as an argument (an extension is a map, three
            // allocations) and hyper's body as it is.
            let endpoint = state
                .as_ref()
                .filter(|state| req.uri().path() == state.cfg.endpoint);
            if let Some(state) = endpoint {
                let state = state.clone();
                // Boxed per request: inline, the endpoint's future sized the state of every
                // connection, and an in-flight 2026 stream (a connection each) cost 17.3 KiB
                // instead of 14.4 (staunch-bench --only modern, memory). Mapped, not wrapped
                // in an async block, which would keep a copy of the request beside it.
                Either::Left(Box::pin(
                    handlers::serve_endpoint(state, req, Some(peer)).map(Ok::<_, Infallible>),
                ))
            } else {
                req.extensions_mut().insert(PeerAddr(peer));
                Either::Right(hyper::service::Service::call(&svc, req))
            }
        });
        let conn = self.http.serve_connection(TokioIo::new(tcp), service);
        tokio::pin!(conn);
        let ended = tokio::select! {
            r = conn.as_mut() => r,
            _ = self.shutdown.cancelled() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(e) = ended {
            tracing::debug!(error = %e, %peer, "connection ended with an error");
        }
        drop(permit);
        drop(tracked);
    }
}

/// The threads that serve connections: each runs a single-threaded runtime of its own, and
/// every connection is served on one of them, round robin. A request's task is spawned from
/// its connection's task, so it runs on the same thread, and its answer wakes the connection
/// there: on one work-stealing runtime those hand-offs can be cross-thread wake-ups (a
/// request runs in a task of its own — that is what a cancel reaches). Measured on 2 cores
/// shared with the load driver: +30–40 % echo throughput at 16–64 connections, 10–40 % less
/// with a single sequential client (README, Streamable HTTP), hence opt-in. The runtimes live
/// until [`ConnWorkers::stop`]: requests (and their cleanups) outlive their connection.
pub(crate) struct ConnWorkers {
    queues: Vec<mpsc::UnboundedSender<AcceptedConn>>,
    next: usize,
    stop: CancellationToken,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// How long a worker's runtime waits for its blocking work (a handler in `ctx.blocking` that
/// ignores its cancel) when it stops; the process does not wait for such a thread either.
const WORKER_SHUTDOWN: Duration = Duration::from_millis(200);

impl ConnWorkers {
    fn start(n: usize, service: &ConnService) -> std::io::Result<ConnWorkers> {
        let stop = CancellationToken::new();
        let mut queues = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (tx, mut rx) = mpsc::unbounded_channel::<AcceptedConn>();
            let service = service.clone();
            let stop = stop.clone();
            let thread = std::thread::Builder::new()
                .name(format!("staunch-http-{i}"))
                .spawn(move || {
                    rt.block_on(async move {
                        while let Some(a) = rx.recv().await {
                            tokio::spawn(service.clone().serve(a));
                        }
                        // No more connections: keep running what they started until told.
                        stop.cancelled().await;
                    });
                    rt.shutdown_timeout(WORKER_SHUTDOWN);
                })?;
            queues.push(tx);
            threads.push(thread);
        }
        Ok(ConnWorkers {
            queues,
            next: 0,
            stop,
            threads,
        })
    }

    fn hand(&mut self, a: AcceptedConn) {
        let i = self.next % self.queues.len();
        self.next = self.next.wrapping_add(1);
        // A worker that is gone (its thread panicked) hands the connection back: closed.
        let _ = self.queues[i].send(a);
    }

    /// Ends the workers' runtimes once everything on them is done (the transport drained its
    /// sessions), and waits for their threads.
    pub(crate) async fn stop(mut self) {
        self.queues.clear();
        self.stop.cancel();
        let threads = std::mem::take(&mut self.threads);
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }
}

impl Drop for ConnWorkers {
    fn drop(&mut self) {
        // Not stopped on purpose (an error on the way): end the runtimes, do not wait.
        self.stop.cancel();
    }
}

/// Serves on `listener` until `shutdown` fires, then waits for open connections to end: the
/// MCP endpoint's path straight to its handler, every other path through `app` (the router,
/// with the metadata and extra routes; its answer for an unknown path). Connections are served
/// on `workers` threads of their own (0: on the caller's runtime); the returned workers keep
/// running what the connections started until [`ConnWorkers::stop`].
pub(crate) async fn serve(
    listener: TcpListener,
    state: Arc<HttpState>,
    app: Router,
    limits: ConnLimits,
    shutdown: CancellationToken,
    workers: usize,
) -> std::io::Result<Option<ConnWorkers>> {
    let service = ConnService::new(Some(state), app, limits, shutdown.clone());
    let mut pool = match workers {
        0 => None,
        n => Some(ConnWorkers::start(n, &service)?),
    };
    accept_until(listener, &service, pool.as_mut(), limits, shutdown).await;
    Ok(pool)
}

/// Serves `app` on `listener` until `shutdown` fires, with the endpoint's limits on
/// connections (header-read timeout, connection cap): a listener other than the MCP endpoint,
/// such as the metrics listener, is no softer than it.
pub(crate) async fn serve_router(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    shutdown: CancellationToken,
) {
    let service = ConnService::new(None, app, limits, shutdown.clone());
    accept_until(listener, &service, None, limits, shutdown).await;
}

/// Accepts connections until `shutdown`, then waits for the open ones to end. Each is served
/// on `pool` when given, else as a task of the caller's runtime.
async fn accept_until(
    listener: TcpListener,
    service: &ConnService,
    mut pool: Option<&mut ConnWorkers>,
    limits: ConnLimits,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = TaskTracker::new();
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
        let tcp = match tcp.into_std() {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "could not hand over an accepted connection");
                continue;
            }
        };
        let a = AcceptedConn {
            tcp,
            peer,
            permit,
            tracked: connections.token(),
        };
        match pool.as_mut() {
            Some(p) => p.hand(a),
            None => {
                tokio::spawn(service.clone().serve(a));
            }
        }
    }
    drop(listener);
    connections.close();
    connections.wait().await;
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
