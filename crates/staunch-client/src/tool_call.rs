//! [`ToolCall`]: a `tools/call` request's params, written straight into the request.
//!
//! A caller that forwards calls (a proxy) holds the arguments as a value already; building a
//! params object around them, only to write it out and drop it, cost more than writing it.
//! [`Client::start_tool_call`](crate::Client::start_tool_call) writes the name, the
//! arguments, the caller's `_meta` and what the client adds to it (its progress token; in the
//! stateless era the version, capabilities and identity every request carries) in one pass.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};
use staunch_protocol::mcp::ProgressToken;

/// The `_meta` key the client sets itself when it asks for progress.
const PROGRESS_TOKEN: &str = "progressToken";

/// A `tools/call` request's params.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    name: &'a str,
    arguments: &'a Value,
    meta: Option<&'a Map<String, Value>>,
    input_responses: Option<&'a Value>,
    request_state: Option<&'a Value>,
}

impl<'a> ToolCall<'a> {
    /// A call of tool `name` with `arguments`.
    pub fn new(name: &'a str, arguments: &'a Value) -> Self {
        Self {
            name,
            arguments,
            meta: None,
            input_responses: None,
            request_state: None,
        }
    }

    /// `_meta` to send with it (trace context and the like). A `progressToken` in it is left
    /// out: the client names its own when it asks for progress.
    pub fn meta(mut self, meta: Option<&'a Map<String, Value>>) -> Self {
        self.meta = meta;
        self
    }

    /// The call again with the answers to a 2026-07-28 server's `input_required` round
    /// (`inputResponses`) and the `requestState` it asked to get back (a null one is left out).
    pub fn answers(mut self, responses: &'a Value, state: Option<&'a Value>) -> Self {
        self.input_responses = Some(responses);
        self.request_state = state.filter(|s| !s.is_null());
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The params as a value, without anything the client adds, for a request that adds
    /// fields of its own (a task-augmented call) and goes through
    /// [`Client::start_request`](crate::Client::start_request).
    pub fn to_params(&self) -> Value {
        serde_json::to_value(Wire {
            call: self,
            progress: None,
            era: None,
        })
        // Strings, maps and values: nothing here fails to serialise.
        .unwrap_or_default()
    }
}

/// The params as sent: the call, the client's progress token, the era's `_meta`.
pub(crate) struct Wire<'c, 'a> {
    pub(crate) call: &'c ToolCall<'a>,
    pub(crate) progress: Option<&'c ProgressToken>,
    /// What every request carries in the stateless era (`None` in a session).
    pub(crate) era: Option<&'c Map<String, Value>>,
}

impl Wire<'_, '_> {
    /// The caller's `_meta` entries that are sent (all but a progress token).
    fn passed_meta(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.call
            .meta
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != PROGRESS_TOKEN)
    }

    /// The era's entries the caller did not set itself (the caller's win, as in
    /// [`Client::start_request`](crate::Client::start_request)).
    fn era_meta(&self) -> impl Iterator<Item = (&String, &Value)> {
        let own = self.call.meta;
        self.era.into_iter().flatten().filter(move |(k, _)| {
            k.as_str() != PROGRESS_TOKEN && !own.is_some_and(|m| m.contains_key(k.as_str()))
        })
    }

    fn has_meta(&self) -> bool {
        self.progress.is_some()
            || self.passed_meta().next().is_some()
            || self.era_meta().next().is_some()
    }
}

impl Serialize for Wire<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let call = self.call;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", call.name)?;
        m.serialize_entry("arguments", call.arguments)?;
        if let Some(r) = call.input_responses {
            m.serialize_entry("inputResponses", r)?;
        }
        if let Some(state) = call.request_state {
            m.serialize_entry("requestState", state)?;
        }
        if self.has_meta() {
            m.serialize_entry("_meta", &MetaWire(self))?;
        }
        m.end()
    }
}

/// `_meta` as sent: the caller's entries, the progress token, the era's.
struct MetaWire<'w, 'c, 'a>(&'w Wire<'c, 'a>);

impl Serialize for MetaWire<'_, '_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let wire = self.0;
        let mut m = s.serialize_map(None)?;
        for (k, v) in wire.passed_meta() {
            m.serialize_entry(k, v)?;
        }
        if let Some(token) = wire.progress {
            m.serialize_entry(PROGRESS_TOKEN, token)?;
        }
        for (k, v) in wire.era_meta() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sent(call: &ToolCall<'_>, progress: Option<&ProgressToken>, era: Option<&Value>) -> Value {
        let wire = Wire {
            call,
            progress,
            era: era.and_then(Value::as_object),
        };
        serde_json::to_value(&wire).unwrap()
    }

    #[test]
    fn a_plain_call_is_its_name_and_arguments() {
        let args = json!({"text": "hi", "n": 1});
        let call = ToolCall::new("echo", &args);
        assert_eq!(
            sent(&call, None, None),
            json!({"name": "echo", "arguments": {"text": "hi", "n": 1}})
        );
        assert_eq!(call.to_params(), sent(&call, None, None));
    }

    #[test]
    fn the_callers_meta_goes_on_without_its_progress_token_and_the_clients_token_is_added() {
        let args = json!({});
        let meta = json!({"progressToken": "theirs", "traceparent": "00-ab"});
        let call = ToolCall::new("echo", &args).meta(meta.as_object());
        assert_eq!(
            sent(&call, None, None),
            json!({"name": "echo", "arguments": {}, "_meta": {"traceparent": "00-ab"}})
        );
        let token = ProgressToken::Number(7);
        assert_eq!(
            sent(&call, Some(&token), None)["_meta"],
            json!({"traceparent": "00-ab", "progressToken": 7})
        );
        // Only a progress token of the caller's: no `_meta` at all.
        let only = json!({"progressToken": 1});
        let call = ToolCall::new("echo", &args).meta(only.as_object());
        assert!(sent(&call, None, None).get("_meta").is_none());
    }

    #[test]
    fn the_eras_meta_is_added_where_the_caller_did_not_set_a_key() {
        let args = json!({});
        let era = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "staunch"},
        });
        let own = json!({"io.modelcontextprotocol/clientInfo": {"name": "theirs"}});
        let call = ToolCall::new("echo", &args).meta(own.as_object());
        assert_eq!(
            sent(&call, None, Some(&era))["_meta"],
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "theirs"},
            })
        );
    }

    #[test]
    fn answers_to_an_input_round_go_with_the_state_asked_back() {
        let args = json!({"a": 1});
        let answers = json!({"q1": {"action": "accept"}});
        let state = json!("opaque");
        let call = ToolCall::new("book", &args).answers(&answers, Some(&state));
        assert_eq!(
            call.to_params(),
            json!({"name": "book", "arguments": {"a": 1},
                   "inputResponses": {"q1": {"action": "accept"}}, "requestState": "opaque"})
        );
        let call = ToolCall::new("book", &args).answers(&answers, Some(&Value::Null));
        assert!(call.to_params().get("requestState").is_none());
    }
}
