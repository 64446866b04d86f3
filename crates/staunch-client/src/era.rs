//! Protocol eras from the client's side: which one to speak, and what the stateless era
//! (2026-07-28) adds to every request.
//!
//! A dual-era client sends a stateless request first (`server/discover`) and falls back to the
//! session era's `initialize` when the server does not understand it (`protocol.md` §6.3).
//! [`EraChoice`] forces one era instead. In the stateless era every request carries the
//! protocol version and the client's identity and capabilities in `params._meta`
//! (`meta_for`); on HTTP the same facts travel in headers ([`header_value`] for the
//! non-ASCII form of `Mcp-Name`). Every result carries `resultType` ([`ResultType`]). What the
//! handshake learned, the era among it, is a [`ServerInfo`].

use serde_json::{Map, Value, json};
use staunch_protocol::codes;
use staunch_protocol::stateless::{keys, result_type};

use std::sync::RwLock;

use crate::ClientError;

/// How this connection speaks, decided by the handshake and asked by everything that sends:
/// in a session a request carries nothing more; without one (the stateless era) every request
/// carries the version, the client's capabilities and its identity in `_meta`, and HTTP sends
/// them as headers too.
#[derive(Debug, Default)]
pub(crate) struct Dialect {
    /// The `_meta` every request carries; `None` in a session.
    meta: RwLock<Option<Value>>,
}

impl Dialect {
    /// From now on every request stands alone and carries `meta` (the handshake tells the
    /// transport too).
    pub(crate) fn stand_alone(&self, meta: Value) {
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = Some(meta);
    }

    /// The session era: requests carry nothing more.
    pub(crate) fn join_session(&self) {
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The era spoken now.
    pub(crate) fn era(&self) -> Era {
        if self
            .meta
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            Era::Stateless
        } else {
            Era::Session
        }
    }

    /// Adds what the era makes every request carry to `params`.
    pub(crate) fn decorate(&self, params: &mut Option<Value>) -> Result<(), ClientError> {
        match &*self.meta.read().unwrap_or_else(|p| p.into_inner()) {
            Some(meta) => add_meta(params, meta),
            None => Ok(()),
        }
    }

    /// Runs `f` with the `_meta` every request carries (`None` in a session).
    pub(crate) fn with_meta<R>(&self, f: impl FnOnce(Option<&Map<String, Value>>) -> R) -> R {
        let meta = self.meta.read().unwrap_or_else(|p| p.into_inner());
        f(meta.as_ref().and_then(Value::as_object))
    }

    /// The client capabilities every request carries (`None` in a session, where they were
    /// declared once, at `initialize`).
    pub(crate) fn capabilities(&self) -> Option<Value> {
        self.meta
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|m| m.get(keys::CLIENT_CAPABILITIES).cloned())
    }
}

/// What the server said about itself in `initialize` or `server/discover`.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// The protocol version in use: negotiated by `initialize`, or the stateless version every
    /// request names.
    pub protocol_version: String,
    /// The era the connection speaks.
    pub era: Era,
    /// `server/discover`'s `supportedVersions` (empty in the session era).
    pub supported_versions: Vec<String>,
    /// Why `server/discover` was not used, when the client fell back to `initialize`.
    pub fallback: Option<String>,
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// `capabilities` as sent.
    pub capabilities: Value,
    /// `instructions`, if any.
    pub instructions: Option<String>,
}

impl ServerInfo {
    /// Whether the server accepts `tools/call` as a task (2025-11-25 `capabilities.tasks`).
    pub fn supports_tool_tasks(&self) -> bool {
        self.era == Era::Session
            && self
                .capabilities
                .pointer("/tasks/requests/tools/call")
                .is_some()
    }

    /// One line about the connection: the server, its protocol and era, how it was reached,
    /// and why `server/discover` was not used when the client fell back to `initialize`.
    pub fn connection_line(&self) -> String {
        let mut line = format!(
            "connected: {} {} — protocol {} ({} era, {})",
            self.name,
            self.version,
            self.protocol_version,
            self.era.as_str(),
            match self.era {
                Era::Stateless => "server/discover",
                Era::Session => "initialize",
            }
        );
        if let Some(why) = &self.fallback {
            line.push_str(&format!("; fell back to initialize: {why}"));
        }
        line
    }
}

/// What the `Mcp-Name` header carries for a request (its tool or prompt name, resource uri or
/// task id), when its method has one.
pub(crate) fn mcp_name(method: &str, params: Option<&Value>) -> Option<String> {
    staunch_protocol::stateless::expected_name(method, params)
        .flatten()
        .map(str::to_string)
}

