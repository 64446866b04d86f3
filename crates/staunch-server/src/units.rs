//! The one duration grammar of staunch's flags and of `staunch.toml`: humantime's (`500ms`,
//! `30s`, `10m`, `1h30m`, `7d`, `2h 15m`), or a bare number of seconds (`45`, `1.5`).

use std::time::Duration;

/// A duration written as text, on a command line or in `staunch.toml`.
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

/// `d` in that grammar (`10m`, `1h 30m`, `250ms`), as a default's help shows it.
pub fn format_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_seconds_and_text_is_humantime() {
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration(" 1h30m "), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("NaN").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("1h30m"));
    }

    #[test]
    fn a_formatted_duration_parses_back() {
        for d in [
            Duration::from_secs(600),
            Duration::from_millis(1500),
            Duration::from_secs(5400),
        ] {
            assert_eq!(
                parse_duration(&format_duration(d)),
                Ok(d),
                "{}",
                format_duration(d)
            );
        }
        assert_eq!(format_duration(Duration::from_secs(600)), "10m");
    }
}
