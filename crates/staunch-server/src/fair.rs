//! A fair share of the in-flight slots between HTTP clients, so that no client — however many
//! sessions it opens, alone or not — can take every slot and leave the others "server busy"
//! (JSON POSTs and SSE streams alike: the count is of requests, whatever carries them).
//!
//! A request of an HTTP client is counted against its **peer**: the authenticated principal
//! when auth is on (one token's calls share one count, whatever address or session they use),
//! else the peer's IP address. Session requests are also counted against their session. A
//! request with no peer (a transport that gave no address, without auth) is counted against
//! its session alone. stdio (one client per process) is bounded by the server-wide limit alone.
//!
//! Three rules, checked as a request starts:
//! 1. a session holds at most `max_in_flight_per_session` requests;
//! 2. a peer holds at most `max_in_flight_per_peer` requests, in both eras together;
//! 3. the last quarter of the server's slots is kept for newcomers: once a quarter or less is
//!    free, a holder (its peer, else its session) that already has requests in flight may hold
//!    at most an equal share of the other three quarters among the busy holders. A holder with
//!    nothing in flight is always let in while a slot is free — that is what the quarter is
//!    kept for — so a client alone cannot take the last quarter either.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use staunch_protocol::{ErrorObject, codes};

use crate::fast_map::FastMap;

/// What a request is counted against for its peer's share (see the module overview): its
/// principal, else its address. A key, not a formatted string: this is on every request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PeerKey {
    Principal(Arc<str>),
    Ip(IpAddr),
}

impl PeerKey {
    /// The request's key; `None`: nothing to count against.
    pub(crate) fn of(principal: Option<&str>, ip: Option<IpAddr>) -> Option<Self> {
        match (principal.filter(|p| !p.is_empty()), ip) {
            (Some(p), _) => Some(Self::Principal(Arc::from(p))),
            (None, Some(ip)) => Some(Self::Ip(ip)),
            (None, None) => None,
        }
    }

    /// How logs and refusals name what was counted.
    pub(crate) fn counted_by(&self) -> &'static str {
        match self {
            Self::Principal(_) => "principal",
            Self::Ip(_) => "address",
        }
    }
}

/// The caps of one server.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caps {
    /// All slots (`max_in_flight`).
    pub(crate) max: usize,
    pub(crate) per_session: usize,
    pub(crate) per_peer: usize,
}

/// Peers (and peer-less sessions) with requests in flight.
#[derive(Debug, Default)]
pub(crate) struct FairShare {
    peers: Mutex<FastMap<PeerKey, usize>>,
    /// Sessions without a peer key that have requests in flight.
    keyless_busy: AtomicUsize,
}

fn busy(message: String) -> ErrorObject {
    ErrorObject::new(codes::SERVER_BUSY, message)
}

/// Rule 3: may a holder that holds `held` take one more, with `free` of `max` slots free and
/// `busy` holders busy (itself included when `held > 0`)?
fn within_share(held: usize, max: usize, free: usize, busy: usize) -> Result<(), usize> {
    let reserve = max / 4;
    if held == 0 || free > reserve {
        return Ok(());
    }
    let share = ((max - reserve) / busy.max(1)).max(1);
    if held >= share { Err(share) } else { Ok(()) }
}

impl FairShare {
    fn lock(&self) -> std::sync::MutexGuard<'_, FastMap<PeerKey, usize>> {
        // Counts only: a panic elsewhere cannot leave them in a state worse than stale.
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn busy_holders(&self, peers: &FastMap<PeerKey, usize>) -> usize {
        peers.len() + self.keyless_busy.load(Ordering::Relaxed)
    }

    /// Admits one more request of a peer, which holds `session_held` in its session (`None`:
    /// a stateless request, no session), or says why not. The slot is the peer's place until
    /// dropped.
    pub(crate) fn admit_peer(
        self: &Arc<Self>,
        key: PeerKey,
        session_held: Option<usize>,
        caps: Caps,
        free: usize,
    ) -> Result<PeerSlot, ErrorObject> {
        if let Some(held) = session_held {
            session_cap(held, caps.per_session)?;
        }
        let mut peers = self.lock();
        let held = peers.get(&key).copied().unwrap_or(0);
        if held >= caps.per_peer {
            return Err(busy(format!(
                "too many requests in flight from this client ({held}; the limit is {}, \
                 --max-in-flight-per-peer, counted by {}); wait for some to finish",
                caps.per_peer,
                key.counted_by()
            )));
        }
        if let Err(share) = within_share(held, caps.max, free, self.busy_holders(&peers)) {
            return Err(over_share("client", held, share, caps.max));
        }
        *peers.entry(key.clone()).or_insert(0) += 1;
        Ok(PeerSlot {
            fair: self.clone(),
            key,
        })
    }

    /// Admits one more request of a session that has no peer key and holds `held`.
    pub(crate) fn admit_keyless_session(
        &self,
        held: usize,
        caps: Caps,
        free: usize,
    ) -> Result<(), ErrorObject> {
        session_cap(held, caps.per_session)?;
        let busy_holders = self.busy_holders(&self.lock());
        within_share(held, caps.max, free, busy_holders)
            .map_err(|share| over_share("session", held, share, caps.max))
    }

    /// A session without a peer key went from no request in flight to one.
    pub(crate) fn keyless_busy(&self) {
        self.keyless_busy.fetch_add(1, Ordering::Relaxed);
    }

