//! The stateless era (2026-07-28): a request's own `_meta`, the methods the era removed, and
//! how its answers are finished.
//!
//! A result gets `resultType` (`complete` unless the handler set one), the server's identity
//! in `_meta["io.modelcontextprotocol/serverInfo"]` and, for cacheable methods,
//! `ttlMs`/`cacheScope` (SEP-2549) unless the handler set them; "resource not found" is -32602
//! (SEP-2164) where it was -32002 before.

use std::borrow::Cow;
use std::sync::LazyLock;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use staunch_protocol::mcp::{CallToolResult, methods};
pub use staunch_protocol::stateless::TASKS_EXTENSION;
use staunch_protocol::stateless::{
    REMOVED_METHODS, RequestMeta, has_stateless_meta, keys, result_type,
};
use staunch_protocol::{ErrorObject, Request, RequestId, codes, result_response_bytes, version};

use super::AnswerKeys;
use crate::error::ToolError;
use crate::json_result::JsonToolResult;
use staunch_protocol::raw::RawObject;

/// Whether `client_capabilities` (a request's, or a session's) declare the tasks extension.
pub fn declares_tasks(client_capabilities: &Value) -> bool {
    client_capabilities
        .get("extensions")
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some()
}

/// -32021 for a request about tasks from a client that did not declare the tasks extension.
pub fn missing_tasks_extension() -> staunch_protocol::ErrorObject {
    staunch_protocol::ErrorObject::new(
        staunch_protocol::codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!(
            "this request needs the {TASKS_EXTENSION} extension: declare it in \
             _meta[\"{}\"].extensions",
            keys::CLIENT_CAPABILITIES
        ),
    )
    .with_data(serde_json::json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}))
}

/// Methods of the session era's tasks that the tasks extension removed (the result is inlined
/// in `tasks/get`; there is no listing).
const TASKS_REMOVED: &[&str] = &["tasks/result", "tasks/list"];

/// The request's own `_meta`, taken out of its params, when it names a protocol version;
/// an error when it does so wrongly (a version not served, a key missing).
pub(super) fn read_meta(req: &mut Request) -> Result<Option<RequestMeta>, ErrorObject> {
    if !has_stateless_meta(req.params.as_ref()) {
        return Ok(None);
    }
    let meta = RequestMeta::take_from(&mut req.params)?;
    meta.check_version()?;
    Ok(Some(meta))
}

/// The session era's methods this era removed, and the tasks methods its extension removed.
pub(super) fn admits(method: &str) -> Result<(), ErrorObject> {
    if REMOVED_METHODS.contains(&method) {
        return Err(ErrorObject::new(
            codes::METHOD_NOT_FOUND,
            format!(
                "method not found: {method} was removed in protocol {} (stateless requests need \
                 no initialize, ping or logging/setLevel; use subscriptions/listen for updates)",
                version::STATELESS
            ),
        ));
    }
    if TASKS_REMOVED.contains(&method) {
        return Err(ErrorObject::new(
            codes::METHOD_NOT_FOUND,
            format!(
                "method not found: {method} does not exist in the {TASKS_EXTENSION} extension \
                 (tasks/get inlines the result)"
            ),
        ));
    }
    Ok(())
}

/// This era's own methods, refused in a session: `server/discover` with a hint at what a
/// stateless request sends, `subscriptions/listen` as unknown.
pub(super) fn admits_in_a_session(method: &str) -> Result<(), ErrorObject> {
    match method {
        methods::SERVER_DISCOVER => Err(ErrorObject::invalid_params(format!(
            "server/discover is a {} request: send it with _meta[\"{}\"] and _meta[\"{}\"] (or \
             send initialize for a session)",
            version::STATELESS,
            keys::PROTOCOL_VERSION,
            keys::CLIENT_CAPABILITIES
        ))),
        methods::SUBSCRIPTIONS_LISTEN => Err(ErrorObject::method_not_found(method)),
        _ => Ok(()),
    }
}

/// The `server/discover` result: versions, capabilities (with `extensions`, the extensions
/// this era's requests can declare), instructions.
pub(crate) fn discover(
    capabilities: &Map<String, Value>,
    extensions: &Map<String, Value>,
    instructions: Option<&str>,
) -> Value {
    let mut caps = capabilities.clone();
    // The session era's tasks capability is negotiated at initialize; it is never advertised
    // next to this era's (the tasks extension lives under `extensions`).
    caps.remove("tasks");
    if !extensions.is_empty() {
        let ext = caps
            .entry("extensions")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(ext) = ext {
            ext.extend(extensions.clone());
        }
    }
    let mut out = Map::new();
    out.insert(
        "supportedVersions".into(),
        json!(version::STATELESS_SUPPORTED),
    );
    out.insert("capabilities".into(), Value::Object(caps));
    if let Some(i) = instructions {
        out.insert("instructions".into(), i.into());
    }
    out.insert("resultType".into(), result_type::COMPLETE.into());
    Value::Object(out)
}

/// Methods whose results carry caching hints, with the server's default hint.
fn cache_hint(keys: &AnswerKeys, method: &str) -> Option<(u64, &'static str)> {
    match method {
        "tools/list"
        | "prompts/list"
        | "resources/list"
        | "resources/templates/list"
        | "server/discover" => Some((keys.list_ttl_ms, "public")),
        // Contents may change at any time and may depend on who asks.
        "resources/read" => Some((0, "private")),
        _ => None,
    }
}

