//! Timestamps for a busy writer: the date and time up to the second are formatted once per
//! second and reused; only the milliseconds are written per line. The text is exactly what
//! [`format_ts`](crate::format_ts) produces.

use crate::read::{Millis, format_ts};

/// A cache of the current second's `YYYY-MM-DDTHH:MM:SS` prefix.
#[derive(Debug, Default)]
pub struct TimestampCache {
    second: Option<Millis>,
    prefix: String,
}

impl TimestampCache {
    /// Appends `ms` (Unix milliseconds) as `YYYY-MM-DDTHH:MM:SS.mmmZ` to `out`.
    pub fn write(&mut self, out: &mut String, ms: Millis) {
        let second = ms.div_euclid(1000);
        if self.second != Some(second) {
            let full = format_ts(second * 1000);
            // `format_ts` ends with ".000Z"; keep what comes before the fraction.
            let cut = full.rfind('.').unwrap_or(full.len());
            self.prefix.clear();
            self.prefix.push_str(&full[..cut]);
            self.second = Some(second);
        }
        out.push_str(&self.prefix);
        // ".mmmZ" by hand: `write!` was a third of a log line's cost.
        let frac = ms.rem_euclid(1000);
        out.push('.');
        for d in [frac / 100, frac / 10 % 10, frac % 10] {
            out.push(char::from(b'0' + u8::try_from(d).unwrap_or(0)));
        }
        out.push('Z');
    }
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> Millis {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_writes_what_format_ts_writes() {
        let mut cache = TimestampCache::default();
        // Within one second, across a second, a minute, a day and a year boundary, and twice
        // the same second out of order (a clock step back).
        let samples: [Millis; 8] = [
            1_764_629_462_001,
            1_764_629_462_999,
            1_764_629_463_000,
            1_764_629_519_999,
            1_764_633_600_000,
            1_767_225_599_999,
            1_767_225_600_000,
            1_764_629_462_500,
        ];
        for ms in samples {
            let mut out = String::new();
            cache.write(&mut out, ms);
            assert_eq!(out, format_ts(ms), "{ms}");
        }
    }
}
