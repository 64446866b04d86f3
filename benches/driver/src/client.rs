//! One client API over both transports, for the behaviour scenarios (cancel, ping, memory,
//! flood). The throughput loops bypass it: they drive the pipe or sockets directly so the
//! driver costs as little as possible.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::http::{self, Conn, Session};
use crate::rpc::{self, Event};
use crate::servers::{Running, Transport};
use crate::stdio::StdioClient;

pub enum Client {
    Stdio(StdioClient, AtomicU64),
    Http {
        session: Session,
        control: tokio::sync::Mutex<Conn>,
        next: AtomicU64,
    },
}

/// A request in flight and what arrives for it.
pub struct Pending {
    pub id: u64,
    pub events: mpsc::UnboundedReceiver<Event>,
    /// HTTP: the call's own connection (dropped with it).
    pub http: Option<http::Call>,
}

impl Client {
    /// Connects to a running server and completes the `initialize` handshake.
    pub async fn connect(server: &mut Running, transport: Transport) -> anyhow::Result<Self> {
        match transport {
            Transport::Stdio => {
                let stdin = server.child.stdin.take().context("stdin taken")?;
                let stdout = server.child.stdout.take().context("stdout taken")?;
                let c = StdioClient::new(stdin, stdout);
                let mut rx = c.route(0);
                c.send(&rpc::initialize(0)).await?;
                match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
                    Ok(Some(Event::Response { .. })) => {}
                    _ => bail!("no initialize response within 30 s"),
                }
                c.unroute(0);
                c.send(&rpc::initialized()).await?;
                Ok(Client::Stdio(c, AtomicU64::new(1)))
            }
            Transport::Http => {
                let mut conn = Conn::open(server.port).await?;
                let session = Session::open(server.port, &mut conn).await?;
                Ok(Client::Http {
                    session,
                    control: tokio::sync::Mutex::new(conn),
                    next: AtomicU64::new(1),
                })
            }
        }
    }

    pub fn next_id(&self) -> u64 {
        match self {
            Client::Stdio(_, n) | Client::Http { next: n, .. } => n.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Starts a tool call (with a progress token = its id when `progress`).
    pub async fn start_tool(
        &self,
        tool: &str,
        args: Value,
        progress: bool,
    ) -> anyhow::Result<Pending> {
        let id = self.next_id();
        let msg = rpc::tool_call(id, tool, args, progress);
        match self {
            Client::Stdio(c, _) => {
                let events = c.route(id);
                c.send(&msg).await?;
                Ok(Pending {
                    id,
                    events,
                    http: None,
                })
            }
            Client::Http { session, .. } => {
                let mut call = session.start_call(&msg).await?;
                let events = std::mem::replace(&mut call.events, mpsc::unbounded_channel().1);
                Ok(Pending {
                    id,
                    events,
                    http: Some(call),
                })
            }
        }
    }

    /// Sends a notification.
    pub async fn notify(&self, msg: &Value) -> anyhow::Result<()> {
        match self {
            Client::Stdio(c, _) => c.send(msg).await,
            Client::Http {
                session, control, ..
            } => session.notify(&mut *control.lock().await, msg).await,
        }
    }

    /// Sends a request and waits (at most `limit`) for its response.
    pub async fn request(&self, method: &str, limit: Duration) -> anyhow::Result<Value> {
        let id = self.next_id();
        let msg = rpc::request(id, method, None, false);
        match self {
            Client::Stdio(c, _) => {
                let mut rx = c.route(id);
                c.send(&msg).await?;
                let got = tokio::time::timeout(limit, rx.recv()).await;
                c.unroute(id);
                match got {
                    Ok(Some(Event::Response { msg, .. })) => Ok(msg),
                    Ok(_) => bail!("the server closed its stdout"),
                    Err(_) => bail!("no answer to {method} within {limit:?}"),
                }
            }
            Client::Http {
                session, control, ..
            } => {
                let mut conn = control.lock().await;
                match tokio::time::timeout(limit, session.request(&mut conn, &msg)).await {
                    Ok(r) => r,
                    Err(_) => {
                        // The connection is now mid-response; replace it.
                        *conn = Conn::open(session.port).await?;
                        bail!("no answer to {method} within {limit:?}")
                    }
                }
            }
        }
    }

    /// Starts `n` slow calls at once (no progress token) and returns their ids; over HTTP each
    /// holds a connection, returned in `held`.
    pub async fn load(
        &self,
        n: usize,
        args: &Value,
        held: &mut Vec<Pending>,
    ) -> anyhow::Result<Vec<u64>> {
        match self {
            Client::Stdio(c, _) => {
                let mut ids = Vec::with_capacity(n);
                let mut buf = Vec::with_capacity(n * 128);
                for _ in 0..n {
                    let id = self.next_id();
                    serde_json::to_writer(
                        &mut buf,
                        &rpc::tool_call(id, "slow_count", args.clone(), false),
                    )?;
                    buf.push(b'\n');
                    ids.push(id);
                }
                c.send_raw(&buf).await?;
                Ok(ids)
            }
            Client::Http { .. } => {
                let mut ids = Vec::with_capacity(n);
                let first = held.len();
                // Connect in waves so the accept queue is not the thing measured.
                for chunk in (0..n).collect::<Vec<_>>().chunks(64) {
                    let starts = chunk
                        .iter()
                        .map(|_| self.start_tool("slow_count", args.clone(), false));
                    for p in futures_join_all(starts).await {
                        let p = p?;
                        ids.push(p.id);
                        held.push(p);
                    }
                }
                // Accepted = response headers received; a server that holds them back until
                // the first event is given 30 s in all.
                let until = tokio::time::Instant::now() + Duration::from_secs(30);
                let mut refused = 0;
                for p in held[first..].iter_mut() {
                    if let Some(call) = p.http.as_mut() {
                        match tokio::time::timeout_at(until, &mut call.accepted).await {
                            Ok(Ok(s)) if s < 400 => {}
                            _ => refused += 1,
                        }
                    }
                }
                if refused > 0 {
                    bail!("{refused} of {n} calls were not accepted");
                }
                Ok(ids)
            }
        }
    }

    /// Cancels every id at once: one write on stdio; over HTTP, POSTs on 8 connections.
    pub async fn cancel_all(&self, ids: &[u64]) -> anyhow::Result<()> {
        match self {
            Client::Stdio(c, _) => {
                let mut buf = Vec::with_capacity(ids.len() * 128);
                for id in ids {
                    serde_json::to_writer(&mut buf, &rpc::cancelled(*id))?;
                    buf.push(b'\n');
                }
                c.send_raw(&buf).await
            }
            Client::Http { session, .. } => {
                let per = ids.len().div_ceil(8).max(1);
                let mut tasks = Vec::new();
                for chunk in ids.chunks(per) {
                    let chunk = chunk.to_vec();
                    let session = session.clone();
                    tasks.push(tokio::spawn(async move {
                        let mut conn = Conn::open(session.port).await?;
                        for id in chunk {
                            session.notify(&mut conn, &rpc::cancelled(id)).await?;
                        }
                        anyhow::Ok(())
                    }));
                }
                for t in tasks {
                    t.await??;
                }
                Ok(())
            }
        }
    }
}

/// Awaits futures concurrently (on this single-threaded runtime), keeping their order.
async fn futures_join_all<F, T>(futs: impl Iterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T>,
{
    let mut set: Vec<std::pin::Pin<Box<F>>> = futs.map(Box::pin).collect();
    let mut out: Vec<Option<T>> = (0..set.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in set.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
