//! SSE event store: what Streamable HTTP (up to 2025-11-25) needs for `Last-Event-ID` replay.
//!
//! Every stream belongs to exactly one session and every lookup names that session, so a client
//! can never read another session's events by guessing a stream id. Sequence numbers are per
//! stream, start at 1 and are handed out under the stream row's lock in the same transaction as
//! the insert, so they commit in order and a replay never skips an event that commits later.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// One stored SSE message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub stream_id: String,
    /// Per-stream sequence number, from 1, gap-free until retention removes a prefix.
    pub seq: u64,
    /// The JSON-RPC message exactly as it was appended.
    pub payload: String,
    pub created_ms: i64,
}

/// The answer to [`EventStore::replay_after`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay {
    /// The events after the cursor, in order (possibly none: the client is up to date).
    Events(Vec<StoredEvent>),
    /// Some events after the cursor were already purged. Replaying what is left would hide a gap,
    /// so the caller must tell the client instead (an error or a fresh stream).
    Gone { oldest_retained: u64 },
    /// No such stream in this session (including: it exists but belongs to another session).
    UnknownStream,
}

/// One write of [`EventStore::write_batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventWrite {
    /// [`EventStore::create_stream`].
    Create {
        session_id: String,
        stream_id: String,
    },
    /// [`EventStore::append`].
    Append {
        session_id: String,
        stream_id: String,
        payload: String,
    },
    /// [`EventStore::mark_closed`].
    Close {
        session_id: String,
        stream_id: String,
    },
}

/// What [`EventStore::write_batch`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Writes applied.
    pub applied: usize,
    /// Writes that did not apply (unknown, foreign or closed stream); the rest still did.
    pub skipped: usize,
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
