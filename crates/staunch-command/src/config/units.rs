//! Durations (`"500ms"`, `"30s"`, `"10m"`, `"2h"`, or a number of seconds) and sizes
//! (`"64KiB"`, `"1MiB"`, `"1GB"`, or a number of bytes) as written in `staunch.toml`.

use std::time::Duration;

use serde::Deserialize;
use staunch_server::units::parse_duration;

/// A number or a string with a unit (`"30s"`, `"1MiB"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum NumOrText {
    Num(i64),
    Text(String),
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
