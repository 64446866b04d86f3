//! A fair share of the in-flight slots between HTTP sessions, so that one session cannot
//! take every slot and leave the others with "server busy" (JSON-only POSTs and SSE streams
//! alike: the count is of requests, whatever carries them).
//!
//! Two rules, checked as a request of an HTTP session starts:
//! 1. a session holds at most `max_in_flight_per_session` requests;
//! 2. once fewer than a quarter of the server's slots are free, a session holds at most an
//!    equal share of all slots among the sessions that have requests in flight (at least one).
//!
//! Stateless (2026-07-28) requests have no session: the HTTP transport counts them per peer
//! (principal, else address) under the same two rules, with the same count of busy holders
//! (`transport::http::peer_share`). stdio (one client per process) is bounded by the
//! server-wide limit alone.

use std::sync::atomic::{AtomicUsize, Ordering};

use staunch_protocol::{ErrorObject, codes};

/// What holds requests in flight: a 2025 session, or a stateless peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    Session,
    Peer,
}

impl Holder {
    /// How a refusal names the holder, and the flag of its cap.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Self::Session => ("in this session", "--max-in-flight-per-session"),
            Self::Peer => (
                "from this client (stateless requests)",
                "--max-in-flight-per-peer",
            ),
        }
    }
}

/// Sessions (and stateless peers) with at least one request in flight.
#[derive(Debug, Default)]
pub(crate) struct FairShare {
    busy_sessions: AtomicUsize,
}

impl FairShare {
    /// Whether a holder that holds `held` requests may start one more, given its cap and the
    /// server's `max` slots of which `free` are free.
    pub(crate) fn admit(
        &self,
        who: Holder,
        held: usize,
        cap: usize,
        max: usize,
        free: usize,
    ) -> Result<(), ErrorObject> {
        let (whose, flag) = who.words();
        if held >= cap {
            return Err(ErrorObject::new(
                codes::SERVER_BUSY,
                format!(
                    "too many requests in flight {whose} ({held}; the limit is {cap}, {flag}); \
                     wait for some to finish"
                ),
            ));
        }
        if free < max / 4 {
            let busy = self.busy_sessions.load(Ordering::Relaxed) + usize::from(held == 0);
            let share = (max / busy.max(1)).max(1);
            if held >= share {
                return Err(ErrorObject::new(
                    codes::SERVER_BUSY,
                    format!(
                        "server busy: {} holds its fair share ({held} of {max} slots, shared by \
                         {busy} sessions and clients); retry when some of its calls finish",
                        match who {
                            Holder::Session => "this session",
                            Holder::Peer => "this client",
                        }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A session went from no request in flight to one.
    pub(crate) fn session_busy(&self) {
        self.busy_sessions.fetch_add(1, Ordering::Relaxed);
    }

    /// A session's last request in flight ended.
    pub(crate) fn session_idle(&self) {
        let _ = self
            .busy_sessions
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_session_cannot_take_every_slot() {
        let f = FairShare::default();
        // The per-session cap holds whatever is free.
        assert!(f.admit(Holder::Session, 7, 8, 100, 100).is_ok());
        assert!(f.admit(Holder::Session, 8, 8, 100, 100).is_err());
        // Under pressure, two busy sessions share 100 slots: 50 each.
        f.session_busy();
        f.session_busy();
        assert!(f.admit(Holder::Session, 49, 1000, 100, 10).is_ok());
        assert!(f.admit(Holder::Session, 50, 1000, 100, 10).is_err());
        // A session with nothing in flight counts itself in and gets a share.
        assert!(f.admit(Holder::Session, 0, 1000, 100, 10).is_ok());
        f.session_idle();
        f.session_idle();
        f.session_idle(); // never below zero
        assert!(f.admit(Holder::Session, 99, 1000, 100, 1).is_ok());
    }
}
