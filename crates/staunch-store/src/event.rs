//! SSE event store: what Streamable HTTP (up to 2025-11-25) needs for `Last-Event-ID` replay.
//!
//! Every stream belongs to exactly one session and every lookup names that session, so a client
//! can never read another session's events by guessing a stream id. Sequence numbers are per
//! stream, start at 1 and are handed out under the stream row's lock in the same transaction as
//! the insert, so they commit in order and a replay never skips an event that commits later.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// One stored SSE message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// The stream the event belongs to.
    pub stream_id: String,
    /// Per-stream sequence number, from 1, gap-free until retention removes a prefix.
    pub seq: u64,
    /// The JSON-RPC message exactly as it was appended.
    pub payload: String,
    /// When the event was appended.
    pub created_ms: i64,
}

/// The answer to [`EventStore::replay_after`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay {
    /// The events after the cursor, in order (possibly none: the client is up to date).
    Events(Vec<StoredEvent>),
    /// Some events after the cursor were already purged. Replaying what is left would hide a gap,
    /// so the caller must tell the client instead (an error or a fresh stream).
    Gone {
        /// Sequence number of the oldest event still stored.
        oldest_retained: u64,
    },
    /// No such stream in this session (including: it exists but belongs to another session).
    UnknownStream,
}

/// One write of [`EventStore::write_batch`]. The ids are shared (`Arc<str>`): a stream's writes
/// name the same session and stream, and a clone of an id is a count, not a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventWrite {
    /// [`EventStore::create_stream`].
    Create {
        /// The session the stream belongs to.
        session_id: Arc<str>,
        /// The new stream's id.
        stream_id: Arc<str>,
    },
    /// [`EventStore::append`].
    Append {
        /// The session the stream belongs to.
        session_id: Arc<str>,
        /// The stream appended to.
        stream_id: Arc<str>,
        /// The JSON-RPC message, as JSON text.
        payload: String,
    },
    /// [`EventStore::mark_closed`].
    Close {
        /// The session the stream belongs to.
        session_id: Arc<str>,
        /// The stream to close.
        stream_id: Arc<str>,
    },
}

/// A batch's writes to one stream in the shape a call's stream takes — maybe its creation,
/// its appends, maybe its close — which a driver applies as a few statements instead of one
/// (or two) per write: a quick call's create, response and close become one row and one event.
#[derive(Debug)]
pub(crate) struct StreamRun<'a> {
    pub session_id: &'a str,
    pub stream_id: &'a str,
    /// The run starts with the stream's creation.
    pub create: bool,
    /// The appended payloads, in order.
    pub payloads: Vec<&'a str>,
    /// The run ends with the stream's close.
    pub close: bool,
}

/// One step of a planned batch. A stream whose writes in the batch take another shape than a
/// run's is applied one write at a time: each append as a run of one, creates and closes as
/// themselves.
#[derive(Debug)]
pub(crate) enum Step<'a> {
    Run(StreamRun<'a>),
    Create {
        session_id: &'a str,
        stream_id: &'a str,
    },
    Close {
        session_id: &'a str,
        stream_id: &'a str,
    },
}

impl<'a> Step<'a> {
    fn single(w: &'a EventWrite) -> Self {
        match w {
            EventWrite::Create {
                session_id,
                stream_id,
            } => Step::Create {
                session_id,
                stream_id,
            },
            EventWrite::Append {
                session_id,
                stream_id,
                payload,
            } => Step::Run(StreamRun {
                session_id,
                stream_id,
                create: false,
                payloads: vec![payload],
                close: false,
            }),
            EventWrite::Close {
                session_id,
                stream_id,
            } => Step::Close {
                session_id,
                stream_id,
            },
        }
    }
}

impl EventWrite {
    fn ids(&self) -> (&str, &str) {
        match self {
            Self::Create {
                session_id,
                stream_id,
            }
            | Self::Append {
                session_id,
                stream_id,
                ..
            }
            | Self::Close {
                session_id,
                stream_id,
            } => (session_id, stream_id),
        }
    }
}

/// Groups `writes` by stream, keeping each stream's writes in order (writes to different
/// streams touch different rows, so only the order within a stream matters). A stream whose
/// writes are `Create? Append* Close?` under one session becomes a [`StreamRun`]; any other
/// shape (an append after a close, a second create, two sessions naming one stream id) is left
/// as single writes, which apply with exactly the per-write semantics.
pub(crate) fn plan(writes: &[EventWrite]) -> Vec<Step<'_>> {
    let mut order: Vec<Vec<&EventWrite>> = Vec::new();
    let mut by_stream: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for w in writes {
        let i = *by_stream.entry(w.ids().1).or_insert_with(|| {
            order.push(Vec::new());
            order.len() - 1
        });
        order[i].push(w);
    }
    let mut steps = Vec::with_capacity(order.len());
    for group in order {
        match as_run(&group) {
            Some(run) => steps.push(Step::Run(run)),
            None => steps.extend(group.into_iter().map(Step::single)),
        }
    }
    steps
}

