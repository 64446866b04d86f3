//! Routes the store's [`Signal`]s: a cancel stops the body if the job runs here, a wake-up
//! makes the claim loop look now, a change another instance made is re-read for the listen
//! streams and sessions here that follow that task (and, after a reconnection, every task
//! they follow, since changes may have been missed). Signals are hints that can be lost (a lagging receiver, a
//! dropped LISTEN connection, another process on a SQLite file): the heartbeat still delivers
//! every cancel flag, and the claim loop still polls.

use std::sync::Arc;

use staunch_store::Signal;
use tokio::sync::broadcast::error::RecvError;

use crate::state::Inner;

pub(crate) async fn route_signals(inner: Arc<Inner>) {
    let mut rx = inner.store.subscribe_signals();
    loop {
        let r = tokio::select! {
            r = rx.recv() => r,
            _ = inner.shutdown.cancelled() => return,
        };
        match r {
            Ok(Signal::Cancel(id)) => inner.deliver_cancel(&id),
            Ok(Signal::Wake) => inner.wake.notify_one(),
            // Our own changes were announced here when they were made.
            Ok(Signal::Changed { id, by }) if by != inner.owner => {
                let inner = inner.clone();
                tokio::spawn(async move { inner.follow_change(&id).await });
            }
            Ok(
                Signal::Changed { .. } | Signal::SessionEnded(_) | Signal::RequestCancelled { .. },
            ) => {}
            Ok(Signal::Reconnected) => {
                let inner = inner.clone();
                tokio::spawn(async move { inner.reread_watched().await });
            }
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "job signals lagged; polling and heartbeating now"
                );
                inner.wake.notify_one();
                let reread = inner.clone();
                tokio::spawn(async move { reread.reread_watched().await });
                // Missed cancels arrive with the next heartbeat; ask for it early.
                for run in inner
                    .running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                {
                    run.progress_wake.notify_one();
                }
            }
            Err(RecvError::Closed) => {
                tokio::select! {
                    _ = tokio::time::sleep(inner.config.claim_poll) => {}
                    _ = inner.shutdown.cancelled() => return,
                }
                rx = inner.store.subscribe_signals();
            }
        }
    }
}
