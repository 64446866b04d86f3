//! MCP payloads: what `initialize`, `tools/*`, progress, cancellation and logging carry.
//!
//! Field names follow the spec's camelCase on the wire. Types stay close to the schema of
//! 2025-11-25; older versions are subsets for what staunch serves.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::RequestId;

/// Method names.
pub mod methods {
    /// Request: the session era's handshake (2025 revisions).
    pub const INITIALIZE: &str = "initialize";
    /// Notification: the client finished initializing.
    pub const INITIALIZED: &str = "notifications/initialized";
    /// Request: a liveness check, answered with an empty result.
    pub const PING: &str = "ping";
    /// Request: the tools the server offers.
    pub const TOOLS_LIST: &str = "tools/list";
    /// Request: calls a tool.
    pub const TOOLS_CALL: &str = "tools/call";
    /// Request: sets the least severe level of log message the client wants.
    pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
    /// Notification: a request was cancelled.
    pub const CANCELLED: &str = "notifications/cancelled";
    /// Notification: progress of a request that carried a `progressToken`.
    pub const PROGRESS: &str = "notifications/progress";
    /// Notification: a log message.
    pub const MESSAGE: &str = "notifications/message";
    /// Request: the stateless era's (2026-07-28) discovery of versions, capabilities and identity.
    pub const SERVER_DISCOVER: &str = "server/discover";
    /// Request: the stateless era's stream of list changes and resource updates (it replaces
    /// the session era's GET stream and `resources/subscribe`).
    pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
    /// Notification: the first message on a `subscriptions/listen` stream.
    pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
}

/// Name and version of a client or server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `initialize` params.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The version the client proposes.
    pub protocol_version: String,
    /// What the client can do (sampling, elicitation, roots, tasks …).
    #[serde(default)]
    pub capabilities: Value,
    /// Who the client is.
    #[serde(default)]
    pub client_info: Option<Implementation>,
}

/// `initialize` result.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The negotiated version.
    pub protocol_version: String,
    /// What the server offers.
    pub capabilities: Map<String, Value>,
    /// Who the server is.
    pub server_info: Implementation,
    /// Guidance for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// A progress token: a string or an integer chosen by the requester.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProgressToken {
    /// Integer token.
    Number(i64),
    /// String token.
    String(String),
}

impl ProgressToken {
    /// Reads a token from `params._meta.progressToken`, if there is a valid one.
    pub fn from_params(params: Option<&Value>) -> Option<Self> {
        let t = params?.get("_meta")?.get("progressToken")?;
        serde_json::from_value(t.clone()).ok()
    }
}

/// `notifications/progress` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams {
    /// The requester's token.
    pub progress_token: ProgressToken,
    /// Work done so far; strictly increasing.
    #[serde(serialize_with = "number")]
    pub progress: f64,
    /// Total, when known.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_number"
    )]
    pub total: Option<f64>,
    /// A sentence on what is happening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Every other field the notification carried (`_meta`, fields of later revisions), kept
    /// so that a proxy passes them on.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Writes whole numbers as integers (`3`, not `3.0`): shorter, and what clients expect.
fn number<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
}

fn opt_number<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => number(v, s),
        None => s.serialize_none(),
    }
}

/// `notifications/cancelled` params.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledParams {
    /// The request to cancel (absent only for tasks, which use `tasks/cancel`).
    #[serde(default)]
    pub request_id: Option<RequestId>,
    /// Why, for the logs.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A tool as listed by `tools/list`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Unique name.
    pub name: String,
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of `structuredContent`, when the tool returns one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Hints (readOnlyHint, destructiveHint, idempotentHint …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// `{"taskSupport": …}` (2025-11-25).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<Value>,
}

/// `tools/call` params.
#[derive(Clone, Debug, Deserialize)]
pub struct CallToolParams {
    /// The tool.
    pub name: String,
    /// Its arguments (absent = `{}`).
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    /// Task augmentation (2025-11-25).
    #[serde(default)]
    pub task: Option<Value>,
}

/// What a content item may carry besides its payload: `annotations` (audience, priority,
/// lastModified) and `_meta`, kept as given — so a result forwarded by `staunch proxy` reaches
/// the client whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ContentExtras {
    /// Hints for the client (`audience`, `priority`, `lastModified`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// The item's metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// One content item of a tool result or prompt message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// Annotations and `_meta`.
        #[serde(flatten)]
        extras: ContentExtras,
    },
    /// An image, base64.
    Image {
        /// Base64 data.
        data: String,
        /// e.g. `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Annotations and `_meta`.
        #[serde(flatten)]
        extras: ContentExtras,
    },
    /// Audio, base64.
    Audio {
        /// Base64 data.
        data: String,
        /// e.g. `audio/wav`.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Annotations and `_meta`.
        #[serde(flatten)]
        extras: ContentExtras,
    },
    /// An embedded resource (`{uri, mimeType, text|blob}`).
    Resource {
        /// The resource contents.
        resource: Value,
        /// Annotations and `_meta`.
        #[serde(flatten)]
        extras: ContentExtras,
    },
    /// A link to a resource.
    ResourceLink {
        /// The link fields (`uri`, `name`, …).
        #[serde(flatten)]
        link: Map<String, Value>,
    },
}

