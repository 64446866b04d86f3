//! The audit's findings: plain data, serialized as the stable `--json` shape.
//!
//! Field names and nesting here are a public contract (documented in the crate overview and
//! `docs/lifecycle-log.md`): add fields, never rename or remove them without bumping
//! [`Report::format_version`]. Every list is sorted by a total order over its own content, never
//! by line number, so two logs that differ only in how sessions' lines interleave give the same
//! report (malformed-line numbers aside).

use std::collections::BTreeMap;

use serde::Serialize;

use staunch_lifecycle::RequestId;

pub use crate::upstream::{UpstreamOrphan, UpstreamOrphanGroup, UpstreamOrphans};

/// Version of the JSON shape below; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 1;

/// Everything `staunch audit` found in one log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Version of this JSON shape ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The thresholds the findings were computed with.
    pub options: OptionsUsed,
    /// Counts over the whole log.
    pub summary: Summary,
    /// Requests that kept running after their cancel (see [`Orphan`]).
    pub orphaned: OrphanGroups,
    /// Requests that did stop (`cancelled`) but took longer than the threshold to do it.
    pub slow_to_stop: OrphanGroups,
    /// Per tool (or per method, for requests that are not tool calls): durations and outcomes,
    /// slowest p95 first.
    pub tools: Vec<ToolStats>,
    /// Same tool + `args_fingerprint` started again within the retry window, earliest first.
    pub retry_clusters: Vec<RetryCluster>,
    /// Cancels that named a request that was not in flight.
    pub unknown_cancels: UnknownCancels,
    /// Requests with a start and no end by the end of the log, longest-running first.
    pub never_ended: Vec<Unended>,
    /// Lines that could not be read.
    pub malformed: Malformed,
    /// Calls whose upstream (behind `staunch proxy`) kept working after the proxy gave up on
    /// them: what it sent late, which never reached the client (`upstream.late` lines).
    pub orphaned_upstream: UpstreamOrphans,
}

/// The options as plain milliseconds, so a JSON reader knows what "slow" and "within" meant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OptionsUsed {
    /// [`AuditOptions::retry_window`](crate::AuditOptions::retry_window).
    pub retry_window_ms: u64,
    /// [`AuditOptions::slow_stop_threshold`](crate::AuditOptions::slow_stop_threshold).
    pub slow_stop_threshold_ms: u64,
    /// [`AuditOptions::examples`](crate::AuditOptions::examples).
    pub examples: usize,
}

/// Counts over the whole log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// `true` when [`Report::is_clean`] is.
    pub clean: bool,
    /// Lines read, including blank and malformed ones.
    pub lines: u64,
    /// Lines that were lifecycle events the audit used.
    pub events: u64,
    /// `request.start` lines.
    pub requests: u64,
    /// `request.end` lines.
    pub ended: u64,
    /// `request.end` lines whose start was not in the log (e.g. it began mid-stream); they
    /// still count in `tools` when they name a tool and carry `duration_ms`.
    pub ends_without_start: u64,
    /// Earliest timestamp on any readable line (UTC, RFC 3339, milliseconds), if any.
    pub first_ts: Option<String>,
    /// Latest timestamp on any readable line: "now" for requests that never ended.
    pub last_ts: Option<String>,
    /// Lines the writer said it dropped (`log.dropped`) because it fell behind: the log is
    /// incomplete, so a finding may be missing or spurious, and the report is not clean.
    pub dropped_lines: u64,
    /// Lines of plain text, not JSON (a server's start banner on the same stream as its log,
    /// say): skipped, and not counted as malformed.
    pub text_lines: u64,
}

/// Findings grouped by tool: the total, and per tool its count and its worst examples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct OrphanGroups {
    /// All of them, across tools.
    pub count: u64,
    /// Worst tool first (by its worst `after_cancel_ms`).
    pub by_tool: Vec<OrphanGroup>,
}

/// One tool's share of a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrphanGroup {
    /// Tool name, or `null` for requests that are not tool calls (then `method` is set).
    pub tool: Option<String>,
    /// The method, only when `tool` is `null` (both `null`: the log named neither).
    pub method: Option<String>,
    /// How many of this tool's requests have this finding.
    pub count: u64,
    /// At most `options.examples`, longest `after_cancel_ms` first (unknown last).
    pub worst: Vec<Orphan>,
}

/// One request that ended after its cancel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Orphan {
    /// The `session` of its lines.
    pub session: String,
    /// Its JSON-RPC id, as the client sent it.
    pub request_id: RequestId,
    /// The `request.end` outcome (`late_finish`, `aborted`, `cancelled`, or for servers that do
    /// not distinguish, `ok`/`error`/… after a cancel).
    pub outcome: String,
    /// `null` when the start is not in the log.
    pub start: Option<String>,
    /// When the (first) cancel was received, if the log says.
    pub cancel: Option<String>,
    /// When it ended.
    pub end: String,
    /// Start to end: the end line's `duration_ms`, else computed from timestamps.
    pub duration_ms: Option<u64>,
    /// How long it ran past its cancel: the end line's `after_cancel_ms`, else computed from
    /// timestamps; `null` when neither is known.
    pub after_cancel_ms: Option<u64>,
}

