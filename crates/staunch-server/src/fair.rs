//! A fair share of the in-flight slots between HTTP sessions, so that one session cannot
//! take every slot and leave the others with "server busy" (JSON-only POSTs and SSE streams
//! alike: the count is of requests, whatever carries them).
//!
//! Two rules, checked as a request of an HTTP session starts:
//! 1. a session holds at most `max_in_flight_per_session` requests;
//! 2. once fewer than a quarter of the server's slots are free, a session holds at most an
//!    equal share of all slots among the sessions that have requests in flight (at least one).
//!
//! stdio (one client per process) and stateless requests (one request per connection) are
//! bounded by the server-wide limit alone.

use std::sync::atomic::{AtomicUsize, Ordering};

use staunch_protocol::{ErrorObject, codes};

/// Sessions with at least one request in flight.
#[derive(Debug, Default)]
pub(crate) struct FairShare {
    busy_sessions: AtomicUsize,
}

impl FairShare {
    /// Whether a session that holds `held` requests may start one more, given the server's
    /// `max` slots of which `free` are free.
    pub(crate) fn admit(
        &self,
        held: usize,
        per_session: usize,
        max: usize,
        free: usize,
    ) -> Result<(), ErrorObject> {
        if held >= per_session {
            return Err(ErrorObject::new(
                codes::SERVER_BUSY,
                format!(
                    "too many requests in flight in this session ({held}; the limit is \
                     {per_session}, --max-in-flight-per-session); wait for some to finish"
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
                        "server busy: this session holds its fair share ({held} of {max} \
                         slots, shared by {busy} sessions); retry when some of its calls finish"
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
        assert!(f.admit(7, 8, 100, 100).is_ok());
        assert!(f.admit(8, 8, 100, 100).is_err());
        // Under pressure, two busy sessions share 100 slots: 50 each.
        f.session_busy();
        f.session_busy();
        assert!(f.admit(49, 1000, 100, 10).is_ok());
        assert!(f.admit(50, 1000, 100, 10).is_err());
        // A session with nothing in flight counts itself in and gets a share.
        assert!(f.admit(0, 1000, 100, 10).is_ok());
        f.session_idle();
        f.session_idle();
        f.session_idle(); // never below zero
        assert!(f.admit(99, 1000, 100, 1).is_ok());
    }
}
