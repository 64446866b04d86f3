//! Reading a `tools/call` result without assuming more than the spec promises.

use serde_json::Value;

/// Whether the result is a tool execution error (`isError: true`).
pub fn is_tool_error(result: &Value) -> bool {
    result["isError"].as_bool().unwrap_or(false)
}

/// The text items of `content`, joined with newlines; other item kinds are summarised.
pub fn text_of(result: &Value) -> String {
    let Some(items) = result["content"].as_array() else {
        return String::new();
    };
    items
        .iter()
        .map(|c| match c["type"].as_str() {
            Some("text") => c["text"].as_str().unwrap_or("").to_string(),
            Some(kind @ ("image" | "audio")) => format!(
                "[{kind} {}]",
                c["mimeType"].as_str().unwrap_or("application/octet-stream")
            ),
            Some("resource") => {
                format!("[resource {}]", c["resource"]["uri"].as_str().unwrap_or(""))
            }
            Some("resource_link") => format!("[link {}]", c["uri"].as_str().unwrap_or("")),
            _ => c.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The result's machine-readable payload: `structuredContent` when it is an object, else the
/// first text item parsed as a JSON object (servers that mirror JSON into text).
pub fn payload(result: &Value) -> Option<Value> {
    if let Some(s) = result.get("structuredContent").filter(|s| s.is_object()) {
        return Some(s.clone());
    }
    result["content"]
        .as_array()?
        .iter()
        .filter_map(|c| c["text"].as_str())
        .find_map(|t| {
            serde_json::from_str::<Value>(t)
                .ok()
                .filter(Value::is_object)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn payload_prefers_structured_content_then_text_json() {
        let r = json!({"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"b":2}});
        assert_eq!(payload(&r), Some(json!({"b":2})));
        let r =
            json!({"content":[{"type":"text","text":"hello"},{"type":"text","text":"{\"a\":1}"}]});
        assert_eq!(payload(&r), Some(json!({"a":1})));
        assert_eq!(payload(&json!({"content":[]})), None);
    }

    #[test]
    fn text_and_error_flags() {
        let r = json!({"content":[{"type":"text","text":"a"},{"type":"image","data":"","mimeType":"image/png"}],"isError":true});
        assert_eq!(text_of(&r), "a\n[image image/png]");
        assert!(is_tool_error(&r));
        assert!(!is_tool_error(&json!({"content":[]})));
    }
}