/// A tool result's response. A result without `_meta` of its own (nearly all) is serialised
/// once, then `"_meta":{serverInfo},"resultType":"complete"` is written before its closing
/// brace — what [`finish_result`] makes of it, without building a value.
pub(super) fn tool_result_bytes(
    answer_keys: &AnswerKeys,
    id: &RequestId,
    r: &CallToolResult,
) -> Vec<u8> {
    if r.meta.is_none() {
        let mut out = result_response_bytes(id, r);
        // `{"jsonrpc":"2.0","id":…,"result":{…}}`: the result object's brace is the last but
        // one.
        if out.ends_with(b"}}") {
            let tail = out.split_off(out.len() - 2);
            out.extend_from_slice(b",\"_meta\":{\"");
            out.extend_from_slice(keys::SERVER_INFO.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(answer_keys.server_info_json.get().as_bytes());
            out.extend_from_slice(b"},\"resultType\":\"");
            out.extend_from_slice(result_type::COMPLETE.as_bytes());
            out.push(b'"');
            out.extend_from_slice(&tail);
            return out;
        }
    }
    // A result with `_meta` of its own (not reachable otherwise for a serialised struct).
    let mut v = serde_json::to_value(r).unwrap_or_default();
    finish_result(answer_keys, methods::TOOLS_CALL, &mut v);
    result_response_bytes(id, &v)
}

/// A tool result held as JSON text, with what this era adds to every result the handler did
/// not set itself: `resultType`, and `_meta`'s `serverInfo` (`server_info`). Only the top
/// level, and `_meta` when it is there, are read; the rest is written as it came.
pub(super) fn finish_json_result(server_info: &RawValue, result: &JsonToolResult) -> Box<RawValue> {
    let Some(mut obj) = RawObject::parse(result.as_raw()) else {
        return result.as_raw().to_owned();
    };
    if obj.get(RESULT_TYPE).is_none() {
        obj.set(RESULT_TYPE, Cow::Borrowed(&**COMPLETE));
    }
    // A `_meta` that is no object is replaced, as one that is absent is made.
    let meta = {
        let mut meta = obj.get(META).and_then(RawObject::parse).unwrap_or_default();
        meta.get(keys::SERVER_INFO).is_none().then(|| {
            meta.set(keys::SERVER_INFO, Cow::Borrowed(server_info));
            meta.to_raw()
        })
    };
    if let Some(meta) = meta {
        obj.set(META, Cow::Owned(meta));
    }
    obj.to_raw()
}

const RESULT_TYPE: &str = "resultType";
const META: &str = "_meta";
/// `"complete"`, as JSON.
static COMPLETE: LazyLock<Box<RawValue>> =
    LazyLock::new(|| serde_json::value::to_raw_value(result_type::COMPLETE).unwrap_or_default());

/// Adds what this era's results carry and the handler did not set.
pub(super) fn finish_result(answer_keys: &AnswerKeys, method: &str, v: &mut Value) {
    let Value::Object(obj) = v else { return };
    obj.entry("resultType")
        .or_insert_with(|| Value::from(result_type::COMPLETE));
    let complete = obj.get("resultType").and_then(Value::as_str) == Some(result_type::COMPLETE);
    if complete && let Some((ttl, scope)) = cache_hint(answer_keys, method) {
        obj.entry("ttlMs").or_insert_with(|| Value::from(ttl));
        obj.entry("cacheScope")
            .or_insert_with(|| Value::from(scope));
    }
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.entry(keys::SERVER_INFO)
            .or_insert_with(|| answer_keys.server_info.clone());
    }
}

/// "Resource not found" is invalid params in this era.
pub(super) fn error(mut e: ErrorObject) -> ErrorObject {
    if e.code == codes::RESOURCE_NOT_FOUND {
        e.code = codes::INVALID_PARAMS;
    }
    e
}

/// This era has a code for it (-32021, `requiredCapabilities`).
pub(super) fn missing_capability(cap: &str, method: &str) -> ToolError {
    ToolError::Rpc(staunch_protocol::stateless::missing_capability(
        cap,
        &format!("this request needs to send {method}"),
    ))
}

/// The `InputRequiredResult` of a round: the open questions (key → `{method, params}`) and
/// the sealed state the client echoes with its answers.
pub(crate) fn input_required(requests: Map<String, Value>, state: String) -> Value {
    json!({
        "resultType": result_type::INPUT_REQUIRED,
        "inputRequests": requests,
        "requestState": state,
    })
}

/// A `subscriptions/listen` notification's params, tagged with the subscription (the listen
/// request's id) in `_meta`.
pub(crate) fn tag_subscription(mut params: Map<String, Value>, subscription: &Value) -> Value {
    params.insert(
        "_meta".into(),
        json!({ keys::SUBSCRIPTION_ID: subscription.clone() }),
    );
    Value::Object(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use staunch_protocol::raw::to_value;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn the_stateless_era_adds_its_keys_and_keeps_the_handlers() {
        let info = raw(r#"{"name":"s","version":"1"}"#);
        let plain = JsonToolResult::from_raw(raw(r#"{"content":[],"b":1}"#)).unwrap();
        assert_eq!(
            finish_json_result(&info, &plain).get(),
            r#"{"content":[],"b":1,"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#
        );
        let own_meta =
            JsonToolResult::from_raw(raw(r#"{"content":[],"_meta":{"x.example/t":"t1"}}"#))
                .unwrap();
        let finished = to_value(&finish_json_result(&info, &own_meta));
        assert_eq!(
            finished,
            json!({"content": [], "resultType": "complete", "_meta": {
                "x.example/t": "t1",
                "io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}})
        );
        let all_set = r#"{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}"#;
        let r = JsonToolResult::from_raw(raw(all_set)).unwrap();
        assert_eq!(finish_json_result(&info, &r).get(), all_set);
    }
}
