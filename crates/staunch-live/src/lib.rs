//! The live page (`staunch serve --http ADDR --live-page /staunch`): requests in flight and
//! jobs, updated every half second over SSE, with a cancel button per job.
//!
//! Server-rendered: the page and every update are HTML fragments rendered in `render`
//! (one rendering path, escaped once); the inline script only swaps them in and posts cancels.
//!
//! Access ([`Access`]):
//! - every request passes the transport's Host check (DNS rebinding);
//! - a cancel is a POST that must carry an allowed `Origin` (same origin);
//! - without `--auth` the page is only mounted on a loopback `--http` address (checked at
//!   start), and a cancel must also carry a token handed out with the page
//!   (`x-staunch-page-token`), so another site cannot make a browser post one (a custom header
//!   also forces a CORS preflight, which this page never answers);
//! - with `--auth`, every route (the page, its stream, the cancel) checks the bearer token
//!   with the MCP endpoint's own verifier and asks for the operator scope (`--live-page-scope`,
//!   default `staunch:operate`): no or a bad token → 401 with the endpoint's
//!   `WWW-Authenticate`, a token without the scope → 403. A browser cannot put a header on a
//!   navigation, so `GET P` without a token answers 401 with the page's shell and no data: its
//!   script asks for the token, keeps it in `sessionStorage` (never in a URL or a cookie) and
//!   reads the stream with `fetch()` and an `Authorization` header. Nothing is sent on the
//!   browser's own initiative, so there is nothing for another site to forge (CSRF); the Origin
//!   check stays. A stream with auth ends every five minutes (`REAUTH`) and the page
//!   reconnects, so the token is checked again (an expired JWT stops the updates).
//!
//! Streams are capped (`--live-page-max-streams`): one more answers 503.
//!
//! Routes under the base path `P`: `GET P` (the page), `GET P/events` (SSE snapshots),
//! `POST P/jobs/{id}/cancel`. [`validate`] checks the path and the address before [`routes`]
//! makes them.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod render;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use staunch_server::Server;
use staunch_server::transport::http::{Allow, Authenticator, Identity};
use staunch_store::{CancelOutcome, JobStore};

use crate::render::{escape, snapshot};

/// How often the page is updated.
const REFRESH: Duration = Duration::from_millis(500);
/// Page tokens remembered (oldest forgotten first) and how long each is honoured.
const MAX_TOKENS: usize = 256;
const TOKEN_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// With auth, how long one stream lives before the page reconnects (and the token is checked
/// again).
const REAUTH: Duration = Duration::from_secs(5 * 60);
/// The operator scope asked for by default.
pub const OPERATOR_SCOPE: &str = "staunch:operate";

const PAGE: &str = include_str!("live_page.html");

/// Who may use the page: callers whose Host (and, to cancel, Origin) pass the allow-list, and
/// with auth on, whose token carries the operator scope.
#[derive(Clone, Debug)]
pub struct Access {
    /// The Host and Origin values the MCP endpoint accepts.
    pub allow: Allow,
    /// With `--auth`: the endpoint's verifier and the scope the page needs.
    pub auth: Option<(Authenticator, String)>,
    /// Streams open at once, at most.
    pub max_streams: usize,
}

impl Access {
    fn host_ok(&self, headers: &HeaderMap) -> bool {
        self.allow.host_headers_ok(headers)
    }

    /// A state-changing request: same origin, required.
    fn origin_ok(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok())
            .is_some_and(|o| self.allow.origin_ok(o))
    }

    /// The caller, with auth on (`Ok(None)` without), or the refusal to answer with.
    async fn identity(&self, headers: &HeaderMap) -> Result<Option<Identity>, Response> {
        if !self.host_ok(headers) {
            return Err(forbidden("forbidden: Host not allowed"));
        }
        let Some((auth, scope)) = &self.auth else {
            return Ok(None);
        };
        let id = auth.authenticate(headers).await?;
        match auth.require_scope(&id, scope, headers) {
            Some(refusal) => Err(refusal),
            None => Ok(Some(id)),
        }
    }
}

/// Counts a stream open while it lives.
struct StreamSlot(Arc<AtomicUsize>);

impl StreamSlot {
    fn take(open: &Arc<AtomicUsize>, max: usize) -> Option<Self> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| Self(open.clone()))
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct LiveState {
    base: String,
    server: Server,
    jobs: Arc<dyn JobStore>,
    /// The proxy's upstreams (none for `serve` alone): their work after a cancel is listed.
    upstreams: Vec<Arc<staunch_proxy::Pool>>,
    access: Access,
    tokens: Mutex<VecDeque<(String, Instant)>>,
    streams: Arc<AtomicUsize>,
}

