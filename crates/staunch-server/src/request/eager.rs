//! A request's first step on its caller: asyncio's eager tasks, for transports that wait.
//!
//! A request runs in a task of its own — that is what its cancel reaches. But most calls of
//! a quick tool (an echo, a lookup) never wait: the task is spawned, scheduled, runs once and
//! answers a transport task that was parked only to be woken again. When the caller is such a
//! transport task — it does nothing but wait for this request's answer (`Origin::eager`) —
//! [`start`] polls the request once on it and spawns the task only if it has to wait.
//!
//! Nothing of the request's life changes: it was registered (and can be cancelled) before its
//! first step, a cancel cannot arrive *inside* a step that does not wait any differently than
//! it could inside its own task's first poll, and a request that waits goes on in a task of
//! its own. The first poll's waker is a no-op: every future it waits on registers the task's
//! waker on the task's first poll, and sees then whatever became ready meanwhile.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Waker};

/// Runs `task` on the caller until it first has to wait, then spawns it. A panic in that
/// first step ends the task, as a panic in a spawned task would, and not the caller.
pub(crate) fn start(task: impl Future<Output = ()> + Send + 'static) {
    let mut task = Box::pin(task);
    let mut cx = Context::from_waker(Waker::noop());
    match std::panic::catch_unwind(AssertUnwindSafe(|| task.as_mut().poll(&mut cx))) {
        Ok(std::task::Poll::Ready(())) => {}
        Ok(std::task::Poll::Pending) => {
            tokio::spawn(task);
        }
        Err(_) => {
            // The handler's own panics are caught inside the task (supervise); this is the
            // request core's, reported like tokio reports a panicked task's.
            tracing::error!("a request's task panicked in its first step");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_task_that_does_not_wait_is_done_before_start_returns() {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        start(async move { d.store(true, Ordering::SeqCst) });
        assert!(done.load(Ordering::SeqCst), "ran on the caller");
    }

    /// What it waits on becomes ready between the no-op-waker poll and the task's first poll:
    /// the task still sees it (nothing depends on the lost no-op wake).
    #[tokio::test]
    async fn a_task_that_waits_goes_on_in_its_own_task() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let (out_tx, out_rx) = tokio::sync::oneshot::channel::<u32>();
        let stepped = Arc::new(AtomicBool::new(false));
        let s = stepped.clone();
        start(async move {
            s.store(true, Ordering::SeqCst);
            let v = rx.await.unwrap_or(0);
            let _ = out_tx.send(v + 1);
        });
        assert!(
            stepped.load(Ordering::SeqCst),
            "the first step ran on the caller"
        );
        tx.send(41).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), out_rx).await;
        assert_eq!(got.unwrap().unwrap(), 42);
    }

    #[tokio::test]
    async fn a_timer_set_in_the_first_step_fires_in_the_task() {
        let (out_tx, out_rx) = tokio::sync::oneshot::channel::<()>();
        start(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = out_tx.send(());
        });
        let got = tokio::time::timeout(Duration::from_secs(5), out_rx).await;
        assert!(got.unwrap().is_ok());
    }

    #[tokio::test]
    async fn a_panic_in_the_first_step_does_not_reach_the_caller() {
        start(async { panic!("request core bug") });
        // Still here; and the runtime still runs tasks started the same way.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        start(async move {
            tokio::task::yield_now().await;
            let _ = tx.send(());
        });
        assert!(
            tokio::time::timeout(Duration::from_secs(5), rx)
                .await
                .is_ok()
        );
    }
}
