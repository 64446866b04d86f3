//! Session ids are credentials (without auth, holding one is being that client), so logs name
//! a session by a short hash of its id instead: enough to group a session's lines (`staunch
//! audit` groups by the value) and to find them given the id, useless for taking the session
//! over.

use sha2::{Digest, Sha256};

/// Hex digits of the hash that logs show.
const SHOWN_HEX: usize = 12;

/// How logs name the session `id`: the first 12 hex digits of its SHA-256.
pub fn session_hash(id: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(id.as_bytes());
    let mut out = String::with_capacity(SHOWN_HEX);
    for b in digest.iter().take(SHOWN_HEX / 2) {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// The owner key work is stored under (the jobs' `principal` column): the principal when the
/// request was authenticated, else `session:` and 32 hex digits of the SHA-256 of the 2025
/// session that made it, else `""` (stateless requests and stdio: whoever holds the id).
/// `staunch-jobs` binds jobs and tasks with it; `subscriptions/listen` uses it to send a task's
/// notifications only to its owner.
pub fn owner_key(principal: Option<&str>, owning_session: Option<&str>) -> String {
    match (principal.filter(|p| !p.is_empty()), owning_session) {
        (Some(p), _) => p.to_string(),
        (None, Some(s)) if !s.is_empty() => {
            let digest = Sha256::digest(s.as_bytes());
            let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
            format!("session:{hex}")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_hash_is_short_stable_and_not_the_id() {
        let id = "0123456789abcdef0123456789abcdef";
        let h = session_hash(id);
        assert_eq!(h.len(), SHOWN_HEX);
        assert_eq!(h, session_hash(id));
        assert_ne!(h, session_hash("0123456789abcdef0123456789abcdee"));
        assert!(!id.contains(&h));
        // SHA-256("abc") starts with ba7816bf8f01.
        assert_eq!(session_hash("abc"), "ba7816bf8f01");
    }
}
