//! The in-flight share of stateless (2026-07-28) requests, per peer: a stateless request has
//! no session, so it is counted against its **peer** alone — the authenticated principal when
//! auth is on, else the peer's IP address — in the same count as the peer's session requests,
//! under the rules of [`crate::fair`]. A refusal is HTTP 429 with `Retry-After` and a JSON-RPC
//! error (-32000) that names the limit.
//!
//! A request holds its place until it has ended in the request core *and* its response is
//! done: the [`PeerSlot`] rides in the request's sink, which the request's connection holds.
//! So a client that closes its streams early cannot stack up cancelled requests still within
//! their grace beyond its share.

use std::net::IpAddr;
use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use staunch_protocol::RequestId;

use crate::fair::{PeerKey, PeerSlot};
use crate::outbound::{Outbound, Sink};
use crate::shared::ServerInner;

/// Takes a place for one more stateless request of this peer (`None`: nothing to count
/// against), or the refusal to answer request `id` with.
pub(crate) fn admit(
    server: &ServerInner,
    principal: Option<&str>,
    ip: Option<IpAddr>,
    id: &RequestId,
) -> Result<Option<PeerSlot>, Box<Response>> {
    let Some(key) = PeerKey::of(principal, ip) else {
        return Ok(None);
    };
    let counted_by = key.counted_by();
    match server.fair.admit_peer(
        key,
        None,
        server.fair_caps(),
        server.limiter.available_permits(),
    ) {
        Ok(slot) => Ok(Some(slot)),
        Err(e) => {
            tracing::warn!(counted_by, "standalone request refused: {}", e.message);
            let mut r = super::sse::error_answer(StatusCode::TOO_MANY_REQUESTS, Some(id), &e);
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            Err(Box::new(r))
        }
    }
}

/// A request's sink that holds its peer slot for as long as the request's connection holds
/// the sink: until the request has ended and its response is done.
pub(crate) struct HeldSink {
    inner: Arc<dyn Sink>,
    _slot: Option<PeerSlot>,
}

impl HeldSink {
    pub(crate) fn wrap(inner: Arc<dyn Sink>, slot: Option<PeerSlot>) -> Arc<dyn Sink> {
        match slot {
            Some(slot) => Arc::new(Self {
                inner,
                _slot: Some(slot),
            }),
            None => inner,
        }
    }
}

impl Sink for HeldSink {
    fn send(&self, msg: Outbound) {
        self.inner.send(msg);
    }

    fn close_connection(&self, related: &RequestId) {
        self.inner.close_connection(related);
    }

    fn end_stream(&self, related: &RequestId) {
        self.inner.end_stream(related);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Server;

    #[test]
    fn a_refusal_is_429_with_retry_after_and_places_come_back() {
        let config = crate::Config {
            max_in_flight_per_peer: 2,
            ..crate::Config::default()
        };
        let server = Server::builder("t", "0").config(config).build();
        let id = RequestId::Number(1);
        let a1 = admit(&server.inner, Some("alice"), None, &id).unwrap();
        let _a2 = admit(&server.inner, Some("alice"), None, &id).unwrap();
        let refused = admit(&server.inner, Some("alice"), None, &id).unwrap_err();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        // Another peer has its own count; no peer at all has none.
        let _b = admit(&server.inner, Some("bob"), None, &id).unwrap();
        assert!(admit(&server.inner, None, None, &id).unwrap().is_none());
        drop(a1);
        assert!(
            admit(&server.inner, Some("alice"), None, &id)
                .unwrap()
                .is_some()
        );
    }
}
