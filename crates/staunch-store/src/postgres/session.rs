//! [`SessionStore`] on PostgreSQL.

use std::sync::Arc;

use async_trait::async_trait;

use super::listen::{channel_for_schema, request_cancel_payload, session_ended_payload};
use super::{Pg, execute, query, query_opt};
use crate::{SessionRecord, SessionStore, StoreError};

pub(crate) struct PgSessionStore {
    pg: Arc<Pg>,
}

impl PgSessionStore {
    pub(crate) fn new(pg: Arc<Pg>) -> PgSessionStore {
        PgSessionStore { pg }
    }
}

#[async_trait]
impl SessionStore for PgSessionStore {
    async fn create(&self, r: SessionRecord) -> Result<(), StoreError> {
        let c = self.pg.client().await?;
        let n = execute(
            &c,
            "INSERT INTO staunch_sessions (id, protocol_version, client_info_json, \
             client_capabilities_json, principal, log_level, created_ms, last_seen_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING",
            &[
                &r.id,
                &r.protocol_version,
                &r.client_info_json,
                &r.client_capabilities_json,
                &r.principal,
                &r.log_level,
                &r.created_ms,
                &r.last_seen_ms,
            ],
        )
        .await?;
        if n == 0 {
            return Err(StoreError::AlreadyExists {
                what: "session",
                id: r.id,
            });
        }
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let row = self
            .pg
            .read_opt(
                "SELECT id, protocol_version, client_info_json, client_capabilities_json, \
             principal, log_level, created_ms, last_seen_ms FROM staunch_sessions WHERE id = $1",
                &[&id],
            )
            .await?;
        Ok(row.map(|r| SessionRecord {
            id: r.get(0),
            protocol_version: r.get(1),
            client_info_json: r.get(2),
            client_capabilities_json: r.get(3),
            principal: r.get(4),
            log_level: r.get(5),
            created_ms: r.get(6),
            last_seen_ms: r.get(7),
        }))
    }

    async fn touch(&self, id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let c = self.pg.client().await?;
        let n = execute(
            &c,
            "UPDATE staunch_sessions SET last_seen_ms = GREATEST(last_seen_ms, $2) WHERE id = $1",
            &[&id, &now_ms],
        )
        .await?;
        Ok(n == 1)
    }

    async fn update_log_level(&self, id: &str, level: Option<&str>) -> Result<bool, StoreError> {
        let c = self.pg.client().await?;
        let n = execute(
            &c,
            "UPDATE staunch_sessions SET log_level = $2 WHERE id = $1",
            &[&id, &level],
        )
        .await?;
        Ok(n == 1)
    }