/// Which era to speak when connecting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EraChoice {
    /// `server/discover` first; `initialize` when the server does not speak 2026-07-28.
    #[default]
    Auto,
    /// The session era only: `initialize` with
    /// [`ConnectOptions::protocol_version`](crate::ConnectOptions::protocol_version).
    Session,
    /// The stateless era only: a server that does not answer `server/discover` is an error.
    Stateless,
}

impl EraChoice {
    /// From a `--protocol` value: `auto`, a session-era version (`2025-11-25`, …) or a
    /// stateless one (`2026-07-28`). The session version to propose comes back with it.
    pub fn parse(s: &str) -> Result<(Self, Option<String>), String> {
        Ok(match staunch_protocol::version::parse_choice(s)? {
            None => (Self::Auto, None),
            Some(v) if staunch_protocol::version::is_stateless_supported(v) => {
                (Self::Stateless, None)
            }
            Some(v) => (Self::Session, Some(v.to_string())),
        })
    }
}

/// The era a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-03-26 … 2025-11-25: `initialize`, a session, `notifications/cancelled`.
    Session,
    /// 2026-07-28: no handshake, `_meta` on every request, a closed HTTP stream is the cancel.
    Stateless,
}

impl Era {
    /// A word for people: `session` or `stateless`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Stateless => "stateless",
        }
    }
}

/// The `_meta` a stateless request carries: version, client capabilities, client info.
pub(crate) fn meta_for(version: &str, capabilities: &Value, name: &str, ver: &str) -> Value {
    let caps = if capabilities.is_object() {
        capabilities.clone()
    } else {
        json!({})
    };
    json!({
        keys::PROTOCOL_VERSION: version,
        keys::CLIENT_CAPABILITIES: caps,
        keys::CLIENT_INFO: {"name": name, "version": ver},
    })
}

/// Merges `meta` into `params._meta` (keys already there, such as `progressToken`, stay).
pub(crate) fn add_meta(params: &mut Option<Value>, meta: &Value) -> Result<(), ClientError> {
    let obj = params.get_or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(map) = obj else {
        return Err(ClientError::Protocol(
            "a 2026-07-28 request needs params to be an object".into(),
        ));
    };
    let slot = map
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    let (Value::Object(dst), Value::Object(src)) = (slot, meta) else {
        return Err(ClientError::Protocol(
            "params._meta must be an object".into(),
        ));
    };
    for (k, v) in src {
        dst.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Ok(())
}

/// A header value as SEP-2243 writes it: as is when it is visible ASCII, else
/// `=?base64?<standard base64 of the UTF-8>?=`.
pub fn header_value(v: &str) -> String {
    let plain = v.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !v.starts_with([' ', '\t'])
        && !v.ends_with([' ', '\t'])
        && !v.starts_with("=?base64?");
    if plain {
        return v.to_string();
    }
    use base64::Engine as _;
    format!(
        "=?base64?{}?=",
        base64::engine::general_purpose::STANDARD.encode(v.as_bytes())
    )
}

/// What a stateless result says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultType {
    /// Final (also when the field is absent, as the spec says clients must assume).
    Complete,
    /// The server needs answers to `inputRequests` before it can finish.
    InputRequired,
    /// A task handle (the tasks extension).
    Task,
}

impl ResultType {
    /// Reads `resultType`; an unknown value is an error (the spec's "unknown result type").
    pub fn of(result: &Value) -> Result<Self, ClientError> {
        match result.get("resultType") {
            None | Some(Value::Null) => Ok(Self::Complete),
            Some(Value::String(s)) => match s.as_str() {
                result_type::COMPLETE => Ok(Self::Complete),
                result_type::INPUT_REQUIRED => Ok(Self::InputRequired),
                result_type::TASK => Ok(Self::Task),
                other => Err(ClientError::UnknownResultType(other.to_string())),
            },
            Some(other) => Err(ClientError::UnknownResultType(other.to_string())),
        }
    }
}

