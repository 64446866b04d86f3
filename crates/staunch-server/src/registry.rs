//! The Registry: every request in flight in this process, keyed by connection and id.
//!
//! It is the only thing that fires a request's token, and it records *why* in the request's
//! slot first ([`CancelReason`]), so the request's own task decides "respond or not" from one
//! place whatever stopped it: a client's cancel, a closed stream, a closed session, shutdown or
//! the deadline. The map is sharded by request so that requests — also the many of one busy
//! session — rarely share a lock.

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use staunch_protocol::RequestId;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::conn::{ConnId, RequestKey};
use crate::fast_map::FastMap;
use crate::progress::Progress;
pub(crate) use crate::reason::{CancelReason, SESSION_DELETED, WhyCell};
use crate::tool::Shape;

/// A received cancel.
#[derive(Clone, Debug)]
pub(crate) struct CancelMark {
    pub(crate) at: Instant,
    pub(crate) reason: CancelReason,
    /// Whether the request still gets its response (its own deadline; a subscription that the
    /// server ends at shutdown, which answers to say so).
    pub(crate) answers: bool,
}

pub(crate) struct Slot {
    /// The connection's label, for log lines written without the connection at hand.
    pub(crate) label: Arc<str>,
    /// The tool called, or the method (for the operator's view of what is in flight).
    pub(crate) what: Arc<str>,
    pub(crate) token: CancellationToken,
    pub(crate) started: Instant,
    pub(crate) shape: Option<Shape>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) cancel: Option<CancelMark>,
    /// The reason, shared with the request's handler.
    pub(crate) why: WhyCell,
    /// A subscription: at shutdown it ends with a response (graceful closure).
    pub(crate) answers_at_shutdown: bool,
    /// The request's place in its HTTP client's share of the slots, given back as the slot
    /// leaves the registry.
    pub(crate) _peer_slot: Option<crate::fair::PeerSlot>,
}

/// What a cancel did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CancelResult {
    /// Not in flight (never seen, or already finished).
    Unknown,
    /// Already cancelled before; nothing more to do.
    Repeated,
    /// Marked; the token fired unless the shape ignores cancels.
    Routed,
}

/// How a routed cancel went, for its log line (written under the registry's lock, so it always
/// precedes the request's end line).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Routed {
    pub(crate) since_start: Duration,
    /// The tool's shape ignores cancels (`atomic`): marked, but the token did not fire.
    pub(crate) ignored: bool,
}

const SHARDS: usize = 16;

/// One request in flight, as an operator sees it ([`crate::Server::in_flight_requests`]).
#[derive(Clone, Debug)]
pub struct InFlight {
    /// The connection: a session id, or `req-…` for a stateless request.
    pub connection: String,
    /// The JSON-RPC id: a number, or a string in quotes.
    pub request_id: String,
    /// The tool called, or the method.
    pub what: String,
    /// Time since the request started.
    pub elapsed: Duration,
    /// The cancel it received, if any.
    pub cancel: Option<InFlightCancel>,
    /// Cancelled (not by its own deadline) and still running after the cancel grace period.
    pub orphaned: bool,
}

/// A cancel an in-flight request received.
#[derive(Clone, Debug)]
pub struct InFlightCancel {
    /// Why: the client's reason, "stream closed", "server shutdown", …
    pub reason: String,
    /// How long ago.
    pub since: Duration,
    /// Whether it still gets a response (its own deadline).
    pub answers: bool,
}

pub(crate) struct Registry {
    shards: [Mutex<FastMap<RequestKey, Slot>>; SHARDS],
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            shards: std::array::from_fn(|_| Mutex::new(FastMap::default())),
        }
    }
}

