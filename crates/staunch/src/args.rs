//! Parsing of the small values the client commands take: durations, tool arguments, headers.

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};

/// A duration flag: `250ms`, `30s`, `1h30m`, `7d`, or bare seconds — the grammar of
/// `staunch.toml` too (one definition, with the server's flags).
pub use staunch_server::units::parse_duration;

/// Tool arguments: one JSON object, or `key=value` pairs whose values are read as JSON when
/// they parse (`steps=5` is a number, `flag=true` a boolean) and as strings otherwise.
pub fn parse_tool_args(words: &[String]) -> anyhow::Result<Value> {
    if let [one] = words
        && one.trim_start().starts_with('{')
    {
        let v: Value = serde_json::from_str(one).context("arguments are not valid JSON")?;
        if !v.is_object() {
            bail!("arguments must be a JSON object");
        }
        return Ok(v);
    }
    let mut map = Map::new();
    for w in words {
        let Some((k, v)) = w.split_once('=') else {
            bail!("argument {w:?} is neither key=value nor a JSON object");
        };
        if k.is_empty() {
            bail!("argument {w:?} has an empty key");
        }
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
        map.insert(k.to_string(), value);
    }
    Ok(Value::Object(map))
}

/// `KEY=JSON`: the answer to one input request.
pub fn parse_input(s: &str) -> Result<(String, Value), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not KEY=JSON"))?;
    if k.is_empty() {
        return Err(format!("{s:?} has an empty key"));
    }
    let v: Value =
        serde_json::from_str(v).map_err(|e| format!("the answer to {k:?} is not JSON: {e}"))?;
    Ok((k.to_string(), v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_args() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_tool_args(&w(&["steps=5", "name=bob", "on=true", "l=[1]"])).unwrap(),
            json!({"steps":5,"name":"bob","on":true,"l":[1]})
        );
        assert_eq!(
            parse_tool_args(&w(&[r#"{"a":{"b":1}}"#])).unwrap(),
            json!({"a":{"b":1}})
        );
        assert_eq!(parse_tool_args(&[]).unwrap(), json!({}));
        assert!(parse_tool_args(&w(&["nope"])).is_err());
        assert!(parse_tool_args(&w(&["[1]"])).is_err());
    }

    #[test]
    fn inputs() {
        assert_eq!(
            parse_input(r#"name={"action":"decline"}"#).unwrap(),
            ("name".to_string(), json!({"action": "decline"}))
        );
        assert!(parse_input("name=nope").is_err());
        assert!(parse_input("=1").is_err());
    }
}
