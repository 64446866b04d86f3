//! Writing one event as one JSON line, straight into a reused buffer.
//!
//! No map is built and nothing is allocated per field: strings are escaped by serde_json into
//! the buffer, numbers are formatted in place. The field order is fixed (`ts`, `event`,
//! `request_id`, `session`, then the event's own fields), which keeps lines greppable.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::event::Event;

/// A request id as the log writes it: a JSON integer or a JSON string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdRef<'a> {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(&'a str),
}

/// Appends `event` as one line (with its trailing newline) to `out`. `ts` writes the RFC 3339
/// timestamp ([`crate::timestamp`] or a [`crate::TimestampCache`]) — text that needs no JSON
/// escaping.
pub fn write_line(
    out: &mut String,
    ts: impl FnOnce(&mut String),
    session: &str,
    id: IdRef<'_>,
    event: &Event<'_>,
) {
    out.push_str("{\"ts\":\"");
    ts(out);
    out.push_str("\",\"event\":");
    string(out, event.name());
    out.push_str(",\"request_id\":");
    match id {
        IdRef::Number(n) => out.push_str(itoa::Buffer::new().format(n)),
        IdRef::String(s) => string(out, s),
    }
    out.push_str(",\"session\":");
    string(out, session);
    match event {
        Event::Start {
            method,
            tool,
            args_fingerprint,
            shape,
            protocol_version,
        } => {
            opt_str(out, "method", method);
            opt_str(out, "tool", tool);
            opt_str(out, "shape", shape);
            opt_str(out, "args_fingerprint", args_fingerprint);
            opt_str(out, "protocol_version", protocol_version);
        }
        Event::CancelReceived {
            reason,
            since_start_ms,
        } => {
            opt_str(out, "reason", reason);
            opt_num(out, "since_start_ms", *since_start_ms);
        }
        Event::CancelIgnored { why, reason } => {
            opt_str(out, "why", why);
            opt_str(out, "reason", reason);
        }
        Event::Aborted { since_cancel_ms } => opt_num(out, "since_cancel_ms", *since_cancel_ms),
        Event::End {
            method,
            tool,
            outcome,
            duration_ms,
            after_cancel_ms,
            why,
            panic,
            response_suppressed,
        } => {
            opt_str(out, "method", method);
            opt_str(out, "tool", tool);
            out.push_str(",\"outcome\":");
            string(out, outcome);
            opt_num(out, "duration_ms", *duration_ms);
            opt_num(out, "after_cancel_ms", *after_cancel_ms);
            opt_str(out, "why", why);
            opt_str(out, "panic", panic);
            if *response_suppressed {
                out.push_str(",\"response_suppressed\":true");
            }
        }
        Event::Upstream {
            step: _,
            upstream,
            upstream_id,
            late,
        } => {
            out.push_str(",\"upstream\":");
            string(out, upstream);
            out.push_str(",\"upstream_id\":");
            out.push_str(itoa::Buffer::new().format(*upstream_id));
            opt_str(out, "late", late);
        }
        Event::UpstreamStopped {
            upstream,
            grace_ms,
            killed,
        } => {
            out.push_str(",\"upstream\":");
            string(out, upstream);
            let _ = write!(out, ",\"grace_ms\":{grace_ms},\"killed\":{killed}");
        }
    }
    out.push_str("}\n");
}

/// Appends the `log.dropped` line: `count` lines were dropped because the writer was too far
/// behind (see `staunch-server`'s lifecycle module). It has no request id.
pub fn write_dropped(out: &mut String, ts: impl FnOnce(&mut String), count: u64) {
    out.push_str("{\"ts\":\"");
    ts(out);
    out.push_str("\",\"event\":");
    string(out, crate::names::DROPPED);
    let _ = writeln!(out, ",\"count\":{count}}}");
}

fn string(out: &mut String, s: &str) {
    // Fast path: nothing to escape (ids, names, timestamps almost always).
    if s.bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f)
    {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        // serde_json's escaping; serialising a &str cannot fail.
        let escaped = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
        out.push_str(&escaped);
    }
}

fn opt_str(out: &mut String, key: &str, v: &Option<Cow<'_, str>>) {
    if let Some(v) = v {
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":");
        string(out, v);
    }
}

fn opt_num(out: &mut String, key: &str, v: Option<u64>) {
    if let Some(v) = v {
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":");
        out.push_str(itoa::Buffer::new().format(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{Parsed, RequestId, parse_line};

    #[test]
    fn every_event_round_trips_through_the_reader() {
        let events = [
            Event::Start {
                method: Some("tools/call".into()),
                tool: Some("slow_count".into()),
                args_fingerprint: Some("5f2b9c0e4a1d3b77".into()),
                shape: Some("atomic".into()),
                protocol_version: Some("2026-07-28".into()),
            },
            Event::CancelReceived {
                reason: Some("timed out \"after\" 5s\n".into()),
                since_start_ms: Some(412),
            },
            Event::CancelIgnored {
                why: Some("unknown_id".into()),
                reason: None,
            },
            Event::Aborted {
                since_cancel_ms: Some(2001),
            },
            Event::UpstreamStopped {
                upstream: "py".into(),
                grace_ms: 1000,
                killed: true,
            },
            Event::End {
                method: Some("tools/call".into()),
                tool: Some("slow_count".into()),
                outcome: "late_finish".into(),
                duration_ms: Some(415),
                after_cancel_ms: Some(3),
                why: None,
                panic: Some("boom ✗".into()),
                response_suppressed: true,
            },
        ];
        for (i, e) in events.iter().enumerate() {
            let mut line = String::new();
            let id = if i % 2 == 0 {
                IdRef::Number(7)
            } else {
                IdRef::String("a\"b")
            };
            write_line(
                &mut line,
                |o| o.push_str("2026-11-29T09:30:00.123Z"),
                "s-1",
                id,
                e,
            );
            assert!(line.ends_with('\n'));
            let Ok(Some(Parsed::Known(parsed))) = parse_line(line.trim_end().as_bytes()) else {
                panic!("not read back: {line}");
            };
            assert_eq!(&parsed.event, e, "{line}");
            assert_eq!(parsed.session, "s-1");
            let want = match id {
                IdRef::Number(n) => RequestId::Number(n.into()),
                IdRef::String(s) => RequestId::String(s.into()),
            };
            assert_eq!(parsed.request_id, want);
            // Valid JSON whatever the content.
            let _: serde_json::Value = serde_json::from_str(&line).unwrap();
        }
    }
}
