//! The stateless era (2026-07-28): what every request carries, and how a server reads it.
//!
//! There is no `initialize` and no session. Each request names its version and the client's
//! capabilities in `params._meta` ([`RequestMeta`]); on Streamable HTTP the same facts travel
//! in headers that must agree with the body ([`expected_name`], [`decode_header_value`]).
//! Results carry `resultType`; server→client requests become input-required rounds.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::codes;
use crate::jsonrpc::ErrorObject;
use crate::mcp::LoggingLevel;
use crate::version;

/// `_meta` keys of the 2026-07-28 revision.
pub mod keys {
    /// The request's protocol version (required).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's capabilities for this request (required).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// Who the client is (should).
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The lowest level of `notifications/message` the client wants for this request; none
    /// are sent without it.
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// Who the server is, in every result's `_meta`.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The id of a `subscriptions/listen` stream, on every notification it carries.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
}

/// Methods of the session era that the stateless era removed: a 2026-07-28 request for one of
/// them is answered -32601 (HTTP 404).
pub const REMOVED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "notifications/initialized",
    "notifications/roots/list_changed",
];

/// The tasks extension (SEP-2663): declared by a client in a request's
/// `clientCapabilities.extensions`, advertised by a server in `server/discover`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// `resultType` values.
pub mod result_type {
    /// The request is done; the result is final.
    pub const COMPLETE: &str = "complete";
    /// The client must answer `inputRequests` and retry (MRTR).
    pub const INPUT_REQUIRED: &str = "input_required";
    /// The tasks extension: the result is a task handle.
    pub const TASK: &str = "task";
}

/// Whether a request's params carry the stateless era's `_meta` (any protocol version key).
pub fn has_stateless_meta(params: Option<&Value>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(keys::PROTOCOL_VERSION))
        .is_some()
}

/// What a stateless request says about itself in `params._meta`, as the server acts on it.
/// The client's `io.modelcontextprotocol/clientInfo` is not copied here: nothing decides on it,
/// and a handler reads it (with any other key) from the request's `_meta`.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestMeta {
    /// `io.modelcontextprotocol/protocolVersion`: borrowed from the versions this crate knows
    /// when it is one of them (every request that is served), so it is not copied per request.
    pub protocol_version: Cow<'static, str>,
    /// `io.modelcontextprotocol/clientCapabilities` (an object).
    pub client_capabilities: Value,
    /// `io.modelcontextprotocol/logLevel`, when sent: log messages at this level and above go
    /// out; none at all without it.
    pub log_level: Option<LoggingLevel>,
}

impl RequestMeta {
    /// Reads and validates the required fields. A missing or malformed required field is
    /// -32602 (HTTP 400); a version this server does not serve is -32022 with `data.supported`
    /// and `data.requested` (HTTP 400).
    pub fn from_params(params: Option<&Value>) -> Result<Self, ErrorObject> {
        let meta = meta_of(params)?;
        let (protocol_version, log_level) = read(meta)?;
        Ok(Self {
            protocol_version,
            client_capabilities: meta
                .get(keys::CLIENT_CAPABILITIES)
                .cloned()
                .unwrap_or_default(),
            log_level,
        })
    }

    /// [`RequestMeta::from_params`], then takes the keys it was read from (and `clientInfo`)
    /// out of `params._meta`, and drops a `_meta` left empty: what a request in flight keeps of
    /// its `_meta` is then only the client's own keys (`progressToken`, vendor keys), and its
    /// client's facts are held once, here, not twice. The capabilities move, uncopied. On an
    /// error `params` are left as they were.
    pub fn take_from(params: &mut Option<Value>) -> Result<Self, ErrorObject> {
        let (protocol_version, log_level) = read(meta_of(params.as_ref())?)?;
        let mut client_capabilities = Value::Null;
        if let Some(Value::Object(p)) = params
            && let Some(Value::Object(meta)) = p.get_mut("_meta")
        {
            client_capabilities = meta.remove(keys::CLIENT_CAPABILITIES).unwrap_or_default();
            for key in [keys::PROTOCOL_VERSION, keys::CLIENT_INFO, keys::LOG_LEVEL] {
                meta.remove(key);
            }
            if meta.is_empty() {
                p.remove("_meta");
            }
        }
        Ok(Self {
            protocol_version,
            client_capabilities,
            log_level,
        })
    }

    /// -32022 unless this server serves the request's version.
    pub fn check_version(&self) -> Result<(), ErrorObject> {
        if version::is_stateless_supported(&self.protocol_version) {
            return Ok(());
        }
        Err(unsupported_version(&self.protocol_version))
    }
}

/// A stateless request's `params._meta`, which must be there.
fn meta_of(params: Option<&Value>) -> Result<&Map<String, Value>, ErrorObject> {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ErrorObject::invalid_params(format!(
                "missing params._meta: a {} request must carry {} and {}",
                version::STATELESS,
                keys::PROTOCOL_VERSION,
                keys::CLIENT_CAPABILITIES
            ))
        })
}

