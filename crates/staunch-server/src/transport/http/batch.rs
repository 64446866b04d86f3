//! The write-behind queue to the durable event store.
//!
//! Sessions queue their writes without waiting; one task applies whatever has accumulated in a
//! single [`EventStore::write_batch`] (one transaction, one fsync), so the commit cost is shared
//! by every event written meanwhile and a request never waits on the disk. Queue order is
//! write order, so a stream's events reach the store in sequence. Deleting a session goes
//! through the same queue, after that session's pending writes.

use std::sync::Arc;

use staunch_store::{EventStore, EventWrite, now_ms};

use crate::metrics::Metrics;
use tokio::sync::{mpsc, oneshot};

enum Item {
    Write(EventWrite),
    DeleteSession(String),
    Flush(oneshot::Sender<()>),
}

/// Queues writes for the store. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Item>,
}

/// Writes per transaction at most.
const MAX_BATCH: usize = 4096;

impl Batcher {
    /// Starts the writer task.
    pub(crate) fn start(events: Arc<dyn EventStore>, metrics: Metrics) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(events, rx, metrics));
        Self { tx }
    }

    pub(crate) fn write(&self, w: EventWrite) {
        let _ = self.tx.send(Item::Write(w));
    }

    pub(crate) fn delete_session(&self, id: String) {
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

async fn run(events: Arc<dyn EventStore>, mut rx: mpsc::UnboundedReceiver<Item>, metrics: Metrics) {
    let mut items = Vec::with_capacity(256);
    let mut writes = Vec::with_capacity(256);
    while rx.recv_many(&mut items, MAX_BATCH).await > 0 {
        for item in items.drain(..) {
            match item {
                Item::Write(w) => writes.push(w),
                Item::DeleteSession(id) => {
                    apply(&*events, &mut writes).await;
                    if let Err(e) = events.delete_session(&id).await {
                        tracing::warn!(session = %id, error = %e, "could not delete session events");
                    }
                }
                Item::Flush(done) => {
                    apply(&*events, &mut writes).await;
                    let _ = done.send(());
                }
            }
        }
        let started = std::time::Instant::now();
        let wrote = !writes.is_empty();
        apply(&*events, &mut writes).await;
        if wrote {
            metrics.store_write(started.elapsed(), rx.len());
        }
    }
}

async fn apply(events: &dyn EventStore, writes: &mut Vec<EventWrite>) {
    if writes.is_empty() {
        return;
    }
    let n = writes.len();
    match events.write_batch(std::mem::take(writes), now_ms()).await {
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
