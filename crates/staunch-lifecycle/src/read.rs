//! Reading: one log line in, one [`Line`] out.
//!
//! Parsing is deliberately forgiving about what it does not use (unknown events and unknown
//! fields are ignored, as `docs/lifecycle-log.md` promises) and strict about what it does use:
//! a known event whose `ts`, `request_id`, `session` or `outcome` is missing or of the wrong type
//! is *malformed*, because silently guessing would turn one bad line into a wrong finding
//! (an `end` we could not read becomes a request that "never ended").

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use serde::{Serialize, Serializer};

use crate::event::{Event, names};
use serde_json::{Map, Number, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A JSON-RPC request id exactly as the client sent it.
///
/// `5` and `"5"` are different ids (JSON-RPC compares them by value *and* type), so the
/// two variants never compare equal. Serializes back to the original JSON value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestId {
    /// A numeric id, kept as `serde_json` parsed it (`5` and `5.0` stay distinct).
    Number(Number),
    /// A string id.
    String(String),
}

impl RequestId {
    /// Reads an id from JSON (a number or a string).
    pub fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Number(n) => Some(Self::Number(n.clone())),
            Value::String(s) => Some(Self::String(s.clone())),
            _ => None,
        }
    }
}

impl fmt::Display for RequestId {
    /// Numbers bare, strings quoted, so a table never shows `5` for `"5"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{}", Value::String(s.clone())),
        }
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Number(n) => n.serialize(s),
            Self::String(v) => v.serialize(s),
        }
    }
}

impl Ord for RequestId {
    /// Any total order will do (it only makes report ordering deterministic); numbers sort
    /// numerically before strings so that `9` comes before `10` in a table.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Number(a), Self::Number(b)) => {
                let (fa, fb) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
                fa.total_cmp(&fb)
                    .then_with(|| a.to_string().cmp(&b.to_string()))
            }
            (Self::Number(_), Self::String(_)) => Ordering::Less,
            (Self::String(_), Self::Number(_)) => Ordering::Greater,
            (Self::String(a), Self::String(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for RequestId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Milliseconds since the Unix epoch. The log has millisecond precision, and an integer keeps
/// every duration we compute exact.
pub type Millis = i64;

/// Parse an RFC 3339 timestamp (any offset) to Unix milliseconds, truncating sub-millisecond
/// digits.
pub fn parse_ts(s: &str) -> Option<Millis> {
    let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    let ms = t.unix_timestamp_nanos().div_euclid(1_000_000);
    Millis::try_from(ms).ok()
}

/// Format Unix milliseconds the way staunch writes them: UTC, milliseconds, `Z`.
pub fn format_ts(ms: Millis) -> String {
    const FMT: &[time::format_description::BorrowedFormatItem<'static>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(FMT).ok())
        // Only reachable for years outside ±9999, which parse_ts cannot produce.
        .unwrap_or_else(|| format!("@{ms}ms"))
}

/// A parsed line of a known event.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// When it happened (`ts`).
    pub ts: Millis,
    /// The key request ids are unique within: `stdio`, an HTTP session's hash, or a stateless
    /// request's own key (`session`, or `session_id`).
    pub session: String,
    /// The JSON-RPC id exactly as the client sent it.
    pub request_id: RequestId,
    /// The event and its own fields.
    pub event: Event<'static>,
}

/// What one non-blank line turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// A lifecycle event the audit uses.
    Known(Line),
    /// A JSON object with an event the audit does not know (e.g. `job.*`). Its timestamp, if
    /// readable, still counts towards "the last timestamp in the log".
    Ignored {
        /// When it happened, if `ts` is readable.
        ts: Option<Millis>,
    },
    /// `log.dropped`: the writer lost `count` lines under pressure, so the log is incomplete
    /// (a request may lack its end, or its start).
    Dropped {
        /// When it happened, if `ts` is readable.
        ts: Option<Millis>,
        /// Lines lost.
        count: u64,
    },
}

/// Parse one line (without its newline). `Ok(None)` for a blank line; `Err(reason)` for a
/// malformed one.
pub fn parse_line(bytes: &[u8]) -> Result<Option<Parsed>, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(obj) = value else {
        return Err("not a JSON object".to_owned());
    };
    let event = match obj.get("event") {
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err("`event` is not a string".to_owned()),
        None => return Err("missing `event`".to_owned()),
    };
    let known = matches!(
        event,
        names::START
            | names::CANCEL_RECEIVED
            | names::CANCEL_IGNORED
            | names::ABORTED
            | names::END
            | names::UPSTREAM_LATE
            | names::UPSTREAM_STOPPED
    );
    if !known {
        let ts = obj.get("ts").and_then(Value::as_str).and_then(parse_ts);
        if event == names::DROPPED {
            let count = obj
                .get("count")
                .and_then(Value::as_u64)
                .ok_or_else(|| "`log.dropped` without a numeric `count`".to_owned())?;
            return Ok(Some(Parsed::Dropped { ts, count }));
        }
        return Ok(Some(Parsed::Ignored { ts }));
    }

    let ts = match obj.get("ts") {
        Some(Value::String(s)) => {
            parse_ts(s).ok_or_else(|| format!("`ts` is not RFC 3339: {s}"))?
        }
        Some(_) => return Err("`ts` is not a string".to_owned()),
        None => return Err("missing `ts`".to_owned()),
    };
    let request_id = match obj.get("request_id") {
        Some(v) => RequestId::from_value(v)
            .ok_or_else(|| "`request_id` is not a string or number".to_owned())?,
        None => return Err("missing `request_id`".to_owned()),
    };
    // `session_id` is what a tracing-based emitter tends to call it (DESIGN.md does); accepting
    // it costs nothing and saves a whole log from being "malformed".
    let session = match obj.get("session").or_else(|| obj.get("session_id")) {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("`session` is not a string".to_owned()),
        None => return Err("missing `session`".to_owned()),
    };

    let event = match event {
        names::START => Event::Start {
            method: opt_str(&obj, "method")?.map(Cow::Owned),
            tool: opt_str(&obj, "tool")?.map(Cow::Owned),
            args_fingerprint: opt_str(&obj, "args_fingerprint")?.map(Cow::Owned),
            shape: opt_str(&obj, "shape")?.map(Cow::Owned),
            protocol_version: lenient_str(&obj, "protocol_version").map(Cow::Owned),
        },
        names::CANCEL_RECEIVED => Event::CancelReceived {
            reason: lenient_str(&obj, "reason").map(Cow::Owned),
            since_start_ms: opt_ms(&obj, "since_start_ms")?,
        },
        names::CANCEL_IGNORED => Event::CancelIgnored {
            why: opt_str(&obj, "why")?.map(Cow::Owned),
            reason: lenient_str(&obj, "reason").map(Cow::Owned),
        },
        names::ABORTED => Event::Aborted {
            since_cancel_ms: opt_ms(&obj, "since_cancel_ms")?,
        },
        names::END => Event::End {
            method: opt_str(&obj, "method")?.map(Cow::Owned),
            tool: opt_str(&obj, "tool")?.map(Cow::Owned),
            outcome: Cow::Owned(
                opt_str(&obj, "outcome")?
                    .ok_or_else(|| "`request.end` without `outcome`".to_owned())?,
            ),
            duration_ms: opt_ms(&obj, "duration_ms")?,
            after_cancel_ms: opt_ms(&obj, "after_cancel_ms")?,
            why: lenient_str(&obj, "why").map(Cow::Owned),
            panic: lenient_str(&obj, "panic").map(Cow::Owned),
            response_suppressed: obj.get("response_suppressed") == Some(&Value::Bool(true)),
        },
        // What an upstream sent after the proxy gave up on the call (`staunch proxy`).
        names::UPSTREAM_LATE => Event::Upstream {
            step: crate::UpstreamStep::Late,
            upstream: Cow::Owned(
                opt_str(&obj, "upstream")?
                    .ok_or_else(|| "`upstream.late` without `upstream`".to_owned())?,
            ),
            upstream_id: obj.get("upstream_id").and_then(Value::as_i64).unwrap_or(0),
            late: opt_str(&obj, "late")?.map(Cow::Owned),
        },
        // A proxied call's upstream process ended by the stop policy.
        names::UPSTREAM_STOPPED => Event::UpstreamStopped {
            upstream: Cow::Owned(
                opt_str(&obj, "upstream")?
                    .ok_or_else(|| "`upstream.stopped` without `upstream`".to_owned())?,
            ),
            grace_ms: opt_ms(&obj, "grace_ms")?.unwrap_or(0),
            killed: obj.get("killed") == Some(&Value::Bool(true)),
        },
        _ => unreachable!("filtered by `known` above"),
    };
    Ok(Some(Parsed::Known(Line {
        ts,
        session,
        request_id,
        event,
    })))
}

