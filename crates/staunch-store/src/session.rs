//! HTTP session records, shared by every instance behind a load balancer.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// What the server remembers about one `Mcp-Session-Id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The `Mcp-Session-Id` the server handed out.
    pub id: String,
    /// The protocol version agreed at `initialize`.
    pub protocol_version: String,
    /// The client's `clientInfo` from `initialize`, as JSON text.
    pub client_info_json: String,
    /// The client's `capabilities` from `initialize`, as JSON text.
    pub client_capabilities_json: String,
    /// The authenticated caller, when the request carried one; sessions are bound to it.
    pub principal: Option<String>,
    /// The level set by `logging/setLevel`, if any.
    pub log_level: Option<String>,
    /// When the session was created.
    pub created_ms: i64,
    /// When a request last used it; never moves backwards ([`SessionStore::touch`]).
    pub last_seen_ms: i64,
}

/// How long a client's answer to a server→client request waits in the store for the instance
/// that asked (it takes it within a poll interval; this only bounds what a crash leaves).
pub const ANSWER_TTL_MS: i64 = 10 * 60 * 1000;

/// Answers a session may have waiting in the store at once; more are refused (a client cannot
/// fill the table with answers to requests nobody sent).
pub const MAX_ANSWERS_PER_SESSION: i64 = 64;

/// How long a silent stream writer's row is kept ([`SessionStore::beat_writer`]).
pub const WRITER_ROW_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// Session storage. Object safe: use it as `Arc<dyn SessionStore>`.
///
/// Expiring a session does not touch its SSE events (another trait, possibly another
/// backend): the caller passes the ids returned by [`SessionStore::expire_idle`] to
/// [`crate::EventStore::delete_session`].
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Stores a new session; [`StoreError::AlreadyExists`] if the id is taken.
    async fn create(&self, record: SessionRecord) -> Result<(), StoreError>;

    /// The session with this id, if the store holds it.
    async fn get(&self, id: &str) -> Result<Option<SessionRecord>, StoreError>;

    /// Records activity. `last_seen_ms` never moves backwards (instances' clocks differ a
    /// little). Returns false if the session does not exist.
    async fn touch(&self, id: &str, now_ms: i64) -> Result<bool, StoreError>;

    /// Sets or clears the client-chosen log level. Returns false if the session does not exist.
    async fn update_log_level(&self, id: &str, level: Option<&str>) -> Result<bool, StoreError>;

    /// Returns true if a session was removed.
    async fn delete(&self, id: &str) -> Result<bool, StoreError>;

    /// Of `ids`, the sessions the store no longer holds (a DELETE or an expiry on another
    /// instance removed them), so that an instance still holding one ends it too.
    async fn missing(&self, ids: &[String]) -> Result<Vec<String>, StoreError>;

    /// Removes sessions not seen for more than `idle_ms` and returns their ids.
    async fn expire_idle(&self, now_ms: i64, idle_ms: i64) -> Result<Vec<String>, StoreError>;

    /// Keeps a client's answer to the server→client request `request_id` of session
    /// `session_id`, received by an instance that did not send that request, for the one that
    /// did ([`SessionStore::take_answer`]). An answer already kept for that id stays as it
    /// is. Returns false, keeping nothing, when the session already has
    /// [`MAX_ANSWERS_PER_SESSION`] answers waiting. Answers older than [`ANSWER_TTL_MS`] are
    /// dropped here and by [`SessionStore::expire_idle`]; a deleted session's go with it.
    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer_json: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Takes (removes and returns) the answer kept for `request_id` of `session_id`, if any.
    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<String>, StoreError>;

    /// Records that the process writing SSE streams under the name `writer` is alive at
    /// `now_ms` (it calls this every few seconds). Rows of writers silent for a day go.
    async fn beat_writer(&self, writer: &str, now_ms: i64) -> Result<(), StoreError>;

    /// When `writer` last said it was alive; `None` if it never did (or went silent a day ago).
    async fn writer_seen(&self, writer: &str) -> Result<Option<i64>, StoreError>;

    /// Passes a client's `notifications/cancelled` for a request this instance does not run to
    /// every instance sharing the store (a [`crate::Signal::RequestCancelled`]); the one that
    /// runs it cancels it. Only PostgreSQL crosses processes; the default sends nothing.
    async fn relay_cancel(
        &self,
        session_id: &str,
        request_id: &str,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        let _ = (session_id, request_id, reason);
        Ok(())
    }

    /// Whether the store answers (the health check): one read, of a session that cannot
    /// exist.
    async fn check(&self) -> Result<(), StoreError> {
        self.get("").await.map(|_| ())
    }

    /// The secret called `name` that every instance sharing this store uses: the first caller
    /// stores its `candidate`, everyone (itself included) gets the stored value back.
    async fn shared_secret(
        &self,
        name: &str,
        candidate: &str,
        now_ms: i64,
    ) -> Result<String, StoreError>;
}
