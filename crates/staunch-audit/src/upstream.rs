//! Orphaned upstream work: what an upstream behind `staunch proxy` sent after the proxy had
//! given up on the call (`upstream.late` lines). The proxy keeps the client clean — nothing late
//! reaches it — so the downstream request's own lines end well; these lines are the only sign
//! that the upstream server kept working, and they are reported as orphaned work of their own.
//!
//! A late line usually comes after its downstream request ended, so the auditor remembers the
//! tool and cancel time of recently ended requests that had a cancel ([`Recent`], bounded).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde::Serialize;
use staunch_lifecycle::{Millis, RequestId, format_ts};

use crate::label::Label;
use crate::label::non_negative;

type UpstreamCallKey = (Arc<str>, RequestId);

/// How many ended, cancelled requests are remembered for late lines that follow them.
const RECENT_CAP: usize = 65_536;

/// Ended requests that had a cancel: their label and cancel time, oldest forgotten first.
#[derive(Debug, Default)]
pub(crate) struct Recent {
    map: HashMap<UpstreamCallKey, (Label, Option<Millis>)>,
    order: VecDeque<UpstreamCallKey>,
}

impl Recent {
    pub(crate) fn remember(&mut self, key: UpstreamCallKey, label: Label, cancel: Option<Millis>) {
        if self.map.insert(key.clone(), (label, cancel)).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > RECENT_CAP {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    pub(crate) fn get(&self, key: &UpstreamCallKey) -> Option<&(Label, Option<Millis>)> {
        self.map.get(key)
    }
}

/// What one call's upstream sent after it was abandoned.
#[derive(Debug)]
struct Late {
    upstream: Arc<str>,
    label: Label,
    cancel: Option<Millis>,
    last: Millis,
    progress: u64,
    response: bool,
}

/// Late lines, per downstream request.
#[derive(Debug, Default)]
pub(crate) struct UpstreamAcc {
    calls: HashMap<UpstreamCallKey, Late>,
    /// Requests whose upstream process the stop policy killed (`upstream.stopped`, `killed`).
    killed: HashSet<UpstreamCallKey>,
}

impl UpstreamAcc {
    /// One `upstream.late` line of request `key`, whose tool and cancel are known when given.
    pub(crate) fn late(
        &mut self,
        key: UpstreamCallKey,
        upstream: Arc<str>,
        what: Option<&str>,
        ts: Millis,
        known: Option<(Label, Option<Millis>)>,
    ) {
        if what == Some("error") {
            // An error answer after the cancel: the upstream stopped and said so late. Not
            // work that went on.
            return;
        }
        let late = self.calls.entry(key).or_insert_with(|| {
            let (label, cancel) = known.unwrap_or((Label::new(None, None), None));
            Late {
                upstream,
                label,
                cancel,
                last: ts,
                progress: 0,
                response: false,
            }
        });
        late.last = late.last.max(ts);
        match what {
            Some("response") => late.response = true,
            _ => late.progress += 1,
        }
    }

    /// An `upstream.stopped` line of request `key`: its upstream process was still running
    /// after the grace and the proxy killed it, so its work ended there.
    pub(crate) fn killed(&mut self, key: UpstreamCallKey) {
        self.killed.insert(key);
    }

    /// The findings, grouped by upstream and tool, each group's longest first. A call whose
    /// upstream sent only progress, all of it within `crossing_ms` of the cancel, is left out:
    /// those messages crossed the cancel on the wire, and the upstream stopped as promptly as
    /// a server of staunch's own must (the audit's slow-stop threshold). Without a known
    /// cancel time, or with a late response (the work was done), it is orphaned work.
    pub(crate) fn finish(self, examples: usize, crossing_ms: u64) -> UpstreamOrphans {
        let mut groups: HashMap<(Arc<str>, Label), Vec<UpstreamOrphan>> = HashMap::new();
        let stopped = self.killed.len() as u64;
        let calls: Vec<(UpstreamCallKey, Late)> = self
            .calls
            .into_iter()
            .filter(|(_, l)| {
                l.response
                    || l.cancel
                        .is_none_or(|c| non_negative(l.last.saturating_sub(c)) > crossing_ms)
            })
            .collect();
        let count = calls.len() as u64;
        for (key, l) in calls {
            let stopped = self.killed.contains(&key);
            let (session, request_id) = key;
            groups
                .entry((l.upstream, l.label))
                .or_default()
                .push(UpstreamOrphan {
                    session: session.to_string(),
                    request_id,
                    cancel: l.cancel.map(format_ts),
                    last_sent: format_ts(l.last),
                    after_cancel_ms: l.cancel.map(|c| non_negative(l.last.saturating_sub(c))),
                    progress: l.progress,
                    response: l.response,
                    stopped,
                });
        }
        let mut by_upstream: Vec<UpstreamOrphanGroup> = groups
            .into_iter()
            .map(|((upstream, label), mut worst)| {
                worst.sort_by(|a, b| {
                    (
                        std::cmp::Reverse(a.after_cancel_ms),
                        &a.session,
                        &a.last_sent,
                    )
                        .cmp(&(
                            std::cmp::Reverse(b.after_cancel_ms),
                            &b.session,
                            &b.last_sent,
                        ))
                });
                let n = worst.len() as u64;
                worst.truncate(examples);
                let (tool, method) = label.parts();
                UpstreamOrphanGroup {
                    upstream: upstream.to_string(),
                    tool,
                    method,
                    count: n,
                    worst,
                }
            })
            .collect();
        by_upstream.sort_by(|a, b| {
            (&a.upstream, &a.tool, &a.method).cmp(&(&b.upstream, &b.tool, &b.method))
        });
        UpstreamOrphans {
            count,
            stopped,
            by_upstream,
        }
    }
}

/// Calls whose upstream kept working after the proxy gave up on them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct UpstreamOrphans {
    /// All of them.
    pub count: u64,
    /// Upstream processes the proxy's stop policy (`kill_after_cancel`) killed because they
    /// were still running after a cancelled call's grace.
    pub stopped: u64,
    /// Per upstream and tool, in name order.
    pub by_upstream: Vec<UpstreamOrphanGroup>,
}

/// One upstream tool's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpstreamOrphanGroup {
    /// The upstream's name (`staunch proxy`'s `--name` or `[[upstream]] name`).
    pub upstream: String,
    /// The tool as the client called it, `null` when the log does not say.
    pub tool: Option<String>,
    /// The method, only when `tool` is `null`.
    pub method: Option<String>,
    /// How many calls.
    pub count: u64,
    /// At most `options.examples`, longest after the cancel first.
    pub worst: Vec<UpstreamOrphan>,
}

/// One call whose upstream went on after it was abandoned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpstreamOrphan {
    /// The downstream request's `session`.
    pub session: String,
    /// The downstream request's id.
    pub request_id: RequestId,
    /// When the proxy received the cancel, if the log says.
    pub cancel: Option<String>,
    /// The last thing the upstream sent for it.
    pub last_sent: String,
    /// How long after the cancel the upstream was still sending; `null` without a cancel time.
    pub after_cancel_ms: Option<u64>,
    /// Progress notifications it sent after being abandoned.
    pub progress: u64,
    /// Whether it sent its response anyway.
    pub response: bool,
    /// Whether the proxy's stop policy killed its upstream process (its work ended there).
    pub stopped: bool,
}
