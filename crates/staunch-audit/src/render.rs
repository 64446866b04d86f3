//! The plain-text report: one section per finding, columns aligned by hand.
//!
//! Written for a terminal and for pasting into an issue, so: no colour, no box drawing, at most
//! one screen per section, findings before statistics, and the clean case in one line.

use std::fmt::Write as _;

use crate::report::{ClusterKind, OrphanGroups, Report, UnknownCancelKind};

/// Clusters shown in full in the table; `--json` has all of them.
const MAX_CLUSTERS_SHOWN: usize = 10;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}
use Align::{Left as L, Right as R};

/// Render rows under a header with every column as wide as its widest cell.
fn table(out: &mut String, indent: &str, header: &[&str], align: &[Align], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::from(indent);
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = widths[i].saturating_sub(cell.chars().count());
            if align[i] == R {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// `412 ms`, `48.2 s`, `3m 12s`: precise where it matters, short where it does not.
pub fn fmt_ms(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{}.{} s", ms / 1_000, (ms % 1_000) / 100)
    } else {
        let s = ms / 1_000;
        if s < 3_600 {
            format!("{}m {:02}s", s / 60, s % 60)
        } else {
            format!("{}h {:02}m", s / 3_600, (s % 3_600) / 60)
        }
    }
}

fn opt_ms(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_owned(), fmt_ms)
}

