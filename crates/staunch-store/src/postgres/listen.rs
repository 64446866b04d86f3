//! Cross-instance signals over `LISTEN/NOTIFY`.
//!
//! One dedicated (non-pooled) connection per store LISTENs on the store's channel and forwards
//! notifications to a `broadcast` channel. Listening connections are known to die silently in
//! other job systems (pg-boss#850, graphile-worker#541), so this one is supervised:
//!
//! - the connection is driven in the same task that forwards, so an error or EOF ends the
//!   session at once and a new connection is made (backoff 100 ms doubling to 5 s);
//! - every [`CHECK_INTERVAL`] the session asks the server, *on the same connection*, whether
//!   it still listens (`pg_listening_channels()`); a failed or negative answer reconnects;
//! - after every successful LISTEN a [`Signal::Wake`] is broadcast, because notifications sent
//!   while no connection listened are lost: receivers should poll now.
//!
//! Signals are only hints: polling stays the backstop for every decision.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::Signal;

/// How often the listening connection proves it still listens.
const CHECK_INTERVAL: Duration = Duration::from_secs(10);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// `application_name` of the listening connection, so operators (and tests) can find it in
/// `pg_stat_activity`: `staunch-listen <schema>`, cut to PostgreSQL's 63 bytes.
fn application_name(channel: &str) -> String {
    let schema = channel.strip_prefix("staunch:").unwrap_or(channel);
    let mut name = format!("staunch-listen {schema}");
    while name.len() > 63 {
        name.pop();
    }
    name
}

/// The payload prefix of a cancel notification; anything unknown is a wake-up.
const CANCEL_PREFIX: &str = "cancel:";
/// The payload prefix of a job-changed notification: `changed:{job id}:{owner id}` (job ids
/// are hex; owner ids may hold anything, so they come last).
const CHANGED_PREFIX: &str = "changed:";
/// The payload prefix of a deleted session: `session-ended:{session id}`. The id is a
/// credential, but whoever can LISTEN on this database can read the session table too.
const SESSION_ENDED_PREFIX: &str = "session-ended:";

pub(crate) fn session_ended_payload(session_id: &str) -> String {
    format!("{SESSION_ENDED_PREFIX}{session_id}")
}

/// The payload prefix of a relayed request cancel: `request-cancel:{json}` with the session,
/// the request id (its JSON form) and the reason.
const REQUEST_CANCEL_PREFIX: &str = "request-cancel:";

/// PostgreSQL refuses a NOTIFY payload of 8000 bytes or more.
const MAX_PAYLOAD: usize = 7900;

/// The payload of a relayed cancel; `None` when it would not fit in a NOTIFY (a request id of
/// several kilobytes: such a cancel is not relayed). A long reason is cut.
pub(crate) fn request_cancel_payload(
    session_id: &str,
    request_id: &str,
    reason: Option<&str>,
) -> Option<String> {
    let reason: Option<String> = reason.map(|r| r.chars().take(200).collect());
    let body = serde_json::json!({"s": session_id, "r": request_id, "why": reason});
    let payload = format!("{REQUEST_CANCEL_PREFIX}{body}");
    (payload.len() < MAX_PAYLOAD).then_some(payload)
}

pub(crate) fn cancel_payload(job_id: &str) -> String {
    format!("{CANCEL_PREFIX}{job_id}")
}

pub(crate) fn changed_payload(job_id: &str, by: &str) -> String {
    format!("{CHANGED_PREFIX}{job_id}:{by}")
}

pub(crate) const WAKE_PAYLOAD: &str = "wake";

