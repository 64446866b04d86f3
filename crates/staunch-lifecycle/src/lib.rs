//! The request-lifecycle log (`docs/lifecycle-log.md`): one JSON line per step in the life of a
//! request — start, cancel received or ignored, abort, end — keyed by request id and session.
//!
//! - [`Event`] (with [`Outcome`] and [`IgnoredWhy`]): the typed events, shared by the writer in
//!   `staunch-server` and the reader in `staunch-audit`.
//! - [`write_line`]: one event as one line, into a reused buffer.
//! - [`parse_line`]: one line back into a [`Line`], forgiving about what it does not use and
//!   strict about what it does.
//! - [`timestamp`]: the `ts` format (RFC 3339, UTC, milliseconds); [`TimestampCache`] writes
//!   the same text for a busy writer, formatting the date once per second.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod clock;
mod event;
mod read;
mod write;

pub use clock::{TimestampCache, now_ms};
pub use event::{Event, IgnoredWhy, Outcome, UpstreamStep, names};
pub use read::{Line, Millis, Parsed, RequestId, format_ts, parse_line, parse_ts};
pub use write::{IdRef, write_dropped, write_line};

/// Now as the log writes it: RFC 3339, UTC, always three fraction digits (so lines sort and
/// align).
pub fn timestamp() -> String {
    let ms = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
    format_ts(Millis::try_from(ms).unwrap_or(0))
}
