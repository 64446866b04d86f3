//! `staunch-audit`: reads a request-lifecycle log (`docs/lifecycle-log.md`) and tells orphaned
//! work from a slow tool.
//!
//! A client timeout in MCP produces a `notifications/cancelled` and an abandoned request, not a
//! stopped handler. The only way to see what happened afterwards is to compare, per request id,
//! handler entry, cancel receipt and handler exit. This crate does that comparison for
//! `staunch audit <log>` and reports:
//!
//! 1. **orphaned work** ([`Report::orphaned`]): requests that ended after their cancel with
//!    `late_finish` or `aborted` (or, for servers that do not use those words, any outcome but
//!    `cancelled`), with how long they ran past it; and requests that did stop (`cancelled`)
//!    but took longer than [`AuditOptions::slow_stop_threshold`] to do so
//!    ([`Report::slow_to_stop`]);
//! 2. **slow tools** ([`Report::tools`]): per tool, calls, p50 / p95 / max duration, cancels;
//! 3. **retry clusters** ([`Report::retry_clusters`]): the same tool and `args_fingerprint`
//!    started again within [`AuditOptions::retry_window`], flagged when an earlier attempt was
//!    still running (the duplicate side-effect signature);
//! 4. **cancels of unknown ids** ([`Report::unknown_cancels`]);
//! 5. **requests that never ended** ([`Report::never_ended`]);
//!
//! plus malformed lines ([`Report::malformed`]), which are counted and skipped, never fatal.
//!
//! ```
//! use staunch_audit::{AuditOptions, audit_str};
//!
//! let log = r#"{"ts":"2026-11-29T09:30:00.000Z","event":"request.start","request_id":7,"session":"stdio","method":"tools/call","tool":"slow_count","args_fingerprint":"5f2b9c0e4a1d3b77"}
//! {"ts":"2026-11-29T09:30:00.412Z","event":"request.cancel_received","request_id":7,"session":"stdio"}
//! {"ts":"2026-11-29T09:30:00.415Z","event":"request.end","request_id":7,"session":"stdio","outcome":"cancelled","duration_ms":415,"after_cancel_ms":3}
//! "#;
//! let report = audit_str(log, &AuditOptions::default());
//! assert!(report.is_clean()); // stopped 3 ms after its cancel: not orphaned
//! assert_eq!(report.tools[0].cancelled, 1);
//! println!("{}", report.render_table());
//! ```
//!
//! The reader is streaming: memory grows with the requests in flight, one duration and one
//! small start record per tool call (percentiles are exact, and retry clusters are found by
//! timestamp, not by line order), and is otherwise bounded. Findings never depend on how
//! different sessions' lines interleave in the file, only on timestamps and each session's own
//! order.
//!
//! The JSON shape ([`Report`], serialized with serde) is stable and versioned by
//! [`Report::format_version`]; every field is documented on the types in [`report`].

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod analysis;
mod groups;
mod label;
mod render;
pub mod report;
mod retry;
mod upstream;

use std::io::{self, BufRead};
use std::time::Duration;

pub use analysis::Auditor;
pub use render::fmt_ms;
pub use report::Report;
pub use staunch_lifecycle::RequestId;

/// A line longer than this is reported as malformed without being buffered, so one runaway
/// line (a logged 50 MB argument, a binary file) cannot exhaust memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// What counts as a finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditOptions {
    /// Two starts of the same tool with the same `args_fingerprint` at most this far apart are
    /// one retry cluster. Set it a little above the client's request timeout: a retry arrives
    /// one timeout *plus* the agent's retry delay after the first attempt.
    pub retry_window: Duration,
    /// A `cancelled` request that took longer than this after its cancel to stop is reported
    /// as slow to stop.
    pub slow_stop_threshold: Duration,
    /// How many examples each finding lists (worst offenders per tool, unknown cancels,
    /// malformed lines). Counts are always complete.
    pub examples: usize,
}

impl Default for AuditOptions {
    /// A 90 s retry window, a 100 ms slow-stop threshold, five examples.
    ///
    /// Why 90 s and not 60 s: 60 s is the most common client timeout (the TypeScript SDK's
    /// default), so the retry it causes lands at 60 s + the retry delay; a 60 s window would
    /// miss exactly the canonical case.
    fn default() -> Self {
        Self {
            retry_window: Duration::from_secs(90),
            slow_stop_threshold: Duration::from_millis(100),
            examples: 5,
        }
    }
}

/// Reading the log failed (the log's *content* never causes an error).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The reader returned an I/O error.
    #[error("reading line {line} of the log: {source}")]
    Read {
        /// 1-based number of the line being read.
        line: u64,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Audit a whole log from a reader, line by line.
///
/// Lines may end in `\n` or `\r\n`; a last line without a newline is read too. Content problems
/// are findings (see [`Report::malformed`]); only an I/O error is an `Err`.
pub fn audit_reader<R: BufRead>(mut reader: R, opts: &AuditOptions) -> Result<Report, AuditError> {
    let mut auditor = Auditor::new(opts);
    let mut buf = Vec::new();
    let mut too_long = false;
    let mut line_no: u64 = 1;
    loop {
        let (used, newline) = {
            let chunk = match reader.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(AuditError::Read {
                        line: line_no,
                        source,
                    });
                }
            };
            if chunk.is_empty() {
                // EOF: a final line without a newline still counts.
                if too_long {
                    auditor.feed_malformed(too_long_msg());
                } else if !buf.is_empty() {
                    auditor.feed_line(&buf);
                }
                break;
            }
            let (take, newline) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            if !too_long {
                if buf.len() + take > MAX_LINE_BYTES {
                    too_long = true;
                    buf = Vec::new(); // give the memory back, not just the length
                } else {
                    buf.extend_from_slice(&chunk[..take]);
                }
            }
            (take + usize::from(newline), newline)
        };
        reader.consume(used);
        if newline {
            if too_long {
                auditor.feed_malformed(too_long_msg());
            } else {
                // serde_json accepts trailing whitespace, so a `\r` left by CRLF is harmless.
                auditor.feed_line(&buf);
            }
            buf.clear();
            too_long = false;
            line_no += 1;
        }
    }
    Ok(auditor.finish())
}

fn too_long_msg() -> String {
    format!("line longer than {MAX_LINE_BYTES} bytes")
}

/// Audit a log held in memory (tests, small logs). Cannot fail.
pub fn audit_str(log: &str, opts: &AuditOptions) -> Report {
    match audit_reader(log.as_bytes(), opts) {
        Ok(report) => report,
        // `&[u8]` as a reader never returns an I/O error.
        Err(e) => unreachable!("in-memory read failed: {e}"),
    }
}