/// Checks `meta`'s required fields (the capabilities an object) and reads the version and
/// the log level.
fn read(
    meta: &Map<String, Value>,
) -> Result<(Cow<'static, str>, Option<LoggingLevel>), ErrorObject> {
    let protocol_version = match meta.get(keys::PROTOCOL_VERSION) {
        Some(Value::String(v)) if !v.is_empty() => match version::known(v) {
            Some(known) => Cow::Borrowed(known),
            None => Cow::Owned(v.clone()),
        },
        Some(_) => {
            return Err(ErrorObject::invalid_params(format!(
                "_meta[\"{}\"] must be a non-empty string",
                keys::PROTOCOL_VERSION
            )));
        }
        None => return Err(missing(keys::PROTOCOL_VERSION)),
    };
    match meta.get(keys::CLIENT_CAPABILITIES) {
        Some(Value::Object(_)) => {}
        Some(_) => {
            return Err(ErrorObject::invalid_params(format!(
                "_meta[\"{}\"] must be an object",
                keys::CLIENT_CAPABILITIES
            )));
        }
        None => return Err(missing(keys::CLIENT_CAPABILITIES)),
    }
    let log_level = match meta.get(keys::LOG_LEVEL) {
        None | Some(Value::Null) => None,
        Some(v) => Some(LoggingLevel::deserialize(v).map_err(|_| {
            ErrorObject::invalid_params(format!(
                "_meta[\"{}\"] must be a logging level (debug … emergency)",
                keys::LOG_LEVEL
            ))
        })?),
    };
    Ok((protocol_version, log_level))
}

/// -32602 for a required `_meta` key that is not there.
fn missing(key: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!("missing _meta[\"{key}\"]"))
}

/// -32022 naming what is served and what was asked for.
pub fn unsupported_version(requested: &str) -> ErrorObject {
    ErrorObject::new(
        codes::UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "unsupported protocol version {requested:?}: this server serves {} statelessly \
             and {} with initialize",
            version::STATELESS_SUPPORTED.join(", "),
            version::SUPPORTED.join(", ")
        ),
    )
    .with_data(serde_json::json!({
        "supported": version::STATELESS_SUPPORTED,
        "requested": requested,
    }))
}

/// -32021: the request needs `capability` (e.g. `"sampling"`) and did not declare it.
pub fn missing_capability(capability: &str, why: &str) -> ErrorObject {
    let mut required = Map::new();
    required.insert(capability.to_string(), Value::Object(Map::new()));
    ErrorObject::new(
        codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!("{why}: the client did not declare the {capability:?} capability"),
    )
    .with_data(serde_json::json!({"requiredCapabilities": required}))
}

/// -32020: a header does not agree with the body.
pub fn header_mismatch(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(codes::HEADER_MISMATCH, message)
}

/// The `Mcp-Name` a request must carry on HTTP: `params.name` for `tools/call` and
/// `prompts/get`, `params.uri` for `resources/read`, `params.taskId` for the tasks extension's
/// methods (it has no `tasks/result`: that one is answered -32601, not refused over a
/// header); `None` for every other method.
pub fn expected_name<'a>(method: &str, params: Option<&'a Value>) -> Option<Option<&'a str>> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    Some(params.and_then(|p| p.get(field)).and_then(Value::as_str))
}

