//! Questions a job body asks its client: elicitation, sampling, roots — the tasks extension's
//! `input_required` (SEP-2663 with SEP-2322's input requests).
//!
//! A job has no request to ask on: its questions are rows in the store
//! ([`staunch_store::JobStore::ask_inputs`], fenced by the lease). While one is unanswered the
//! task reports `input_required` with every open question in `inputRequests`; a client answers
//! with `tasks/update` on any instance ([`staunch_store::JobStore::answer_inputs`]), and the body
//! continues where it waited: woken at once when the answer arrives in this process, found by
//! polling when it arrives elsewhere. Answers are kept with the job, so a retry-safe job that
//! runs again after a crash gets the answers already given instead of asking twice.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use staunch_store::JobInput;

use crate::context::{JobContext, StopReason};
use crate::error::JobError;

impl JobContext {
    /// Asks the user through the client (`elicitation/create`; `params` are its params:
    /// `message`, `requestedSchema`) and waits for the answer (`action`, `content`). The task
    /// is `input_required` meanwhile; a cancel ends the wait with `Cancelled`.
    pub async fn elicit(&self, params: Value) -> Result<Value, JobError> {
        self.ask(None, "elicitation/create", params).await
    }

    /// [`JobContext::elicit`] under a key of your choosing (unique for the life of the job).
    pub async fn elicit_as(&self, key: &str, params: Value) -> Result<Value, JobError> {
        self.ask(Some(key), "elicitation/create", params).await
    }

    /// Asks the client one question: `method` (`elicitation/create`,
    /// `sampling/createMessage`, `roots/list`) with `params`, under `key` when given.
    pub async fn ask(
        &self,
        key: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, JobError> {
        let mut answers = self.ask_all(vec![(key, method, params)]).await?;
        Ok(answers.pop().unwrap_or_default())
    }

    /// Asks several questions at once (they are open together, and may be answered one by
    /// one); returns the answers in order once every one has come.
    pub async fn ask_all(
        &self,
        questions: Vec<(Option<&str>, &str, Value)>,
    ) -> Result<Vec<Value>, JobError> {
        self.check()?;
        let s = &self.shared;
        let keys: Vec<String> = questions
            .iter()
            .map(|(key, method, _)| match key {
                Some(k) => (*k).to_string(),
                None => {
                    let n = s.input_counter.fetch_add(1, Ordering::Relaxed) + 1;
                    format!("{}-{n}", method.split('/').next().unwrap_or("input"))
                }
            })
            .collect();
        let store = &s.lease.store;
        let known = store.inputs(&s.job_id).await.map_err(store_failed)?;
        let new: Vec<(String, String)> = keys
            .iter()
            .zip(&questions)
            .filter(|(k, _)| !known.iter().any(|i| &i.key == *k))
            .map(|(k, (_, method, params))| {
                (
                    k.clone(),
                    json!({"method": method, "params": params}).to_string(),
                )
            })
            .collect();
        if !new.is_empty() {
            let l = &s.lease;
            let held = store
                .ask_inputs(&s.job_id, &l.owner, l.token, new, l.clock.now_ms())
                .await
                .map_err(store_failed)?;
            if !held {
                s.stop(StopReason::LeaseLost);
                return Err(JobError::Cancelled);
            }
            if let Some(f) = &s.on_change {
                f(&s.job_id);
            }
        }
        let mut inputs = known;
        loop {
            if let Some(answers) = answered(&inputs, &keys) {
                return Ok(answers);
            }
            // `notify_one` keeps a permit when nobody waits, so an answer that arrived
            // between the read and this wait still wakes it.
            tokio::select! {
                biased;
                _ = s.token.cancelled() => return Err(JobError::Cancelled),
                _ = s.input_wake.notified() => {}
                _ = tokio::time::sleep(s.input_poll) => {}
            }
            inputs = store.inputs(&s.job_id).await.map_err(store_failed)?;
        }
    }
}

/// The answers to `keys`, in order, if every one has come.
fn answered(inputs: &[JobInput], keys: &[String]) -> Option<Vec<Value>> {
    keys.iter()
        .map(|k| {
            let i = inputs.iter().find(|i| &i.key == k)?;
            let r = i.response_json.as_deref()?;
            Some(serde_json::from_str(r).unwrap_or(Value::Null))
        })
        .collect()
}

fn store_failed(e: staunch_store::StoreError) -> JobError {
    JobError::failed(format!(
        "could not reach the job store to ask the client: {e}"
    ))
}