    /// Such a session's last request in flight ended.
    pub(crate) fn keyless_idle(&self) {
        let _ = self
            .keyless_busy
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    fn release(&self, key: &PeerKey) {
        let mut peers = self.lock();
        match peers.get_mut(key) {
            Some(n) if *n > 1 => *n -= 1,
            // The peer's last request: its entry goes, so the map holds busy peers only.
            Some(_) => {
                peers.remove(key);
            }
            None => {}
        }
    }

    #[cfg(test)]
    pub(crate) fn held(&self, key: &PeerKey) -> usize {
        self.lock().get(key).copied().unwrap_or(0)
    }
}

fn over_share(who: &str, held: usize, share: usize, max: usize) -> ErrorObject {
    busy(format!(
        "server busy: this {who} holds its fair share ({held} in flight; while the server is \
         this busy each busy client may hold {share} of its {max} slots, and the last quarter \
         is kept for clients with none); retry when some of its calls finish"
    ))
}

fn session_cap(held: usize, cap: usize) -> Result<(), ErrorObject> {
    if held >= cap {
        return Err(busy(format!(
            "too many requests in flight in this session ({held}; the limit is {cap}, \
             --max-in-flight-per-session); wait for some to finish"
        )));
    }
    Ok(())
}

/// One request's place in its peer's share; given back when dropped.
#[derive(Debug)]
pub(crate) struct PeerSlot {
    fair: Arc<FairShare>,
    key: PeerKey,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        self.fair.release(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(max: usize, per_session: usize, per_peer: usize) -> Caps {
        Caps {
            max,
            per_session,
            per_peer,
        }
    }

    fn alice() -> PeerKey {
        PeerKey::Principal(Arc::from("alice"))
    }

    #[test]
    fn a_peer_is_its_principal_else_its_address() {
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(PeerKey::of(Some("alice"), Some(ip)).unwrap(), alice());
        assert_eq!(PeerKey::of(Some(""), Some(ip)).unwrap(), PeerKey::Ip(ip));
        assert_eq!(PeerKey::of(None, None), None);
    }

    #[test]
    fn a_client_alone_cannot_take_the_last_quarter() {
        let f = Arc::new(FairShare::default());
        let c = caps(64, 1000, 1000);
        let mut slots = Vec::new();
        // 48 of 64 go while more than a quarter is free ...
        for held in 0..48 {
            slots.push(f.admit_peer(alice(), None, c, 64 - held).unwrap());
        }
        // ... and the 49th would eat into the quarter kept for others.
        let e = f.admit_peer(alice(), None, c, 16).unwrap_err();
        assert!(e.message.contains("fair share"), "{}", e.message);
        // A newcomer gets in, and so does each other newcomer while a slot is free.
        let bob = PeerKey::Principal(Arc::from("bob"));
        let b = f.admit_peer(bob.clone(), None, c, 16).unwrap();
        // Two busy peers now share 48: alice (48) is over, bob (1) is not.
        assert!(f.admit_peer(alice(), None, c, 15).is_err());
        let b2 = f.admit_peer(bob.clone(), None, c, 15).unwrap();
        assert_eq!(f.held(&bob), 2);
        drop((b, b2));
        assert_eq!(f.held(&bob), 0, "places come back");
        slots.truncate(10);
        assert!(
            f.admit_peer(alice(), None, c, 54).is_ok(),
            "no pressure, no share"
        );
    }

    #[test]
    fn the_peer_cap_holds_across_sessions_and_eras() {
        let f = Arc::new(FairShare::default());
        let c = caps(1024, 256, 3);
        let _a = f.admit_peer(alice(), Some(0), c, 1024).unwrap();
        let _b = f.admit_peer(alice(), Some(0), c, 1024).unwrap(); // another session
        let _c = f.admit_peer(alice(), None, c, 1024).unwrap(); // stateless
        let e = f.admit_peer(alice(), Some(0), c, 1024).unwrap_err();
        assert!(
            e.message.contains("--max-in-flight-per-peer"),
            "{}",
            e.message
        );
        let ip = PeerKey::Ip("10.0.0.2".parse().unwrap());
        assert!(
            f.admit_peer(ip, None, c, 1024).is_ok(),
            "another peer counts apart"
        );
    }

    #[test]
    fn the_session_cap_holds_whatever_is_free() {
        let f = Arc::new(FairShare::default());
        let c = caps(100, 8, 1000);
        assert!(f.admit_peer(alice(), Some(7), c, 100).is_ok());
        let e = f.admit_peer(alice(), Some(8), c, 100).unwrap_err();
        assert!(e.message.contains("in this session"), "{}", e.message);
        assert!(f.admit_keyless_session(8, c, 100).is_err());
    }

    #[test]
    fn keyless_sessions_share_like_peers() {
        let f = FairShare::default();
        let c = caps(100, 1000, 1000);
        f.keyless_busy();
        assert!(f.admit_keyless_session(74, c, 26).is_ok());
        assert!(f.admit_keyless_session(75, c, 25).is_err());
        assert!(
            f.admit_keyless_session(0, c, 1).is_ok(),
            "a newcomer gets in"
        );
        f.keyless_busy();
        assert!(f.admit_keyless_session(37, c, 25).is_err(), "two share 75");
        f.keyless_idle();
        f.keyless_idle();
        f.keyless_idle(); // never below zero
        assert!(f.admit_keyless_session(50, c, 25).is_ok());
    }
}
