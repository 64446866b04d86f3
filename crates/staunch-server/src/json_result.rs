//! [`JsonToolResult`]: a tool result held as the JSON text a handler got it as, written into
//! the response as it is.
//!
//! A proxy's tool answers with its upstream's result. As text it reaches the client with every
//! key, in the order the upstream wrote them, and every number as written (an integer beyond
//! 64 bits stays exact); it is neither read into a value tree nor written out of one.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use staunch_protocol::mcp::CallToolResult;
use staunch_protocol::raw::{RawObject, to_value};

/// A tool result (`{"content": […], …}`) as JSON text.
#[derive(Debug, Clone)]
pub struct JsonToolResult {
    text: Box<RawValue>,
    is_error: bool,
}

impl JsonToolResult {
    /// The object `obj` as a tool result; `None` when it has no `content` array.
    pub fn from_object(obj: &RawObject<'_>) -> Option<Self> {
        let is_error = is_error_of(obj)?;
        Some(Self {
            text: obj.to_raw(),
            is_error,
        })
    }

    /// The JSON text `text` as a tool result, kept as it is; `None` when it is not an object
    /// with a `content` array.
    pub fn from_raw(text: Box<RawValue>) -> Option<Self> {
        let is_error = match serde_json::from_str::<Peek<'_>>(text.get()) {
            Ok(peek) => peek.is_error()?,
            // Not an object, or a key written twice (the last one counts, as `RawObject`
            // reads it).
            Err(_) => is_error_of(&RawObject::parse(&text)?)?,
        };
        Some(Self { text, is_error })
    }

    /// A typed result, serialised.
    pub fn from_result(r: &CallToolResult) -> Self {
        Self {
            text: serde_json::value::to_raw_value(r).unwrap_or_default(),
            is_error: r.is_error == Some(true),
        }
    }

    /// Whether it reports a tool execution error (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// The text.
    pub fn as_raw(&self) -> &RawValue {
        &self.text
    }

    /// The result as a value.
    pub fn to_value(&self) -> Value {
        to_value(&self.text)
    }
}

/// The two keys a tool result is read for, found in one pass that keeps nothing else.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(rename = "isError", borrow, default)]
    is_error: Option<&'a RawValue>,
}

impl Peek<'_> {
    /// As [`is_error_of`].
    fn is_error(&self) -> Option<bool> {
        let content = self.content?;
        content
            .get()
            .starts_with('[')
            .then(|| self.is_error.is_some_and(|v| v.get() == "true"))
    }
}

/// `None` when `obj` is no tool result (it has no `content` array); else whether it reports a
/// tool execution error.
fn is_error_of(obj: &RawObject<'_>) -> Option<bool> {
    let content = obj.get("content")?;
    content
        .get()
        .starts_with('[')
        .then(|| obj.get("isError").is_some_and(|v| v.get() == "true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn a_result_is_kept_as_written_and_read_for_is_error() {
        let text = r#"{"zeta":1,"content":[{"type":"text","text":"x"}],"n":123456789012345678901234567890,"isError":true}"#;
        let r = JsonToolResult::from_raw(raw(text)).unwrap();
        assert_eq!(r.as_raw().get(), text);
        assert!(r.is_error());
        let ok = JsonToolResult::from_raw(raw(r#"{"content":[],"isError":false}"#)).unwrap();
        assert!(!ok.is_error());
        // A key written twice: the last one counts.
        let twice =
            JsonToolResult::from_raw(raw(r#"{"content":[],"isError":true,"isError":false}"#));
        assert!(!twice.unwrap().is_error());
        let twice = JsonToolResult::from_raw(raw(r#"{"content":[],"content":null}"#));
        assert!(twice.is_none());
        for bad in [
            r#"{"content":"x"}"#,
            r#"{"content":null}"#,
            r#"{"text":"y"}"#,
            "[]",
            "1",
        ] {
            assert!(JsonToolResult::from_raw(raw(bad)).is_none(), "{bad}");
        }
        let typed = JsonToolResult::from_result(&CallToolResult::error("no"));
        assert!(typed.is_error());
        assert_eq!(typed.to_value()["content"][0]["text"], "no");
    }
}