/// Durations and outcomes of one tool (or one non-tool method).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolStats {
    /// Tool name, or `null` for requests that are not tool calls.
    pub tool: Option<String>,
    /// Set only when `tool` is `null`.
    pub method: Option<String>,
    /// Ended requests.
    pub calls: u64,
    /// Percentiles (nearest rank) and maximum over the ended requests whose duration is known;
    /// `null` when none is.
    pub p50_ms: Option<u64>,
    /// 95th percentile, nearest rank.
    pub p95_ms: Option<u64>,
    /// Longest.
    pub max_ms: Option<u64>,
    /// Ended requests that had received a cancel, whatever their outcome.
    pub cancelled: u64,
    /// Of those, orphaned ones (see [`Report::orphaned`]).
    pub orphaned: u64,
    /// Started and never ended.
    pub unended: u64,
    /// Ended requests by outcome.
    pub outcomes: BTreeMap<String, u64>,
}

/// Why a retry cluster matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterKind {
    /// An earlier attempt was still running when a later one started: the same side effect is
    /// being done twice at once. The dangerous case.
    Overlapping,
    /// Every earlier attempt had ended before the retry, but one had been cancelled or ended
    /// with an outcome other than `ok`: a client that gave up and tried again.
    AfterFailure,
    /// Every earlier attempt had ended `ok` without a cancel before the next began. Polling a
    /// job handle looks like this, so it is listed but does not make the log unclean.
    Repeat,
}

/// Starts of the same tool with the same `args_fingerprint`, each within the retry window of the
/// one before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetryCluster {
    /// The tool called.
    pub tool: String,
    /// The `args_fingerprint` every member shares.
    pub args_fingerprint: String,
    /// The worst thing that happened between its members.
    pub kind: ClusterKind,
    /// Start of the first member.
    pub first_start: String,
    /// Start of the last member.
    pub last_start: String,
    /// In start order (ties by session, then request id).
    pub members: Vec<ClusterMember>,
}

/// One start in a retry cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterMember {
    /// Its session (retries often come on a new one).
    pub session: String,
    /// Its JSON-RPC id.
    pub request_id: RequestId,
    /// When it started.
    pub start: String,
    /// `null` if it never ended.
    pub end: Option<String>,
    /// Its `request.end` outcome; `null` if it never ended.
    pub outcome: Option<String>,
    /// Indices (into `members`) of earlier members still running when this one started.
    pub earlier_running: Vec<usize>,
}

/// Cancels that did not reach a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct UnknownCancels {
    /// All of them.
    pub count: u64,
    /// At most `options.examples`, earliest first.
    pub examples: Vec<UnknownCancel>,
}

/// How an unknown cancel showed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownCancelKind {
    /// The server logged `request.cancel_ignored` with `why: unknown_id`.
    IgnoredUnknownId,
    /// A `request.cancel_received` for a (session, id) with no request in flight.
    NotInFlight,
}

/// One cancel that did not reach a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownCancel {
    /// Which line showed it.
    pub kind: UnknownCancelKind,
    /// When.
    pub ts: String,
    /// The session it arrived on.
    pub session: String,
    /// The id it named.
    pub request_id: RequestId,
    /// The client's `reason`, if logged.
    pub reason: Option<String>,
}

/// A request still in flight when the log ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unended {
    /// Its session.
    pub session: String,
    /// Its JSON-RPC id.
    pub request_id: RequestId,
    /// Its tool, for tool calls.
    pub tool: Option<String>,
    /// Its method, if logged.
    pub method: Option<String>,
    /// When it started.
    pub start: String,
    /// From its start to the latest timestamp in the log.
    pub running_ms: u64,
    /// Whether a cancel had reached it: a cancelled request that never ends is stuck.
    pub cancel_received: bool,
}

/// Lines skipped because they could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Malformed {
    /// All of them.
    pub count: u64,
    /// The first few, in line order.
    pub examples: Vec<MalformedLine>,
}

/// One unreadable line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MalformedLine {
    /// 1-based line number.
    pub line: u64,
    /// What was wrong with it.
    pub error: String,
}

impl Report {
    /// No orphaned work, no request slow to stop, no retry cluster that is more than a
    /// [`ClusterKind::Repeat`], no unknown cancels and no request that never ended.
    ///
    /// Slow tools alone do not make a log unclean (being slow is not a bug; ignoring a cancel
    /// is), and neither do malformed lines, which are reported separately.
    pub fn is_clean(&self) -> bool {
        self.orphaned.count == 0
            && self.slow_to_stop.count == 0
            && !self
                .retry_clusters
                .iter()
                .any(|c| c.kind != ClusterKind::Repeat)
            && self.unknown_cancels.count == 0
            && self.never_ended.is_empty()
            && self.summary.dropped_lines == 0
            && self.orphaned_upstream.count == 0
    }

    /// The report as pretty JSON (the `--json` output).
    pub fn to_json_pretty(&self) -> String {
        // Serializing plain structs with string keys cannot fail.
        serde_json::to_string_pretty(self).expect("report serializes")
    }
}

/// Nearest-rank percentile of an ascending slice: the smallest value with at least `p` % of the
/// values at or below it. Exact (no interpolation), so it is always a duration that happened.
pub fn percentile(sorted: &[u64], p: u32) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len() as u64;
    let rank = (u64::from(p) * n).div_ceil(100).max(1);
    Some(sorted[(rank - 1) as usize])
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank() {
        let v: Vec<u64> = (1..=20).collect();
        assert_eq!(percentile(&v, 50), Some(10));
        assert_eq!(percentile(&v, 95), Some(19));
        assert_eq!(percentile(&v, 100), Some(20));
        assert_eq!(percentile(&[7], 50), Some(7));
        assert_eq!(percentile(&[7], 95), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }
}
