//! The in-flight share of stateless (2026-07-28) requests, per peer: the stateless era's
//! counterpart of a session's share ([`crate::fair`]), so that one client sending many slow
//! stateless calls cannot take every slot of the server.
//!
//! A stateless request has no session to count against; it is counted against its **peer**:
//! the authenticated principal when auth is on (one token's calls share one count, whatever
//! address they come from), else the peer's IP address. A request with neither (no auth, and
//! a transport that gave no address) has the server-wide limit alone.
//!
//! The rules are those of a session: at most `--max-in-flight-per-peer` requests, and once
//! fewer than a quarter of the server's slots are free, at most an equal share among the
//! sessions and peers with requests in flight (the same [`crate::fair::FairShare`] count). A
//! refusal is HTTP 429 with `Retry-After` and a JSON-RPC error (-32000) that names the limit.
//!
//! A request holds its place until it has ended in the request core *and* its response is
//! done: the [`PeerSlot`] rides in the request's sink, which the request's connection holds.
//! So a client that closes its streams early cannot stack up cancelled requests still within
//! their grace beyond its share.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use staunch_protocol::RequestId;

use crate::fair::Holder;
use crate::fast_map::FastMap;
use crate::outbound::{Outbound, Sink};
use crate::shared::ServerInner;

/// Requests in flight per peer, for one HTTP transport.
pub(crate) struct PeerShares {
    held: Mutex<FastMap<PeerKey, usize>>,
    per_peer: usize,
    server: Arc<ServerInner>,
}

impl std::fmt::Debug for PeerShares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerShares")
            .field("per_peer", &self.per_peer)
            .finish_non_exhaustive()
    }
}

/// What a stateless request is counted against (see the module overview): its principal,
/// else its address. A key, not a formatted string: this is on every stateless request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum PeerKey {
    Principal(Arc<str>),
    Ip(IpAddr),
}

/// The request's [`PeerKey`]; `None`: nothing to count against.
fn peer_key(principal: Option<&str>, ip: Option<IpAddr>) -> Option<PeerKey> {
    match (principal.filter(|p| !p.is_empty()), ip) {
        (Some(p), _) => Some(PeerKey::Principal(Arc::from(p))),
        (None, Some(ip)) => Some(PeerKey::Ip(ip)),
        (None, None) => None,
    }
}

impl PeerShares {
    pub(crate) fn new(server: Arc<ServerInner>, per_peer: usize) -> Arc<Self> {
        Arc::new(Self {
            held: Mutex::new(FastMap::default()),
            per_peer: per_peer.max(1),
            server,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FastMap<PeerKey, usize>> {
        // Counts only: a panic elsewhere cannot leave them in a state worse than stale.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a place for one more stateless request of this peer, or the refusal to answer
    /// request `id` with.
    pub(crate) fn admit(
        self: &Arc<Self>,
        principal: Option<&str>,
        ip: Option<IpAddr>,
        id: &RequestId,
    ) -> Result<Option<PeerSlot>, Box<Response>> {
        let Some(key) = peer_key(principal, ip) else {
            return Ok(None);
        };
        let mut held = self.lock();
        let n = held.get(&key).copied().unwrap_or(0);
        let cfg = &self.server.config;
        if let Err(e) = self.server.fair.admit(
            Holder::Peer,
            n,
            self.per_peer,
            cfg.max_in_flight,
            self.server.limiter.available_permits(),
        ) {
            drop(held);
            tracing::warn!(
                counted_by = match key {
                    PeerKey::Principal(_) => "principal",
                    PeerKey::Ip(_) => "address",
                },
                in_flight = n,
                limit = self.per_peer,
                "stateless request refused: {}",
                e.message
            );
            let mut r = super::stateless::error_answer(StatusCode::TOO_MANY_REQUESTS, Some(id), &e);
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return Err(Box::new(r));
        }
        held.insert(key.clone(), n + 1);
        if n == 0 {
            self.server.fair.session_busy();
        }
        Ok(Some(PeerSlot {
            shares: self.clone(),
            key,
        }))
    }

    fn release(&self, key: &PeerKey) {
        let mut held = self.lock();
        match held.get_mut(key) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                // The peer's last request: its entry goes, so the map holds busy peers only.
                held.remove(key);
                self.server.fair.session_idle();
            }
            None => {}
        }
    }

    #[cfg(test)]
    fn held(&self, principal: Option<&str>, ip: Option<IpAddr>) -> usize {
        peer_key(principal, ip)
            .and_then(|k| self.lock().get(&k).copied())
            .unwrap_or(0)
    }
}

/// One stateless request's place in its peer's share; given back when dropped.
#[derive(Debug)]
pub(crate) struct PeerSlot {
    shares: Arc<PeerShares>,
    key: PeerKey,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        self.shares.release(&self.key);
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

    fn shares(per_peer: usize) -> Arc<PeerShares> {
        let server = Server::builder("t", "0").build();
        PeerShares::new(server.inner.clone(), per_peer)
    }

    #[test]
    fn a_peer_is_its_principal_else_its_address() {
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            peer_key(Some("alice"), Some(ip)).unwrap(),
            PeerKey::Principal(Arc::from("alice"))
        );
        assert_eq!(peer_key(Some(""), Some(ip)).unwrap(), PeerKey::Ip(ip));
        assert_eq!(peer_key(None, None), None);
    }

    #[test]
    fn the_cap_holds_per_peer_and_places_come_back() {
        let s = shares(2);
        let id = RequestId::Number(1);
        let a1 = s.admit(Some("alice"), None, &id).unwrap();
        let a2 = s.admit(Some("alice"), None, &id).unwrap();
        let refused = s.admit(Some("alice"), None, &id).unwrap_err();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        // Another peer has its own count; no peer at all has none.
        let _b = s.admit(Some("bob"), None, &id).unwrap();
        assert!(s.admit(None, None, &id).unwrap().is_none());
        drop(a1);
        assert_eq!(s.held(Some("alice"), None), 1);
        let _a3 = s.admit(Some("alice"), None, &id).unwrap();
        drop(a2);
        drop(_a3);
        assert_eq!(s.held(Some("alice"), None), 0);
        assert!(
            s.lock()
                .get(&PeerKey::Principal(Arc::from("alice")))
                .is_none(),
            "idle peers leave the map"
        );
    }
}
