//! Answers to server→client requests (sampling, elicitation, roots) that reach another
//! instance.
//!
//! Behind a load balancer without stickiness, a 2025 client POSTs its answer to whichever
//! instance the balancer picks, while the request that asked waits on the instance that sent
//! it. The instance that receives an answer it has no waiter for keeps it in the shared
//! session store ([`AnswerRelay::keep`]); the waiting request looks there too, every
//! [`POLL`], besides its in-process channel ([`AnswerRelay::wait`]). On one instance the
//! channel answers first and the store is never written.
//!
//! The same way a client's `notifications/cancelled` for a request that runs on another
//! instance is passed on to it ([`AnswerRelay::relay_cancel`]).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use staunch_protocol::{ErrorObject, RequestId};
use staunch_store::{SessionStore, now_ms};

/// A client's answer to a server→client request: its result, or its error.
pub(crate) type ClientReply = Result<Value, ErrorObject>;

/// How often a waiting request looks for its answer in the store.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The prefix of every server→client request id this server sends: an answer whose id does
/// not start so was not asked by any instance, and is not kept.
pub(crate) const OUTGOING_PREFIX: &str = "staunch-";

/// Where one session's answers wait for the instance that asked.
pub(crate) struct AnswerRelay {
    store: Arc<dyn SessionStore>,
    session: Arc<str>,
}

impl std::fmt::Debug for AnswerRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerRelay").finish_non_exhaustive()
    }
}

/// The store's key for a request id: its JSON form (so `1` and `"1"` stay apart).
fn key(id: &RequestId) -> String {
    id.to_value().to_string()
}

fn encode(reply: &ClientReply) -> String {
    match reply {
        Ok(v) => json!({ "result": v }),
        Err(e) => json!({ "error": e }),
    }
    .to_string()
}

fn decode(s: &str) -> Option<ClientReply> {
    let mut v: Value = serde_json::from_str(s).ok()?;
    if let Some(r) = v.get_mut("result") {
        return Some(Ok(r.take()));
    }
    let e: ErrorObject = serde_json::from_value(v.get_mut("error")?.take()).ok()?;
    Some(Err(e))
}

impl AnswerRelay {
    pub(crate) fn new(store: Arc<dyn SessionStore>, session: Arc<str>) -> Self {
        Self { store, session }
    }

    /// Whether an answer with this id may belong to a request another instance sent.
    pub(crate) fn may_be_ours(id: &RequestId) -> bool {
        matches!(id, RequestId::String(s) if s.starts_with(OUTGOING_PREFIX))
    }

    /// Keeps an answer nobody here waits for, for the instance that asked.
    pub(crate) async fn keep(&self, id: &RequestId, reply: &ClientReply, log_label: &str) {
        match self
            .store
            .put_answer(&self.session, &key(id), &encode(reply), now_ms())
            .await
        {
            Ok(true) => {
                tracing::info!(session = %log_label, id = %id, "answer kept for the instance that asked");
            }
            Ok(false) => tracing::warn!(
                session = %log_label,
                id = %id,
                cap = staunch_store::MAX_ANSWERS_PER_SESSION,
                "answer to an unknown request ignored: the session has too many answers waiting"
            ),
            Err(e) => tracing::warn!(
                session = %log_label,
                id = %id,
                error = %e,
                "answer to an unknown request could not be kept"
            ),
        }
    }

    /// Passes a client's cancel of a request that does not run here to the instance that
    /// runs it (through the store's signals; nothing on a store that has none).
    pub(crate) async fn relay_cancel(&self, id: &RequestId, reason: Option<&str>, log_label: &str) {
        if let Err(e) = self
            .store
            .relay_cancel(&self.session, &key(id), reason)
            .await
        {
            tracing::warn!(session = %log_label, id = %id, error = %e, "cancel could not be passed on");
        }
    }

    /// The answer to `id` once another instance kept it. Never returns otherwise: the caller
    /// races it against its own channel and its cancellation. A store that fails is asked
    /// again at the next poll.
    pub(crate) async fn wait(&self, id: &RequestId) -> ClientReply {
        let key = key(id);
        loop {
            tokio::time::sleep(POLL).await;
            match self.store.take_answer(&self.session, &key).await {
                Ok(Some(s)) => match decode(&s) {
                    Some(reply) => return reply,
                    None => {
                        return Err(ErrorObject::invalid_params(
                            "the client's answer could not be read",
                        ));
                    }
                },
                Ok(None) => {}
                Err(e) => tracing::debug!(error = %e, "looking for a kept answer failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use staunch_store::MemorySessionStore;

    #[test]
    fn replies_round_trip_through_their_stored_form() {
        let ok: ClientReply = Ok(json!({"action": "accept", "content": {"x": 1}}));
        assert_eq!(decode(&encode(&ok)), Some(ok));
        let err: ClientReply = Err(ErrorObject::invalid_params("declined"));
        assert_eq!(decode(&encode(&err)), Some(err));
        assert_eq!(decode("{}"), None);
        assert_eq!(decode("not json"), None);
    }

    #[test]
    fn only_ids_this_server_hands_out_are_kept() {
        assert!(AnswerRelay::may_be_ours(&RequestId::String(
            "staunch-0a1b2c-7".into()
        )));
        assert!(!AnswerRelay::may_be_ours(&RequestId::Number(7)));
        assert!(!AnswerRelay::may_be_ours(&RequestId::String("7".into())));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_kept_by_one_instance_reaches_the_waiter_on_another() {
        let store: Arc<dyn SessionStore> = Arc::new(MemorySessionStore::new());
        let here = AnswerRelay::new(store.clone(), "s1".into());
        let there = AnswerRelay::new(store.clone(), "s1".into());
        let id = RequestId::String("staunch-ab-1".into());
        let waiter = tokio::spawn({
            let id = id.clone();
            async move { here.wait(&id).await }
        });
        tokio::time::sleep(POLL * 3).await;
        assert!(!waiter.is_finished());
        there.keep(&id, &Ok(json!({"ok": true})), "s1").await;
        let got = tokio::time::timeout(POLL * 2, waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, Ok(json!({"ok": true})));
        // Taken: nothing is left for a second waiter.
        assert_eq!(store.take_answer("s1", &key(&id)).await.unwrap(), None);
    }
}
