//! Retry clusters: the same tool with the same arguments started again soon after.
//!
//! Starts are kept per (tool, fingerprint) and clustered at the end, by timestamp: line order
//! cannot be trusted across sessions, and an out-of-order line must not split a cluster.

use std::collections::HashMap;
use std::sync::Arc;

use crate::label::non_negative;
use crate::report::{ClusterKind, ClusterMember, RetryCluster};
use staunch_lifecycle::{Millis, RequestId, format_ts};

/// One start of a (tool, fingerprint) pair, for retry clusters.
#[derive(Debug)]
pub(crate) struct StartRec {
    pub(crate) start: Millis,
    pub(crate) session: Arc<str>,
    pub(crate) request_id: RequestId,
    pub(crate) end: Option<Millis>,
    pub(crate) outcome: Option<Arc<str>>,
    pub(crate) cancel: Option<Millis>,
}

/// Where a start's record lives, so its cancel and end can be filled in later.
pub(crate) type Slot = (usize, usize);

/// Every start of every (tool, fingerprint) pair.
#[derive(Debug, Default)]
pub(crate) struct Starts {
    index: HashMap<(Arc<str>, Arc<str>), usize>,
    recs: Vec<Vec<StartRec>>,
}

impl Starts {
    pub(crate) fn record(&mut self, tool: Arc<str>, fingerprint: Arc<str>, rec: StartRec) -> Slot {
        let next = self.recs.len();
        let k = *self.index.entry((tool, fingerprint)).or_insert(next);
        if k == next {
            self.recs.push(Vec::new());
        }
        self.recs[k].push(rec);
        (k, self.recs[k].len() - 1)
    }

    pub(crate) fn get_mut(&mut self, (k, i): Slot) -> &mut StartRec {
        &mut self.recs[k][i]
    }

    pub(crate) fn into_clusters(self, window_ms: u64) -> Vec<RetryCluster> {
        clusters(self.index, self.recs, window_ms)
    }
}

/// Single-linkage clustering per (tool, fingerprint): sort the starts by time, and cut wherever
/// two consecutive starts are more than `window_ms` apart.
fn clusters(
    index: HashMap<(Arc<str>, Arc<str>), usize>,
    mut starts: Vec<Vec<StartRec>>,
    window_ms: u64,
) -> Vec<RetryCluster> {
    let mut out = Vec::new();
    for ((tool, fp), k) in index {
        let recs = &mut starts[k];
        // A stateless input-required round ends so that the client sends the same call again
        // with its answers: the protocol, not a retry.
        recs.retain(|r| r.outcome.as_deref() != Some("input_required"));
        if recs.len() < 2 {
            continue;
        }
        // Stable sort: equal keys keep their order of arrival, which within one session is the
        // session's own order, so interleaving sessions differently cannot reorder them.
        recs.sort_by(|a, b| {
            (a.start, &a.session, &a.request_id).cmp(&(b.start, &b.session, &b.request_id))
        });
        let mut begin = 0;
        for i in 1..=recs.len() {
            let cut = i == recs.len()
                || non_negative(recs[i].start.saturating_sub(recs[i - 1].start)) > window_ms;
            if cut {
                if i - begin >= 2 {
                    out.push(cluster(&tool, &fp, &recs[begin..i]));
                }
                begin = i;
            }
        }
    }
    out.sort_by(|a, b| {
        (&a.first_start, &a.tool, &a.args_fingerprint).cmp(&(
            &b.first_start,
            &b.tool,
            &b.args_fingerprint,
        ))
    });
    out
}

fn cluster(tool: &str, fp: &str, recs: &[StartRec]) -> RetryCluster {
    let mut kind = ClusterKind::Repeat;
    let members = recs
        .iter()
        .enumerate()
        .map(|(j, m)| {
            let earlier = &recs[..j];
            let earlier_running: Vec<usize> = earlier
                .iter()
                .enumerate()
                .filter(|(_, e)| e.end.is_none_or(|end| end > m.start))
                .map(|(i, _)| i)
                .collect();
            let after_failure = earlier.iter().any(|e| {
                e.cancel.is_some_and(|c| c <= m.start)
                    || e.outcome.as_deref().is_some_and(|o| o != "ok")
            });
            if !earlier_running.is_empty() {
                kind = kind.min(ClusterKind::Overlapping);
            } else if after_failure {
                kind = kind.min(ClusterKind::AfterFailure);
            }
            ClusterMember {
                session: m.session.to_string(),
                request_id: m.request_id.clone(),
                start: format_ts(m.start),
                end: m.end.map(format_ts),
                outcome: m.outcome.as_deref().map(str::to_owned),
                earlier_running,
            }
        })
        .collect::<Vec<_>>();
    RetryCluster {
        tool: tool.to_owned(),
        args_fingerprint: fp.to_owned(),
        kind,
        first_start: members[0].start.clone(),
        last_start: members[members.len() - 1].start.clone(),
        members,
    }
}