/// Why `server/discover` failed in a way that means "this server speaks the session era":
/// `Some(reason)` to fall back to `initialize`, `None` when the failure is the network's (the
/// same error would end `initialize` too).
pub(crate) fn fallback_reason(e: &ClientError) -> Option<String> {
    match e {
        ClientError::Connect(_) | ClientError::InvalidUrl { .. } | ClientError::Spawn { .. } => {
            None
        }
        ClientError::Rpc(err) if err.code == codes::UNSUPPORTED_PROTOCOL_VERSION => Some(format!(
            "the server does not serve 2026-07-28 (-32022; it serves {})",
            err.data
                .as_ref()
                .and_then(|d| d.get("supported"))
                .map_or_else(|| "?".to_string(), Value::to_string)
        )),
        ClientError::Rpc(err) if err.code == codes::METHOD_NOT_FOUND => Some(format!(
            "server/discover is unknown (-32601: {})",
            err.message
        )),
        ClientError::Rpc(err) => Some(format!(
            "server/discover was refused ({}: {})",
            err.code, err.message
        )),
        ClientError::Http { status, body } => {
            let said: String = body.chars().take(160).collect();
            Some(format!(
                "server/discover was refused with HTTP {status}: {}",
                said.trim()
            ))
        }
        other => Some(format!("server/discover failed: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use staunch_protocol::ErrorObject;

    #[test]
    fn the_dialect_decorates_requests_only_without_a_session() {
        let d = Dialect::default();
        let mut params = Some(json!({"name": "echo"}));
        d.decorate(&mut params).unwrap();
        assert_eq!(
            params,
            Some(json!({"name": "echo"})),
            "a session adds nothing"
        );
        assert_eq!((d.era(), d.capabilities()), (Era::Session, None));

        d.stand_alone(meta_for("2026-07-28", &json!({"roots": {}}), "c", "1"));
        let mut params = Some(json!({"_meta": {"progressToken": 3}}));
        d.decorate(&mut params).unwrap();
        let meta = &params.unwrap()["_meta"];
        assert_eq!(meta["progressToken"], 3, "the request's own keys stay");
        assert_eq!(meta[keys::PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(d.era(), Era::Stateless);
        assert_eq!(d.capabilities(), Some(json!({"roots": {}})));

        d.join_session();
        assert_eq!(d.era(), Era::Session);
    }

    #[test]
    fn meta_is_merged_without_losing_the_progress_token() {
        let meta = meta_for("2026-07-28", &json!({"elicitation": {}}), "c", "1");
        let mut p = Some(json!({"name": "echo", "_meta": {"progressToken": 3}}));
        add_meta(&mut p, &meta).unwrap();
        let m = &p.unwrap()["_meta"];
        assert_eq!(m["progressToken"], 3);
        assert_eq!(m[keys::PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(m[keys::CLIENT_CAPABILITIES], json!({"elicitation": {}}));
        assert_eq!(m[keys::CLIENT_INFO]["name"], "c");

        let mut none = None;
        add_meta(&mut none, &meta).unwrap();
        assert!(staunch_protocol::stateless::has_stateless_meta(
            none.as_ref()
        ));
        assert!(add_meta(&mut Some(json!([1])), &meta).is_err());
        // A non-object capability value still yields a valid request.
        assert_eq!(
            meta_for("v", &Value::Null, "c", "1")[keys::CLIENT_CAPABILITIES],
            json!({})
        );
    }

    #[test]
    fn header_values_round_trip_through_the_servers_decoder() {
        use staunch_protocol::stateless::decode_header_value;
        for v in ["echo", "héllo wörld", " padded ", "=?base64?trap?=", "日本"] {
            let h = header_value(v);
            assert!(h.is_ascii(), "{h}");
            assert_eq!(decode_header_value(&h).as_deref(), Some(v), "{v:?} → {h}");
        }
        assert_eq!(header_value("slow_count"), "slow_count");
    }

    #[test]
    fn result_types() {
        assert_eq!(ResultType::of(&json!({})).unwrap(), ResultType::Complete);
        assert_eq!(
            ResultType::of(&json!({"resultType": "complete"})).unwrap(),
            ResultType::Complete
        );
        assert_eq!(
            ResultType::of(&json!({"resultType": "input_required"})).unwrap(),
            ResultType::InputRequired
        );
        assert!(matches!(
            ResultType::of(&json!({"resultType": "later"})),
            Err(ClientError::UnknownResultType(s)) if s == "later"
        ));
        assert!(ResultType::of(&json!({"resultType": 1})).is_err());
    }

    #[test]
    fn fallback_follows_the_kind_of_refusal() {
        let rpc = |code| ClientError::Rpc(ErrorObject::new(code, "x"));
        assert!(fallback_reason(&rpc(codes::METHOD_NOT_FOUND)).is_some());
        assert!(fallback_reason(&rpc(codes::UNSUPPORTED_PROTOCOL_VERSION)).is_some());
        assert!(fallback_reason(&rpc(codes::INVALID_REQUEST)).is_some());
        let http = ClientError::Http {
            status: 400,
            body: "Bad Request: Server not initialized".into(),
        };
        assert!(fallback_reason(&http).is_some());
        assert!(fallback_reason(&ClientError::Connect("refused".into())).is_none());
    }

    #[test]
    fn protocol_choices() {
        assert_eq!(EraChoice::parse("auto").unwrap(), (EraChoice::Auto, None));
        assert_eq!(
            EraChoice::parse("2026-07-28").unwrap(),
            (EraChoice::Stateless, None)
        );
        assert_eq!(
            EraChoice::parse("2025-06-18").unwrap(),
            (EraChoice::Session, Some("2025-06-18".into()))
        );
        assert!(EraChoice::parse("2024-01-01").is_err());
    }
}
