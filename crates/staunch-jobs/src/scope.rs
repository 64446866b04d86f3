//! The owner scope: who a job belongs to — and with it its task, its idempotency key and the
//! in-flight dedupe that may join it. One rule, used by every face:
//!
//! 1. the **principal**, when requests carry an auth context ([`crate::JobConfig::principal`]);
//! 2. otherwise the **HTTP session** (2025 era) that created it
//!    ([`Context::owning_session`]);
//! 3. otherwise — a stateless 2026 request without auth, or stdio — **whoever holds its id**:
//!    ids are 128 random bits, so holding one is the capability.
//!
//! One exception, for idempotency keys: a job an unauthenticated session starts *with a key*
//! is recorded in scope 3, because such a server cannot tell its clients apart and a client
//! that lost its session retries in a new one (see `tool_face::create`). The same key with the
//! same arguments then leads to the job from any session; with other arguments the refusal
//! names no job.
//!
//! The scope's [`OwnerScope::key`] is what the store keeps in the job's `principal` column, so
//! the store scopes idempotency keys and in-flight dedupe by it without knowing the rule: the
//! principal itself, `session:` and a hash of the session id (the id is a credential and stays
//! out of job rows), or "" for id holders. Another scope asking for a job gets exactly the
//! answer an id that never existed gets, so ids cannot be probed, and no refusal names a job
//! of another scope.

use staunch_server::Context;
use staunch_store::JobRecord;

/// Who a job belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerScope {
    /// An authenticated caller.
    Principal(String),
    /// The HTTP session with this id (no auth).
    Session(String),
    /// Whoever holds the job's id (no auth and no session: stateless requests, stdio).
    IdHolder,
}

impl OwnerScope {
    /// The scope of a request: `principal` when there is one, else its owning session, else
    /// the id holder.
    pub fn of(principal: Option<String>, ctx: &Context) -> Self {
        match (principal.filter(|p| !p.is_empty()), ctx.owning_session()) {
            (Some(p), _) => Self::Principal(p),
            (None, Some(s)) if !s.is_empty() => Self::Session(s.to_string()),
            _ => Self::IdHolder,
        }
    }

    /// What the store keeps in the job's `principal` column for this scope.
    pub fn key(&self) -> String {
        match self {
            Self::Principal(p) => p.clone(),
            Self::Session(s) => staunch_server::owner_key(None, Some(s)),
            Self::IdHolder => String::new(),
        }
    }

    /// Whether a caller in this scope may see (get, cancel, answer, join) `job`, whose request
    /// came on `ctx`. A job of the id-holder scope is anyone's who holds its id — except a row
    /// recorded before scopes existed, with an empty principal and a session, which stays that
    /// session's.
    pub fn owns(&self, job: &JobRecord, ctx: &Context) -> bool {
        if job.principal.is_empty() {
            return job
                .session_id
                .as_deref()
                .is_none_or(|s| s == ctx.session_id());
        }
        job.principal == self.key()
    }
}

/// How a request's session is named in what the job row records (`cancel_requested_by`): an
/// HTTP session by its log hash (the id is a credential), anything else by its label.
pub(crate) fn session_label(ctx: &Context) -> String {
    match ctx.owning_session() {
        Some(s) => staunch_server::session_hash(s),
        None => ctx.session_id().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_scopes_apart_and_hide_the_session_id() {
        let a = OwnerScope::Session("aaaa".into()).key();
        let b = OwnerScope::Session("bbbb".into()).key();
        assert_ne!(a, b);
        assert!(a.starts_with("session:") && !a.contains("aaaa"));
        assert_eq!(a.len(), "session:".len() + 32);
        assert_eq!(OwnerScope::Principal("alice".into()).key(), "alice");
        assert_eq!(OwnerScope::IdHolder.key(), "");
    }
}
