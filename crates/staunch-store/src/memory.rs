//! In-memory event and session stores: for tests and `--store :memory:` (one process, nothing
//! survives a restart). Same semantics as the SQL drivers; the shared test suite checks that.
//!
//! A plain `std::sync::Mutex` is right here: critical sections are short, never await, and
//! never call out.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::{
    BatchOutcome, EventStore, EventWrite, Replay, SessionRecord, SessionStore, StoreError,
    StoredEvent,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave these maps half-updated in a way that
    // matters more than losing the store, so keep serving.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct MemStream {
    session_id: Arc<str>,
    last_seq: u64,
    purged_through: u64,
    closed_ms: Option<i64>,
    events: VecDeque<StoredEvent>,
}

/// [`EventStore`] kept in process memory.
#[derive(Default)]
pub struct MemoryEventStore {
    /// Keyed by the server's own random stream ids, so a fast hash (foldhash, seeded per
    /// process) serves: three lookups per answered request with SipHash were 1 % of a proxied
    /// call.
    streams: Mutex<Streams>,
}

impl MemoryEventStore {
    /// An empty store.
    pub fn new() -> MemoryEventStore {
        MemoryEventStore::default()
    }

    /// A batch's writes under one lock, with no future (the transport writes every event of
    /// every stream so).
    fn apply(&self, writes: impl IntoIterator<Item = EventWrite>, now_ms: i64) -> BatchOutcome {
        let mut out = BatchOutcome::default();
        let mut streams = lock(&self.streams);
        for w in writes {
            let applied = match w {
                EventWrite::Create {
                    session_id,
                    stream_id,
                } => create(&mut streams, &session_id, &stream_id).is_ok(),
                EventWrite::Append {
                    session_id,
                    stream_id,
                    payload,
                } => append(&mut streams, &session_id, &stream_id, payload, now_ms).is_ok(),
                EventWrite::Close {
                    session_id,
                    stream_id,
                } => mark_closed(&mut streams, &session_id, &stream_id, now_ms),
            };
            out.count(applied, 1);
        }
        out
    }
}

/// The streams under their lock, where each write is applied (alone, or as part of a batch
/// that takes the lock once).
type Streams = foldhash::HashMap<Arc<str>, MemStream>;

/// Creates `stream_id` in `session_id`, keeping the ids as they are shared.
fn create(
    streams: &mut Streams,
    session_id: &Arc<str>,
    stream_id: &Arc<str>,
) -> Result<(), StoreError> {
    match streams.get(&**stream_id) {
        Some(s) if s.session_id == *session_id => Ok(()),
        Some(_) => Err(StoreError::AlreadyExists {
            what: "stream",
            id: stream_id.to_string(),
        }),
        None => {
            streams.insert(
                stream_id.clone(),
                MemStream {
                    session_id: session_id.clone(),
                    last_seq: 0,
                    purged_through: 0,
                    closed_ms: None,
                    events: VecDeque::new(),
                },
            );
            Ok(())
        }
    }
}

fn append(
    streams: &mut Streams,
    session_id: &str,
    stream_id: &str,
    payload: String,
    now_ms: i64,
) -> Result<u64, StoreError> {
    let s = match streams.get_mut(stream_id) {
        Some(s) if *s.session_id == *session_id => s,
        _ => return Err(StoreError::UnknownStream(stream_id.to_owned())),
    };
    if s.closed_ms.is_some() {
        return Err(StoreError::StreamClosed(stream_id.to_owned()));
    }
    s.last_seq += 1;
    s.events.push_back(StoredEvent {
        stream_id: stream_id.to_owned(),
        seq: s.last_seq,
        payload,
        created_ms: now_ms,
    });
    Ok(s.last_seq)
}

fn mark_closed(streams: &mut Streams, session_id: &str, stream_id: &str, now_ms: i64) -> bool {
    match streams.get_mut(stream_id) {
        Some(s) if *s.session_id == *session_id => {
            s.closed_ms.get_or_insert(now_ms);
            true
        }
        _ => false,
    }
}

#[async_trait]
impl EventStore for MemoryEventStore {
    fn in_process(&self) -> bool {
        true
    }

    async fn create_stream(
        &self,
        session_id: &str,
        stream_id: &str,
        _now_ms: i64,
    ) -> Result<(), StoreError> {
        create(
            &mut lock(&self.streams),
            &Arc::from(session_id),
            &Arc::from(stream_id),
        )
    }

    async fn append(
        &self,
        session_id: &str,
        stream_id: &str,
        payload_json: String,
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        append(
            &mut lock(&self.streams),
            session_id,
            stream_id,
            payload_json,
            now_ms,
        )
    }

    async fn write_batch(
        &self,
        writes: Vec<EventWrite>,
        now_ms: i64,
    ) -> Result<BatchOutcome, StoreError> {
        Ok(self.apply(writes, now_ms))
    }

    fn write_batch_now(
        &self,
        writes: &mut Vec<EventWrite>,
        now_ms: i64,
    ) -> Option<Result<BatchOutcome, StoreError>> {
        Some(Ok(self.apply(writes.drain(..), now_ms)))
    }