impl LiveState {
    fn issue_token(&self) -> String {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b).expect("the OS random number generator failed");
        let token: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if tokens.len() >= MAX_TOKENS {
            tokens.pop_front();
        }
        tokens.push_back((token.clone(), Instant::now()));
        token
    }

    fn token_ok(&self, headers: &HeaderMap) -> bool {
        let Some(given) = headers
            .get("x-staunch-page-token")
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        tokens
            .iter()
            .any(|(t, at)| t == given && at.elapsed() < TOKEN_TTL)
    }
}

/// Why the page cannot be served as asked; each message names the flag to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LivePageError {
    /// Without auth the page is served only on a loopback address.
    #[error(
        "--live-page without --auth is served only on a loopback --http address (got {0}); add \
         --auth to serve it elsewhere"
    )]
    NotLoopback(std::net::SocketAddr),
    /// The base is not a path like `/staunch`.
    #[error("--live-page must be a path like /staunch (got {0:?})")]
    NotAPath(String),
    /// The base holds characters a route cannot.
    #[error("--live-page {0:?} has characters a path cannot hold")]
    BadCharacters(String),
    /// The base is the MCP endpoint or contains it.
    #[error("--live-page {base:?} overlaps the MCP endpoint {endpoint:?}")]
    OverlapsEndpoint {
        /// The page's base path.
        base: String,
        /// The MCP endpoint's path.
        endpoint: String,
    },
}

/// Checks the `--live-page` path and that the page may be served on `addr` (any address with
/// auth on; a loopback one without).
pub fn validate(
    base: &str,
    endpoint: &str,
    addr: std::net::SocketAddr,
    authenticated: bool,
) -> Result<(), LivePageError> {
    if !addr.ip().is_loopback() && !authenticated {
        return Err(LivePageError::NotLoopback(addr));
    }
    if !base.starts_with('/') || base.len() < 2 || base.ends_with('/') {
        return Err(LivePageError::NotAPath(base.into()));
    }
    if base.contains(['{', '}', '*', '?', '#']) {
        return Err(LivePageError::BadCharacters(base.into()));
    }
    if base == endpoint || endpoint.starts_with(&format!("{base}/")) {
        return Err(LivePageError::OverlapsEndpoint {
            base: base.into(),
            endpoint: endpoint.into(),
        });
    }
    Ok(())
}

/// The page's routes under `base`. `upstreams`: the proxy's, whose late work it lists.
pub fn routes(
    base: &str,
    server: Server,
    jobs: Arc<dyn JobStore>,
    upstreams: Vec<Arc<staunch_proxy::Pool>>,
    access: Access,
) -> Router {
    let state = Arc::new(LiveState {
        base: base.to_string(),
        server,
        jobs,
        upstreams,
        access,
        tokens: Mutex::new(VecDeque::new()),
        streams: Arc::new(AtomicUsize::new(0)),
    });
    Router::new()
        .route(base, get(page))
        .route(&format!("{base}/events"), get(events))
        .route(&format!("{base}/jobs/{{id}}/cancel"), post(cancel))
        .with_state(state)
}

fn forbidden(why: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain")],
        why.to_string(),
    )
        .into_response()
}

fn json_response(status: StatusCode, v: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

async fn page(State(st): State<Arc<LiveState>>, headers: HeaderMap) -> Response {
    let authed = st.access.auth.is_some();
    let (status, snap) = match st.access.identity(&headers).await {
        Ok(_) => (
            None,
            Some(snapshot(&st.server, st.jobs.as_ref(), &st.upstreams).await),
        ),
        // A browser's navigation carries no token: the shell (no data) asks for one. The 401
        // keeps the endpoint's WWW-Authenticate.
        Err(refusal) if authed && refusal.status() == StatusCode::UNAUTHORIZED => {
            (Some(refusal), None)
        }
        Err(refusal) => return refusal,
    };
    let (requests, jobs, upstream, at) = match &snap {
        Some(s) => (
            s.requests.as_str(),
            s.jobs.as_str(),
            s.upstream.as_deref(),
            s.at.as_str(),
        ),
        None => (SIGN_IN_ROW, SIGN_IN_ROW, None, "—"),
    };
    // Without auth, a cancel needs the page's token; with auth, the bearer token does it.
    let page_token = if authed {
        String::new()
    } else {
        st.issue_token()
    };
    let html = PAGE
        .replace("{{BASE}}", &escape(&st.base))
        .replace("{{AUTH}}", if authed { "bearer" } else { "none" })
        .replace("{{TOKEN}}", &page_token)
        .replace("{{REQUESTS}}", requests)
        .replace("{{JOBS}}", jobs)
        .replace("{{UPSTREAM}}", upstream.unwrap_or_default())
        .replace(
            "{{UPSTREAM_HIDDEN}}",
            if upstream.is_some() { "" } else { " hidden" },
        )
        .replace("{{AT}}", &escape(at));
    let mut r = (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            // Not framable: a cancel button must not be click-jacked.
            (header::X_FRAME_OPTIONS, "DENY"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; form-action 'none'; frame-ancestors 'none'",
            ),
        ],
        html,
    )
        .into_response();
    if let Some(refusal) = status {
        *r.status_mut() = refusal.status();
        if let Some(v) = refusal.headers().get(header::WWW_AUTHENTICATE) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v.clone());
        }
    }
    r
}

