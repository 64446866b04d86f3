//! The progress protocol: a command reports progress by writing lines such as
//!
//! ```text
//! staunch-progress: {"progress": 3, "total": 10, "message": "page 3 of 10"}
//! ```
//!
//! to its standard error. `progress` is required and should increase; `total` and `message`
//! are optional. These lines go to the client (as `notifications/progress`, under the usual
//! rate rules) or to the job's stored progress, and are left out of the stderr tail. Any other
//! line is ordinary stderr.

use serde::Deserialize;

/// The prefix of a progress line.
pub const PREFIX: &str = "staunch-progress: ";

/// One progress report.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Report {
    /// Work done so far; should increase from one report to the next.
    pub progress: f64,
    /// Work in all, when known.
    #[serde(default)]
    pub total: Option<f64>,
    /// A short line saying what is happening.
    #[serde(default)]
    pub message: Option<String>,
}

/// What a stderr line is.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A well-formed report.
    Progress(Report),
    /// A line with the prefix that does not parse: kept in the tail so the author sees it.
    Malformed,
    /// An ordinary stderr line.
    Other,
}

/// Reads one line (without its newline).
pub fn classify(line: &[u8]) -> Line {
    let Some(rest) = line.strip_prefix(PREFIX.as_bytes()) else {
        return Line::Other;
    };
    match serde_json::from_slice::<Report>(rest) {
        Ok(r) if r.progress.is_finite() && r.total.is_none_or(f64::is_finite) => Line::Progress(r),
        _ => Line::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_classified() {
        assert_eq!(
            classify(br#"staunch-progress: {"progress": 3, "total": 10, "message": "m"}"#),
            Line::Progress(Report {
                progress: 3.0,
                total: Some(10.0),
                message: Some("m".into())
            })
        );
        assert_eq!(
            classify(br#"staunch-progress: {"progress": 1}"#),
            Line::Progress(Report {
                progress: 1.0,
                total: None,
                message: None
            })
        );
        assert_eq!(classify(b"staunch-progress: {oops"), Line::Malformed);
        assert_eq!(
            classify(br#"staunch-progress: {"total": 3}"#),
            Line::Malformed
        );
        assert_eq!(classify(b"warning: disk almost full"), Line::Other);
    }
}
