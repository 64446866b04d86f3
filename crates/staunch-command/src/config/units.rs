//! Durations (`"500ms"`, `"30s"`, `"10m"`, `"2h"`, or a number of seconds) and sizes
//! (`"64KiB"`, `"1MiB"`, `"1GB"`, or a number of bytes) as written in `staunch.toml`.

use std::time::Duration;

use serde::Deserialize;

/// A number or a string with a unit (`"30s"`, `"1MiB"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum NumOrText {
    Num(i64),
    Text(String),
}

/// A duration written as text, on a command line or in `staunch.toml`: humantime's grammar
/// (`500ms`, `30s`, `10m`, `1h30m`, `7d`, `2h 15m`), or a bare number of seconds (`45`,
/// `1.5`). The one duration grammar of every staunch command and setting.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!("{t:?} is not a duration"));
        }
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{t:?}: {e}"));
    }
    // humantime's own message ("expected number at 0") says where its parser stopped, not
    // what to write.
    humantime::parse_duration(t)
        .map_err(|_| format!("{t:?} is not a duration; write e.g. 500ms, 30s, 10m, 1h30m or 7d"))
}

/// A duration given as a number of seconds or as text ([`parse_duration`]).
pub(crate) fn duration(v: &NumOrText) -> Result<Duration, String> {
    match v {
        NumOrText::Num(n) if *n >= 0 => Ok(Duration::from_secs(*n as u64)),
        NumOrText::Num(n) => Err(format!("{n} is negative; durations are like \"30s\"")),
        NumOrText::Text(s) => parse_duration(s),
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
        // One grammar for flags and the file: compound, days, bare and fractional seconds.
        assert_eq!(duration(&t("1h30m")), Ok(Duration::from_secs(5400)));
        assert_eq!(duration(&t("1d")), Ok(Duration::from_secs(86_400)));
        assert_eq!(duration(&t("7d")), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(duration(&t("45")), Ok(Duration::from_secs(45)));
        assert_eq!(duration(&t("1.5")), Ok(Duration::from_millis(1500)));
        assert!(duration(&t("-1")).is_err());
        assert!(duration(&t("-1s")).is_err());
        assert!(duration(&t("")).is_err());
        let said = duration(&t("soon")).unwrap_err();
        assert!(said.contains("1h30m"), "{said}");
        assert_eq!(size(&t("64KiB")), Ok(65536));
        assert_eq!(size(&t("1MB")), Ok(1_000_000));
        assert_eq!(size(&NumOrText::Num(10)), Ok(10));
        assert!(size(&t("lots")).is_err());
        assert!(size(&NumOrText::Num(-1)).is_err());
    }
}