impl Registry {
    fn shard(&self, key: &RequestKey) -> MutexGuard<'_, FastMap<RequestKey, Slot>> {
        // By request, not by connection: the many requests of one busy HTTP session run on
        // every worker thread at once, and one lock for all of them was contended. Closing a
        // connection (rare) visits every shard instead.
        let i = (shard_hasher().hash_one(key) % SHARDS as u64) as usize;
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a request; `false` if its id is already in flight on its connection.
    pub(crate) fn insert(&self, key: RequestKey, slot: Slot) -> bool {
        match self.shard(&key).entry(key) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(slot);
                true
            }
        }
    }

    /// Marks the request cancelled for `reason`, stops its progress at once and fires its
    /// token — unless its shape ignores cancels (an `atomic` write finishes; only a deadline,
    /// which atomic tools do not have, would stop it). `on_routed` runs under the lock.
    pub(crate) fn cancel(
        &self,
        key: &RequestKey,
        reason: CancelReason,
        on_routed: impl FnOnce(Routed),
    ) -> CancelResult {
        let mut shard = self.shard(key);
        let Some(slot) = shard.get_mut(key) else {
            return CancelResult::Unknown;
        };
        mark(slot, reason, on_routed)
    }

    /// Cancels every request of connection `conn` (its session closed).
    pub(crate) fn cancel_conn(
        &self,
        conn: ConnId,
        reason: CancelReason,
        mut on_routed: impl FnMut(&RequestId, Routed),
    ) {
        for shard in &self.shards {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            for (key, slot) in shard.iter_mut().filter(|(k, _)| k.conn == conn) {
                mark(slot, reason.clone(), |r| on_routed(&key.id, r));
            }
        }
    }

    /// Cancels everything in flight (shutdown); `on_routed` gets each request's key and its
    /// connection's label.
    pub(crate) fn cancel_all(
        &self,
        reason: CancelReason,
        mut on_routed: impl FnMut(&RequestKey, &str, Routed),
    ) {
        for shard in &self.shards {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            for (key, slot) in shard.iter_mut() {
                let label = slot.label.clone();
                mark(slot, reason.clone(), |r| on_routed(key, &label, r));
            }
        }
    }

    /// Removes a finished request and returns its slot.
    pub(crate) fn finish(&self, key: &RequestKey) -> Option<Slot> {
        self.shard(key).remove(key)
    }

    /// What is in flight right now, for operators (the live page).
    pub(crate) fn snapshot(&self, grace: Duration) -> Vec<InFlight> {
        let now = Instant::now();
        let mut out = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            out.extend(shard.iter().map(|(key, slot)| {
                let cancel = slot.cancel.as_ref().map(|m| InFlightCancel {
                    reason: m.reason.log_text().unwrap_or("cancelled").to_string(),
                    since: now.duration_since(m.at),
                    answers: m.answers,
                });
                InFlight {
                    connection: slot.label.to_string(),
                    request_id: key.id.to_string(),
                    what: slot.what.to_string(),
                    elapsed: now.duration_since(slot.started),
                    // What `staunch audit` calls orphaned: told to stop (not by its own
                    // deadline) and still running after the grace period; an `atomic` write
                    // finishing on purpose is not.
                    orphaned: slot.shape != Some(Shape::Atomic)
                        && cancel
                            .as_ref()
                            .is_some_and(|c| !c.answers && c.since > grace),
                    cancel,
                }
            }));
        }
        out.sort_by_key(|r| std::cmp::Reverse(r.elapsed));
        out
    }

    /// Requests in flight in the whole process.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }
}

/// Picks a key's shard (a fixed seed: which shard is no secret, each shard's map is seeded).
fn shard_hasher() -> foldhash::fast::FixedState {
    foldhash::fast::FixedState::with_seed(0x5eed_5ca1_ab1e)
}

fn mark(slot: &mut Slot, reason: CancelReason, on_routed: impl FnOnce(Routed)) -> CancelResult {
    let now = Instant::now();
    let answers =
        reason.answers() || (reason == CancelReason::Shutdown && slot.answers_at_shutdown);
    match &slot.cancel {
        // The deadline stopped it, but now the client gave up too: no answer after all.
        Some(m) if m.answers && !answers => {
            slot.progress.close();
            *slot.why.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
            slot.cancel = Some(CancelMark {
                at: now,
                reason,
                answers,
            });
            on_routed(Routed {
                since_start: now.duration_since(slot.started),
                ignored: false,
            });
            return CancelResult::Routed;
        }
        Some(_) => return CancelResult::Repeated,
        None => {}
    }
    let ignored = slot.shape == Some(Shape::Atomic) && reason != CancelReason::Deadline;
    *slot.why.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
    slot.cancel = Some(CancelMark {
        at: now,
        reason,
        answers,
    });
    if !answers {
        // Nothing more goes to a client that gave up.
        slot.progress.close();
    }
    on_routed(Routed {
        since_start: now.duration_since(slot.started),
        ignored,
    });
    if !ignored {
        slot.token.cancel();
    }
    CancelResult::Routed
}