const SIGN_IN_ROW: &str = "<tr><td colspan=\"7\" class=\"none\">sign in to see this</td></tr>";

async fn events(State(st): State<Arc<LiveState>>, headers: HeaderMap) -> Response {
    if let Err(refusal) = st.access.identity(&headers).await {
        return refusal;
    }
    let max = st.access.max_streams;
    let Some(slot) = StreamSlot::take(&st.streams, max) else {
        tracing::warn!(max, "live page: stream refused, too many open");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [
                (header::CONTENT_TYPE, "text/plain"),
                (header::RETRY_AFTER, "5"),
            ],
            format!(
                "too many live page streams open ({max}, the --live-page-max-streams limit); \
                 close another tab of the page or raise the limit"
            ),
        )
            .into_response();
    };
    let shutdown = st.server.shutdown_token();
    // With auth a stream ends after REAUTH: the page reconnects with its token, checked again.
    let until = st
        .access
        .auth
        .is_some()
        .then(|| tokio::time::Instant::now() + REAUTH);
    let frames = futures_util::stream::unfold((st, slot, true), move |(st, slot, first)| {
        let shutdown = shutdown.clone();
        async move {
            if !first {
                let expired = async {
                    match until {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep(REFRESH) => {}
                    _ = shutdown.cancelled() => return None,
                    _ = expired => return None,
                }
            }
            let snap = snapshot(&st.server, st.jobs.as_ref(), &st.upstreams).await;
            let data = json!({"requests": snap.requests, "jobs": snap.jobs,
                              "upstream": snap.upstream, "at": snap.at});
            let frame = Bytes::from(format!("data: {data}\n\n"));
            Some((Ok::<_, Infallible>(frame), (st, slot, false)))
        }
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response()
}

async fn cancel(
    State(st): State<Arc<LiveState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let who = match st.access.identity(&headers).await {
        Ok(who) => who,
        Err(refusal) => return refusal,
    };
    if !st.access.origin_ok(&headers) {
        return forbidden("forbidden: a cancel must come from this page (Host and Origin)");
    }
    if who.is_none() && !st.token_ok(&headers) {
        return forbidden("forbidden: missing or unknown page token; reload the page");
    }
    let by = match &who {
        Some(who) => format!("live page ({})", who.principal),
        None => "live page".to_string(),
    };
    let (status, message) = match st
        .jobs
        .request_cancel(&id, &by, staunch_store::now_ms())
        .await
    {
        Ok(CancelOutcome::CancelledQueued(_)) => ("cancelled", "Cancelled before it started."),
        Ok(CancelOutcome::Requested(_)) => (
            "cancelling",
            "Cancel requested: the job stops at its next unit of work.",
        ),
        Ok(CancelOutcome::AlreadyTerminal(_)) => ("already_ended", "The job had already ended."),
        Ok(CancelOutcome::NotFound) => {
            return json_response(
                StatusCode::NOT_FOUND,
                json!({"status": "not_found", "message": "No such job."}),
            );
        }
        Err(e) => {
            tracing::warn!(job_id = %id, error = %e, "live page: cancel failed");
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"status": "error", "message": format!("The store refused the cancel: {e}")}),
            );
        }
    };
    tracing::info!(job_id = %id, status, by = %by, "live page: job cancel");
    json_response(
        StatusCode::OK,
        json!({"job_id": id, "status": status, "message": message}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_path_is_checked() {
        let lo: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        let public: std::net::SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert!(validate("/staunch", "/mcp", lo, false).is_ok());
        let refused = validate("/staunch", "/mcp", public, false).unwrap_err();
        assert_eq!(refused, LivePageError::NotLoopback(public));
        assert!(refused.to_string().contains("loopback"), "{refused}");
        // With auth, the page may be served on any address.
        assert!(validate("/staunch", "/mcp", public, true).is_ok());
        assert!(matches!(
            validate("staunch", "/mcp", lo, false),
            Err(LivePageError::NotAPath(_))
        ));
        assert!(matches!(
            validate("/", "/mcp", lo, false),
            Err(LivePageError::NotAPath(_))
        ));
        assert!(matches!(
            validate("/mcp", "/mcp", lo, false),
            Err(LivePageError::OverlapsEndpoint { .. })
        ));
        assert!(matches!(
            validate("/a/{id}", "/mcp", lo, false),
            Err(LivePageError::BadCharacters(_))
        ));
    }
}
