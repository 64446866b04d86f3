//! An upstream's tool result as the client gets it: sent on as JSON, unread, so every field
//! the upstream wrote reaches the client — annotations, `_meta`, `structuredContent`, content
//! types and keys staunch does not model — except what describes the upstream's own hop.

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;
use staunch_protocol::raw::RawObject;
use staunch_server::{CallToolResult, JsonToolResult, ToolError};

/// The result the upstream sent, as the client gets it: its text, every field it carried in
/// the order it wrote them, except what describes the upstream's hop rather than this one (its
/// `resultType`, which the server writes again for a 2026-07-28 client, and the protocol's
/// keys in `_meta`). Only the top level, and `_meta` when it is there, are read; a result
/// that names neither (a 2025-11-25 upstream's, nearly always) is passed on as it came.
pub(crate) fn forwarded_result(raw: Box<RawValue>) -> Result<JsonToolResult, ToolError> {
    // Either key in a string of the result only costs the edit below, which changes nothing.
    let text = raw.get();
    if !text.contains("\"resultType\"") && !text.contains(PROTOCOL_META_PREFIX) {
        return JsonToolResult::from_raw(raw)
            .ok_or_else(|| unreadable("not an object with a content array"));
    }
    let Some(mut result) = RawObject::parse(&raw) else {
        return Err(unreadable("not an object"));
    };
    if let Some(rt) = result.get("resultType") {
        match serde_json::from_str::<Cow<'_, str>>(rt.get()) {
            Ok(rt) if rt != "complete" => {
                return Ok(error_result(format!(
                    "the upstream answered with resultType {rt:?} (it asks for input or made a \
                     task), which staunch proxy does not bridge here"
                )));
            }
            _ => {}
        }
        result.remove("resultType");
    }
    // `Some(None)`: `_meta` held only the protocol's keys; `Some(Some(m))`: the rest of it.
    let meta = result
        .get("_meta")
        .and_then(RawObject::parse)
        .and_then(|mut meta| {
            let before = meta.len();
            meta.retain(|k| !k.starts_with(PROTOCOL_META_PREFIX));
            (meta.len() != before).then(|| (!meta.is_empty()).then(|| meta.to_raw()))
        });
    match meta {
        Some(Some(rest)) => result.set("_meta", Cow::Owned(rest)),
        Some(None) => {
            result.remove("_meta");
        }
        None => {}
    }
    JsonToolResult::from_object(&result).ok_or_else(|| unreadable("no content array"))
}

/// [`forwarded_result`] of a result read into a value already (a task's).
pub(crate) fn forwarded_value(v: Value) -> Result<Value, ToolError> {
    let raw = serde_json::value::to_raw_value(&v).map_err(|e| unreadable(&e.to_string()))?;
    forwarded_result(raw).map(|r| r.to_value())
}

/// An internal error for a result the proxy cannot pass on, saying `why`.
pub(crate) fn unreadable(why: &str) -> ToolError {
    ToolError::Internal(format!(
        "the upstream sent an unreadable tool result: {why}"
    ))
}

/// A tool execution error (`isError: true`).
pub(crate) fn error_result(message: String) -> JsonToolResult {
    JsonToolResult::from_result(&CallToolResult::error(message))
}

/// `_meta` keys the protocol reserves for each hop (`io.modelcontextprotocol/serverInfo`, …).
const PROTOCOL_META_PREFIX: &str = "io.modelcontextprotocol/";

/// The text of a tool result's content, for a job's error.
pub(crate) fn content_text(v: &Value) -> String {
    let texts: Vec<&str> = v["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect();
    if texts.is_empty() {
        "the upstream tool reported an error without text".into()
    } else {
        texts.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(v: &str) -> Box<RawValue> {
        RawValue::from_string(v.to_string()).unwrap()
    }

    #[test]
    fn a_forwarded_result_keeps_every_field_but_the_upstreams_hop() {
        let upstream = json!({
            "resultType": "complete",
            "content": [
                {"type": "text", "text": "hi", "annotations": {"audience": ["user"]},
                 "_meta": {"x.example/k": 1}},
                {"type": "x.example/hologram", "frames": [1, 2], "annotations": {"priority": 1}}
            ],
            "structuredContent": {"n": 1},
            "x.example/field": {"later": true},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up", "version": "1"},
                      "x.example/trace": "t1"}
        });
        let mut want = upstream.clone();
        want.as_object_mut().unwrap().remove("resultType");
        want["_meta"] = json!({"x.example/trace": "t1"});
        assert_eq!(forwarded_value(upstream).unwrap(), want);

        let only_hop =
            raw(r#"{"content": [], "_meta": {"io.modelcontextprotocol/serverInfo": {}}}"#);
        assert_eq!(
            forwarded_result(only_hop).unwrap().as_raw().get(),
            r#"{"content":[]}"#
        );
    }

    /// The upstream's text as it wrote it: its key order, and numbers a value tree would round
    /// or rewrite.
    #[test]
    fn a_forwarded_result_is_the_upstreams_text() {
        let text = r#"{"structuredContent":{"zeta":1,"alpha":[1e+21, 12345678901234567890123]},"content":[{"type":"text","text":"x"}],"isError":false}"#;
        let r = forwarded_result(raw(text)).unwrap();
        assert_eq!(r.as_raw().get(), text);
        assert!(!r.is_error());
        let failed = forwarded_result(raw(r#"{"content":[],"isError":true}"#)).unwrap();
        assert!(failed.is_error());

        // Only the hop's keys go; `_meta` keeps its place and the rest of its text.
        let hop = r#"{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{},"k":[1, 2]},"content":[],"z":1}"#;
        assert_eq!(
            forwarded_result(raw(hop)).unwrap().as_raw().get(),
            r#"{"_meta":{"k":[1, 2]},"content":[],"z":1}"#
        );
    }

    #[test]
    fn a_result_that_is_not_one_is_an_error_and_not_a_complete_one_is_said_so() {
        for bad in [r#"[]"#, r#"{"text": "no content"}"#, r#"{"content": "x"}"#] {
            let e = forwarded_result(raw(bad)).unwrap_err();
            assert!(
                e.to_string().contains("unreadable tool result"),
                "{bad}: {e}"
            );
        }
        let task = forwarded_result(raw(r#"{"resultType": "task", "task": {}}"#)).unwrap();
        assert!(task.is_error());
        let task = task.to_value();
        assert!(
            task["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("\"task\""),
            "{task}"
        );
    }
}
