//! The write-behind queue to the durable event store.
//!
//! Sessions queue their writes without waiting; one task applies whatever has accumulated in a
//! single [`EventStore::write_batch`] (one transaction, one fsync), so the commit cost is shared
//! by every event written meanwhile and a request never waits on the disk. While the store is
//! busy (it wrote a batch within the last 10 ms) the task lets writes gather for 1 ms before a
//! batch, so a quick call's create, append and close share one transaction. Queue order is
//! write order, so a stream's events reach the store in sequence. Deleting a session goes
//! through the same queue, after that session's pending writes.
//!
//! **Bounded by admission.** A store slower than the offered load would otherwise grow the
//! queue without limit. The queue counts the writes not yet committed; once that reaches the
//! capacity (`--event-queue-max`), a *new* request waits for the store to catch up (slower
//! answers: backpressure) for at most [`ADMIT_WAIT`], and is then refused with `503` and a
//! JSON-RPC "server busy" error that says why. Writes of requests already admitted are never
//! refused or dropped — their results must stay resumable — so the queue can pass the
//! capacity by what the requests in flight still send (bounded by `--max-in-flight` and the
//! progress rate limit).
//!
//! **A store in the process's memory** (`--store :memory:`) has no commit to share: its writes
//! are applied as they come, in the caller's order, with nothing queued.
//!
//! **The crash window.** A message reaches its live connection when it is queued, and the
//! store a batch later (one commit; a few ms at most under normal load, longer under
//! pressure). A crash of the process in between loses the queued events from the store only:
//! a client connected at the time has them already; a client that was away and resumes on
//! *another* instance (or this one after its restart) misses them — at worst the response,
//! which it then never gets (the call's job, if it was one, is durable on its own).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use staunch_store::{EventStore, EventWrite, now_ms};

use crate::metrics::Metrics;
use tokio::sync::{Notify, mpsc, oneshot};

enum Item {
    Write(EventWrite),
    DeleteSession(String),
    Flush(oneshot::Sender<()>),
}

/// Queues writes for the store. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Item>,
    pressure: Arc<Pressure>,
    /// The store, when it lives in this process and takes writes at once
    /// ([`EventStore::in_process`]).
    at_once: Option<Arc<dyn EventStore>>,
}

/// How far behind the store is, and what admission did about it.
struct Pressure {
    /// Writes queued and not yet committed (or failed).
    queued: AtomicUsize,
    capacity: usize,
    /// Signalled after every batch.
    drained: Notify,
    /// Requests that had to wait for the store before they were admitted.
    delayed: AtomicU64,
    /// Requests refused because the store did not catch up in time.
    refused: AtomicU64,
    /// Live connections closed because their client fell a backlog behind (kept here because
    /// every session of the transport holds the batcher).
    connections_cut: AtomicU64,
    /// Stateless (2026) requests cancelled because their client fell a backlog behind on
    /// their response stream.
    streams_cut: AtomicU64,
}

/// Writes per transaction at most.
const MAX_BATCH: usize = 4096;

/// How long a busy queue lets writes gather before a batch (part of the crash window).
const GATHER: Duration = Duration::from_millis(1);

/// A queue whose last batch is older than this is quiet: its next write goes at once.
const QUIET: Duration = Duration::from_millis(10);

/// How long a new request waits for a store that is behind before it is refused.
pub(crate) const ADMIT_WAIT: Duration = Duration::from_secs(2);

/// The store is too far behind to admit a new request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoreBehind {
    pub(crate) queued: usize,
}

/// What the queue has seen so far (for tests and operators).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventQueueStats {
    /// Writes queued for the store and not yet committed.
    pub queued: usize,
    /// The admission threshold (`--event-queue-max`).
    pub capacity: usize,
    /// Requests admitted only after waiting for the store.
    pub delayed: u64,
    /// Requests refused with 503 because the store stayed behind.
    pub refused: u64,
    /// Live connections closed because their client stopped reading (it resumes with
    /// `Last-Event-ID`).
    pub connections_cut: u64,
    /// Stateless (2026) requests cancelled because their client stopped reading the response
    /// stream (in that era a stream that is not read is a client that has gone).
    pub streams_cut: u64,
}

