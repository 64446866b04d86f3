//! [`EventStore`] on PostgreSQL.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Pg, execute, query_opt, to_i64, to_u64};
use crate::event::{Step, StreamRun, plan};
use crate::{BatchOutcome, EventStore, EventWrite, Replay, StoreError, StoredEvent};

pub(crate) struct PgEventStore {
    pg: Arc<Pg>,
}

impl PgEventStore {
    pub(crate) fn new(pg: Arc<Pg>) -> PgEventStore {
        PgEventStore { pg }
    }
}

#[async_trait]
impl EventStore for PgEventStore {
    async fn write_batch(
        &self,
        writes: Vec<EventWrite>,
        now_ms: i64,
    ) -> Result<BatchOutcome, StoreError> {
        let mut c = self.pg.client().await?;
        let tx = c.transaction().await?;
        let mut out = BatchOutcome::default();
        // None of these statements fails on a missing or foreign stream (they just touch no
        // row), so one transaction can carry the whole batch; a stream's run is one or two
        // round trips however many events it carries.
        for step in plan(&writes) {
            match step {
                Step::Run(run) => apply_run(&tx, &run, now_ms, &mut out).await?,
                Step::Create {
                    session_id,
                    stream_id,
                } => out.count(
                    on_stream(&tx, CREATE, session_id, stream_id, now_ms).await?,
                    1,
                ),
                Step::Close {
                    session_id,
                    stream_id,
                } => out.count(
                    on_stream(&tx, CLOSE, session_id, stream_id, now_ms).await?,
                    1,
                ),
            }
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn create_stream(
        &self,
        session_id: &str,
        stream_id: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let c = self.pg.client().await?;
        let inserted = execute(
            &c,
            "INSERT INTO staunch_sse_streams (stream_id, session_id, created_ms) \
             VALUES ($1, $2, $3) ON CONFLICT (stream_id) DO NOTHING",
            &[&stream_id, &session_id, &now_ms],
        )
        .await?;
        if inserted == 1 {
            return Ok(());
        }
        // A new statement sees the row that conflicted, committed by whoever inserted it.
        let owner = query_opt(
            &c,
            "SELECT session_id FROM staunch_sse_streams WHERE stream_id = $1",
            &[&stream_id],
        )
        .await?;
        match owner {
            Some(row) if row.get::<_, String>(0) == session_id => Ok(()),
            _ => Err(StoreError::AlreadyExists {
                what: "stream",
                id: stream_id.to_owned(),
            }),
        }
    }

    async fn append(
        &self,
        session_id: &str,
        stream_id: &str,
        payload_json: String,
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        let c = self.pg.client().await?;
        // One statement, one transaction: bumping last_seq locks the stream row until the
        // event row commits, so appends to a stream commit in seq order.
        let row = query_opt(
            &c,
            "WITH s AS (UPDATE staunch_sse_streams SET last_seq = last_seq + 1 \
                 WHERE stream_id = $1 AND session_id = $2 AND closed_ms IS NULL \
                 RETURNING last_seq) \
             INSERT INTO staunch_sse_events (stream_id, seq, payload, created_ms) \
             SELECT $1::text, s.last_seq, $3::text, $4::bigint FROM s RETURNING seq",
            &[&stream_id, &session_id, &payload_json, &now_ms],
        )
        .await?;
        if let Some(row) = row {
            return to_u64(row.get(0), "seq");
        }
        let closed = query_opt(
            &c,
            "SELECT closed_ms FROM staunch_sse_streams WHERE stream_id = $1 AND session_id = $2",
            &[&stream_id, &session_id],
        )
        .await?;
        Err(match closed {
            Some(row) if row.get::<_, Option<i64>>(0).is_some() => {
                StoreError::StreamClosed(stream_id.to_owned())
            }
            _ => StoreError::UnknownStream(stream_id.to_owned()),
        })
    }

    async fn replay_after(
        &self,
        session_id: &str,
        stream_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Replay, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // One statement, one snapshot: the retention horizon and the events agree, so a purge
        // running concurrently cannot open a silent gap.
        let rows = self
            .pg
            .read(
                "SELECT s.purged_through, e.seq, e.payload, e.created_ms \
             FROM staunch_sse_streams s \
             LEFT JOIN LATERAL (SELECT seq, payload, created_ms FROM staunch_sse_events \
                 WHERE stream_id = s.stream_id AND seq > $3 ORDER BY seq LIMIT $4) e ON TRUE \
             WHERE s.stream_id = $1 AND s.session_id = $2 ORDER BY e.seq",
                &[&stream_id, &session_id, &to_i64(after_seq), &limit],
            )
            .await?;
        let Some(first) = rows.first() else {
            return Ok(Replay::UnknownStream);
        };
        let purged = to_u64(first.get(0), "purged_through")?;
        if after_seq < purged {
            return Ok(Replay::Gone {
                oldest_retained: purged + 1,
            });
        }
        let mut events = Vec::with_capacity(rows.len());
        for row in &rows {
            if let Some(seq) = row.get::<_, Option<i64>>(1) {
                events.push(StoredEvent {
                    stream_id: stream_id.to_owned(),
                    seq: to_u64(seq, "seq")?,
                    payload: row.get(2),
                    created_ms: row.get(3),
                });
            }
        }
        Ok(Replay::Events(events))
    }

    async fn mark_closed(
        &self,
        session_id: &str,
        stream_id: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let c = self.pg.client().await?;
        let n = execute(
            &c,
            "UPDATE staunch_sse_streams SET closed_ms = COALESCE(closed_ms, $3) \
             WHERE stream_id = $1 AND session_id = $2",
            &[&stream_id, &session_id, &now_ms],
        )
        .await?;
        Ok(n == 1)
    }

    async fn purge(
        &self,
        now_ms: i64,
        max_age_ms: i64,
        max_events_per_stream: u64,
    ) -> Result<u64, StoreError> {
        let cutoff = now_ms.saturating_sub(max_age_ms);
        let keep = to_i64(max_events_per_stream);
        let mut c = self.pg.client().await?;
        let tx = c.transaction().await?;
        // One purger at a time per schema; the others skip (the work is the same), rather than
        // lock stream rows in different orders and deadlock.
        let lock_key = format!("staunch.sse_purge:{}", self.pg.schema);
        let got: bool = tx
            .query_one(
                "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))",
                &[&lock_key],
            )
            .await?
            .get(0);
        if !got {
            return Ok(0);
        }
        // The horizon only moves forward and always removes a prefix of each stream.
        let purged = execute(
            &tx,
            "WITH h AS ( \
                 SELECT s.stream_id, GREATEST(s.purged_through, s.last_seq - $1, \
                     COALESCE((SELECT MAX(e.seq) FROM staunch_sse_events e \
                               WHERE e.stream_id = s.stream_id AND e.created_ms < $2), 0)) AS horizon \
                 FROM staunch_sse_streams s), \
             u AS ( \
                 UPDATE staunch_sse_streams s SET purged_through = h.horizon FROM h \
                 WHERE s.stream_id = h.stream_id AND h.horizon > s.purged_through \
                 RETURNING s.stream_id, s.purged_through) \
             DELETE FROM staunch_sse_events e USING u \
             WHERE e.stream_id = u.stream_id AND e.seq <= u.purged_through",
            &[&keep, &cutoff],
        )
        .await?;
        // Closed streams with nothing left to replay go too.
        execute(
            &tx,
            "DELETE FROM staunch_sse_streams WHERE closed_ms IS NOT NULL AND closed_ms < $1 \
             AND purged_through >= last_seq",
            &[&cutoff],
        )
        .await?;
        tx.commit().await?;
        Ok(purged)
    }

    async fn delete_session(&self, session_id: &str) -> Result<u64, StoreError> {
        let mut c = self.pg.client().await?;
        let tx = c.transaction().await?;
        execute(
            &tx,
            "DELETE FROM staunch_sse_events e USING staunch_sse_streams s \
             WHERE e.stream_id = s.stream_id AND s.session_id = $1",
            &[&session_id],
        )
        .await?;
        let n = execute(
            &tx,
            "DELETE FROM staunch_sse_streams WHERE session_id = $1",
            &[&session_id],
        )
        .await?;
        tx.commit().await?;
        Ok(n)
    }
}

/// A created stream's row (its last seq and, when the run closes it, its close time) and its
/// events in one statement.
const INSERT_RUN: &str = "WITH s AS (\
        INSERT INTO staunch_sse_streams (stream_id, session_id, created_ms, last_seq, closed_ms) \
        VALUES ($1, $2, $3, $4, $5) ON CONFLICT (stream_id) DO NOTHING RETURNING 1), \
     e AS (\
        INSERT INTO staunch_sse_events (stream_id, seq, payload, created_ms) \
        SELECT $1::text, t.o, t.p, $3::bigint FROM s, unnest($6::text[]) WITH ORDINALITY AS t(p, o) \
        RETURNING 1) \
     SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM e)";

/// An open stream's next `$3` sequence numbers, taken under its row lock, and the events.
const APPEND_RUN: &str = "WITH s AS (\
        UPDATE staunch_sse_streams SET last_seq = last_seq + $3 \
        WHERE stream_id = $1 AND session_id = $2 AND closed_ms IS NULL RETURNING last_seq) \
     INSERT INTO staunch_sse_events (stream_id, seq, payload, created_ms) \
     SELECT $1::text, s.last_seq - $3::bigint + t.o, t.p, $5::bigint \
     FROM s, unnest($4::text[]) WITH ORDINALITY AS t(p, o)";

async fn apply_run(
    tx: &deadpool_postgres::Transaction<'_>,
    run: &StreamRun<'_>,
    now_ms: i64,
    out: &mut BatchOutcome,
) -> Result<(), StoreError> {
    let k = run.payloads.len();
    let k_i64 = to_i64(k as u64);
    if run.create {
        let closed = run.close.then_some(now_ms);
        let row = tx
            .query_one(
                INSERT_RUN,
                &[
                    &run.stream_id,
                    &run.session_id,
                    &now_ms,
                    &k_i64,
                    &closed,
                    &run.payloads,
                ],
            )
            .await?;
        if row.get::<_, i64>(0) == 1 {
            out.count(true, 1 + k + usize::from(run.close));
            return Ok(());
        }
        // The id was taken: what follows applies as it would to that stream.
        out.count(false, 1);
    }
    if k > 0 {
        let n = tx
            .execute(
                APPEND_RUN,
                &[
                    &run.stream_id,
                    &run.session_id,
                    &k_i64,
                    &run.payloads,
                    &now_ms,
                ],
            )
            .await?;
        out.count(n as usize == k, k);
    }
    if run.close {
        let closed = on_stream(tx, CLOSE, run.session_id, run.stream_id, now_ms).await?;
        out.count(closed, 1);
    }
    Ok(())
}

/// Creates a stream on its own (an id already taken is skipped).
const CREATE: &str = "INSERT INTO staunch_sse_streams (stream_id, session_id, created_ms) \
                      VALUES ($1, $2, $3) ON CONFLICT (stream_id) DO NOTHING";

/// Closes a stream (again: no change).
const CLOSE: &str = "UPDATE staunch_sse_streams SET closed_ms = COALESCE(closed_ms, $3) \
                     WHERE stream_id = $1 AND session_id = $2";

/// Runs `sql` ([`CREATE`] or [`CLOSE`]) for one stream; whether it touched its row.
async fn on_stream(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &str,
    session_id: &str,
    stream_id: &str,
    now_ms: i64,
) -> Result<bool, StoreError> {
    Ok(tx.execute(sql, &[&stream_id, &session_id, &now_ms]).await? == 1)
}