    async fn replay_after(
        &self,
        session_id: &str,
        stream_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Replay, StoreError> {
        let streams = lock(&self.streams);
        let s = match streams.get(stream_id) {
            Some(s) if *s.session_id == *session_id => s,
            _ => return Ok(Replay::UnknownStream),
        };
        if after_seq < s.purged_through {
            return Ok(Replay::Gone {
                oldest_retained: s.purged_through + 1,
            });
        }
        Ok(Replay::Events(
            s.events
                .iter()
                .filter(|e| e.seq > after_seq)
                .take(limit)
                .cloned()
                .collect(),
        ))
    }

    async fn mark_closed(
        &self,
        session_id: &str,
        stream_id: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        Ok(mark_closed(
            &mut lock(&self.streams),
            session_id,
            stream_id,
            now_ms,
        ))
    }

    async fn purge(
        &self,
        now_ms: i64,
        max_age_ms: i64,
        max_events_per_stream: u64,
    ) -> Result<u64, StoreError> {
        let cutoff = now_ms.saturating_sub(max_age_ms);
        let mut purged = 0;
        let mut streams = lock(&self.streams);
        for s in streams.values_mut() {
            // The horizon is a seq, not a set of rows, so retention always removes a prefix.
            let by_age = s
                .events
                .iter()
                .filter(|e| e.created_ms < cutoff)
                .map(|e| e.seq)
                .max();
            let horizon = s
                .purged_through
                .max(s.last_seq.saturating_sub(max_events_per_stream))
                .max(by_age.unwrap_or(0));
            while s.events.front().is_some_and(|e| e.seq <= horizon) {
                s.events.pop_front();
                purged += 1;
            }
            s.purged_through = horizon;
        }
        streams.retain(|_, s| {
            !(s.events.is_empty() && s.closed_ms.is_some_and(|closed| closed < cutoff))
        });
        Ok(purged)
    }

    async fn delete_session(&self, session_id: &str) -> Result<u64, StoreError> {
        let mut streams = lock(&self.streams);
        let before = streams.len();
        streams.retain(|_, s| *s.session_id != *session_id);
        Ok((before - streams.len()) as u64)
    }
}

/// [`SessionStore`] kept in process memory.
#[derive(Default)]
pub struct MemorySessionStore {
    sessions: Mutex<HashMap<String, SessionRecord>>,
    secrets: Mutex<HashMap<String, String>>,
    /// Answers to server→client requests, by (session, request id): (answer, kept at).
    answers: Mutex<HashMap<(String, String), (String, i64)>>,
    writers: Mutex<HashMap<String, i64>>,
}

impl MemorySessionStore {
    /// An empty store.
    pub fn new() -> MemorySessionStore {
        MemorySessionStore::default()
    }
}

#[async_trait]
impl SessionStore for MemorySessionStore {
    async fn create(&self, record: SessionRecord) -> Result<(), StoreError> {
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(&record.id) {
            return Err(StoreError::AlreadyExists {
                what: "session",
                id: record.id,
            });
        }
        sessions.insert(record.id.clone(), record);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        Ok(lock(&self.sessions).get(id).cloned())
    }

    async fn touch(&self, id: &str, now_ms: i64) -> Result<bool, StoreError> {
        Ok(lock(&self.sessions)
            .get_mut(id)
            .map(|s| s.last_seen_ms = s.last_seen_ms.max(now_ms))
            .is_some())
    }

    async fn missing(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let held = lock(&self.sessions);
        Ok(ids
            .iter()
            .filter(|i| !held.contains_key(*i))
            .cloned()
            .collect())
    }

    async fn update_log_level(&self, id: &str, level: Option<&str>) -> Result<bool, StoreError> {
        Ok(lock(&self.sessions)
            .get_mut(id)
            .map(|s| s.log_level = level.map(str::to_owned))
            .is_some())
    }

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        lock(&self.answers).retain(|(s, _), _| s != id);
        Ok(lock(&self.sessions).remove(id).is_some())
    }

    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer_json: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut answers = lock(&self.answers);
        answers.retain(|_, (_, at)| *at >= now_ms.saturating_sub(crate::ANSWER_TTL_MS));
        let key = (session_id.to_owned(), request_id.to_owned());
        if answers.contains_key(&key) {
            return Ok(true);
        }
        let waiting = answers.keys().filter(|(s, _)| s == session_id).count();
        if waiting as i64 >= crate::MAX_ANSWERS_PER_SESSION {
            return Ok(false);
        }
        answers.insert(key, (answer_json.to_owned(), now_ms));
        Ok(true)
    }

    async fn beat_writer(&self, writer: &str, now_ms: i64) -> Result<(), StoreError> {
        let mut writers = lock(&self.writers);
        writers.retain(|_, seen| *seen >= now_ms.saturating_sub(crate::WRITER_ROW_TTL_MS));
        let seen = writers.entry(writer.to_owned()).or_insert(now_ms);
        *seen = (*seen).max(now_ms);
        Ok(())
    }

    async fn writer_seen(&self, writer: &str) -> Result<Option<i64>, StoreError> {
        Ok(lock(&self.writers).get(writer).copied())
    }

    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(lock(&self.answers)
            .remove(&(session_id.to_owned(), request_id.to_owned()))
            .map(|(a, _)| a))
    }

    async fn shared_secret(
        &self,
        name: &str,
        candidate: &str,
        _now_ms: i64,
    ) -> Result<String, StoreError> {
        Ok(lock(&self.secrets)
            .entry(name.to_owned())
            .or_insert_with(|| candidate.to_owned())
            .clone())
    }

    async fn expire_idle(&self, now_ms: i64, idle_ms: i64) -> Result<Vec<String>, StoreError> {
        let cutoff = now_ms.saturating_sub(idle_ms);
        let mut sessions = lock(&self.sessions);
        let expired: Vec<String> = sessions
            .values()
            .filter(|s| s.last_seen_ms < cutoff)
            .map(|s| s.id.clone())
            .collect();
        for id in &expired {
            sessions.remove(id);
        }
        let old = now_ms.saturating_sub(crate::ANSWER_TTL_MS);
        lock(&self.answers).retain(|(s, _), (_, at)| *at >= old && !expired.contains(s));
        Ok(expired)
    }
}
