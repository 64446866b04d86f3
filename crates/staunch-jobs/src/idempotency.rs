//! Idempotency: where a key comes from, and the fingerprint of a call's arguments.
//!
//! Rules (jobs.md §1): the key is scoped to `(owner scope, tool, key)` (see `scope.rs`: the
//! principal, else the HTTP session, else whoever holds the id); the fingerprint is the
//! SHA-256 of the canonical JSON of the *normalised* arguments (decoded into the tool's type
//! and encoded again, so `{"a":1}` and `{"a":1,"b":null}` agree when `b` is optional); the same
//! key with the same fingerprint returns the existing job whatever its state, with another
//! fingerprint it is refused. A retried `tools/call` has a new JSON-RPC id, so the key comes
//! from the arguments (`idempotency_key`) or from request `_meta` ([`META_KEY`]), never from
//! the request id.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use staunch_store::MAX_IDEM_KEY_CHARS;

use crate::error::JobRuntimeError;

/// The argument of `start_<tool>` (and `<tool>`) that carries the key.
pub const ARG_KEY: &str = "idempotency_key";

/// The vendor-prefixed request `_meta` key that carries the key, for clients that keep it out
/// of the arguments.
pub const META_KEY: &str = "io.staunch/idempotency-key";

/// Takes the key out of the arguments (so it is not part of the fingerprint) and reconciles it
/// with one in `_meta`. Two different keys are an error; either alone is fine.
pub(crate) fn take_key(
    args: &mut Map<String, Value>,
    meta: Option<&Value>,
) -> Result<Option<String>, JobRuntimeError> {
    let from_args = match args.remove(ARG_KEY) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(JobRuntimeError::InvalidKey(format!(
                "`{ARG_KEY}` must be a string"
            )));
        }
    };
    let from_meta = match meta.and_then(|m| m.get(META_KEY)) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(JobRuntimeError::InvalidKey(format!(
                "_meta[\"{META_KEY}\"] must be a string"
            )));
        }
    };
    let key = match (from_args, from_meta) {
        (Some(a), Some(m)) if a != m => {
            return Err(JobRuntimeError::InvalidKey(format!(
                "`{ARG_KEY}` and _meta[\"{META_KEY}\"] differ; send one key"
            )));
        }
        (a, m) => a.or(m),
    };
    if let Some(k) = &key {
        check_key(k)?;
    }
    Ok(key)
}

/// A usable key: not blank, at most [`MAX_IDEM_KEY_CHARS`] characters.
pub(crate) fn check_key(key: &str) -> Result<(), JobRuntimeError> {
    if key.trim().is_empty() {
        return Err(JobRuntimeError::InvalidKey("the key is empty".into()));
    }
    if key.chars().count() > MAX_IDEM_KEY_CHARS {
        return Err(JobRuntimeError::InvalidKey(format!(
            "the key is longer than {MAX_IDEM_KEY_CHARS} characters"
        )));
    }
    Ok(())
}

/// JSON with object keys sorted at every level and no insignificant whitespace. Written out
/// by hand rather than trusting `serde_json::Map`'s order, which a `preserve_order` feature
/// anywhere in the build would change — and fingerprints are stored durably.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// SHA-256 of the canonical JSON, as 64 lowercase hex digits.
pub fn fingerprint(canonical: &str) -> String {
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a = json!({"b": 1, "a": {"d": [1, {"z": 0, "y": "x"}], "c": null}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"d":[1,{"y":"x","z":0}]},"b":1}"#
        );
        let b = json!({"a": {"c": null, "d": [1, {"y": "x", "z": 0}]}, "b": 1});
        assert_eq!(
            fingerprint(&canonical_json(&a)),
            fingerprint(&canonical_json(&b))
        );
    }

    #[test]
    fn the_key_comes_from_the_arguments_or_meta_and_leaves_the_arguments() {
        let mut args = json!({"rows": 3, "idempotency_key": "k1"})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(take_key(&mut args, None).unwrap().as_deref(), Some("k1"));
        assert!(!args.contains_key(ARG_KEY));

        let mut args = Map::new();
        let meta = json!({META_KEY: "k2", "progressToken": 1});
        assert_eq!(
            take_key(&mut args, Some(&meta)).unwrap().as_deref(),
            Some("k2")
        );

        let mut args = json!({"idempotency_key": "k1"})
            .as_object()
            .unwrap()
            .clone();
        assert!(matches!(
            take_key(&mut args, Some(&meta)),
            Err(JobRuntimeError::InvalidKey(_))
        ));
        let mut args = json!({"idempotency_key": "  "})
            .as_object()
            .unwrap()
            .clone();
        assert!(take_key(&mut args, None).is_err());
        let long = "x".repeat(MAX_IDEM_KEY_CHARS + 1);
        let mut args = json!({"idempotency_key": long})
            .as_object()
            .unwrap()
            .clone();
        assert!(take_key(&mut args, None).is_err());
        let mut args = json!({"idempotency_key": 7}).as_object().unwrap().clone();
        assert!(take_key(&mut args, None).is_err());
    }
}