fn as_run<'a>(group: &[&'a EventWrite]) -> Option<StreamRun<'a>> {
    let (session_id, stream_id) = group.first()?.ids();
    let mut run = StreamRun {
        session_id,
        stream_id,
        create: false,
        payloads: Vec::new(),
        close: false,
    };
    for (i, w) in group.iter().enumerate() {
        if w.ids().0 != session_id || run.close {
            return None;
        }
        match w {
            EventWrite::Create { .. } if i == 0 => run.create = true,
            EventWrite::Create { .. } => return None,
            EventWrite::Append { payload, .. } => run.payloads.push(payload),
            EventWrite::Close { .. } => run.close = true,
        }
    }
    Some(run)
}

/// What [`EventStore::write_batch`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Writes applied.
    pub applied: usize,
    /// Writes that did not apply (unknown, foreign or closed stream); the rest still did.
    pub skipped: usize,
}

impl BatchOutcome {
    /// Counts `n` writes that applied, or were skipped.
    pub(crate) fn count(&mut self, applied: bool, n: usize) {
        if applied {
            self.applied += n;
        } else {
            self.skipped += n;
        }
    }
}

/// Durable, session-scoped storage of SSE events. Object safe: use it as `Arc<dyn EventStore>`.
///
/// Times are epoch milliseconds passed in by the caller, so retention can be tested without
/// sleeping and every instance of a cluster stamps events with its own clock consistently.
#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// Registers a stream for a session. Calling it again for the same session is a no-op;
    /// the same stream id under another session is [`StoreError::AlreadyExists`].
    async fn create_stream(
        &self,
        session_id: &str,
        stream_id: &str,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Appends one message and returns its sequence number (1, 2, 3, … per stream).
    /// [`StoreError::UnknownStream`] if the stream is not this session's,
    /// [`StoreError::StreamClosed`] after [`EventStore::mark_closed`].
    async fn append(
        &self,
        session_id: &str,
        stream_id: &str,
        payload_json: String,
        now_ms: i64,
    ) -> Result<u64, StoreError>;

    /// Up to `limit` events with `seq > after_seq`, oldest first.
    async fn replay_after(
        &self,
        session_id: &str,
        stream_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Replay, StoreError>;

    /// The response on this stream is complete. Its events stay for replay until retention
    /// removes them; once a closed stream has no events left and was closed longer than
    /// `max_age_ms` ago, [`EventStore::purge`] drops the stream itself. Idempotent;
    /// returns false when the stream is not this session's.
    async fn mark_closed(
        &self,
        session_id: &str,
        stream_id: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Retention: drops events older than `max_age_ms` and all but the newest
    /// `max_events_per_stream` of each stream. Always removes a *prefix* of a stream, and
    /// remembers how far, so a later replay from before it answers [`Replay::Gone`].
    /// Returns how many events were removed.
    async fn purge(
        &self,
        now_ms: i64,
        max_age_ms: i64,
        max_events_per_stream: u64,
    ) -> Result<u64, StoreError>;

    /// Removes every stream and event of a session (on DELETE or session expiry).
    /// Returns how many streams were removed.
    async fn delete_session(&self, session_id: &str) -> Result<u64, StoreError>;

    /// Whether the store lives in this process's memory, so that every method finishes
    /// without waiting: there is no commit for a batch to share, and the HTTP transport
    /// applies such a store's writes as they come instead of queueing them. A driver that
    /// writes to a database keeps the default, `false`.
    fn in_process(&self) -> bool {
        false
    }

    /// [`write_batch`](Self::write_batch) done now, without a future, by a store that can
    /// (one [`in_process`](Self::in_process), with nothing to wait for): it takes the writes
    /// out of `writes`. `None`, the default, leaves them there, for a store that must be
    /// awaited (the HTTP transport then queues them for [`write_batch`](Self::write_batch)).
    /// The transport writes every event of every stream through this, and a future per write
    /// was a measurable part of a call.
    fn write_batch_now(
        &self,
        writes: &mut Vec<EventWrite>,
        now_ms: i64,
    ) -> Option<Result<BatchOutcome, StoreError>> {
        let _ = (writes, now_ms);
        None
    }

    /// Applies many writes in order — in one transaction (one commit, one fsync) where the
    /// driver can. The HTTP transport batches what its sessions send this way, so the cost of a
    /// durable commit is shared by every event written meanwhile. A write that cannot apply
    /// (unknown, foreign or closed stream) is skipped and counted; the others still apply.
    async fn write_batch(
        &self,
        writes: Vec<EventWrite>,
        now_ms: i64,
    ) -> Result<BatchOutcome, StoreError> {
        let mut out = BatchOutcome::default();
        for w in writes {
            let r = match w {
                EventWrite::Create {
                    session_id,
                    stream_id,
                } => self
                    .create_stream(&session_id, &stream_id, now_ms)
                    .await
                    .map(|_| true),
                EventWrite::Append {
                    session_id,
                    stream_id,
                    payload,
                } => self
                    .append(&session_id, &stream_id, payload, now_ms)
                    .await
                    .map(|_| true),
                EventWrite::Close {
                    session_id,
                    stream_id,
                } => self.mark_closed(&session_id, &stream_id, now_ms).await,
            };
            match r {
                Ok(true) => out.applied += 1,
                Ok(false) => out.skipped += 1,
                Err(e) if e.is_transient() || matches!(e, StoreError::WorkerGone) => return Err(e),
                Err(_) => out.skipped += 1,
            }
        }
        Ok(out)
    }
}
