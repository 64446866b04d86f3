//! [`EventStore`] on SQLite.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Transaction, params};

use super::{Db, read_tx, to_i64, to_u64, write_tx};
use crate::event::{Step, StreamRun, plan};
use crate::{BatchOutcome, EventStore, EventWrite, Replay, StoreError, StoredEvent};

pub(crate) struct SqliteEventStore {
    db: Db,
}

impl SqliteEventStore {
    pub(crate) fn new(db: Db) -> SqliteEventStore {
        SqliteEventStore { db }
    }
}

/// The retention horizon of a stream: the highest seq to drop (`?1` = max events per stream,
/// `?2` = age cutoff). Never below what was already purged, so it only moves forward.
const HORIZON: &str = "MAX(purged_through, last_seq - ?1, \
    COALESCE((SELECT MAX(e.seq) FROM staunch_sse_events e \
              WHERE e.stream_id = staunch_sse_streams.stream_id AND e.created_ms < ?2), 0))";

#[async_trait]
impl EventStore for SqliteEventStore {
    async fn write_batch(
        &self,
        writes: Vec<EventWrite>,
        now_ms: i64,
    ) -> Result<BatchOutcome, StoreError> {
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    let mut out = BatchOutcome::default();
                    for step in plan(&writes) {
                        match step {
                            Step::Run(run) => apply_run(tx, &run, now_ms, &mut out)?,
                            Step::Create {
                                session_id,
                                stream_id,
                            } => {
                                out.count(on_stream(tx, CREATE, session_id, stream_id, now_ms)?, 1)
                            }
                            Step::Close {
                                session_id,
                                stream_id,
                            } => out.count(on_stream(tx, CLOSE, session_id, stream_id, now_ms)?, 1),
                        }
                    }
                    Ok(out)
                })
            })
            .await
    }

    async fn create_stream(
        &self,
        session_id: &str,
        stream_id: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let (session_id, stream_id) = (session_id.to_owned(), stream_id.to_owned());
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    let owner: Option<String> = tx
                        .query_row(
                            "SELECT session_id FROM staunch_sse_streams WHERE stream_id = ?1",
                            [&stream_id],
                            |r| r.get(0),
                        )
                        .optional()?;
                    match owner {
                        Some(owner) if owner == session_id => Ok(()),
                        Some(_) => Err(StoreError::AlreadyExists { what: "stream", id: stream_id }),
                        None => {
                            tx.execute(
                                "INSERT INTO staunch_sse_streams (stream_id, session_id, created_ms) \
                                 VALUES (?1, ?2, ?3)",
                                params![stream_id, session_id, now_ms],
                            )?;
                            Ok(())
                        }
                    }
                })
            })
            .await
    }

    async fn append(
        &self,
        session_id: &str,
        stream_id: &str,
        payload_json: String,
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        let (session_id, stream_id) = (session_id.to_owned(), stream_id.to_owned());
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    let seq: Option<i64> = tx
                        .prepare_cached(
                            "UPDATE staunch_sse_streams SET last_seq = last_seq + 1 \
                             WHERE stream_id = ?1 AND session_id = ?2 AND closed_ms IS NULL \
                             RETURNING last_seq",
                        )?
                        .query_row(params![stream_id, session_id], |r| r.get(0))
                        .optional()?;
                    let Some(seq) = seq else {
                        let closed: Option<Option<i64>> = tx
                            .query_row(
                                "SELECT closed_ms FROM staunch_sse_streams \
                                 WHERE stream_id = ?1 AND session_id = ?2",
                                params![stream_id, session_id],
                                |r| r.get(0),
                            )
                            .optional()?;
                        return Err(match closed {
                            Some(Some(_)) => StoreError::StreamClosed(stream_id),
                            _ => StoreError::UnknownStream(stream_id),
                        });
                    };
                    tx.prepare_cached(
                        "INSERT INTO staunch_sse_events (stream_id, seq, payload, created_ms) \
                         VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![stream_id, seq, payload_json, now_ms])?;
                    Ok(to_u64(seq, "seq")?)
                })
            })
            .await
    }

    async fn replay_after(
        &self,
        session_id: &str,
        stream_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Replay, StoreError> {
        let (session_id, stream_id) = (session_id.to_owned(), stream_id.to_owned());
        self.db
            .call(move |conn| {
                // One snapshot for both reads: a purge between them cannot open a silent gap.
                read_tx(conn, |tx| {
                    let purged: Option<i64> = tx
                        .query_row(
                            "SELECT purged_through FROM staunch_sse_streams \
                             WHERE stream_id = ?1 AND session_id = ?2",
                            params![stream_id, session_id],
                            |r| r.get(0),
                        )
                        .optional()?;
                    let Some(purged) = purged else {
                        return Ok(Replay::UnknownStream);
                    };
                    let purged = to_u64(purged, "purged_through")?;
                    if after_seq < purged {
                        return Ok(Replay::Gone {
                            oldest_retained: purged + 1,
                        });
                    }
                    let mut stmt = tx.prepare_cached(
                        "SELECT seq, payload, created_ms FROM staunch_sse_events \
                         WHERE stream_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                    )?;
                    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                    let events = stmt
                        .query_map(params![stream_id, to_i64(after_seq), limit], |r| {
                            Ok(StoredEvent {
                                stream_id: stream_id.clone(),
                                seq: to_u64(r.get(0)?, "seq")?,
                                payload: r.get(1)?,
                                created_ms: r.get(2)?,
                            })
                        })?
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(Replay::Events(events))
                })
            })
            .await
    }

    async fn mark_closed(
        &self,
        session_id: &str,
        stream_id: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let (session_id, stream_id) = (session_id.to_owned(), stream_id.to_owned());
        self.db
            .call(move |conn| {
                let n = conn.execute(
                    "UPDATE staunch_sse_streams SET closed_ms = COALESCE(closed_ms, ?3) \
                     WHERE stream_id = ?1 AND session_id = ?2",
                    params![stream_id, session_id, now_ms],
                )?;
                Ok(n == 1)
            })
            .await
    }

    async fn purge(
        &self,
        now_ms: i64,
        max_age_ms: i64,
        max_events_per_stream: u64,
    ) -> Result<u64, StoreError> {
        let cutoff = now_ms.saturating_sub(max_age_ms);
        let keep = to_i64(max_events_per_stream);
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    tx.execute(
                        &format!(
                            "UPDATE staunch_sse_streams SET purged_through = {HORIZON} \
                             WHERE {HORIZON} > purged_through"
                        ),
                        params![keep, cutoff],
                    )?;
                    let purged = tx.execute(
                        "DELETE FROM staunch_sse_events WHERE seq <= \
                         (SELECT s.purged_through FROM staunch_sse_streams s \
                          WHERE s.stream_id = staunch_sse_events.stream_id)",
                        [],
                    )?;
                    // Closed streams with nothing left to replay go too.
                    tx.execute(
                        "DELETE FROM staunch_sse_streams WHERE closed_ms IS NOT NULL \
                         AND closed_ms < ?1 AND purged_through >= last_seq",
                        [cutoff],
                    )?;
                    Ok(purged as u64)
                })
            })
            .await
    }

    async fn delete_session(&self, session_id: &str) -> Result<u64, StoreError> {
        let session_id = session_id.to_owned();
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    tx.execute(
                        "DELETE FROM staunch_sse_events WHERE stream_id IN \
                         (SELECT stream_id FROM staunch_sse_streams WHERE session_id = ?1)",
                        [&session_id],
                    )?;
                    let n = tx.execute(
                        "DELETE FROM staunch_sse_streams WHERE session_id = ?1",
                        [&session_id],
                    )?;
                    Ok(n as u64)
                })
            })
            .await
    }
}