/// An optional string field the audit relies on: wrong type is an error, `null` is absent.
fn opt_str(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` is not a string")),
    }
}

/// Free text we only display (a client's cancel `reason`): never worth rejecting a line over.
fn lenient_str(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// An optional non-negative millisecond count. Fractions are rounded: the log's resolution is
/// one millisecond anyway.
fn opt_ms(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(u) = n.as_u64() {
                return Ok(Some(u));
            }
            match n.as_f64() {
                Some(f) if f.is_finite() && f >= 0.0 && f < u64::MAX as f64 => {
                    Ok(Some(f.round() as u64))
                }
                _ => Err(format!("`{key}` is not a non-negative number")),
            }
        }
        Some(_) => Err(format!("`{key}` is not a number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ts_round_trips_at_millisecond_precision() {
        let ms = parse_ts("2026-11-29T09:30:00.123Z").unwrap();
        assert_eq!(format_ts(ms), "2026-11-29T09:30:00.123Z");
        // Offsets are normalised to UTC; sub-millisecond digits are truncated.
        assert_eq!(parse_ts("2026-11-29T10:30:00.123999+01:00"), Some(ms));
        assert_eq!(parse_ts("yesterday"), None);
    }

    #[test]
    fn ids_keep_their_json_type() {
        let n = RequestId::from_value(&serde_json::json!(5)).unwrap();
        let s = RequestId::from_value(&serde_json::json!("5")).unwrap();
        assert_ne!(n, s);
        assert_eq!(n.to_string(), "5");
        assert_eq!(s.to_string(), "\"5\"");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"5\"");
        assert!(RequestId::from_value(&Value::Null).is_none());
    }

    #[test]
    fn blank_unknown_and_bad_lines() {
        assert_eq!(parse_line(b"   "), Ok(None));
        assert_eq!(
            parse_line(br#"{"event":"job.progress","ts":"2026-11-29T09:30:00.000Z"}"#),
            Ok(Some(Parsed::Ignored {
                ts: parse_ts("2026-11-29T09:30:00.000Z")
            }))
        );
        assert!(parse_line(b"{").is_err());
        assert!(parse_line(b"[1]").is_err());
        let no_outcome = br#"{"ts":"2026-11-29T09:30:00.000Z","event":"request.end","request_id":1,"session":"s"}"#;
        assert!(parse_line(no_outcome).unwrap_err().contains("outcome"));
        let bad_id = br#"{"ts":"2026-11-29T09:30:00.000Z","event":"request.start","request_id":null,"session":"s"}"#;
        assert!(parse_line(bad_id).is_err());
    }
}
