//! [`Ledger`]: the recent calls whose upstream kept working after the proxy gave up on them,
//! as it happens — for the operator's live page. (`staunch audit` reads the same facts from
//! the lifecycle log afterwards; the metric `staunch_upstream_late_total` counts them.)
//!
//! An entry is made by the first thing the upstream sends after the cancel (`upstream.late`),
//! or by the stop policy killing a call's process that was still running; it records how long
//! the upstream went on, what it sent, and whether the stop policy ended it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Calls remembered (the newest); an older one is forgotten first.
const KEPT: usize = 64;

/// One call whose upstream went on after its cancel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateWork {
    /// The upstream's name.
    pub upstream: String,
    /// The upstream's own name of the tool.
    pub tool: String,
    /// The downstream request's session (or connection) and id.
    pub session: String,
    /// The downstream request's id, as JSON text.
    pub request_id: String,
    /// When the proxy gave up on the call (its cancel was sent upstream).
    pub abandoned_at: Instant,
    /// The last thing the upstream sent for it, if it sent anything.
    pub last_sent_at: Option<Instant>,
    /// Progress notifications it sent after the cancel.
    pub progress: u64,
    /// Whether it sent its response anyway.
    pub response: bool,
    /// The stop policy ended its process: `Some(true)` killed, still running after the grace;
    /// `Some(false)` it exited within the grace; `None` no policy (or not yet).
    pub stopped: Option<bool>,
}

impl LateWork {
    /// How long after the cancel the upstream was last seen working.
    pub fn went_on_for(&self) -> Duration {
        self.last_sent_at.map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(self.abandoned_at)
        })
    }
}

/// What an upstream sent after its call was abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// A progress notification.
    Progress,
    /// Its response.
    Response,
}

/// The recent calls of one upstream (shared by all its connections) whose work went on.
#[derive(Debug, Default)]
pub struct Ledger {
    calls: Mutex<VecDeque<LateWork>>,
}

/// Who a call was: upstream and tool, and the downstream request.
#[derive(Debug, Clone, Copy)]
pub struct CallKey<'a> {
    /// The upstream's name.
    pub upstream: &'a str,
    /// The upstream's own name of the tool.
    pub tool: &'a str,
    /// The downstream request's session.
    pub session: &'a str,
    /// The downstream request's id, as JSON text.
    pub request_id: &'a str,
}

impl Ledger {
    fn entry<'l>(
        calls: &'l mut VecDeque<LateWork>,
        key: CallKey<'_>,
        abandoned_at: Instant,
    ) -> &'l mut LateWork {
        let found = calls.iter().position(|w| {
            w.upstream == key.upstream && w.session == key.session && w.request_id == key.request_id
        });
        let at = match found {
            Some(i) => i,
            None => {
                if calls.len() == KEPT {
                    calls.pop_front();
                }
                calls.push_back(LateWork {
                    upstream: key.upstream.to_string(),
                    tool: key.tool.to_string(),
                    session: key.session.to_string(),
                    request_id: key.request_id.to_string(),
                    abandoned_at,
                    last_sent_at: None,
                    progress: 0,
                    response: false,
                    stopped: None,
                });
                calls.len() - 1
            }
        };
        &mut calls[at]
    }

    /// The upstream sent `what` for the call `key`, abandoned at `abandoned_at`. Whether it is
    /// the first thing it sent after the cancel.
    pub fn sent(&self, key: CallKey<'_>, abandoned_at: Instant, what: Sent) -> bool {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let w = Self::entry(&mut calls, key, abandoned_at);
        let first = w.last_sent_at.is_none();
        w.last_sent_at = Some(Instant::now());
        match what {
            Sent::Progress => w.progress += 1,
            Sent::Response => w.response = true,
        }
        first
    }

    /// The stop policy ended the process of the call `key`. A process that had to be killed
    /// was still working, so it is an entry even if it sent nothing; one that exited on its
    /// own only marks an entry already there.
    pub fn stopped(&self, key: CallKey<'_>, abandoned_at: Instant, killed: bool) {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let known = calls.iter().any(|w| {
            w.upstream == key.upstream && w.session == key.session && w.request_id == key.request_id
        });
        if known || killed {
            Self::entry(&mut calls, key, abandoned_at).stopped = Some(killed);
        }
    }

    /// The calls remembered, newest first.
    pub fn recent(&self) -> Vec<LateWork> {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.iter().rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(request_id: &str) -> CallKey<'_> {
        CallKey {
            upstream: "up",
            tool: "slow",
            session: "s1",
            request_id,
        }
    }

    #[test]
    fn late_messages_of_one_call_make_one_entry_with_their_counts() {
        let ledger = Ledger::default();
        let at = Instant::now();
        assert!(ledger.sent(key("1"), at, Sent::Progress), "the first");
        assert!(!ledger.sent(key("1"), at, Sent::Progress));
        assert!(!ledger.sent(key("1"), at, Sent::Response));
        ledger.sent(key("2"), at, Sent::Progress);
        let recent = ledger.recent();
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[0].request_id, "2", "newest first");
        let one = &recent[1];
        assert_eq!((one.progress, one.response), (2, true));
        assert!(one.last_sent_at.is_some_and(|t| t >= at));
        assert_eq!(one.stopped, None);
    }

    #[test]
    fn a_kill_is_an_entry_and_a_quiet_exit_only_marks_one() {
        let ledger = Ledger::default();
        let at = Instant::now();
        ledger.stopped(key("quiet"), at, false);
        assert!(
            ledger.recent().is_empty(),
            "nothing went on: nothing to show"
        );
        ledger.stopped(key("killed"), at, true);
        ledger.sent(key("noisy"), at, Sent::Progress);
        ledger.stopped(key("noisy"), at, false);
        let recent = ledger.recent();
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[1].request_id, "killed");
        assert_eq!(recent[1].stopped, Some(true));
        assert_eq!(recent[1].went_on_for(), Duration::ZERO);
        assert_eq!(recent[0].stopped, Some(false));
    }

    #[test]
    fn the_oldest_entry_is_forgotten_first() {
        let ledger = Ledger::default();
        let at = Instant::now();
        for i in 0..KEPT + 3 {
            ledger.sent(key(&i.to_string()), at, Sent::Progress);
        }
        let recent = ledger.recent();
        assert_eq!(recent.len(), KEPT);
        assert_eq!(recent.last().unwrap().request_id, "3");
    }
}
