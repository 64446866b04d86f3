//! The request Registry: the one place that knows every in-flight request of a session.
//!
//! It routes cancels to request tokens, knows which requests were cancelled (so their
//! responses are dropped), and tells the session when it is empty (for the drain on close).
//! The request's own task owns the grace period and the abort (see `session::run_request`):
//! that keeps one task per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use staunch_protocol::RequestId;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::progress::Progress;
use crate::tool::Shape;

/// A received cancel.
#[derive(Clone, Debug)]
pub(crate) struct CancelMark {
    pub(crate) at: Instant,
}

pub(crate) struct Slot {
    pub(crate) token: CancellationToken,
    pub(crate) started: Instant,
    pub(crate) shape: Option<Shape>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) cancel: Option<CancelMark>,
}

/// What a cancel did.
pub(crate) enum CancelResult {
    /// Not in flight (never seen, or already finished).
    Unknown,
    /// Already cancelled before; nothing more to do.
    Repeated,
    /// Routed to the request (the callback saw its age and whether its shape ignores it).
    Routed,
}

#[derive(Default)]
pub(crate) struct Registry {
    slots: Mutex<HashMap<RequestId, Slot>>,
    emptied: Notify,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a request; `false` if the id is already in flight.
    pub(crate) fn insert(&self, id: RequestId, slot: Slot) -> bool {
        let mut slots = self.lock();
        if slots.contains_key(&id) {
            return false;
        }
        slots.insert(id, slot);
        true
    }

    /// Routes a cancel: marks the request (its response will be dropped), stops its progress
    /// at once and fires its token — unless its shape ignores cancels. `on_routed` runs under
    /// the lock, so the cancel's log line is written before the request's end line.
    pub(crate) fn cancel(
        &self,
        id: &RequestId,
        on_routed: impl FnOnce(Duration, bool),
    ) -> CancelResult {
        let mut slots = self.lock();
        let Some(slot) = slots.get_mut(id) else {
            return CancelResult::Unknown;
        };
        if slot.cancel.is_some() {
            return CancelResult::Repeated;
        }
        let now = Instant::now();
        slot.cancel = Some(CancelMark { at: now });
        slot.progress.close();
        let ignored = slot.shape == Some(Shape::Atomic);
        let since_start = now.duration_since(slot.started);
        on_routed(since_start, ignored);
        if !ignored {
            slot.token.cancel();
        }
        CancelResult::Routed
    }

    /// Cancels everything in flight, calling `on_routed` for each request reached.
    pub(crate) fn cancel_all(&self, on_routed: impl Fn(&RequestId, Duration, bool)) {
        let ids: Vec<RequestId> = self.lock().keys().cloned().collect();
        for id in ids {
            self.cancel(&id, |since, ignored| on_routed(&id, since, ignored));
        }
    }

    /// Removes a finished request and returns its slot.
    pub(crate) fn finish(&self, id: &RequestId) -> Option<Slot> {
        let mut slots = self.lock();
        let slot = slots.remove(id);
        if slots.is_empty() {
            self.emptied.notify_waiters();
        }
        slot
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Waits until no request is in flight, or `limit` passes; returns whether it emptied.
    pub(crate) async fn wait_empty(&self, limit: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.emptied.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.len() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }
}
