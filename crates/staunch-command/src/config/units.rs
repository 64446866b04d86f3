//! Durations (`"500ms"`, `"30s"`, `"10m"`, `"2h"`, or a number of seconds) and sizes
//! (`"64KiB"`, `"1MiB"`, `"1GB"`, or a number of bytes) as written in `staunch.toml`.

use std::time::Duration;

use super::raw::NumOrText;

/// A duration, or a message saying what is accepted.
/// A duration written as text on a command line: `500ms`, `30s`, `10m`, `2h`, or bare seconds —
/// the same grammar as in `staunch.toml`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    duration(&NumOrText::Text(text.to_string()))
}

pub(crate) fn duration(v: &NumOrText) -> Result<Duration, String> {
    match v {
        NumOrText::Num(n) if *n >= 0 => Ok(Duration::from_secs(*n as u64)),
        NumOrText::Num(n) => Err(format!("{n} is negative; durations are like \"30s\"")),
        NumOrText::Text(s) => {
            let t = s.trim();
            let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
                (n, 0.001)
            } else if let Some(n) = t.strip_suffix('s') {
                (n, 1.0)
            } else if let Some(n) = t.strip_suffix('m') {
                (n, 60.0)
            } else if let Some(n) = t.strip_suffix('h') {
                (n, 3600.0)
            } else {
                (t, 1.0)
            };
            let v: f64 = num.trim().parse().map_err(|_| {
                format!("{s:?} is not a duration (write \"500ms\", \"30s\", \"10m\" or \"2h\")")
            })?;
            if !v.is_finite() || v < 0.0 {
                return Err(format!("{s:?} is not a duration"));
            }
            Duration::try_from_secs_f64(v * scale).map_err(|e| format!("{s:?}: {e}"))
        }
    }
}

/// A size in bytes, or a message saying what is accepted.
pub(crate) fn size(v: &NumOrText) -> Result<u64, String> {
    match v {
        NumOrText::Num(n) if *n >= 0 => Ok(*n as u64),
        NumOrText::Num(n) => Err(format!("{n} is negative; sizes are like \"1MiB\"")),
        NumOrText::Text(s) => {
            let t = s.trim();
            let units: [(&str, u64); 8] = [
                ("KiB", 1 << 10),
                ("MiB", 1 << 20),
                ("GiB", 1 << 30),
                ("KB", 1000),
                ("MB", 1_000_000),
                ("GB", 1_000_000_000),
                ("K", 1 << 10),
                ("B", 1),
            ];
            let (num, scale) = units
                .iter()
                .find_map(|(u, m)| t.strip_suffix(u).map(|n| (n, *m)))
                .unwrap_or((t, 1));
            let n: u64 = num.trim().parse().map_err(|_| {
                format!("{s:?} is not a size (write a number of bytes, or \"64KiB\", \"1MiB\")")
            })?;
            n.checked_mul(scale)
                .ok_or_else(|| format!("{s:?} is too large"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> NumOrText {
        NumOrText::Text(s.into())
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(duration(&t("250ms")), Ok(Duration::from_millis(250)));
        assert_eq!(duration(&t("2m")), Ok(Duration::from_secs(120)));
        assert_eq!(duration(&NumOrText::Num(3)), Ok(Duration::from_secs(3)));
        assert!(duration(&t("soon")).is_err());
        assert_eq!(size(&t("64KiB")), Ok(65536));
        assert_eq!(size(&t("1MB")), Ok(1_000_000));
        assert_eq!(size(&NumOrText::Num(10)), Ok(10));
        assert!(size(&t("lots")).is_err());
        assert!(size(&NumOrText::Num(-1)).is_err());
    }
}
