//! Protocol versions and their eras.
//!
//! Two eras share one server, decided per request:
//! - the **session era** (2025-03-26 … 2025-11-25): a client proposes a version in `initialize`;
//!   the server answers in that version when it supports it, otherwise in its latest session
//!   version, and the session keeps it;
//! - the **stateless era** (2026-07-28): no handshake; every request names its version in
//!   `_meta["io.modelcontextprotocol/protocolVersion"]` ([`crate::stateless`]).

/// Session-era versions this server speaks, oldest first (what `initialize` negotiates).
pub const SUPPORTED: &[&str] = &["2025-03-26", "2025-06-18", "2025-11-25"];

/// The newest session-era version.
pub const LATEST: &str = "2025-11-25";

/// Stateless-era versions this server speaks (what `server/discover` lists).
pub const STATELESS_SUPPORTED: &[&str] = &["2026-07-28"];

/// Session-era revisions a client may name (including ones older than this server speaks): a
/// request that names one of these in `MCP-Protocol-Version` and carries no per-request
/// `_meta` is session traffic.
pub const SESSION_ERA: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The version a Streamable HTTP request is assumed to speak when it carries no
/// `MCP-Protocol-Version` header and nothing else tells.
pub const HTTP_DEFAULT: &str = "2025-03-26";

/// The 2026-07-28 revision (stateless, `server/discover`).
pub const STATELESS: &str = "2026-07-28";

/// Picks the version to answer `initialize` with.
pub fn negotiate(requested: &str) -> &'static str {
    SUPPORTED
        .iter()
        .copied()
        .find(|v| *v == requested)
        .unwrap_or(LATEST)
}

/// `v` as it appears in [`SUPPORTED`], [`STATELESS_SUPPORTED`] or [`SESSION_ERA`], when it does
/// (a `'static` name for a version, so it need not be copied).
pub fn known(v: &str) -> Option<&'static str> {
    SUPPORTED
        .iter()
        .chain(STATELESS_SUPPORTED)
        .chain(SESSION_ERA)
        .copied()
        .find(|k| *k == v)
}

/// Whether `v` is a session-era version this server speaks.
pub fn is_supported(v: &str) -> bool {
    SUPPORTED.contains(&v)
}

/// Whether `v` is a stateless-era version this server speaks.
pub fn is_stateless_supported(v: &str) -> bool {
    STATELESS_SUPPORTED.contains(&v)
}

/// A choice of protocol as a user writes it (`--protocol`, `protocol = …`): `auto` (`None`:
/// let the client find the newest both sides speak) or a version served in either era. The
/// error names what is accepted.
pub fn parse_choice(s: &str) -> Result<Option<&'static str>, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    match SUPPORTED
        .iter()
        .chain(STATELESS_SUPPORTED)
        .find(|v| **v == s)
    {
        Some(v) => Ok(Some(v)),
        None => Err(format!(
            "unknown protocol {s:?}: use auto, {} or {}",
            SUPPORTED.join(", "),
            STATELESS_SUPPORTED.join(", ")
        )),
    }
}

/// Whether `v` names a session-era revision (served or not).
pub fn is_session_era(v: &str) -> bool {
    SESSION_ERA.contains(&v)
}

/// Whether a negotiated version is at least `min` (versions are ISO dates, so they sort as
/// strings).
pub fn at_least(v: &str, min: &str) -> bool {
    v >= min
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protocol_choice_is_auto_or_a_version_served() {
        assert_eq!(parse_choice(" Auto "), Ok(None));
        assert_eq!(parse_choice("2025-11-25"), Ok(Some("2025-11-25")));
        assert_eq!(parse_choice(STATELESS), Ok(Some(STATELESS)));
        // Named as a session-era revision, but not served.
        let why = parse_choice("2024-11-05").unwrap_err();
        assert!(why.contains("\"2024-11-05\"") && why.contains(LATEST) && why.contains(STATELESS));
        assert!(parse_choice("latest").is_err());
    }

    #[test]
    fn answers_in_the_clients_version_when_supported() {
        assert_eq!(negotiate("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2025-11-25"), "2025-11-25");
    }

    #[test]
    fn answers_latest_for_unknown_versions() {
        assert_eq!(negotiate("2024-11-05"), LATEST);
        assert_eq!(negotiate("2026-07-28"), LATEST);
        assert_eq!(negotiate("garbage"), LATEST);
    }
}
