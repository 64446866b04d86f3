//! `GET /healthz`: whether this instance can take new work — what a load balancer or an
//! orchestrator probes.
//!
//! - `200 {"status":"ok"}` when the store answered a read within [`STORE_TIMEOUT`];
//! - `503 {"status":"unavailable","reason":"store unreachable"}` when it did not (the error is
//!   logged, not shown: it may name the database's host);
//! - `503 {"status":"draining"}` once shutdown has begun, so the balancer sends new requests
//!   elsewhere while this instance's streams finish.
//!
//! The store is asked at most once per [`CHECK_EVERY`]; probes in between get the last answer,
//! so a flood of probes costs the database nothing. The route sits behind the same Host check
//! as the endpoint and asks for no token (it tells nothing about sessions, jobs or tools).

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::json;
use staunch_store::SessionStore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::guard::{Allow, guarded};
use super::sse::json_body;

/// The path of the health check.
pub const HEALTH_PATH: &str = "/healthz";
/// How long the store may take to answer before the instance counts as unavailable.
pub(crate) const STORE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one answer of the store is reused.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What the health check reads.
struct Health {
    store: Arc<dyn SessionStore>,
    shutdown: CancellationToken,
    /// When the store was last asked, and whether it answered. Held across the check, so
    /// concurrent probes wait for one check instead of each starting their own.
    last: tokio::sync::Mutex<Option<(Instant, bool)>>,
}

impl Health {
    async fn store_ok(&self) -> bool {
        let mut last = self.last.lock().await;
        if let Some((at, ok)) = *last
            && at.elapsed() < CHECK_EVERY
        {
            return ok;
        }
        let ok = match tokio::time::timeout(STORE_TIMEOUT, self.store.check()).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "health check: the store failed");
                false
            }
            Err(_) => {
                tracing::warn!(
                    timeout_ms = STORE_TIMEOUT.as_millis() as u64,
                    "health check: the store did not answer in time"
                );
                false
            }
        };
        *last = Some((Instant::now(), ok));
        ok
    }

    async fn answer(&self) -> Response {
        let (status, body) = if self.shutdown.is_cancelled() {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "draining"}),
            )
        } else if self.store_ok().await {
            (StatusCode::OK, json!({"status": "ok"}))
        } else {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "unavailable", "reason": "store unreachable"}),
            )
        };
        json_body(status, body.to_string())
    }
}

