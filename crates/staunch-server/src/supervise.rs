//! Running a body of work under supervision: the one piece of code that decides how a request
//! handler — or a job body (`staunch-jobs` uses it too) — ends.
//!
//! The body runs until it returns, panics (caught: the server lives on), or is told to stop.
//! A stop is a token firing — a cancel, a session closing, shutdown — or the body's own time
//! limit passing (the caller's `on_limit` records why before the token fires). After a stop the
//! body gets `grace` to wind down; then it is dropped, which is the abort: a future is
//! cancelled by dropping it, at its next await.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a supervised body ended.
#[derive(Debug)]
pub enum Ended<T> {
    /// It returned.
    Returned(T),
    /// It panicked, with this message.
    Panicked(String),
    /// It was told to stop and did not return within the grace period: it was dropped.
    Aborted,
}

/// What [`supervise`] observed.
#[derive(Debug)]
pub struct Supervised<T> {
    /// How the body ended.
    pub ended: Ended<T>,
    /// Whether its time limit passed before it ended.
    pub limit_hit: bool,
}

/// Runs `body` until it ends; see the module docs. `on_limit` runs when `limit` passes first
/// (it should record why and fire `stop`, so the body can observe it).
pub async fn supervise<T, F>(
    body: F,
    stop: &CancellationToken,
    grace: Duration,
    limit: Option<Instant>,
    on_limit: impl FnOnce(),
) -> Supervised<T>
where
    F: Future<Output = T>,
{
    let fut = AssertUnwindSafe(body).catch_unwind();
    tokio::pin!(fut);
    let limit_sleep = async {
        match limit {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    let mut limit_hit = false;
    let ended = tokio::select! {
        biased;
        r = &mut fut => finished(r),
        _ = stop.cancelled() => within_grace(fut.as_mut(), grace).await,
        _ = limit_sleep => {
            limit_hit = true;
            on_limit();
            within_grace(fut.as_mut(), grace).await
        }
    };
    // Dropping the body here (when it came to that) is the abort.
    Supervised { ended, limit_hit }
}

async fn within_grace<T>(
    fut: std::pin::Pin<&mut impl Future<Output = std::thread::Result<T>>>,
    grace: Duration,
) -> Ended<T> {
    match tokio::time::timeout(grace, fut).await {
        Ok(r) => finished(r),
        Err(_) => Ended::Aborted,
    }
}

fn finished<T>(r: std::thread::Result<T>) -> Ended<T> {
    match r {
        Ok(v) => Ended::Returned(v),
        Err(p) => Ended::Panicked(panic_message(p.as_ref())),
    }
}

/// The text of a panic payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_body_that_returns_is_returned() {
        let stop = CancellationToken::new();
        let s = supervise(async { 7 }, &stop, Duration::from_secs(1), None, || {}).await;
        assert!(matches!(s.ended, Ended::Returned(7)));
        assert!(!s.limit_hit);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panic_is_caught_with_its_message() {
        let stop = CancellationToken::new();
        let s = supervise(
            async {
                if stop.is_cancelled() {
                    return 0;
                }
                panic!("boom")
            },
            &stop,
            Duration::from_secs(1),
            None,
            || {},
        )
        .await;
        assert!(matches!(s.ended, Ended::Panicked(ref m) if m == "boom"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cooperative_body_returns_within_the_grace() {
        let stop = CancellationToken::new();
        let body = {
            let stop = stop.clone();
            async move {
                stop.cancelled().await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                "stopped"
            }
        };
        let trigger = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            trigger.cancel();
        });
        let s = supervise(body, &stop, Duration::from_secs(1), None, || {}).await;
        assert!(matches!(s.ended, Ended::Returned("stopped")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stubborn_body_is_dropped_after_the_grace() {
        struct DropFlag(std::sync::Arc<std::sync::atomic::AtomicBool>);
        impl Drop for DropFlag {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        let stop = CancellationToken::new();
        stop.cancel();
        let started = Instant::now();
        let s: Supervised<()> = supervise(
            async move {
                let _flag = flag;
                std::future::pending::<()>().await
            },
            &stop,
            Duration::from_millis(300),
            None,
            || {},
        )
        .await;
        assert!(matches!(s.ended, Ended::Aborted));
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(started.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn the_limit_runs_on_limit_then_grants_the_grace() {
        let stop = CancellationToken::new();
        let body = {
            let stop = stop.clone();
            async move {
                stop.cancelled().await;
                "gave up"
            }
        };
        let fire = stop.clone();
        let s = supervise(
            body,
            &stop,
            Duration::from_secs(1),
            Some(Instant::now() + Duration::from_secs(5)),
            move || fire.cancel(),
        )
        .await;
        assert!(s.limit_hit);
        assert!(matches!(s.ended, Ended::Returned("gave up")));
    }
}