/// Decodes a header value as SEP-2243 writes non-ASCII text: `=?base64?<base64>?=` is the
/// UTF-8 of the decoded bytes (standard alphabet, padding required: anything else is
/// malformed); any other value is itself. Surrounding whitespace is not part of the value
/// (RFC 9110 §5.5). `None` when the base64 form is malformed. A plain value is borrowed.
pub fn decode_header_value(raw: &str) -> Option<std::borrow::Cow<'_, str>> {
    let v = raw.trim_matches([' ', '\t']);
    match v
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(b64) => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
            String::from_utf8(bytes).ok().map(std::borrow::Cow::Owned)
        }
        None => Some(std::borrow::Cow::Borrowed(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(meta: Value) -> Value {
        json!({"_meta": meta})
    }

    #[test]
    fn stripping_leaves_only_the_clients_own_keys() {
        let mut p = Some(json!({"name": "t", "_meta": {
            keys::PROTOCOL_VERSION: version::STATELESS,
            keys::CLIENT_CAPABILITIES: {"elicitation": {}},
            keys::CLIENT_INFO: {"name": "c", "version": "1"},
            keys::LOG_LEVEL: "info",
            "progressToken": 7,
            "io.staunch/idempotency-key": "k"
        }}));
        let m = RequestMeta::take_from(&mut p).unwrap();
        assert_eq!(m.client_capabilities, json!({"elicitation": {}}), "moved");
        assert_eq!(m.log_level, Some(LoggingLevel::Info));
        assert_eq!(
            p,
            Some(
                json!({"name": "t", "_meta": {"progressToken": 7, "io.staunch/idempotency-key": "k"}})
            )
        );
        let mut p = Some(json!({"_meta": {keys::PROTOCOL_VERSION: version::STATELESS,
                                           keys::CLIENT_CAPABILITIES: {}}}));
        RequestMeta::take_from(&mut p).unwrap();
        assert_eq!(p, Some(json!({})), "an emptied _meta goes");
        // Refused: nothing is taken.
        let refused = json!({"_meta": {keys::PROTOCOL_VERSION: version::STATELESS,
                                       keys::CLIENT_CAPABILITIES: []}});
        let mut p = Some(refused.clone());
        assert!(RequestMeta::take_from(&mut p).is_err());
        assert_eq!(p, Some(refused));
    }

    #[test]
    fn required_meta_fields_are_checked() {
        let ok = params(json!({
            keys::PROTOCOL_VERSION: "2026-07-28",
            keys::CLIENT_CAPABILITIES: {"sampling": {}},
            keys::LOG_LEVEL: "warning"
        }));
        let m = RequestMeta::from_params(Some(&ok)).unwrap();
        assert_eq!(m.protocol_version, "2026-07-28");
        assert_eq!(m.log_level, Some(LoggingLevel::Warning));
        assert!(
            matches!(m.protocol_version, Cow::Borrowed(_)),
            "a known version"
        );
        let unknown = params(json!({keys::PROTOCOL_VERSION: "v9", keys::CLIENT_CAPABILITIES: {}}));
        let m9 = RequestMeta::from_params(Some(&unknown)).unwrap();
        assert_eq!(m9.protocol_version, "v9");
        assert!(m9.check_version().is_err());
        m.check_version().unwrap();

        for bad in [
            json!({}),
            params(json!({keys::CLIENT_CAPABILITIES: {}})),
            params(json!({keys::PROTOCOL_VERSION: "2026-07-28"})),
            params(json!({keys::PROTOCOL_VERSION: 7, keys::CLIENT_CAPABILITIES: {}})),
            params(json!({keys::PROTOCOL_VERSION: "2026-07-28", keys::CLIENT_CAPABILITIES: []})),
            params(
                json!({keys::PROTOCOL_VERSION: "2026-07-28", keys::CLIENT_CAPABILITIES: {},
                keys::LOG_LEVEL: "loud"}),
            ),
        ] {
            let e = RequestMeta::from_params(Some(&bad)).unwrap_err();
            assert_eq!(e.code, codes::INVALID_PARAMS, "{bad}");
        }
    }

    #[test]
    fn unsupported_versions_name_what_is_served() {
        let p = params(json!({keys::PROTOCOL_VERSION: "v999", keys::CLIENT_CAPABILITIES: {}}));
        let e = RequestMeta::from_params(Some(&p))
            .unwrap()
            .check_version()
            .unwrap_err();
        assert_eq!(e.code, codes::UNSUPPORTED_PROTOCOL_VERSION);
        let data = e.data.unwrap();
        assert_eq!(data["requested"], "v999");
        assert_eq!(data["supported"], json!(["2026-07-28"]));
    }

    #[test]
    fn mcp_name_follows_the_method() {
        let p = json!({"name": "echo", "uri": "test://x", "taskId": "t1"});
        assert_eq!(expected_name("tools/call", Some(&p)), Some(Some("echo")));
        assert_eq!(expected_name("prompts/get", Some(&p)), Some(Some("echo")));
        assert_eq!(
            expected_name("resources/read", Some(&p)),
            Some(Some("test://x"))
        );
        assert_eq!(expected_name("tasks/get", Some(&p)), Some(Some("t1")));
        assert_eq!(expected_name("tools/list", Some(&p)), None);
        assert_eq!(expected_name("tools/call", None), Some(None));
    }

    #[test]
    fn header_values_decode_base64_and_trim() {
        assert_eq!(decode_header_value("  echo\t").as_deref(), Some("echo"));
        // "héllo" in UTF-8, base64.
        assert_eq!(
            decode_header_value("=?base64?aMOpbGxv?=").as_deref(),
            Some("héllo")
        );
        assert_eq!(
            decode_header_value("=?base64?aMOpbGxv").as_deref(),
            Some("=?base64?aMOpbGxv")
        );
        assert_eq!(decode_header_value("=?base64?a$b?="), None);
        assert_eq!(decode_header_value("=?base64?YQ==?=").as_deref(), Some("a"));
        // Padding is required, and only the standard alphabet is accepted.
        assert_eq!(decode_header_value("=?base64?YWI?="), None);
        assert_eq!(decode_header_value("=?base64?SGVsbG8?="), None);
        assert_eq!(decode_header_value("=?base64?SGVs!!!bG8=?="), None);
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8=?=").as_deref(),
            Some("Hello")
        );
    }

    #[test]
    fn stateless_meta_is_detected_by_its_version_key() {
        assert!(has_stateless_meta(Some(&params(
            json!({keys::PROTOCOL_VERSION: "x"})
        ))));
        assert!(!has_stateless_meta(Some(&params(
            json!({"progressToken": 1})
        ))));
        assert!(!has_stateless_meta(None));
    }
}