/// A stream's run of writes: a created stream is inserted whole (its last seq and, when the
/// run closes it, its close time in the same row) with its events numbered from 1; an existing
/// stream takes all the run's sequence numbers in one update.
fn apply_run(
    tx: &Transaction<'_>,
    run: &StreamRun<'_>,
    now_ms: i64,
    out: &mut BatchOutcome,
) -> Result<(), StoreError> {
    let k = run.payloads.len();
    let k_i64 = to_i64(k as u64);
    if run.create {
        let inserted =
            tx.prepare_cached(
                "INSERT INTO staunch_sse_streams \
                 (stream_id, session_id, created_ms, last_seq, closed_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (stream_id) DO NOTHING",
            )?
            .execute(params![
                run.stream_id,
                run.session_id,
                now_ms,
                k_i64,
                run.close.then_some(now_ms)
            ])? == 1;
        if inserted {
            insert_events(tx, run, 1, now_ms)?;
            out.count(true, 1 + k + usize::from(run.close));
            return Ok(());
        }
        // The id was taken: what follows applies as it would to that stream.
        out.count(false, 1);
    }
    if k > 0 {
        let last: Option<i64> = tx
            .prepare_cached(
                "UPDATE staunch_sse_streams SET last_seq = last_seq + ?3 \
                 WHERE stream_id = ?1 AND session_id = ?2 AND closed_ms IS NULL \
                 RETURNING last_seq",
            )?
            .query_row(params![run.stream_id, run.session_id, k_i64], |r| r.get(0))
            .optional()?;
        match last {
            Some(last) => {
                insert_events(tx, run, last - k_i64 + 1, now_ms)?;
                out.count(true, k);
            }
            None => out.count(false, k),
        }
    }
    if run.close {
        let closed = on_stream(tx, CLOSE, run.session_id, run.stream_id, now_ms)?;
        out.count(closed, 1);
    }
    Ok(())
}

/// The run's payloads as events `first`, `first + 1`, ….
fn insert_events(
    tx: &Transaction<'_>,
    run: &StreamRun<'_>,
    first: i64,
    now_ms: i64,
) -> Result<(), StoreError> {
    if run.payloads.is_empty() {
        return Ok(());
    }
    let mut insert = tx.prepare_cached(
        "INSERT INTO staunch_sse_events (stream_id, seq, payload, created_ms) \
         VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (seq, payload) in (first..).zip(&run.payloads) {
        insert.execute(params![run.stream_id, seq, payload, now_ms])?;
    }
    Ok(())
}

/// Creates a stream on its own (an id already taken is skipped).
const CREATE: &str = "INSERT INTO staunch_sse_streams (stream_id, session_id, created_ms) \
                      VALUES (?1, ?2, ?3) ON CONFLICT (stream_id) DO NOTHING";

/// Closes a stream (again: no change).
const CLOSE: &str = "UPDATE staunch_sse_streams SET closed_ms = COALESCE(closed_ms, ?3) \
                     WHERE stream_id = ?1 AND session_id = ?2";

/// Runs `sql` ([`CREATE`] or [`CLOSE`]) for one stream; whether it touched its row.
fn on_stream(
    tx: &Transaction<'_>,
    sql: &str,
    session_id: &str,
    stream_id: &str,
    now_ms: i64,
) -> Result<bool, StoreError> {
    Ok(tx
        .prepare_cached(sql)?
        .execute(params![stream_id, session_id, now_ms])?
        == 1)
}