fn parse_payload(payload: &str) -> Signal {
    if let Some(id) = payload.strip_prefix(CANCEL_PREFIX) {
        return Signal::Cancel(id.to_owned());
    }
    if let Some(body) = payload.strip_prefix(REQUEST_CANCEL_PREFIX) {
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        if let (Some(s), Some(r)) = (v["s"].as_str(), v["r"].as_str()) {
            return Signal::RequestCancelled {
                session_id: s.to_owned(),
                request_id: r.to_owned(),
                reason: v["why"].as_str().map(str::to_owned),
            };
        }
        return Signal::Wake;
    }
    if let Some(id) = payload.strip_prefix(SESSION_ENDED_PREFIX) {
        return Signal::SessionEnded(id.to_owned());
    }
    if let Some((id, by)) = payload
        .strip_prefix(CHANGED_PREFIX)
        .and_then(|rest| rest.split_once(':'))
    {
        return Signal::Changed {
            id: id.to_owned(),
            by: by.to_owned(),
        };
    }
    Signal::Wake
}

/// The channel name for a schema. Channels are database-wide, so two schemas must not share
/// one. PostgreSQL caps identifiers at 63 bytes.
pub(crate) fn channel_for_schema(schema: &str) -> String {
    let mut name = format!("staunch:{schema}");
    while name.len() > 63 {
        name.pop();
    }
    name
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// Runs until aborted (the owning store aborts it on drop). `live` is true while a LISTEN is
/// in place.
pub(crate) async fn run(
    mut config: tokio_postgres::Config,
    channel: String,
    tx: broadcast::Sender<Signal>,
    live: Arc<AtomicBool>,
) {
    config.application_name(application_name(&channel));
    let mut backoff = BACKOFF_MIN;
    loop {
        let started = tokio::time::Instant::now();
        // The error itself has nowhere useful to go (this crate does not log); what matters is
        // that we reconnect, and receivers get a Wake when we are back.
        let _ = session(&config, &channel, &tx, &live).await;
        live.store(false, Ordering::SeqCst);
        if started.elapsed() > BACKOFF_MAX * 4 {
            backoff = BACKOFF_MIN;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// One connection's life: LISTEN, forward, check; returns when it must be replaced.
async fn session(
    config: &tokio_postgres::Config,
    channel: &str,
    tx: &broadcast::Sender<Signal>,
    live: &AtomicBool,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let forward = async {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) if n.channel() == channel => {
                    let _ = tx.send(parse_payload(n.payload()));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    };
    let supervise = async {
        client
            .batch_execute(&format!("LISTEN {}", quote_ident(channel)))
            .await?;
        live.store(true, Ordering::SeqCst);
        let _ = tx.send(Signal::Wake);
        let _ = tx.send(Signal::Reconnected);
        loop {
            tokio::time::sleep(CHECK_INTERVAL).await;
            let listening = client
                .query_opt(
                    "SELECT 1 FROM pg_listening_channels() AS c(name) WHERE c.name = $1",
                    &[&channel],
                )
                .await?;
            if listening.is_none() {
                return Ok(());
            }
        }
    };
    tokio::select! {
        r = forward => r,
        r = supervise => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_read_back_as_the_signal_they_carry() {
        assert_eq!(
            parse_payload(&cancel_payload("ab12")),
            Signal::Cancel("ab12".into())
        );
        // An owner id may itself hold colons: everything after the job id is the owner.
        assert_eq!(
            parse_payload(&changed_payload("ab12", "host:8080/run")),
            Signal::Changed {
                id: "ab12".into(),
                by: "host:8080/run".into()
            }
        );
        assert_eq!(
            parse_payload(&session_ended_payload("0123abcd")),
            Signal::SessionEnded("0123abcd".into())
        );
        assert_eq!(
            parse_payload(&request_cancel_payload("s1", r#""req:7""#, Some("timeout")).unwrap()),
            Signal::RequestCancelled {
                session_id: "s1".into(),
                request_id: r#""req:7""#.into(),
                reason: Some("timeout".into())
            }
        );
        assert_eq!(request_cancel_payload("s1", &"x".repeat(8000), None), None);
        assert_eq!(parse_payload("request-cancel:{broken"), Signal::Wake);
        assert_eq!(parse_payload(WAKE_PAYLOAD), Signal::Wake);
        // Unknown payloads (a newer instance's) are only a hint to look now.
        assert_eq!(parse_payload("changed:no-owner"), Signal::Wake);
        assert_eq!(parse_payload("something-new"), Signal::Wake);
    }
}
