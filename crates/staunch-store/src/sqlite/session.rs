//! [`SessionStore`] on SQLite.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::{Db, write_tx};
use crate::{SessionRecord, SessionStore, StoreError};

pub(crate) struct SqliteSessionStore {
    db: Db,
}

impl SqliteSessionStore {
    pub(crate) fn new(db: Db) -> SqliteSessionStore {
        SqliteSessionStore { db }
    }
}

#[async_trait]
impl SessionStore for SqliteSessionStore {
    async fn create(&self, r: SessionRecord) -> Result<(), StoreError> {
        self.db
            .call(move |conn| {
                let n = conn.execute(
                    "INSERT INTO staunch_sessions (id, protocol_version, client_info_json, \
                     client_capabilities_json, principal, log_level, created_ms, last_seen_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (id) DO NOTHING",
                    params![
                        r.id,
                        r.protocol_version,
                        r.client_info_json,
                        r.client_capabilities_json,
                        r.principal,
                        r.log_level,
                        r.created_ms,
                        r.last_seen_ms
                    ],
                )?;
                if n == 0 {
                    return Err(StoreError::AlreadyExists {
                        what: "session",
                        id: r.id,
                    });
                }
                Ok(())
            })
            .await
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let id = id.to_owned();
        self.db
            .call(move |conn| {
                Ok(conn
                    .prepare_cached(
                        "SELECT id, protocol_version, client_info_json, client_capabilities_json, \
                         principal, log_level, created_ms, last_seen_ms \
                         FROM staunch_sessions WHERE id = ?1",
                    )?
                    .query_row([&id], |r| {
                        Ok(SessionRecord {
                            id: r.get(0)?,
                            protocol_version: r.get(1)?,
                            client_info_json: r.get(2)?,
                            client_capabilities_json: r.get(3)?,
                            principal: r.get(4)?,
                            log_level: r.get(5)?,
                            created_ms: r.get(6)?,
                            last_seen_ms: r.get(7)?,
                        })
                    })
                    .optional()?)
            })
            .await
    }

    async fn touch(&self, id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.db
            .call(move |conn| {
                let n = conn
                    .prepare_cached(
                        "UPDATE staunch_sessions SET last_seen_ms = MAX(last_seen_ms, ?2) \
                         WHERE id = ?1",
                    )?
                    .execute(params![id, now_ms])?;
                Ok(n == 1)
            })
            .await
    }

    async fn update_log_level(&self, id: &str, level: Option<&str>) -> Result<bool, StoreError> {
        let (id, level) = (id.to_owned(), level.map(str::to_owned));
        self.db
            .call(move |conn| {
                let n = conn.execute(
                    "UPDATE staunch_sessions SET log_level = ?2 WHERE id = ?1",
                    params![id, level],
                )?;
                Ok(n == 1)
            })
            .await
    }

