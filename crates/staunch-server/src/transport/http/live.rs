//! The channel from a stream's writer to the connection that carries it live: [`channel`]
//! makes one, [`LiveTx`] offers events and [`LiveRx`] takes them in order.
//!
//! Built on [`super::answer_queue`], not a tokio channel: every 2025 request answered on a
//! stream holds one while its handler works, and a tokio channel allocates its shared state
//! and a first block of 32 slots when it is made (about 1 KiB per waiting request), where
//! this queue allocates on its first message.

use axum::body::Bytes;

use super::answer_queue::{self, NotQueued, Receiver, Sender};

/// What a live connection receives.
#[derive(Debug)]
pub(crate) enum SseItem {
    /// One message with its sequence number in its stream (its event id is
    /// `{stream}:{seq}`, written only when it goes out as an event); `last` when it is the
    /// response that ends its request's stream.
    Event { seq: u64, data: Bytes, last: bool },
    /// End this connection (the stream goes on; the client resumes with `Last-Event-ID`).
    Close,
}

/// A bounded channel of `backlog` items (at least one).
pub(crate) fn channel(backlog: usize) -> (LiveTx, LiveRx) {
    let (tx, rx) = answer_queue::queue(backlog);
    (LiveTx(tx), LiveRx(rx))
}

/// The writer's end.
pub(crate) struct LiveTx(Sender<SseItem>);

/// Why [`LiveTx::try_send`] refused an item.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The connection is gone.
    Closed,
    /// The connection is its whole backlog behind.
    Full,
}

impl LiveTx {
    /// Queues `item` without waiting.
    pub(crate) fn try_send(&self, item: SseItem) -> Result<(), Refused> {
        self.0.try_send(item).map_err(|e| match e {
            NotQueued::Closed => Refused::Closed,
            NotQueued::Full => Refused::Full,
        })
    }

    /// Queues `item`, waiting for room; `false` when the connection is gone.
    pub(crate) async fn send(&self, item: SseItem) -> bool {
        self.0.send(item).await
    }

    /// The connection is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// The backlog it was made with.
    pub(crate) fn max_capacity(&self) -> usize {
        self.0.capacity()
    }
}

/// The connection's end.
pub(crate) struct LiveRx(Receiver<SseItem>);

impl LiveRx {
    /// The next item; `None` once the sender is gone and the queue is empty.
    pub(crate) async fn recv(&mut self) -> Option<SseItem> {
        self.0.recv().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn items_arrive_in_order_and_a_full_or_closed_channel_refuses() {
        let (tx, mut rx) = channel(2);
        for seq in 1..=2 {
            let item = SseItem::Event {
                seq,
                data: Bytes::from_static(b"{}"),
                last: false,
            };
            assert_eq!(tx.try_send(item), Ok(()));
        }
        assert_eq!(tx.try_send(SseItem::Close), Err(Refused::Full));
        assert!(matches!(
            rx.recv().await,
            Some(SseItem::Event { seq: 1, .. })
        ));
        assert!(matches!(
            rx.recv().await,
            Some(SseItem::Event { seq: 2, .. })
        ));
        assert!(tx.send(SseItem::Close).await);
        assert!(matches!(rx.recv().await, Some(SseItem::Close)));
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.try_send(SseItem::Close), Err(Refused::Closed));
        assert_eq!(tx.max_capacity(), 2);
    }
}
