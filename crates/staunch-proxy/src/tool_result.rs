//! An upstream's tool result as the client gets it: sent on as JSON, unread, so every field
//! the upstream wrote reaches the client — annotations, `_meta`, `structuredContent`, content
//! types and keys staunch does not model — except what describes the upstream's own hop.

use serde_json::Value;
use staunch_server::{CallToolResult, ToolError};

/// The result the upstream sent, as the client gets it: every field it carried, except what
/// describes the upstream's hop rather than this one (its `resultType`, which the server
/// writes again for a 2026-07-28 client, and the protocol's keys in `_meta`).
pub(crate) fn forwarded_result(v: Value) -> Result<Value, ToolError> {
    let Value::Object(mut result) = v else {
        return Err(unreadable("not an object"));
    };
    match result.remove("resultType") {
        Some(Value::String(rt)) if rt != "complete" => {
            return Ok(error_value(format!(
                "the upstream answered with resultType {rt:?} (it asks for input or made a \
                 task), which staunch proxy does not bridge here"
            )));
        }
        _ => {}
    }
    if !result.get("content").is_some_and(Value::is_array) {
        return Err(unreadable("no content array"));
    }
    if let Some(Value::Object(meta)) = result.get_mut("_meta") {
        meta.retain(|k, _| !k.starts_with(PROTOCOL_META_PREFIX));
        if meta.is_empty() {
            result.remove("_meta");
        }
    }
    Ok(Value::Object(result))
}

/// An internal error for a result the proxy cannot pass on, saying `why`.
pub(crate) fn unreadable(why: &str) -> ToolError {
    ToolError::Internal(format!(
        "the upstream sent an unreadable tool result: {why}"
    ))
}

/// A tool execution error (`isError: true`) as JSON.
pub(crate) fn error_value(message: String) -> Value {
    serde_json::to_value(CallToolResult::error(message)).unwrap_or_default()
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
        assert_eq!(forwarded_result(upstream).unwrap(), want);

        let only_hop = json!({"content": [], "_meta": {"io.modelcontextprotocol/serverInfo": {}}});
        assert_eq!(forwarded_result(only_hop).unwrap(), json!({"content": []}));
    }

    #[test]
    fn a_result_that_is_not_one_is_an_error_and_not_a_complete_one_is_said_so() {
        for bad in [
            json!([]),
            json!({"text": "no content"}),
            json!({"content": "x"}),
        ] {
            let e = forwarded_result(bad.clone()).unwrap_err();
            assert!(
                e.to_string().contains("unreadable tool result"),
                "{bad}: {e}"
            );
        }
        let task = forwarded_result(json!({"resultType": "task", "task": {}})).unwrap();
        assert_eq!(task["isError"], true, "{task}");
        assert!(
            task["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("\"task\""),
            "{task}"
        );
    }
}
