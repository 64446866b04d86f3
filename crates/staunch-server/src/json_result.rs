//! [`JsonToolResult`]: a tool result held as the JSON text a handler got it as, written into
//! the response as it is.
//!
//! A proxy's tool answers with its upstream's result. As text it reaches the client with every
//! key, in the order the upstream wrote them, and every number as written (an integer beyond
//! 64 bits stays exact); it is neither read into a value tree nor written out of one.

use std::borrow::Cow;

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
        let is_error = is_error_of(&RawObject::parse(&text)?)?;
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

    /// The result with what the stateless era adds to every result it did not set itself:
    /// `resultType` and `_meta`'s `serverInfo` (`server_info`). Only the top level, and
    /// `_meta` when it is there, are read.
    pub(crate) fn finished_for_stateless(&self, server_info: &RawValue) -> Box<RawValue> {
        let Some(mut obj) = RawObject::parse(&self.text) else {
            return self.text.clone();
        };
        if obj.get(RESULT_TYPE).is_none() {
            obj.set(RESULT_TYPE, Cow::Borrowed(&**COMPLETE));
        }
        let meta = match obj.get(META).and_then(RawObject::parse) {
            Some(meta) if meta.get(SERVER_INFO).is_some() => None,
            Some(mut meta) => {
                meta.set(SERVER_INFO, Cow::Borrowed(server_info));
                Some(meta.to_raw())
            }
            None => {
                let mut meta = RawObject::default();
                meta.set(SERVER_INFO, Cow::Borrowed(server_info));
                Some(meta.to_raw())
            }
        };
        if let Some(meta) = meta {
            obj.set(META, Cow::Owned(meta));
        }
        obj.to_raw()
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

const RESULT_TYPE: &str = "resultType";
const META: &str = "_meta";
const SERVER_INFO: &str = staunch_protocol::stateless::keys::SERVER_INFO;
/// `"complete"`, as JSON.
static COMPLETE: std::sync::LazyLock<Box<RawValue>> = std::sync::LazyLock::new(|| {
    serde_json::value::to_raw_value(staunch_protocol::stateless::result_type::COMPLETE)
        .unwrap_or_default()
});

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        for bad in [r#"{"content":"x"}"#, r#"{"text":"y"}"#, "[]", "1"] {
            assert!(JsonToolResult::from_raw(raw(bad)).is_none(), "{bad}");
        }
        let typed = JsonToolResult::from_result(&CallToolResult::error("no"));
        assert!(typed.is_error());
        assert_eq!(typed.to_value()["content"][0]["text"], "no");
    }

    #[test]
    fn the_stateless_era_adds_its_keys_and_keeps_the_handlers() {
        let info = raw(r#"{"name":"s","version":"1"}"#);
        let plain = JsonToolResult::from_raw(raw(r#"{"content":[],"b":1}"#)).unwrap();
        assert_eq!(
            plain.finished_for_stateless(&info).get(),
            r#"{"content":[],"b":1,"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#
        );
        let own_meta =
            JsonToolResult::from_raw(raw(r#"{"content":[],"_meta":{"x.example/t":"t1"}}"#))
                .unwrap();
        let finished = to_value(&own_meta.finished_for_stateless(&info));
        assert_eq!(
            finished,
            json!({"content": [], "resultType": "complete", "_meta": {
                "x.example/t": "t1",
                "io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}})
        );
        let all_set = r#"{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}"#;
        let r = JsonToolResult::from_raw(raw(all_set)).unwrap();
        assert_eq!(r.finished_for_stateless(&info).get(), all_set);
    }
}
