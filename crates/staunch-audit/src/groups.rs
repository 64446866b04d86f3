//! Example lists that stay small and do not depend on line order, and the grouping of
//! per-request findings by tool.

use std::cmp::{Ordering, Reverse};
use std::collections::HashMap;

use crate::label::Label;
use crate::report::{Orphan, OrphanGroup, OrphanGroups, UnknownCancel};

/// Keeps the `cap` smallest items under `cmp`, in bounded memory and independent of the order
/// they arrive in (so the examples do not depend on how sessions interleave).
#[derive(Debug)]
pub(crate) struct Bounded<T> {
    cap: usize,
    cmp: fn(&T, &T) -> Ordering,
    items: Vec<T>,
}

impl<T> Bounded<T> {
    pub(crate) fn new(cap: usize, cmp: fn(&T, &T) -> Ordering) -> Self {
        Self {
            cap,
            cmp,
            items: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, item: T) {
        self.items.push(item);
        // Trim in batches rather than on every push: amortised O(log n) per item.
        if self.items.len() >= self.cap.saturating_mul(2).saturating_add(16) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        self.items.sort_by(self.cmp);
        self.items.truncate(self.cap);
    }

    pub(crate) fn finish(mut self) -> Vec<T> {
        self.trim();
        self.items
    }
}

#[derive(Debug)]
pub(crate) struct GroupAcc {
    pub(crate) count: u64,
    pub(crate) worst: Bounded<Orphan>,
}

/// Worst first: longest past the cancel (unknown last), then longest overall, then a total
/// tie-break on identity.
pub(crate) fn orphan_order(a: &Orphan, b: &Orphan) -> Ordering {
    Reverse(rank(a.after_cancel_ms))
        .cmp(&Reverse(rank(b.after_cancel_ms)))
        .then_with(|| Reverse(rank(a.duration_ms)).cmp(&Reverse(rank(b.duration_ms))))
        .then_with(|| a.end.cmp(&b.end))
        .then_with(|| a.session.cmp(&b.session))
        .then_with(|| a.request_id.cmp(&b.request_id))
        .then_with(|| a.outcome.cmp(&b.outcome))
}

/// Orders known values above unknown ones, for "largest first, unknown last" sorts
/// (`Reverse(Option)` alone would put `None` first).
fn rank(v: Option<u64>) -> u64 {
    v.map_or(0, |x| x.saturating_add(1))
}

pub(crate) fn unknown_order(a: &UnknownCancel, b: &UnknownCancel) -> Ordering {
    (&a.ts, &a.session, &a.request_id, a.kind, &a.reason).cmp(&(
        &b.ts,
        &b.session,
        &b.request_id,
        b.kind,
        &b.reason,
    ))
}

pub(crate) fn groups(map: HashMap<Label, GroupAcc>) -> OrphanGroups {
    let mut count = 0;
    let mut by_tool: Vec<OrphanGroup> = map
        .into_iter()
        .map(|(label, g)| {
            count += g.count;
            let (tool, method) = label.parts();
            OrphanGroup {
                tool,
                method,
                count: g.count,
                worst: g.worst.finish(),
            }
        })
        .collect();
    // Worst tool first: the one whose worst example is worst, then the most frequent.
    by_tool.sort_by(|a, b| {
        let worst = |g: &OrphanGroup| g.worst.first().and_then(|o| o.after_cancel_ms);
        (
            Reverse(rank(worst(a))),
            Reverse(a.count),
            &a.tool,
            &a.method,
        )
            .cmp(&(
                Reverse(rank(worst(b))),
                Reverse(b.count),
                &b.tool,
                &b.method,
            ))
    });
    OrphanGroups { count, by_tool }
}
