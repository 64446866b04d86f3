//! A held task's progress after the call that made it, passed on to the session holding the
//! task: strictly increasing, paced, and ordered against the task's end.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_client::{Progress, ProgressStream};
use staunch_protocol::mcp::{ProgressParams, ProgressToken};
use staunch_server::{Notifier, ProgressRate};

use super::{Ended, RELATED_TASK, with_id};

/// Passes a task's progress reports on to `session` under the client's `token` and with the
/// proxy's id as the related task, paced by a [`Pacer`], until the task has ended, the
/// session is gone or the upstream connection is ([`super::UpstreamTasks::pass_progress`]).
pub(super) async fn pass_on(
    mut progress: ProgressStream,
    ended: Ended,
    session: Notifier,
    token: Value,
    (upstream_id, id): (String, String),
) {
    let gap = Duration::from_secs_f64(1.0 / ProgressRate::default().per_second);
    let Ok(token) = serde_json::from_value::<ProgressToken>(token) else {
        return;
    };
    let send = |p: Progress| {
        let params = ProgressParams {
            progress_token: token.clone(),
            progress: p.progress,
            total: p.total,
            message: p.message,
            extra: p.extra,
        };
        let params = serde_json::to_value(params).unwrap_or_default();
        let mut params = with_id(params, &upstream_id, &id);
        params["_meta"][RELATED_TASK] = json!({"taskId": id});
        session.notify("notifications/progress", params)
    };
    let mut pacer = Pacer::new(gap);
    loop {
        let due = async {
            match pacer.due() {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let now = tokio::time::Instant::now;
        let send_now = tokio::select! {
            biased;
            _ = ended.wait() => break,
            _ = due => pacer.take_due(now()),
            next = progress.next() => match next {
                Some(p) => pacer.offer(p, now()),
                None => break,
            },
        };
        if let Some(p) = send_now
            && !ended.unless_ended(|| send(p))
        {
            break;
        }
    }
}

/// Paces a task's progress reports: strictly increasing values only, at most one per `gap`; a
/// report that comes sooner is held until the gap has passed, replaced by any later one.
pub(super) struct Pacer {
    gap: Duration,
    /// The last value let through (sent or held).
    last: Option<f64>,
    sent_at: Option<tokio::time::Instant>,
    held: Option<Progress>,
}

impl Pacer {
    fn new(gap: Duration) -> Self {
        Self {
            gap,
            last: None,
            sent_at: None,
            held: None,
        }
    }

    /// A report arrived at `now`: the one to send now, if any.
    fn offer(&mut self, p: Progress, now: tokio::time::Instant) -> Option<Progress> {
        if self.last.is_some_and(|l| p.progress <= l) {
            return None;
        }
        self.last = Some(p.progress);
        if self.sent_at.is_some_and(|at| now < at + self.gap) {
            self.held = Some(p);
            return None;
        }
        self.held = None;
        self.sent_at = Some(now);
        Some(p)
    }

    /// When the held report may go.
    fn due(&self) -> Option<tokio::time::Instant> {
        let at = self.sent_at?;
        self.held.as_ref().map(|_| at + self.gap)
    }

    /// The held report, to send at `now` (its time has come).
    fn take_due(&mut self, now: tokio::time::Instant) -> Option<Progress> {
        let p = self.held.take()?;
        self.sent_at = Some(now);
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_paced_increasing_and_the_latest_held_value_goes_out() {
        let report = |v: f64| Progress {
            progress: v,
            total: None,
            message: None,
            extra: Default::default(),
            at: tokio::time::Instant::now(),
        };
        let gap = Duration::from_millis(50);
        let t0 = tokio::time::Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut pacer = Pacer::new(gap);
        let sent = |p: Option<Progress>| p.map(|p| p.progress);
        assert_eq!(
            sent(pacer.offer(report(1.0), ms(0))),
            Some(1.0),
            "the first goes at once"
        );
        assert_eq!(pacer.due(), None);
        assert_eq!(
            sent(pacer.offer(report(2.0), ms(10))),
            None,
            "too soon: held"
        );
        assert_eq!(
            sent(pacer.offer(report(3.0), ms(20))),
            None,
            "replaces the held one"
        );
        assert_eq!(
            sent(pacer.offer(report(2.5), ms(30))),
            None,
            "not increasing: dropped"
        );
        assert_eq!(pacer.due(), Some(ms(50)));
        assert_eq!(sent(pacer.take_due(ms(50))), Some(3.0));
        assert_eq!(pacer.due(), None, "nothing held");
        assert_eq!(
            sent(pacer.offer(report(4.0), ms(120))),
            Some(4.0),
            "past the gap: at once"
        );
        assert_eq!(
            sent(pacer.offer(report(4.0), ms(200))),
            None,
            "a repeat is not progress"
        );
    }
}
