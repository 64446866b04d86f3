//! Waiting for one answer: idle timeout, reset on progress, a ceiling that always wins, and
//! the caller's cancel — each of the last three ends with `notifications/cancelled` on the
//! wire (spec: lifecycle §Timeouts, cancellation).

use std::future::pending;

use serde_json::value::RawValue;
use tokio::time::{Instant, sleep_until};

use tokio::sync::mpsc;

use crate::router::ReplyReceiver;
use crate::{CallOptions, ClientError, Progress};

/// A request waiting for its answer, as the wait sees it (the client's pending request
/// implements it; a trait so that this module does not depend on the client).
pub(crate) trait Waiting {
    /// When it was sent.
    fn sent_at(&self) -> Instant;
    /// Where its answer and its progress arrive.
    fn channels(
        &mut self,
    ) -> (
        &mut ReplyReceiver,
        Option<&mut mpsc::UnboundedReceiver<Progress>>,
    );
    /// The answer arrived: nothing to cancel any more.
    fn mark_answered(&mut self);
    /// Gives up: `notifications/cancelled` (or the era's cancel) with `reason`.
    fn cancel_now(&mut self, reason: &str);
}

enum Event {
    Reply(Result<Box<RawValue>, ClientError>),
    Progress(Progress),
    Deadline,
    Cancel,
}

/// Waits for `p`'s answer under `opts`, calling `on_progress` for each notification.
pub(crate) async fn wait(
    p: &mut impl Waiting,
    opts: &CallOptions,
    on_progress: &mut (dyn FnMut(&Progress) + Send),
) -> Result<Box<RawValue>, ClientError> {
    let sent = p.sent_at();
    let hard = opts.max_total.map(|d| sent + d);
    let mut idle = opts.timeout.map(|d| sent + d);
    loop {
        let deadline = match (idle, hard) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let ev = {
            let (reply, progress) = p.channels();
            let next_progress = async {
                match progress {
                    Some(rx) => rx.recv().await,
                    None => pending().await,
                }
            };
            let timer = async {
                match deadline {
                    Some(d) => sleep_until(d).await,
                    None => pending().await,
                }
            };
            let cancelled = async {
                match &opts.cancel {
                    Some(t) => t.cancelled().await,
                    None => pending().await,
                }
            };
            // Biased: an answer that is already here beats a timer that fired at the same
            // time, and the caller's cancel beats further progress.
            tokio::select! {
                biased;
                r = reply => Event::Reply(r.unwrap_or_else(|_| {
                    Err(ClientError::Closed("the connection closed before the answer".into()))
                })),
                _ = cancelled => Event::Cancel,
                _ = timer => Event::Deadline,
                Some(pr) = next_progress => Event::Progress(pr),
            }
        };
        match ev {
            Event::Reply(r) => {
                p.mark_answered();
                // Progress sent before the answer is still the caller's to see.
                if let (_, Some(rx)) = p.channels() {
                    while let Ok(pr) = rx.try_recv() {
                        on_progress(&pr);
                    }
                }
                return r;
            }
            Event::Progress(pr) => {
                on_progress(&pr);
                if opts.reset_on_progress
                    && let Some(t) = opts.timeout
                {
                    idle = Some(Instant::now() + t);
                }
            }
            Event::Deadline => {
                let now = Instant::now();
                let elapsed = now.saturating_duration_since(sent);
                let ceiling = hard.is_some_and(|h| now >= h);
                let reason = if ceiling {
                    format!(
                        "maximum total timeout exceeded after {} ms",
                        elapsed.as_millis()
                    )
                } else {
                    format!("request timed out after {} ms", elapsed.as_millis())
                };
                p.cancel_now(&reason);
                return Err(ClientError::Timeout { elapsed, ceiling });
            }
            Event::Cancel => {
                p.cancel_now("cancelled by the user");
                return Err(ClientError::Cancelled);
            }
        }
    }
}
