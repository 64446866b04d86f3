//! The streaming pass: pairs each request's start, cancel and end, and folds finished requests
//! into per-tool accumulators as soon as they end.
//!
//! Memory is bounded by the requests in flight, plus, per tool call, one duration (for exact
//! percentiles) and one small start record per (tool, fingerprint) (for retry clusters, which
//! must be found by timestamp rather than by line order, because concurrent writers interleave
//! sessions' lines arbitrarily). Example lists are capped at `AuditOptions::examples`.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::AuditOptions;
use crate::groups::{Bounded, GroupAcc, groups, orphan_order, unknown_order};
use crate::label::{Label, non_negative};
use crate::report::{
    FORMAT_VERSION, Malformed, MalformedLine, OptionsUsed, Orphan, Report, Summary, ToolStats,
    Unended, UnknownCancel, UnknownCancelKind, UnknownCancels, percentile,
};
use crate::retry::{Slot, StartRec, Starts};
use crate::upstream::{Recent, UpstreamAcc};
use staunch_lifecycle::{Event, Line, Millis, Parsed, RequestId, format_ts, parse_line};

type Key = (Arc<str>, RequestId);

/// A started request that has not ended yet.
#[derive(Debug)]
struct InFlight {
    start: Millis,
    tool: Option<Arc<str>>,
    method: Option<Arc<str>>,
    /// First cancel that reached it (a client may cancel, then its session may close).
    cancel: Option<Millis>,
    /// The tool ignores cancels on purpose: its start said `shape: atomic`, or the server logged
    /// `cancel_ignored` with `why: atomic`.
    atomic: bool,
    /// A cancel reached it and was ignored (`why: atomic`): still "a cancel was received".
    cancel_ignored: bool,
    /// Where its start record lives in [`Starts`], to fill in its cancel and end later.
    retry_slot: Option<Slot>,
}

#[derive(Debug, Default)]
struct ToolAcc {
    calls: u64,
    durations: Vec<u64>,
    cancelled: u64,
    orphaned: u64,
    unended: u64,
    outcomes: BTreeMap<String, u64>,
}

/// The streaming auditor: feed it lines, then [`finish`](Auditor::finish) for the report.
///
/// [`audit_reader`](crate::audit_reader) drives one over a `BufRead`; use it directly to audit
/// lines as they are written.
#[derive(Debug)]
pub struct Auditor {
    opts: AuditOptions,
    strings: HashSet<Arc<str>>,
    lines: u64,
    events: u64,
    requests: u64,
    ended: u64,
    ends_without_start: u64,
    first_ts: Option<Millis>,
    last_ts: Option<Millis>,
    in_flight: HashMap<Key, Vec<InFlight>>,
    /// Requests whose end said a cancel had reached them (`after_cancel_ms`) before any
    /// `cancel_received` line for them was read. A server that marks the cancel and then writes
    /// the line can lose the race to the handler's own end line; the late line belongs to the
    /// ended request and is not an unknown cancel. Only such races land here, so it stays tiny.
    awaiting_cancel_line: HashSet<Key>,
    tools: HashMap<Label, ToolAcc>,
    orphans: HashMap<Label, GroupAcc>,
    slow_stops: HashMap<Label, GroupAcc>,
    starts: Starts,
    unknown_count: u64,
    /// Lines the server said it dropped (`log.dropped`).
    dropped_lines: u64,
    text_lines: u64,
    /// Ended requests that had a cancel, for `upstream.late` lines that come after them.
    recent_cancelled: Recent,
    upstream: UpstreamAcc,
    unknown: Bounded<UnknownCancel>,
    malformed: Malformed,
}