fn name(tool: Option<&str>, method: Option<&str>) -> String {
    match (tool, method) {
        (Some(t), _) => t.to_owned(),
        (None, Some(m)) => format!("({m})"),
        (None, None) => "(unknown)".to_owned(),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl Report {
    /// A readable plain-text report. A clean log gets one line plus the per-tool table.
    pub fn render_table(&self) -> String {
        let mut out = String::new();
        let s = &self.summary;
        let _ = write!(
            out,
            "staunch audit: {}, {}",
            plural(s.lines, "line", "lines"),
            plural(s.requests, "request", "requests"),
        );
        if let (Some(a), Some(b)) = (&s.first_ts, &s.last_ts) {
            let _ = write!(out, ", {a} .. {b}");
        }
        if s.text_lines > 0 {
            let _ = write!(
                out,
                " ({} not JSON, skipped)",
                plural(s.text_lines, "line of plain text", "lines of plain text")
            );
        }
        out.push('\n');

        let problem_clusters = self
            .retry_clusters
            .iter()
            .filter(|c| c.kind != ClusterKind::Repeat)
            .count() as u64;
        if self.is_clean() {
            out.push_str(
                "clean: no orphaned work, no retry clusters, no unknown cancels, no unended requests",
            );
            if !self.retry_clusters.is_empty() {
                // Only `repeat` clusters can be here; say so rather than seem to contradict
                // the section below.
                out.push_str(" (repeated successful calls listed below)");
            }
            out.push('\n');
        } else {
            let mut parts = Vec::new();
            let mut add = |n: u64, one: &str, many: &str| {
                if n > 0 {
                    parts.push(plural(n, one, many));
                }
            };
            add(self.orphaned.count, "orphaned", "orphaned");
            add(self.slow_to_stop.count, "slow to stop", "slow to stop");
            add(problem_clusters, "retry cluster", "retry clusters");
            add(
                self.unknown_cancels.count,
                "unknown cancel",
                "unknown cancels",
            );
            add(self.never_ended.len() as u64, "never ended", "never ended");
            add(
                self.orphaned_upstream.count,
                "call whose upstream kept working after the cancel",
                "calls whose upstream kept working after the cancel",
            );
            add(
                self.summary.dropped_lines,
                "log line dropped by the server (the log is incomplete)",
                "log lines dropped by the server (the log is incomplete)",
            );
            let _ = writeln!(out, "NOT CLEAN: {}", parts.join(", "));
        }

        self.render_orphans(
            &mut out,
            &self.orphaned,
            "Orphaned work: ran past their cancel",
            "ORPHANED",
        );
        self.render_orphans(
            &mut out,
            &self.slow_to_stop,
            &format!(
                "Slow to stop: cancelled, but more than {} after the cancel",
                fmt_ms(self.options.slow_stop_threshold_ms)
            ),
            "SLOW",
        );
        self.render_upstream_orphans(&mut out);
        self.render_clusters(&mut out);
        self.render_unknown_cancels(&mut out);
        self.render_never_ended(&mut out);
        self.render_tools(&mut out);
        self.render_malformed(&mut out);
        out
    }

    fn render_orphans(&self, out: &mut String, groups: &OrphanGroups, title: &str, what: &str) {
        if groups.count == 0 {
            return;
        }
        let _ = writeln!(out, "\n{title} ({})", groups.count);
        let mut rows = Vec::new();
        for g in &groups.by_tool {
            for (i, o) in g.worst.iter().enumerate() {
                let (tool, count) = if i == 0 {
                    (
                        name(g.tool.as_deref(), g.method.as_deref()),
                        g.count.to_string(),
                    )
                } else {
                    (String::new(), String::new())
                };
                rows.push(vec![
                    tool,
                    count,
                    o.session.clone(),
                    o.request_id.to_string(),
                    o.outcome.clone(),
                    opt_ms(o.after_cancel_ms),
                    opt_ms(o.duration_ms),
                    o.end.clone(),
                ]);
            }
        }
        table(
            out,
            "  ",
            &[
                "TOOL",
                what,
                "SESSION",
                "ID",
                "OUTCOME",
                "PAST CANCEL",
                "RAN",
                "ENDED AT",
            ],
            &[L, R, L, R, L, R, R, L],
            &rows,
        );
    }

    fn render_upstream_orphans(&self, out: &mut String) {
        let u = &self.orphaned_upstream;
        if u.count == 0 {
            return;
        }
        let _ = writeln!(
            out,
            "\nOrphaned upstream work: the upstream kept working after the proxy gave up on the \
             call ({}; none of it reached the client)",
            u.count
        );
        if u.stopped > 0 {
            let _ = writeln!(
                out,
                "  {} upstream processes were still running when their cancelled call's grace \
                 ended, and were killed (kill_after_cancel)",
                u.stopped
            );
        }
        let mut rows = Vec::new();
        for g in &u.by_upstream {
            for (i, o) in g.worst.iter().enumerate() {
                let (upstream, tool, count) = if i == 0 {
                    (
                        g.upstream.clone(),
                        name(g.tool.as_deref(), g.method.as_deref()),
                        g.count.to_string(),
                    )
                } else {
                    (String::new(), String::new(), String::new())
                };
                rows.push(vec![
                    upstream,
                    tool,
                    count,
                    o.session.clone(),
                    o.request_id.to_string(),
                    opt_ms(o.after_cancel_ms),
                    o.progress.to_string(),
                    if o.response { "yes" } else { "no" }.to_string(),
                    if o.stopped { "killed" } else { "-" }.to_string(),
                ]);
            }
        }
        table(
            out,
            "  ",
            &[
                "UPSTREAM",
                "TOOL",
                "CALLS",
                "SESSION",
                "ID",
                "WENT ON FOR",
                "PROGRESS",
                "RESPONSE",
                "STOPPED",
            ],
            &[L, L, R, L, R, R, R, L, L],
            &rows,
        );
    }

    fn render_clusters(&self, out: &mut String) {
        if self.retry_clusters.is_empty() {
            return;
        }
        let count = |k: ClusterKind| self.retry_clusters.iter().filter(|c| c.kind == k).count();
        let _ = writeln!(
            out,
            "\nRetry clusters: same tool and arguments within {} ({}: {} overlapping, {} after failure, {} repeat)",
            fmt_ms(self.options.retry_window_ms),
            self.retry_clusters.len(),
            count(ClusterKind::Overlapping),
            count(ClusterKind::AfterFailure),
            count(ClusterKind::Repeat),
        );
        for c in self.retry_clusters.iter().take(MAX_CLUSTERS_SHOWN) {
            let (mark, what) = match c.kind {
                ClusterKind::Overlapping => ("!!", "retried while an earlier attempt still ran"),
                ClusterKind::AfterFailure => ("! ", "retried after a cancel or failure"),
                ClusterKind::Repeat => ("  ", "repeated after success (polling?)"),
            };
            let _ = writeln!(
                out,
                "{mark}{} args {}: {} starts, {} .. {}: {what}",
                c.tool,
                c.args_fingerprint,
                c.members.len(),
                c.first_start,
                c.last_start
            );
            let rows: Vec<Vec<String>> = c
                .members
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let note = if m.earlier_running.is_empty() {
                        String::new()
                    } else {
                        let ids: Vec<String> = m
                            .earlier_running
                            .iter()
                            .map(|j| format!("#{}", j + 1))
                            .collect();
                        format!("started while {} still running", ids.join(", "))
                    };
                    vec![
                        format!("#{}", i + 1),
                        m.session.clone(),
                        m.request_id.to_string(),
                        m.start.clone(),
                        m.end.clone().unwrap_or_else(|| "-".to_owned()),
                        m.outcome
                            .clone()
                            .unwrap_or_else(|| "(never ended)".to_owned()),
                        note,
                    ]
                })
                .collect();
            table(
                out,
                "    ",
                &["", "SESSION", "ID", "STARTED AT", "ENDED AT", "OUTCOME", ""],
                &[R, L, R, L, L, L, L],
                &rows,
            );
        }
        if self.retry_clusters.len() > MAX_CLUSTERS_SHOWN {
            let _ = writeln!(
                out,
                "  ... and {} more (see --json)",
                self.retry_clusters.len() - MAX_CLUSTERS_SHOWN
            );
        }
    }

    fn render_unknown_cancels(&self, out: &mut String) {
        let u = &self.unknown_cancels;
        if u.count == 0 {
            return;
        }
        let _ = writeln!(out, "\nCancels of unknown requests ({})", u.count);
        let rows: Vec<Vec<String>> = u
            .examples
            .iter()
            .map(|c| {
                vec![
                    c.ts.clone(),
                    c.session.clone(),
                    c.request_id.to_string(),
                    match c.kind {
                        UnknownCancelKind::IgnoredUnknownId => "ignored: unknown_id",
                        UnknownCancelKind::NotInFlight => "received, not in flight",
                    }
                    .to_owned(),
                    c.reason.clone().unwrap_or_default(),
                ]
            })
            .collect();
        table(
            out,
            "  ",
            &["AT", "SESSION", "ID", "HOW", "REASON"],
            &[L, L, R, L, L],
            &rows,
        );
        more(out, u.count, u.examples.len());
    }

    fn render_never_ended(&self, out: &mut String) {
        if self.never_ended.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\nNever ended ({}): running for, at the last timestamp in the log",
            self.never_ended.len()
        );
        let rows: Vec<Vec<String>> = self
            .never_ended
            .iter()
            .map(|u| {
                vec![
                    name(u.tool.as_deref(), u.method.as_deref()),
                    u.session.clone(),
                    u.request_id.to_string(),
                    u.start.clone(),
                    fmt_ms(u.running_ms),
                    if u.cancel_received {
                        "yes".to_owned()
                    } else {
                        "no".to_owned()
                    },
                ]
            })
            .collect();
        table(
            out,
            "  ",
            &[
                "TOOL",
                "SESSION",
                "ID",
                "STARTED AT",
                "RUNNING",
                "CANCELLED",
            ],
            &[L, L, R, L, R, L],
            &rows,
        );
    }

    fn render_tools(&self, out: &mut String) {
        if self.tools.is_empty() {
            return;
        }
        out.push_str("\nTools (slowest p95 first)\n");
        let rows: Vec<Vec<String>> = self
            .tools
            .iter()
            .map(|t| {
                vec![
                    name(t.tool.as_deref(), t.method.as_deref()),
                    t.calls.to_string(),
                    opt_ms(t.p50_ms),
                    opt_ms(t.p95_ms),
                    opt_ms(t.max_ms),
                    t.cancelled.to_string(),
                    t.orphaned.to_string(),
                    t.unended.to_string(),
                ]
            })
            .collect();
        table(
            out,
            "  ",
            &[
                "TOOL",
                "CALLS",
                "P50",
                "P95",
                "MAX",
                "CANCELLED",
                "ORPHANED",
                "UNENDED",
            ],
            &[L, R, R, R, R, R, R, R],
            &rows,
        );
    }

    fn render_malformed(&self, out: &mut String) {
        let m = &self.malformed;
        if m.count == 0 {
            return;
        }
        let _ = writeln!(out, "\nMalformed lines skipped ({})", m.count);
        for l in &m.examples {
            let _ = writeln!(out, "  line {}: {}", l.line, l.error);
        }
        more(out, m.count, m.examples.len());
    }
}

fn more(out: &mut String, count: u64, shown: usize) {
    if count > shown as u64 {
        let _ = writeln!(out, "  ... and {} more", count - shown as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_ms;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(fmt_ms(3), "3 ms");
        assert_eq!(fmt_ms(48_250), "48.2 s");
        assert_eq!(fmt_ms(192_000), "3m 12s");
        assert_eq!(fmt_ms(7_380_000), "2h 03m");
    }
}
