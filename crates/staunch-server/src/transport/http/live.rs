//! The channel from a stream's writer to the connection that carries it live: [`channel`]
//! makes one, [`LiveTx`] offers events and [`LiveRx`] takes them in order.
//!
//! The items travel boxed. tokio allocates a block of 32 slots when a channel is made, and
//! every in-flight request holds a channel while its handler works: 32 slots of a 48-byte
//! [`SseItem`] are 1.5 KiB per waiting request, 32 pointers are 256 bytes. The price is one
//! small allocation per message sent, and most streams carry one.

use axum::body::Bytes;
use tokio::sync::mpsc;

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
    let (tx, rx) = mpsc::channel(backlog.max(1));
    (LiveTx(tx), LiveRx(rx))
}

/// The writer's end.
#[derive(Debug, Clone)]
pub(crate) struct LiveTx(mpsc::Sender<Box<SseItem>>);

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
        self.0.try_send(Box::new(item)).map_err(|e| match e {
            mpsc::error::TrySendError::Closed(_) => Refused::Closed,
            mpsc::error::TrySendError::Full(_) => Refused::Full,
        })
    }

    /// Queues `item`, waiting for room; `false` when the connection is gone.
    pub(crate) async fn send(&self, item: SseItem) -> bool {
        self.0.send(Box::new(item)).await.is_ok()
    }

    /// The connection is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// The backlog it was made with.
    pub(crate) fn max_capacity(&self) -> usize {
        self.0.max_capacity()
    }
}

/// The connection's end.
#[derive(Debug)]
pub(crate) struct LiveRx(mpsc::Receiver<Box<SseItem>>);

impl LiveRx {
    /// The next item; `None` once every sender is gone and the queue is empty.
    pub(crate) async fn recv(&mut self) -> Option<SseItem> {
        self.0.recv().await.map(|item| *item)
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
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.try_send(SseItem::Close), Err(Refused::Closed));
        assert_eq!(tx.max_capacity(), 2);
    }

    #[test]
    fn boxing_makes_a_slot_smaller_than_the_item() {
        // What the boxing is for: tokio's first block holds 32 slots per channel. If the item
        // ever shrank to a pointer's size, the box would only add an allocation per message.
        assert!(std::mem::size_of::<SseItem>() > 4 * std::mem::size_of::<Box<SseItem>>());
    }
}
