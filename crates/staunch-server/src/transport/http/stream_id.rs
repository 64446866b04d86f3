//! Stream and event ids of the HTTP transport.
//!
//! A stream id is this process's random prefix and a counter, so ids made by instances that
//! share a store never collide, and an instance can tell its own streams from another's (the
//! writer-liveness check of [`super::writer`] reads the prefix). An event id is
//! `"{stream}:{seq}"`: it names its stream, so `Last-Event-ID` alone says what to resume.

use std::sync::Arc;
use std::sync::atomic::Ordering;

/// `"{stream}:{seq}"`: unique within the session, and it names its stream.
pub(crate) fn event_id(stream_id: &str, seq: u64) -> String {
    // Built by hand: `format!` was 1.1k instructions of every message.
    let mut digits = itoa::Buffer::new();
    let seq = digits.format(seq);
    let mut id = String::with_capacity(stream_id.len() + 1 + seq.len());
    id.push_str(stream_id);
    id.push(':');
    id.push_str(seq);
    id
}

/// Splits an event id into stream and sequence number.
pub(crate) fn parse_event_id(id: &str) -> Option<(&str, u64)> {
    let (stream, seq) = id.rsplit_once(':')?;
    if stream.is_empty() {
        return None;
    }
    Some((stream, seq.parse().ok()?))
}

/// A stream id unique across processes sharing a store: this process's random prefix (64
/// bits, drawn once) and a counter. It need not be unguessable — a stream is only ever
/// replayed to the session that owns it, and the session id is the secret — so the OS
/// generator is not asked for every request.
pub(super) fn new_stream_id() -> Arc<str> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let prefix = stream_prefix();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // Written on the stack, then one allocation: the shared id itself.
    let mut buf = [0u8; 64];
    let mut len = 0;
    for b in prefix.bytes().chain(std::iter::once(b'-')).chain(hex(n)) {
        if let Some(slot) = buf.get_mut(len) {
            *slot = b;
            len += 1;
        }
    }
    Arc::from(std::str::from_utf8(&buf[..len]).unwrap_or_default())
}

/// This process's stream id prefix.
pub(super) fn stream_prefix() -> &'static str {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PREFIX.get_or_init(|| random_hex(8))
}

/// The counter of a stream id this process made (`None` for any other id: another
/// instance's, or not a stream id at all).
pub(super) fn own_stream_number(stream_id: &str) -> Option<u64> {
    let n = stream_id
        .strip_prefix(stream_prefix())?
        .strip_prefix('-')
        // Only the form `new_stream_id` writes (lower case, no leading zero), so that one
        // number stands for one id.
        .filter(|n| {
            n.len() <= 16
                && !n.starts_with('0')
                && n.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })?;
    u64::from_str_radix(n, 16).ok()
}

/// `n` in lower-case hex, without leading zeros.
fn hex(n: u64) -> impl Iterator<Item = u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - n.leading_zeros()).div_ceil(4).max(1);
    (0..digits)
        .rev()
        .map(move |i| HEX[((n >> (i * 4)) & 0xf) as usize])
}

/// `n` random bytes from the OS CSPRNG, as hex.
pub(crate) fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    if getrandom::fill(&mut buf).is_err() {
        // The OS RNG failing is not recoverable in any useful way for ids.
        panic!("the operating system's random number generator failed");
    }
    // A table, not `format!` per byte: this runs for every request's stream id.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(n * 2);
    for b in buf {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn event_ids_round_trip() {
        assert_eq!(parse_event_id(&event_id("ab12", 7)), Some(("ab12", 7)));
        assert_eq!(parse_event_id("nocolon"), None);
        assert_eq!(parse_event_id(":5"), None);
        assert_eq!(parse_event_id("s:x"), None);
        assert_eq!(random_hex(16).len(), 32);
        assert_ne!(random_hex(16), random_hex(16));
    }

    #[test]
    fn counters_are_written_in_hex_like_format_does() {
        for n in [0u64, 1, 9, 10, 15, 16, 255, 256, 0xdead_beef, u64::MAX] {
            let s: String = hex(n).map(char::from).collect();
            assert_eq!(s, format!("{n:x}"));
        }
        assert_eq!(event_id("a-1f", 0), "a-1f:0");
        assert_eq!(event_id("a-1f", u64::MAX), format!("a-1f:{}", u64::MAX));
    }

    #[test]
    fn stream_ids_are_unique_and_round_trip_in_event_ids() {
        let ids: HashSet<Arc<str>> = (0..10_000).map(|_| new_stream_id()).collect();
        assert_eq!(ids.len(), 10_000);
        for id in ids.iter().take(10) {
            assert_eq!(parse_event_id(&event_id(id, 3)), Some((&**id, 3)));
        }
        // One prefix per process: the part before the counter is shared.
        let a = new_stream_id();
        let b = new_stream_id();
        assert_eq!(a.split_once('-').unwrap().0, b.split_once('-').unwrap().0);
    }

    #[test]
    fn own_stream_numbers_are_read_only_from_this_process_ids_in_their_written_form() {
        let id = new_stream_id();
        let (prefix, hex_n) = id.split_once('-').unwrap();
        let n = u64::from_str_radix(hex_n, 16).unwrap();
        assert_eq!(own_stream_number(&id), Some(n));
        // Another process's prefix, other spellings of the same number, not an id at all.
        assert_eq!(
            own_stream_number(&format!("0000000000000000-{hex_n}")),
            None
        );
        assert_eq!(own_stream_number(&format!("{prefix}-0{hex_n}")), None);
        assert_eq!(
            own_stream_number(&format!("{prefix}-{}", hex_n.to_uppercase())),
            (hex_n == hex_n.to_uppercase()).then_some(n)
        );
        assert_eq!(own_stream_number(&format!("{prefix}-")), None);
        assert_eq!(own_stream_number(&format!("{prefix}-1x")), None);
        assert_eq!(
            own_stream_number(&format!("{prefix}-{}", "f".repeat(17))),
            None
        );
        assert_eq!(own_stream_number("standalone"), None);
    }
}
