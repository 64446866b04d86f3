//! A request's messages on their way to the connection that writes them: a bounded queue
//! from one sender to one receiver (a stateless request's response, and a session stream's
//! live connection, [`super::live`]).
//!
//! A tokio channel would do, but it allocates its state and its first block of 32 slots when it
//! is made — about 1 KiB, held by every request in flight, most of which send nothing until
//! their answer. This queue is a lock, a list that allocates on its first message, and a
//! [`Notify`]: a request that waits costs a few words.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

struct QueueState<T> {
    items: VecDeque<T>,
    /// The sending side is gone: the receiver gets what is queued, then `None`.
    sender_gone: bool,
    /// The receiving side is gone: nothing more is queued.
    receiver_gone: bool,
}

struct QueueShared<T> {
    state: Mutex<QueueState<T>>,
    /// Wakes the receiver (a permit is kept when it is not waiting yet).
    queued: Notify,
    /// Wakes a sender waiting for room ([`Sender::send`]).
    room: Notify,
    capacity: usize,
}

impl<T> QueueShared<T> {
    fn lock(&self) -> MutexGuard<'_, QueueState<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why [`Sender::try_send`] did not queue a message (it is dropped).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotQueued {
    /// The receiver is gone.
    Closed,
    /// `capacity` messages wait already.
    Full,
}

/// Queues messages; dropping it ends the queue once the receiver has read what is in it.
pub(crate) struct Sender<T>(Arc<QueueShared<T>>);

/// Takes messages in order.
pub(crate) struct Receiver<T>(Arc<QueueShared<T>>);

/// A queue holding at most `capacity` (at least 1) messages.
pub(crate) fn queue<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(QueueShared {
        state: Mutex::new(QueueState {
            items: VecDeque::new(),
            sender_gone: false,
            receiver_gone: false,
        }),
        queued: Notify::new(),
        room: Notify::new(),
        capacity: capacity.max(1),
    });
    (Sender(shared.clone()), Receiver(shared))
}

impl<T> Sender<T> {
    /// Queues `item` unless the receiver is gone or the queue is full.
    pub(crate) fn try_send(&self, item: T) -> Result<(), NotQueued> {
        {
            let mut st = self.0.lock();
            if st.receiver_gone {
                return Err(NotQueued::Closed);
            }
            if st.items.len() >= self.0.capacity {
                return Err(NotQueued::Full);
            }
            st.items.push_back(item);
        }
        self.0.queued.notify_one();
        Ok(())
    }

    /// Queues `item`, waiting while the queue is full; `false` (the item dropped) when the
    /// receiver is gone.
    pub(crate) async fn send(&self, item: T) -> bool {
        loop {
            let room = self.0.room.notified();
            {
                let mut st = self.0.lock();
                if st.receiver_gone {
                    return false;
                }
                if st.items.len() < self.0.capacity {
                    st.items.push_back(item);
                    drop(st);
                    self.0.queued.notify_one();
                    return true;
                }
            }
            room.await;
        }
    }

    /// How many messages the queue holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.0.capacity
    }

    /// The receiver is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.lock().receiver_gone
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.0.lock().sender_gone = true;
        self.0.queued.notify_one();
    }
}

impl<T> Receiver<T> {
    /// The next message; `None` once the sender is gone and the queue empty. Cancel-safe: a
    /// message is taken only in the poll that returns it.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        loop {
            let queued = self.0.queued.notified();
            {
                let mut st = self.0.lock();
                if let Some(item) = st.items.pop_front() {
                    drop(st);
                    self.0.room.notify_one();
                    return Some(item);
                }
                if st.sender_gone {
                    return None;
                }
            }
            queued.await;
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        {
            let mut st = self.0.lock();
            st.receiver_gone = true;
            st.items.clear();
        }
        self.0.room.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn messages_arrive_in_order_then_none_once_the_sender_is_gone() {
        let (tx, mut rx) = queue(4);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        drop(tx);
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_waiting_receiver_wakes_for_a_message_and_for_the_end() {
        let (tx, mut rx) = queue(4);
        let waiting = tokio::spawn(async move { (rx.recv().await, rx.recv().await) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.try_send("a").unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(tx);
        let got = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(got, (Some("a"), None));
    }

    #[tokio::test]
    async fn a_full_queue_and_a_gone_receiver_refuse() {
        let (tx, rx) = queue(2);
        assert_eq!(tx.capacity(), 2);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        assert_eq!(tx.try_send(3), Err(NotQueued::Full));
        drop(rx);
        assert_eq!(tx.try_send(4), Err(NotQueued::Closed));
    }

    #[tokio::test]
    async fn a_receive_given_up_takes_nothing() {
        let (tx, mut rx) = queue(2);
        // Given up before anything was queued: the message stays for the next receive.
        let gave_up = tokio::time::timeout(Duration::from_millis(10), rx.recv()).await;
        assert!(gave_up.is_err());
        tx.try_send(7).unwrap();
        assert_eq!(rx.recv().await, Some(7));
    }

    #[tokio::test]
    async fn a_sender_waits_for_room_and_gives_up_when_the_receiver_goes() {
        let (tx, mut rx) = queue(1);
        assert!(tx.send(1).await);
        let tx = std::sync::Arc::new(tx);
        let waiting = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(2).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the queue is full: the send waits");
        assert_eq!(rx.recv().await, Some(1));
        assert!(
            waiting.await.unwrap(),
            "room made: the waiting send went in"
        );
        assert_eq!(rx.recv().await, Some(2));

        assert!(tx.send(3).await);
        let blocked = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(4).await }
        });
        tokio::task::yield_now().await;
        drop(rx);
        assert!(
            !blocked.await.unwrap(),
            "the receiver went: the send gives up"
        );
        assert!(tx.is_closed());
    }
}
