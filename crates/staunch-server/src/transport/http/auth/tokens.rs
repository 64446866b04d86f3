//! Static bearer tokens (`--auth bearer`): each token names a principal and, optionally, the
//! scopes it carries.
//!
//! Only SHA-256 digests of the tokens are kept, and a presented token is compared against
//! every entry in constant time (`subtle`), so neither the memory of the process nor the time
//! a refusal takes says anything about a stored token. Tokens are never logged: errors name the
//! line of the file, not its content.
//!
//! The format (a file, or the `STAUNCH_AUTH_TOKENS` variable): one entry per line (or per `;`),
//! `TOKEN PRINCIPAL [SCOPE ...]`, separated by whitespace; blank lines and lines starting with
//! `#` are ignored.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{AuthError, Identity};

/// Shortest token accepted: shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;

#[derive(Clone)]
struct Entry {
    digest: [u8; 32],
    principal: String,
    scopes: Vec<String>,
}

/// The static tokens a server accepts.
#[derive(Clone)]
pub struct StaticTokens {
    entries: Vec<Entry>,
}

impl std::fmt::Debug for StaticTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The principals are not secret; the tokens are (and are not kept anyway).
        f.debug_struct("StaticTokens")
            .field("principals", &self.principals())
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl StaticTokens {
    /// Parses the token list (see the module docs). `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, AuthError> {
        let mut entries = Vec::new();
        for (n, line) in text.split(['\n', ';']).enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| AuthError::Config(format!("{source}: entry {}: {why}", n + 1));
            let mut fields = line.split_whitespace();
            let token = fields.next().unwrap_or_default();
            let Some(principal) = fields.next() else {
                return Err(bad("expected `TOKEN PRINCIPAL [SCOPE ...]`"));
            };
            if token.len() < MIN_TOKEN_LEN {
                return Err(bad(&format!(
                    "the token is shorter than {MIN_TOKEN_LEN} characters"
                )));
            }
            let d = digest(token);
            if entries.iter().any(|e: &Entry| e.digest == d) {
                return Err(bad("the same token appears twice"));
            }
            entries.push(Entry {
                digest: d,
                principal: principal.to_string(),
                scopes: fields.map(String::from).collect(),
            });
        }
        if entries.is_empty() {
            return Err(AuthError::Config(format!("{source}: no tokens")));
        }
        Ok(Self { entries })
    }

    /// The principals named, in order (for logs and diagnostics).
    pub fn principals(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.principal.as_str()).collect()
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none (never true for a parsed list).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The identity a presented token stands for. Every entry is compared, whatever matches.
    pub(crate) fn verify(&self, token: &str) -> Option<Identity> {
        let presented = digest(token);
        let mut found = None;
        for e in &self.entries {
            if bool::from(e.digest.ct_eq(&presented)) {
                found = Some(e);
            }
        }
        found.map(|e| Identity {
            principal: e.principal.clone(),
            scopes: e.scopes.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_and_finds_tokens() {
        let t = StaticTokens::parse(
            "# comment\n0123456789abcdef alice tools:write jobs\n\nfedcba9876543210 bob",
            "test",
        )
        .unwrap();
        assert_eq!(t.principals(), ["alice", "bob"]);
        let a = t.verify("0123456789abcdef").unwrap();
        assert_eq!(a.principal, "alice");
        assert_eq!(a.scopes, ["tools:write", "jobs"]);
        assert_eq!(t.verify("fedcba9876543210").unwrap().principal, "bob");
        assert!(t.verify("0123456789abcdeF").is_none());
        assert!(t.verify("").is_none());
    }

    #[test]
    fn semicolons_separate_entries_from_the_environment() {
        let t = StaticTokens::parse("aaaaaaaaaaaaaaaa alice; bbbbbbbbbbbbbbbb bob", "env").unwrap();
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn refuses_short_duplicate_and_incomplete_entries_without_echoing_them() {
        let short = StaticTokens::parse("secret alice", "f")
            .unwrap_err()
            .to_string();
        assert!(short.contains("shorter than 16"), "{short}");
        assert!(!short.contains("secret"), "{short}");
        let dup = StaticTokens::parse("aaaaaaaaaaaaaaaa a\naaaaaaaaaaaaaaaa b", "f")
            .unwrap_err()
            .to_string();
        assert!(dup.contains("entry 2") && dup.contains("twice"), "{dup}");
        let lone = StaticTokens::parse("aaaaaaaaaaaaaaaa", "f")
            .unwrap_err()
            .to_string();
        assert!(!lone.contains("aaaa"), "{lone}");
        assert!(StaticTokens::parse("# nothing\n", "f").is_err());
    }
}