impl Batcher {
    /// Starts the writer task; new requests wait once `capacity` writes are queued.
    pub(crate) fn start(events: Arc<dyn EventStore>, capacity: usize, metrics: Metrics) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let pressure = Arc::new(Pressure {
            queued: AtomicUsize::new(0),
            capacity: capacity.max(1),
            drained: Notify::new(),
            delayed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            connections_cut: AtomicU64::new(0),
            streams_cut: AtomicU64::new(0),
        });
        let at_once = events.in_process().then(|| events.clone());
        tokio::spawn(run(events, rx, pressure.clone(), metrics));
        Self {
            tx,
            pressure,
            at_once,
        }
    }

    pub(crate) fn write(&self, w: EventWrite) {
        self.write_all(vec![w]);
    }

    /// [`write`](Self::write) for several writes in order (a stream's last event and its
    /// close): an in-process store takes them in one batch, at once; what a store leaves
    /// (one that must be awaited) goes through the queue.
    pub(crate) fn write_all(&self, mut writes: Vec<EventWrite>) {
        if let Some(events) = &self.at_once
            && let Some(stored) = events.write_batch_now(&mut writes, now_ms())
        {
            if let Err(e) = stored {
                tracing::warn!(error = %e, "event not stored");
            }
            return;
        }
        for w in writes {
            self.pressure.queued.fetch_add(1, Ordering::Relaxed);
            if self.tx.send(Item::Write(w)).is_err() {
                self.pressure.queued.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Admits a new request: at once while the store keeps up; otherwise after it caught up
    /// below the capacity, waiting at most [`ADMIT_WAIT`].
    pub(crate) async fn admit(&self) -> Result<(), StoreBehind> {
        let p = &self.pressure;
        if p.queued.load(Ordering::Relaxed) < p.capacity {
            return Ok(());
        }
        p.delayed.fetch_add(1, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + ADMIT_WAIT;
        loop {
            let drained = p.drained.notified();
            let queued = p.queued.load(Ordering::Relaxed);
            if queued < p.capacity {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                let queued = p.queued.load(Ordering::Relaxed);
                if queued < p.capacity {
                    return Ok(());
                }
                p.refused.fetch_add(1, Ordering::Relaxed);
                return Err(StoreBehind { queued });
            }
        }
    }

    pub(crate) fn stats(&self) -> EventQueueStats {
        let p = &self.pressure;
        EventQueueStats {
            queued: p.queued.load(Ordering::Relaxed),
            capacity: p.capacity,
            delayed: p.delayed.load(Ordering::Relaxed),
            refused: p.refused.load(Ordering::Relaxed),
            connections_cut: p.connections_cut.load(Ordering::Relaxed),
            streams_cut: p.streams_cut.load(Ordering::Relaxed),
        }
    }

    /// Counts a live connection closed because its client fell behind.
    pub(crate) fn connection_cut(&self) {
        self.pressure
            .connections_cut
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a stateless request cancelled because its client fell behind on its stream.
    pub(crate) fn stream_cut(&self) {
        self.pressure.streams_cut.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn delete_session(&self, id: String) {
        if let Some(events) = self.at_once.clone() {
            let deleted = async move { (events.delete_session(&id).await, id) };
            return apply_now(deleted, |(r, id)| {
                if let Err(e) = r {
                    tracing::warn!(session = %crate::session_hash(&id), error = %e, "could not delete session events");
                }
            });
        }
        let _ = self.tx.send(Item::DeleteSession(id));
    }

    /// Waits until everything queued so far is in the store.
    pub(crate) async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Item::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

/// Runs an operation of an in-process store (a session's delete) to its end now, handing its
/// outcome to `then`. Such a store never waits, so this finishes in the one poll; were one
/// ever to wait, the rest would run on a task of its own rather than be lost.
fn apply_now<F, T>(op: F, then: impl FnOnce(T) + Send + 'static)
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    use futures_util::FutureExt;
    let mut op = Box::pin(op);
    match (&mut op).now_or_never() {
        Some(out) => then(out),
        None => {
            tokio::spawn(async move { then(op.await) });
        }
    }
}

async fn run(
    events: Arc<dyn EventStore>,
    mut rx: mpsc::UnboundedReceiver<Item>,
    pressure: Arc<Pressure>,
    metrics: Metrics,
) {
    let mut items = Vec::with_capacity(256);
    let mut writes = Vec::with_capacity(256);
    let mut last_batch: Option<std::time::Instant> = None;
    while rx.recv_many(&mut items, MAX_BATCH).await > 0 {
        // A busy store (a batch within QUIET) lets writes gather for GATHER first: a quick
        // call's stream is created, appended to and closed within a millisecond or two, and a
        // transaction per write was a third of what a proxied call cost. A flush cuts it short.
        if last_batch.is_some_and(|t| t.elapsed() < QUIET) {
            let until = tokio::time::Instant::now() + GATHER;
            while items.len() < MAX_BATCH && !items.iter().any(|i| matches!(i, Item::Flush(_))) {
                let room = MAX_BATCH - items.len();
                match tokio::time::timeout_at(until, rx.recv_many(&mut items, room)).await {
                    Ok(n) if n > 0 => {}
                    _ => break,
                }
            }
        }
        for item in items.drain(..) {
            match item {
                Item::Write(w) => writes.push(w),
                Item::DeleteSession(id) => {
                    apply(&*events, &mut writes, &pressure).await;
                    if let Err(e) = events.delete_session(&id).await {
                        tracing::warn!(session = %crate::session_hash(&id), error = %e, "could not delete session events");
                    }
                }
                Item::Flush(done) => {
                    apply(&*events, &mut writes, &pressure).await;
                    let _ = done.send(());
                }
            }
        }
        let started = std::time::Instant::now();
        let wrote = !writes.is_empty();
        apply(&*events, &mut writes, &pressure).await;
        if wrote {
            metrics.store_write(started.elapsed(), rx.len());
            last_batch = Some(std::time::Instant::now());
        }
    }
}

async fn apply(events: &dyn EventStore, writes: &mut Vec<EventWrite>, pressure: &Pressure) {
    if writes.is_empty() {
        return;
    }
    let n = writes.len();
    let result = events.write_batch(std::mem::take(writes), now_ms()).await;
    // Committed or failed, these writes no longer hold the queue up.
    pressure.queued.fetch_sub(n, Ordering::Relaxed);
    pressure.drained.notify_waiters();
    match result {
        Ok(out) if out.skipped > 0 => {
            tracing::debug!(
                skipped = out.skipped,
                of = n,
                "event writes skipped (streams gone)"
            );
        }
        Ok(_) => {}
        // Live delivery and same-instance resumption still work from memory; only replay from
        // another instance or after a restart loses these events.
        Err(e) => tracing::warn!(error = %e, writes = n, "event batch not stored"),
    }
}

#[cfg(test)]
mod tests {
    use staunch_store::{MemoryEventStore, Replay};

    use super::*;

    fn create(stream: &str) -> EventWrite {
        EventWrite::Create {
            session_id: "s".into(),
            stream_id: stream.into(),
        }
    }

    fn append(stream: &str, payload: &str) -> EventWrite {
        EventWrite::Append {
            session_id: "s".into(),
            stream_id: stream.into(),
            payload: payload.into(),
        }
    }

    async fn replayed(events: &dyn EventStore, stream: &str) -> Vec<String> {
        match events.replay_after("s", stream, 0, 10).await.unwrap() {
            Replay::Events(evs) => evs.into_iter().map(|e| e.payload).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn an_in_process_store_has_each_write_before_the_call_returns() {
        let events: Arc<dyn EventStore> = Arc::new(MemoryEventStore::new());
        let batcher = Batcher::start(events.clone(), 1, Metrics::disabled());
        batcher.write(create("a"));
        batcher.write(append("a", "1"));
        batcher.write(append("a", "2"));
        // No flush, no yield to the writer task: nothing was queued.
        assert_eq!(batcher.stats().queued, 0);
        assert_eq!(replayed(&*events, "a").await, ["1", "2"]);
        batcher.delete_session("s".into());
        assert!(matches!(
            events.replay_after("s", "a", 0, 10).await.unwrap(),
            Replay::UnknownStream
        ));
    }

    #[tokio::test]
    async fn a_store_that_is_awaited_gets_its_writes_in_order_through_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.db");
        let events = staunch_store::open(path.to_str().unwrap())
            .await
            .unwrap()
            .events;
        assert!(!events.in_process());
        let batcher = Batcher::start(events.clone(), 1, Metrics::disabled());
        batcher.write(create("a"));
        batcher.write(append("a", "1"));
        batcher.write(append("a", "2"));
        assert_eq!(batcher.stats().queued, 3, "queued for the writer task");
        batcher.flush().await;
        assert_eq!(batcher.stats().queued, 0);
        assert_eq!(replayed(&*events, "a").await, ["1", "2"]);
    }
}