impl Content {
    /// A text item.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            extras: ContentExtras::default(),
        }
    }

    /// An image item (base64 `data`).
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Image {
            data: data.into(),
            mime_type: mime_type.into(),
            extras: ContentExtras::default(),
        }
    }

    /// An audio item (base64 `data`).
    pub fn audio(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Audio {
            data: data.into(),
            mime_type: mime_type.into(),
            extras: ContentExtras::default(),
        }
    }

    /// An embedded resource (`{uri, mimeType, text|blob}`).
    pub fn resource(resource: Value) -> Self {
        Self::Resource {
            resource,
            extras: ContentExtras::default(),
        }
    }
}

/// `tools/call` result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// What the model reads.
    pub content: Vec<Content>,
    /// Machine-readable result matching the tool's output schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// A tool execution error the model can read and correct.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// The result's `_meta`, kept as given (the server adds its own keys beside these).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
}

impl CallToolResult {
    /// One text item.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![Content::text(text)],
            ..Self::default()
        }
    }

    /// A tool execution error (`isError: true`) with one text item.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            content: vec![Content::text(text)],
            is_error: Some(true),
            ..Self::default()
        }
    }

    /// Structured content, mirrored as JSON text for clients that read only `content`.
    pub fn structured(value: Value) -> Self {
        Self {
            content: vec![Content::text(value.to_string())],
            structured_content: Some(value),
            ..Self::default()
        }
    }

    /// The concatenated text items (for tests and logs).
    pub fn text_joined(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Log levels, RFC 5424 order (debug lowest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoggingLevel {
    /// Detail for debugging.
    Debug,
    /// Normal events.
    Info,
    /// Normal but significant.
    Notice,
    /// Something unexpected.
    Warning,
    /// An operation failed.
    Error,
    /// A component failed.
    Critical,
    /// Act now.
    Alert,
    /// The system is unusable.
    Emergency,
}

/// `logging/setLevel` params.
#[derive(Clone, Debug, Deserialize)]
pub struct SetLevelParams {
    /// The minimum level the client wants.
    pub level: LoggingLevel,
}

/// `notifications/message` params.
#[derive(Clone, Debug, Serialize)]
pub struct LoggingMessageParams {
    /// Severity.
    pub level: LoggingLevel,
    /// Which part of the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// The message (any JSON).
    pub data: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn progress_token_is_read_from_meta() {
        let p = json!({"_meta": {"progressToken": "abc"}});
        assert_eq!(
            ProgressToken::from_params(Some(&p)),
            Some(ProgressToken::String("abc".into()))
        );
        let p = json!({"_meta": {"progressToken": 4}});
        assert_eq!(
            ProgressToken::from_params(Some(&p)),
            Some(ProgressToken::Number(4))
        );
        assert_eq!(ProgressToken::from_params(Some(&json!({}))), None);
        let bogus = json!({"_meta": {"progressToken": {"x": 1}}});
        assert_eq!(ProgressToken::from_params(Some(&bogus)), None);
    }

    #[test]
    fn content_serialises_with_spec_field_names() {
        let v = serde_json::to_value(Content::image("AA==", "image/png")).unwrap();
        assert_eq!(
            v,
            json!({"type":"image","data":"AA==","mimeType":"image/png"})
        );
        let r = serde_json::to_value(CallToolResult::error("bad")).unwrap();
        assert_eq!(
            r,
            json!({"content":[{"type":"text","text":"bad"}],"isError":true})
        );
    }

    #[test]
    fn whole_progress_values_are_integers_on_the_wire() {
        let p = ProgressParams {
            progress_token: ProgressToken::Number(1),
            progress: 3.0,
            total: Some(10.0),
            message: None,
            extra: Map::new(),
        };
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"progressToken":1,"progress":3,"total":10}"#
        );
        let p = ProgressParams { progress: 2.5, ..p };
        assert!(
            serde_json::to_string(&p)
                .unwrap()
                .contains("\"progress\":2.5")
        );
    }

    #[test]
    fn a_progress_notification_keeps_the_fields_it_carries() {
        let sent = json!({
            "progressToken": "t", "progress": 1, "message": "m",
            "_meta": {"x.example/step": "download"}, "x.example/later": [1, 2]
        });
        let p: ProgressParams = serde_json::from_value(sent.clone()).unwrap();
        assert_eq!(p.extra.len(), 2, "{:?}", p.extra);
        assert_eq!(serde_json::to_value(&p).unwrap(), sent);
    }

    #[test]
    fn levels_are_ordered() {
        assert!(LoggingLevel::Debug < LoggingLevel::Info);
        assert!(LoggingLevel::Error > LoggingLevel::Warning);
        let l: SetLevelParams = serde_json::from_value(json!({"level":"warning"})).unwrap();
        assert_eq!(l.level, LoggingLevel::Warning);
    }

    #[test]
    fn annotations_and_meta_survive_a_round_trip() {
        let result = json!({
            "content": [
                {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.5},
                 "_meta": {"x.example/k": 1}},
                {"type": "image", "data": "AA==", "mimeType": "image/png",
                 "annotations": {"lastModified": "2026-12-02T00:00:00Z"}},
                {"type": "resource", "resource": {"uri": "a://b", "text": "t"}, "_meta": {"k": 2}},
                {"type": "resource_link", "uri": "a://c", "name": "c", "annotations": {"priority": 1}}
            ],
            "structuredContent": {"n": 1},
            "_meta": {"x.example/trace": "t1"}
        });
        let parsed: CallToolResult = serde_json::from_value(result.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), result);
        assert_eq!(parsed.text_joined(), "hi");
    }
}