/// The `/healthz` route, guarded by `allow` like every other route of the listener.
pub(crate) fn routes(
    store: Arc<dyn SessionStore>,
    shutdown: CancellationToken,
    allow: Allow,
) -> axum::Router {
    let health = Arc::new(Health {
        store,
        shutdown,
        last: tokio::sync::Mutex::new(None),
    });
    let route = axum::Router::new().route(
        HEALTH_PATH,
        get(move || {
            let health = health.clone();
            async move { health.answer().await }
        }),
    );
    guarded(route, allow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use axum::body::Body;
    use axum::http::Request;
    use staunch_store::{MemorySessionStore, SessionRecord, StoreError};
    use tower::ServiceExt;

    /// A session store whose reads fail (or hang) while `down` says so, counting the checks.
    struct Flaky {
        down: std::sync::atomic::AtomicBool,
        hang: bool,
        checks: AtomicUsize,
        inner: MemorySessionStore,
    }

    #[async_trait]
    impl SessionStore for Flaky {
        async fn create(&self, r: SessionRecord) -> Result<(), StoreError> {
            self.inner.create(r).await
        }
        async fn get(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
            self.inner.get(id).await
        }
        async fn touch(&self, id: &str, now: i64) -> Result<bool, StoreError> {
            self.inner.touch(id, now).await
        }
        async fn update_log_level(&self, id: &str, l: Option<&str>) -> Result<bool, StoreError> {
            self.inner.update_log_level(id, l).await
        }
        async fn delete(&self, id: &str) -> Result<bool, StoreError> {
            self.inner.delete(id).await
        }
        async fn missing(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
            self.inner.missing(ids).await
        }
        async fn expire_idle(&self, now: i64, idle: i64) -> Result<Vec<String>, StoreError> {
            self.inner.expire_idle(now, idle).await
        }
        async fn shared_secret(
            &self,
            name: &str,
            candidate: &str,
            now: i64,
        ) -> Result<String, StoreError> {
            self.inner.shared_secret(name, candidate, now).await
        }
        async fn put_answer(
            &self,
            session: &str,
            request: &str,
            answer: &str,
            now: i64,
        ) -> Result<bool, StoreError> {
            self.inner.put_answer(session, request, answer, now).await
        }
        async fn take_answer(
            &self,
            session: &str,
            request: &str,
        ) -> Result<Option<String>, StoreError> {
            self.inner.take_answer(session, request).await
        }
        async fn beat_writer(&self, writer: &str, now: i64) -> Result<(), StoreError> {
            self.inner.beat_writer(writer, now).await
        }
        async fn writer_seen(&self, writer: &str) -> Result<Option<i64>, StoreError> {
            self.inner.writer_seen(writer).await
        }
        async fn check(&self) -> Result<(), StoreError> {
            self.checks.fetch_add(1, Ordering::SeqCst);
            if !self.down.load(Ordering::SeqCst) {
                return Ok(());
            }
            if self.hang {
                std::future::pending::<()>().await;
            }
            Err(StoreError::Open("connection refused".into()))
        }
    }

    fn flaky(down: bool, hang: bool) -> Arc<Flaky> {
        Arc::new(Flaky {
            down: down.into(),
            hang,
            checks: AtomicUsize::new(0),
            inner: MemorySessionStore::default(),
        })
    }

    async fn probe(app: &axum::Router, host: &str) -> (StatusCode, serde_json::Value) {
        let req = Request::get(HEALTH_PATH)
            .header("host", host)
            .body(Body::empty())
            .unwrap();
        let res = app.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, serde_json::from_slice(&body).unwrap_or_default())
    }

    #[tokio::test(start_paused = true)]
    async fn ok_while_the_store_answers_unavailable_when_it_does_not() {
        let store = flaky(false, false);
        let app = routes(store.clone(), CancellationToken::new(), Allow::loopback());
        assert_eq!(
            probe(&app, "127.0.0.1:8080").await,
            (StatusCode::OK, json!({"status": "ok"}))
        );
        store.down.store(true, Ordering::SeqCst);
        // Within CHECK_EVERY the last answer stands, and the store is not asked again.
        assert_eq!(probe(&app, "127.0.0.1:8080").await.0, StatusCode::OK);
        assert_eq!(store.checks.load(Ordering::SeqCst), 1);
        tokio::time::advance(CHECK_EVERY).await;
        assert_eq!(
            probe(&app, "127.0.0.1:8080").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "unavailable", "reason": "store unreachable"})
            )
        );
        store.down.store(false, Ordering::SeqCst);
        tokio::time::advance(CHECK_EVERY).await;
        assert_eq!(probe(&app, "127.0.0.1:8080").await.0, StatusCode::OK);
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_hangs_is_unavailable_after_the_timeout() {
        let app = routes(
            flaky(true, true),
            CancellationToken::new(),
            Allow::loopback(),
        );
        let started = Instant::now();
        let (status, _) = probe(&app, "localhost").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(started.elapsed(), STORE_TIMEOUT);
    }

    #[tokio::test]
    async fn draining_once_shutdown_begins() {
        let shutdown = CancellationToken::new();
        let app = routes(flaky(false, false), shutdown.clone(), Allow::loopback());
        shutdown.cancel();
        assert_eq!(
            probe(&app, "localhost").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "draining"})
            )
        );
    }

    #[tokio::test]
    async fn a_foreign_host_is_refused_like_at_the_endpoint() {
        let app = routes(
            flaky(false, false),
            CancellationToken::new(),
            Allow::loopback(),
        );
        assert_eq!(probe(&app, "evil.example").await.0, StatusCode::FORBIDDEN);
    }
}