    async fn missing(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let list =
            serde_json::to_string(ids).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
        let ids = ids.to_vec();
        self.db
            .call(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT id FROM staunch_sessions WHERE id IN (SELECT value FROM json_each(?1))",
                )?;
                let held: std::collections::HashSet<String> = stmt
                    .query_map([&list], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                Ok(ids.into_iter().filter(|i| !held.contains(i)).collect())
            })
            .await
    }

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    tx.execute(
                        "DELETE FROM staunch_client_answers WHERE session_id = ?1",
                        [&id],
                    )?;
                    Ok(tx.execute("DELETE FROM staunch_sessions WHERE id = ?1", [&id])? == 1)
                })
            })
            .await
    }

    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer_json: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let (session, request, answer) = (
            session_id.to_owned(),
            request_id.to_owned(),
            answer_json.to_owned(),
        );
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    tx.execute(
                        "DELETE FROM staunch_client_answers WHERE created_ms < ?1",
                        [now_ms.saturating_sub(crate::ANSWER_TTL_MS)],
                    )?;
                    let kept: bool = tx.query_row(
                        "SELECT EXISTS (SELECT 1 FROM staunch_client_answers \
                         WHERE session_id = ?1 AND request_id = ?2)",
                        params![session, request],
                        |r| r.get(0),
                    )?;
                    if kept {
                        return Ok(true);
                    }
                    let n = tx.execute(
                        "INSERT INTO staunch_client_answers \
                         (session_id, request_id, answer_json, created_ms) \
                         SELECT ?1, ?2, ?3, ?4 WHERE (SELECT count(*) FROM \
                         staunch_client_answers WHERE session_id = ?1) < ?5",
                        params![
                            session,
                            request,
                            answer,
                            now_ms,
                            crate::MAX_ANSWERS_PER_SESSION
                        ],
                    )?;
                    Ok(n == 1)
                })
            })
            .await
    }

    async fn beat_writer(&self, writer: &str, now_ms: i64) -> Result<(), StoreError> {
        let writer = writer.to_owned();
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    tx.execute(
                        "INSERT INTO staunch_stream_writers (writer, seen_ms) VALUES (?1, ?2) \
                         ON CONFLICT (writer) DO UPDATE SET \
                         seen_ms = max(seen_ms, excluded.seen_ms)",
                        params![writer, now_ms],
                    )?;
                    tx.execute(
                        "DELETE FROM staunch_stream_writers WHERE seen_ms < ?1",
                        [now_ms.saturating_sub(crate::WRITER_ROW_TTL_MS)],
                    )?;
                    Ok(())
                })
            })
            .await
    }

    async fn writer_seen(&self, writer: &str) -> Result<Option<i64>, StoreError> {
        let writer = writer.to_owned();
        self.db
            .call(move |conn| {
                Ok(conn
                    .query_row(
                        "SELECT seen_ms FROM staunch_stream_writers WHERE writer = ?1",
                        [&writer],
                        |r| r.get(0),
                    )
                    .optional()?)
            })
            .await
    }

    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let (session, request) = (session_id.to_owned(), request_id.to_owned());
        self.db
            .call(move |conn| {
                Ok(conn
                    .query_row(
                        "DELETE FROM staunch_client_answers \
                         WHERE session_id = ?1 AND request_id = ?2 RETURNING answer_json",
                        params![session, request],
                        |r| r.get(0),
                    )
                    .optional()?)
            })
            .await
    }

    async fn shared_secret(
        &self,
        name: &str,
        candidate: &str,
        now_ms: i64,
    ) -> Result<String, StoreError> {
        let (name, candidate) = (name.to_owned(), candidate.to_owned());
        self.db
            .call(move |conn| {
                conn.execute(
                    "INSERT INTO staunch_secrets (name, value, created_ms) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (name) DO NOTHING",
                    params![name, candidate, now_ms],
                )?;
                Ok(conn.query_row(
                    "SELECT value FROM staunch_secrets WHERE name = ?1",
                    [&name],
                    |r| r.get(0),
                )?)
            })
            .await
    }

    async fn expire_idle(&self, now_ms: i64, idle_ms: i64) -> Result<Vec<String>, StoreError> {
        let cutoff = now_ms.saturating_sub(idle_ms);
        self.db
            .call(move |conn| {
                write_tx(conn, |tx| {
                    let mut stmt = tx.prepare(
                        "DELETE FROM staunch_sessions WHERE last_seen_ms < ?1 RETURNING id",
                    )?;
                    let ids = stmt
                        .query_map([cutoff], |r| r.get(0))?
                        .collect::<Result<Vec<String>, _>>()?;
                    // Answers of expired sessions, and any nobody took in time.
                    tx.execute(
                        "DELETE FROM staunch_client_answers WHERE created_ms < ?1 \
                         OR session_id NOT IN (SELECT id FROM staunch_sessions)",
                        [now_ms.saturating_sub(crate::ANSWER_TTL_MS)],
                    )?;
                    Ok(ids)
                })
            })
            .await
    }
}
