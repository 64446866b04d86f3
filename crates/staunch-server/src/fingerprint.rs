//! A call's argument fingerprint: the first 16 hex digits of SHA-256 of its canonical JSON.
//!
//! The lifecycle log writes it on every tool call (`staunch audit` groups retries by it) and a
//! stateless call's input rounds bind their sealed state to it. It is held inline — sixteen
//! ASCII bytes, `Copy` — so the log and the binding each get it without an allocation.

use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The fingerprint of one set of arguments.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Fingerprint([u8; 16]);

impl Fingerprint {
    /// The fingerprint of `args` (keys sorted: serde_json's map is ordered), serialised
    /// straight into the hash: the same bytes as `args.to_string()`, no string built.
    pub(crate) fn of(args: &Value) -> Self {
        let mut hasher = HashWriter(Sha256::new());
        let _ = serde_json::to_writer(&mut hasher, args);
        let digest = hasher.0.finalize();
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 16];
        for (i, b) in digest[..8].iter().enumerate() {
            out[2 * i] = HEX[usize::from(b >> 4)];
            out[2 * i + 1] = HEX[usize::from(b & 0xf)];
        }
        Fingerprint(out)
    }

    /// The sixteen hex digits.
    pub(crate) fn as_str(&self) -> &str {
        // Hex digits only, so always UTF-8; the fallback is never taken.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Feeds what is written into a SHA-256.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The streamed hash is the hash of the canonical text (sorted keys, no spaces), as
    /// `staunch audit` and the input-rounds binding have always read it.
    #[test]
    fn the_fingerprint_hashes_the_canonical_text() {
        let args = json!({"b": 1, "a": "x\"y", "n": [1.5, null, {"z": true}]});
        let text = r#"{"a":"x\"y","b":1,"n":[1.5,null,{"z":true}]}"#;
        assert_eq!(args.to_string(), text);
        let digest = Sha256::digest(text.as_bytes());
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(Fingerprint::of(&args).as_str(), hex);
        assert_eq!(format!("{:?}", Fingerprint::of(&args)), hex);
        assert_ne!(Fingerprint::of(&json!({})), Fingerprint::of(&Value::Null));
    }
}
