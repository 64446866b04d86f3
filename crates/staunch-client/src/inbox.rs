//! [`Inbox`]: where a transport hands what it reads.
//!
//! Each item is routed on the task that read it: a response reaches its waiting request
//! through the router's oneshot, with no hop through a routing task in between (a proxied
//! call crossed threads once more for that hop, and cloned every message on the way). Items
//! read before the client is attached — a stdio server that writes before it is asked
//! anything — wait in a queue and are routed first, in order, when it is.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::router::Inbound;

/// What an inbox hands its items to: the client (`session`), which implements it. A trait
/// here, so that transports and the inbox do not depend on the client that owns them.
pub(crate) trait Route: Send + Sync {
    /// Routes one item, on the task that read it.
    fn route_item(self: Arc<Self>, item: Inbound);
}

/// A transport's way to the client's router. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Inbox(Arc<InboxState>);

#[derive(Default)]
struct InboxState {
    /// Set once every queued item was routed, so an item seen after it follows them.
    client: OnceLock<Weak<dyn Route>>,
    early: Mutex<Vec<Inbound>>,
}

impl Inbox {
    /// Routes `item` now (or queues it until [`attach`](Self::attach)). `false` when the
    /// client is gone: the transport may stop reading.
    pub(crate) fn deliver(&self, item: Inbound) -> bool {
        let weak = match self.0.client.get() {
            Some(w) => w,
            None => {
                let mut early = self.0.early.lock().unwrap_or_else(|p| p.into_inner());
                match self.0.client.get() {
                    // Attached while this waited for the lock.
                    Some(w) => w,
                    None => {
                        early.push(item);
                        return true;
                    }
                }
            }
        };
        match weak.upgrade() {
            Some(client) => {
                client.route_item(item);
                true
            }
            None => false,
        }
    }

    /// Connects the inbox to its client, routing what came early first.
    pub(crate) fn attach<R: Route + 'static>(&self, client: &Arc<R>) {
        let mut early = self.0.early.lock().unwrap_or_else(|p| p.into_inner());
        for item in early.drain(..) {
            client.clone().route_item(item);
        }
        let weak: Weak<dyn Route> = Arc::downgrade(client) as Weak<dyn Route>;
        let _ = self.0.client.set(weak);
    }
}