    async fn missing(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .pg
            .read(
                "SELECT id FROM staunch_sessions WHERE id = ANY($1)",
                &[&ids],
            )
            .await?;
        let held: std::collections::HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
        Ok(ids.iter().filter(|i| !held.contains(*i)).cloned().collect())
    }

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let c = self.pg.client().await?;
        execute(
            &c,
            "DELETE FROM staunch_client_answers WHERE session_id = $1",
            &[&id],
        )
        .await?;
        let deleted = execute(&c, "DELETE FROM staunch_sessions WHERE id = $1", &[&id]).await? == 1;
        if deleted {
            // Every instance holding the session ends it now, not at its next check.
            query_opt(
                &c,
                "SELECT pg_notify($1, $2)",
                &[
                    &channel_for_schema(&self.pg.schema),
                    &session_ended_payload(id),
                ],
            )
            .await?;
        }
        Ok(deleted)
    }

    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer_json: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let c = self.pg.client().await?;
        execute(
            &c,
            "DELETE FROM staunch_client_answers WHERE created_ms < $1",
            &[&now_ms.saturating_sub(crate::ANSWER_TTL_MS)],
        )
        .await?;
        // The count and the insert are one statement; two answers racing past the cap by one
        // are harmless (the cap bounds a misbehaving client, it is not an exact quota).
        let n = execute(
            &c,
            "INSERT INTO staunch_client_answers (session_id, request_id, answer_json, created_ms) \
             SELECT $1::text, $2::text, $3::text, $4::bigint WHERE (SELECT count(*) FROM \
             staunch_client_answers WHERE session_id = $1::text) < $5::bigint \
             ON CONFLICT (session_id, request_id) DO NOTHING",
            &[
                &session_id,
                &request_id,
                &answer_json,
                &now_ms,
                &crate::MAX_ANSWERS_PER_SESSION,
            ],
        )
        .await?;
        if n == 1 {
            return Ok(true);
        }
        // Either the answer was kept already (true) or the session is full (false).
        Ok(query_opt(
            &c,
            "SELECT 1 FROM staunch_client_answers WHERE session_id = $1 AND request_id = $2",
            &[&session_id, &request_id],
        )
        .await?
        .is_some())
    }

    async fn relay_cancel(
        &self,
        session_id: &str,
        request_id: &str,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        let Some(payload) = request_cancel_payload(session_id, request_id, reason) else {
            return Ok(());
        };
        let c = self.pg.client().await?;
        query_opt(
            &c,
            "SELECT pg_notify($1, $2)",
            &[&channel_for_schema(&self.pg.schema), &payload],
        )
        .await?;
        Ok(())
    }

    async fn beat_writer(&self, writer: &str, now_ms: i64) -> Result<(), StoreError> {
        let c = self.pg.client().await?;
        execute(
            &c,
            "INSERT INTO staunch_stream_writers (writer, seen_ms) VALUES ($1, $2) \
             ON CONFLICT (writer) DO UPDATE SET \
             seen_ms = GREATEST(staunch_stream_writers.seen_ms, excluded.seen_ms)",
            &[&writer, &now_ms],
        )
        .await?;
        execute(
            &c,
            "DELETE FROM staunch_stream_writers WHERE seen_ms < $1",
            &[&now_ms.saturating_sub(crate::WRITER_ROW_TTL_MS)],
        )
        .await?;
        Ok(())
    }

    async fn writer_seen(&self, writer: &str) -> Result<Option<i64>, StoreError> {
        let c = self.pg.client().await?;
        let row = query_opt(
            &c,
            "SELECT seen_ms FROM staunch_stream_writers WHERE writer = $1",
            &[&writer],
        )
        .await?;
        Ok(row.map(|r| r.get(0)))
    }

    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let c = self.pg.client().await?;
        let row = query_opt(
            &c,
            "DELETE FROM staunch_client_answers WHERE session_id = $1 AND request_id = $2 \
             RETURNING answer_json",
            &[&session_id, &request_id],
        )
        .await?;
        Ok(row.map(|r| r.get(0)))
    }

    async fn shared_secret(
        &self,
        name: &str,
        candidate: &str,
        now_ms: i64,
    ) -> Result<String, StoreError> {
        let c = self.pg.client().await?;
        execute(
            &c,
            "INSERT INTO staunch_secrets (name, value, created_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO NOTHING",
            &[&name, &candidate, &now_ms],
        )
        .await?;
        let row = query_opt(
            &c,
            "SELECT value FROM staunch_secrets WHERE name = $1",
            &[&name],
        )
        .await?;
        row.map(|r| r.get::<_, String>(0))
            .ok_or_else(|| StoreError::Corrupt(format!("secret {name} vanished after insert")))
    }

    async fn expire_idle(&self, now_ms: i64, idle_ms: i64) -> Result<Vec<String>, StoreError> {
        let cutoff = now_ms.saturating_sub(idle_ms);
        let c = self.pg.client().await?;
        // SKIP LOCKED: instances expiring at the same time split the work instead of waiting
        // on (or deadlocking over) each other's rows.
        let rows = query(
            &c,
            "DELETE FROM staunch_sessions WHERE id IN (SELECT id FROM staunch_sessions \
             WHERE last_seen_ms < $1 FOR UPDATE SKIP LOCKED) RETURNING id",
            &[&cutoff],
        )
        .await?;
        let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        // Answers of the sessions just expired, and any nobody took in time.
        execute(
            &c,
            "DELETE FROM staunch_client_answers WHERE created_ms < $1 OR session_id = ANY($2)",
            &[&now_ms.saturating_sub(crate::ANSWER_TTL_MS), &ids],
        )
        .await?;
        Ok(ids)
    }
}