impl Auditor {
    /// An auditor that has seen no lines yet.
    pub fn new(opts: &AuditOptions) -> Self {
        Self {
            opts: opts.clone(),
            strings: HashSet::new(),
            lines: 0,
            events: 0,
            requests: 0,
            ended: 0,
            ends_without_start: 0,
            first_ts: None,
            last_ts: None,
            in_flight: HashMap::new(),
            awaiting_cancel_line: HashSet::new(),
            tools: HashMap::new(),
            orphans: HashMap::new(),
            slow_stops: HashMap::new(),
            starts: Starts::default(),
            unknown_count: 0,
            dropped_lines: 0,
            text_lines: 0,
            recent_cancelled: Recent::default(),
            upstream: UpstreamAcc::default(),
            unknown: Bounded::new(opts.examples, unknown_order),
            malformed: Malformed::default(),
        }
    }

    /// Feed the next line (without its line ending). Never fails: a bad line is counted.
    pub fn feed_line(&mut self, bytes: &[u8]) {
        self.lines += 1;
        // A log line is a JSON object; a line of text that does not even start like JSON is
        // other output on the same stream (a start banner), not a damaged log line. Bytes that
        // are not text stay malformed.
        if bytes
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b != b'{' && b != b'[')
            && std::str::from_utf8(bytes).is_ok()
        {
            self.text_lines += 1;
            return;
        }
        match parse_line(bytes) {
            Ok(None) => {}
            Ok(Some(Parsed::Ignored { ts })) => {
                if let Some(ts) = ts {
                    self.see_ts(ts);
                }
            }
            Ok(Some(Parsed::Dropped { ts, count })) => {
                self.dropped_lines = self.dropped_lines.saturating_add(count);
                if let Some(ts) = ts {
                    self.see_ts(ts);
                }
            }
            Ok(Some(Parsed::Known(line))) => {
                self.events += 1;
                self.see_ts(line.ts);
                self.apply(line);
            }
            Err(error) => self.malformed_line(error),
        }
    }

    /// Count a line that was rejected before parsing (e.g. too long to buffer).
    pub(crate) fn feed_malformed(&mut self, error: String) {
        self.lines += 1;
        self.malformed_line(error);
    }

    fn malformed_line(&mut self, error: String) {
        self.malformed.count += 1;
        if self.malformed.examples.len() < self.opts.examples {
            self.malformed.examples.push(MalformedLine {
                line: self.lines,
                error,
            });
        }
    }

    fn see_ts(&mut self, ts: Millis) {
        self.first_ts = Some(self.first_ts.map_or(ts, |f| f.min(ts)));
        self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
    }

    /// Share one allocation per distinct session / tool / method / outcome string.
    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.strings.get(s) {
            return Arc::clone(a);
        }
        let a: Arc<str> = Arc::from(s);
        self.strings.insert(Arc::clone(&a));
        a
    }

    fn apply(&mut self, line: Line) {
        let session = self.intern(&line.session);
        let key = (session, line.request_id);
        match line.event {
            Event::Start {
                method,
                tool,
                args_fingerprint,
                shape,
                ..
            } => self.on_start(
                key,
                line.ts,
                method.map(Cow::into_owned),
                tool.map(Cow::into_owned),
                args_fingerprint.map(Cow::into_owned),
                shape.as_deref() == Some("atomic"),
            ),
            Event::CancelReceived { reason, .. } => {
                let reason = reason.map(Cow::into_owned);
                if let Some(req) = self.oldest_in_flight(&key) {
                    req.cancel.get_or_insert(line.ts);
                    let slot = req.retry_slot;
                    self.note_retry_cancel(slot, line.ts);
                } else if !self.awaiting_cancel_line.remove(&key) {
                    self.unknown_cancel(UnknownCancelKind::NotInFlight, line.ts, key, reason);
                }
            }
            Event::CancelIgnored { why, reason } => match why.as_deref() {
                Some("unknown_id") => {
                    let reason = reason.map(Cow::into_owned);
                    self.unknown_cancel(UnknownCancelKind::IgnoredUnknownId, line.ts, key, reason);
                }
                Some("atomic") => {
                    if let Some(req) = self.oldest_in_flight(&key) {
                        req.atomic = true;
                        req.cancel_ignored = true;
                        // The client still gave up on it, which matters for retries.
                        let slot = req.retry_slot;
                        self.note_retry_cancel(slot, line.ts);
                    }
                }
                // `not_cancellable` (initialize) and anything newer: nothing to report.
                _ => {}
            },
            Event::Aborted { since_cancel_ms } => {
                if let Some(req) = self.oldest_in_flight(&key) {
                    // A server that logs the abort but not the cancel still tells us when the
                    // cancel was, which is what `after_cancel_ms` is measured from.
                    if req.cancel.is_none() {
                        // Checked: `since_cancel_ms` is whatever the log says, however large.
                        req.cancel = since_cancel_ms
                            .and_then(|s| Millis::try_from(s).ok())
                            .and_then(|s| line.ts.checked_sub(s));
                    }
                }
            }
            Event::End {
                method,
                tool,
                outcome,
                duration_ms,
                after_cancel_ms,
                ..
            } => self.on_end(
                key,
                line.ts,
                method.map(Cow::into_owned),
                tool.map(Cow::into_owned),
                outcome.into_owned(),
                duration_ms,
                after_cancel_ms,
            ),
            // What an upstream sent after the proxy gave up on the call: orphaned work that the
            // downstream request's own lines (which end well) cannot show.
            Event::Upstream {
                step: staunch_lifecycle::UpstreamStep::Late,
                upstream,
                late,
                ..
            } => {
                let known = match self.oldest_in_flight(&key) {
                    Some(r) => Some((Label::new(r.tool.clone(), r.method.clone()), r.cancel)),
                    None => self.recent_cancelled.get(&key).cloned(),
                };
                let upstream = self.intern(&upstream);
                self.upstream
                    .late(key, upstream, late.as_deref(), line.ts, known);
            }
            // The other steps upstream: the downstream request's own lines tell its story.
            Event::Upstream { .. } => {}
            Event::UpstreamStopped { killed: true, .. } => self.upstream.killed(key),
            // It exited on its own within the grace: nothing went on.
            Event::UpstreamStopped { killed: false, .. } => {}
        }
    }

    fn oldest_in_flight(&mut self, key: &Key) -> Option<&mut InFlight> {
        self.in_flight.get_mut(key).and_then(|v| v.first_mut())
    }

    fn note_retry_cancel(&mut self, slot: Option<Slot>, ts: Millis) {
        if let Some(slot) = slot {
            self.starts.get_mut(slot).cancel.get_or_insert(ts);
        }
    }

    fn on_start(
        &mut self,
        key: Key,
        ts: Millis,
        method: Option<String>,
        tool: Option<String>,
        fingerprint: Option<String>,
        atomic: bool,
    ) {
        self.requests += 1;
        self.awaiting_cancel_line.remove(&key);
        let tool = tool.map(|t| self.intern(&t));
        let method = method.map(|m| self.intern(&m));
        // Only tool calls with a fingerprint can be recognised as "the same call again".
        let retry_slot = match (&tool, fingerprint) {
            (Some(t), Some(fp)) => {
                let fp = self.intern(&fp);
                let rec = StartRec {
                    start: ts,
                    session: Arc::clone(&key.0),
                    request_id: key.1.clone(),
                    end: None,
                    outcome: None,
                    cancel: None,
                };
                Some(self.starts.record(Arc::clone(t), fp, rec))
            }
            _ => None,
        };
        // Normally one entry per key; a second start while the first is open is a duplicate id,
        // which the server rejects, so it is kept separately rather than replacing the first.
        self.in_flight.entry(key).or_default().push(InFlight {
            start: ts,
            tool,
            method,
            cancel: None,
            atomic,
            cancel_ignored: false,
            retry_slot,
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn on_end(
        &mut self,
        key: Key,
        ts: Millis,
        method: Option<String>,
        tool: Option<String>,
        outcome: String,
        duration_ms: Option<u64>,
        after_cancel_ms: Option<u64>,
    ) {
        self.ended += 1;
        let mut req = None;
        if let Some(open) = self.in_flight.get_mut(&key) {
            // A `rejected` end belongs to the newest start (the duplicate that was refused);
            // any other end to the oldest (the request that actually ran).
            req = if outcome == "rejected" {
                open.pop()
            } else if open.is_empty() {
                None
            } else {
                Some(open.remove(0))
            };
            if open.is_empty() {
                self.in_flight.remove(&key);
            }
        }
        if req.is_none() {
            self.ends_without_start += 1;
        }
        if after_cancel_ms.is_some() && req.as_ref().is_some_and(|r| r.cancel.is_none()) {
            self.awaiting_cancel_line.insert(key.clone());
        }
        let outcome_arc = self.intern(&outcome);
        let (start, cancel, atomic, cancel_ignored, retry_slot, label) = match req {
            Some(r) => {
                let tool = r.tool.or_else(|| tool.map(|t| self.intern(&t)));
                let method = r.method.or_else(|| method.map(|m| self.intern(&m)));
                (
                    Some(r.start),
                    r.cancel,
                    r.atomic,
                    r.cancel_ignored,
                    r.retry_slot,
                    Label::new(tool, method),
                )
            }
            None => {
                let tool = tool.map(|t| self.intern(&t));
                let method = method.map(|m| self.intern(&m));
                (None, None, false, false, None, Label::new(tool, method))
            }
        };
        if let Some(slot) = retry_slot {
            let rec = self.starts.get_mut(slot);
            rec.end = Some(ts);
            rec.outcome = Some(outcome_arc);
        }

        let duration = duration_ms.or_else(|| start.map(|s| non_negative(ts.saturating_sub(s))));
        let after_cancel =
            after_cancel_ms.or_else(|| cancel.map(|c| non_negative(ts.saturating_sub(c))));
        let stopping_outcome = matches!(outcome.as_str(), "cancelled" | "late_finish" | "aborted");
        let had_cancel = cancel.is_some() || after_cancel_ms.is_some() || stopping_outcome;

        let threshold = millis(self.opts.slow_stop_threshold);
        let verdict = match outcome.as_str() {
            // staunch's own words for "ran past its cancel".
            "late_finish" | "aborted" => Verdict::Orphaned,
            "cancelled" if after_cancel.is_some_and(|a| a > threshold) => Verdict::SlowToStop,
            "cancelled" => Verdict::Fine,
            // A server that does not distinguish late finishes logs ok/error/… after the
            // cancel; that is the same orphaned work. An `atomic` tool finishing on purpose is
            // not.
            _ if had_cancel && !atomic => Verdict::Orphaned,
            _ => Verdict::Fine,
        };

        if had_cancel {
            self.recent_cancelled
                .remember(key.clone(), label.clone(), cancel);
        }
        let acc = self.tools.entry(label.clone()).or_default();
        acc.calls += 1;
        if let Some(d) = duration {
            acc.durations.push(d);
        }
        if had_cancel || cancel_ignored {
            acc.cancelled += 1;
        }
        if verdict == Verdict::Orphaned {
            acc.orphaned += 1;
        }
        match acc.outcomes.get_mut(outcome.as_str()) {
            Some(n) => *n += 1,
            None => {
                acc.outcomes.insert(outcome.clone(), 1);
            }
        }

        if verdict != Verdict::Fine {
            let orphan = Orphan {
                session: key.0.to_string(),
                request_id: key.1,
                outcome,
                start: start.map(format_ts),
                cancel: cancel.map(format_ts),
                end: format_ts(ts),
                duration_ms: duration,
                after_cancel_ms: after_cancel,
            };
            let examples = self.opts.examples;
            let groups = if verdict == Verdict::Orphaned {
                &mut self.orphans
            } else {
                &mut self.slow_stops
            };
            let g = groups.entry(label).or_insert_with(|| GroupAcc {
                count: 0,
                worst: Bounded::new(examples, orphan_order),
            });
            g.count += 1;
            g.worst.push(orphan);
        }
    }

    fn unknown_cancel(
        &mut self,
        kind: UnknownCancelKind,
        ts: Millis,
        key: Key,
        reason: Option<String>,
    ) {
        self.unknown_count += 1;
        self.unknown.push(UnknownCancel {
            kind,
            ts: format_ts(ts),
            session: key.0.to_string(),
            request_id: key.1,
            reason,
        });
    }

    /// End of log: whatever is still in flight never ended.
    pub fn finish(mut self) -> Report {
        let last = self.last_ts.unwrap_or(0);
        let mut never_ended = Vec::new();
        for ((session, id), open) in std::mem::take(&mut self.in_flight) {
            for r in open {
                let label = Label::new(r.tool.clone(), r.method.clone());
                self.tools.entry(label).or_default().unended += 1;
                never_ended.push(Unended {
                    session: session.to_string(),
                    request_id: id.clone(),
                    tool: r.tool.as_deref().map(str::to_owned),
                    method: r.method.as_deref().map(str::to_owned),
                    start: format_ts(r.start),
                    running_ms: non_negative(last.saturating_sub(r.start)),
                    cancel_received: r.cancel.is_some() || r.cancel_ignored,
                });
            }
        }
        never_ended.sort_by(|a, b| {
            (Reverse(a.running_ms), &a.session, &a.request_id, &a.start).cmp(&(
                Reverse(b.running_ms),
                &b.session,
                &b.request_id,
                &b.start,
            ))
        });

        let retry_clusters =
            std::mem::take(&mut self.starts).into_clusters(millis(self.opts.retry_window));

        let mut tools: Vec<ToolStats> = std::mem::take(&mut self.tools)
            .into_iter()
            .map(|(label, mut acc)| {
                acc.durations.sort_unstable();
                let (tool, method) = label.parts();
                ToolStats {
                    tool,
                    method,
                    calls: acc.calls,
                    p50_ms: percentile(&acc.durations, 50),
                    p95_ms: percentile(&acc.durations, 95),
                    max_ms: acc.durations.last().copied(),
                    cancelled: acc.cancelled,
                    orphaned: acc.orphaned,
                    unended: acc.unended,
                    outcomes: acc.outcomes,
                }
            })
            .collect();
        // Slowest first; tools with no known duration last.
        tools.sort_by(|a, b| {
            (Reverse(a.p95_ms), Reverse(a.max_ms), &a.tool, &a.method).cmp(&(
                Reverse(b.p95_ms),
                Reverse(b.max_ms),
                &b.tool,
                &b.method,
            ))
        });

        let mut report = Report {
            format_version: FORMAT_VERSION,
            options: OptionsUsed {
                retry_window_ms: millis(self.opts.retry_window),
                slow_stop_threshold_ms: millis(self.opts.slow_stop_threshold),
                examples: self.opts.examples,
            },
            summary: Summary {
                clean: false, // set below, once the report exists
                lines: self.lines,
                events: self.events,
                requests: self.requests,
                ended: self.ended,
                ends_without_start: self.ends_without_start,
                first_ts: self.first_ts.map(format_ts),
                last_ts: self.last_ts.map(format_ts),
                dropped_lines: self.dropped_lines,
                text_lines: self.text_lines,
            },
            orphaned: groups(std::mem::take(&mut self.orphans)),
            slow_to_stop: groups(std::mem::take(&mut self.slow_stops)),
            tools,
            retry_clusters,
            unknown_cancels: UnknownCancels {
                count: self.unknown_count,
                examples: self.unknown.finish(),
            },
            never_ended,
            malformed: self.malformed,
            orphaned_upstream: std::mem::take(&mut self.upstream)
                .finish(self.opts.examples, millis(self.opts.slow_stop_threshold)),
        };
        report.summary.clean = report.is_clean();
        report
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Fine,
    Orphaned,
    SlowToStop,
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
