//! JSON-RPC 2.0 messages: parsing one frame, and serialising what the server sends.

use std::borrow::Cow;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::codes;
use crate::frame::{Envelope, Frame, IdField};
use crate::raw::{Incoming, RawResponse};
pub use crate::request_id::RequestId;

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code (see [`codes`]).
    pub code: i64,
    /// A sentence for a person (or a model) to act on.
    pub message: String,
    /// Optional machine-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32602.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_PARAMS, message)
    }

    /// -32601 for `method` (named as [`echo_name`] bounds it).
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            codes::METHOD_NOT_FOUND,
            format!("method not found: {}", echo_name(method)),
        )
    }

    /// -32603.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(codes::INTERNAL_ERROR, message)
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// A request: expects exactly one response.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The id the response must carry.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The params (an object or array), if any.
    pub params: Option<Value>,
}

/// A notification: no id, no response.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The params, if any.
    pub params: Option<Value>,
}

/// A response to a request sent earlier by the other side.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// The id of the request this answers.
    pub id: RequestId,
    /// The result or the error.
    pub outcome: Result<Value, ErrorObject>,
}

/// One JSON-RPC message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

/// Why a frame could not be read as a message; each maps to the error to answer with.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON at all (-32700, id null).
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not a valid JSON-RPC message (-32600). `id` is set when one could be read, so
    /// the error can be correlated.
    #[error("invalid request: {reason}")]
    Invalid {
        /// The id, when the frame had a usable one.
        id: Option<RequestId>,
        /// What is wrong.
        reason: String,
    },
}

impl FrameError {
    /// The id to answer with (null when unknown).
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Self::Parse(_) => None,
            Self::Invalid { id, .. } => id.as_ref(),
        }
    }

    /// The error object to answer with.
    pub fn to_error(&self) -> ErrorObject {
        match self {
            Self::Parse(m) => ErrorObject::new(codes::PARSE_ERROR, format!("parse error: {m}")),
            Self::Invalid { reason, .. } => {
                ErrorObject::new(codes::INVALID_REQUEST, format!("invalid request: {reason}"))
            }
        }
    }

    /// The whole error response as JSON bytes.
    pub fn to_response_bytes(&self) -> Vec<u8> {
        error_response_bytes(self.id(), &self.to_error())
    }
}

fn invalid(id: Option<RequestId>, reason: impl Into<String>) -> FrameError {
    FrameError::Invalid {
        id,
        reason: reason.into(),
    }
}

/// Parses one frame (a stdio line or an HTTP body) into a message.
///
/// Batches (JSON arrays) are refused with -32600: they were removed in 2025-06-18 and staunch
/// does not serve them for 2025-03-26 either (see the README). Only `params`, `result` and
/// `error` are parsed into values; the rest of the envelope is read in place ([`frame`]).
///
/// [`frame`]: crate::frame
/// Longest client-chosen name an answer repeats whole ([`echo_name`]).
const ECHO_MAX_CHARS: usize = 100;

/// A client-chosen name (a method, a tool) as an answer may repeat it: whole when short, else
/// its first characters and how long it was — an answer, a log line or a stored stream never
/// grows with what a client chose to send.
pub fn echo_name(name: &str) -> Cow<'_, str> {
    match name.char_indices().nth(ECHO_MAX_CHARS) {
        None => Cow::Borrowed(name),
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes)", &name[..cut], name.len())),
    }
}

/// A client-chosen method name as a metric label, span name or log field: the name when it is
/// short and plain (letters, digits, `/`, `_`, `-`, `.`), else `_OTHER` (OpenTelemetry's word
/// for a method it does not know).
pub fn method_label(method: &str) -> &str {
    let plain = method.len() <= 64
        && !method.is_empty()
        && method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'.'));
    if plain { method } else { "_OTHER" }
}

/// Reads one frame (one JSON value) as a JSON-RPC message; batches and scalars are refused.
pub fn parse_message(frame: &[u8]) -> Result<Message, FrameError> {
    Ok(match read::<Value>(frame)? {
        Classified::Response(id, outcome) => Message::Response(Response { id, outcome }),
        Classified::Other(m) => m,
    })
}

/// [`parse_message`] for a reader that passes results on: a response's result is kept as the
/// text it arrived as (see [`crate::raw`]).
pub fn parse_incoming(frame: &[u8]) -> Result<Incoming, FrameError> {
    Ok(match read::<Box<RawValue>>(frame)? {
        Classified::Response(id, outcome) => Incoming::Response(RawResponse { id, outcome }),
        Classified::Other(m) => Incoming::Other(m),
    })
}

/// A frame read, its response's result an `R`.
enum Classified<R> {
    Response(RequestId, Result<R, ErrorObject>),
    Other(Message),
}

fn read<R: DeserializeOwned>(frame: &[u8]) -> Result<Classified<R>, FrameError> {
    match crate::frame::read(frame).map_err(|e| FrameError::Parse(e.to_string()))? {
        Frame::Object(env) => classify(env),
        Frame::Array => Err(invalid(None, "JSON-RPC batches are not supported")),
        Frame::Scalar => Err(invalid(None, "a message must be a JSON object")),
    }
}

fn classify<R>(env: Envelope<R>) -> Result<Classified<R>, FrameError> {
    // Read the id first so every later error can carry it.
    let id = match env.id {
        None => None,
        Some(IdField::Valid(id)) => Some(id),
        Some(IdField::Null) => {
            return Err(invalid(None, "id must be a string or an integer, not null"));
        }
        Some(IdField::Invalid) => return Err(invalid(None, "id must be a string or an integer")),
    };
    if env.version_ok != Some(true) {
        return Err(invalid(id, "\"jsonrpc\" must be \"2.0\""));
    }
    let params = match env.params {
        None | Some(Value::Null) => None,
        Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
        Some(_) => return Err(invalid(id, "params must be an object or an array")),
    };
    match env.method {
        Some(Ok(method)) => Ok(Classified::Other(match id {
            Some(id) => Message::Request(Request { id, method, params }),
            None => Message::Notification(Notification { method, params }),
        })),
        Some(Err(())) => Err(invalid(id, "method must be a string")),
        None => {
            let Some(id) = id else {
                return Err(invalid(
                    None,
                    "a message needs a method, or an id with a result",
                ));
            };
            match (env.result, env.error) {
                (Some(result), None) => Ok(Classified::Response(id, Ok(result))),
                (None, Some(error)) => match serde_json::from_value::<ErrorObject>(error) {
                    Ok(e) => Ok(Classified::Response(id, Err(e))),
                    Err(e) => Err(invalid(Some(id), format!("malformed error object: {e}"))),
                },
                _ => Err(invalid(
                    Some(id),
                    "a response needs exactly one of result and error",
                )),
            }
        }
    }
}

#[derive(Serialize)]
struct OutResponse<'a, R: ?Sized> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a R>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
}

#[derive(Serialize)]
struct OutRequest<'a, P: ?Sized = Value> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RequestId>,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

/// Serialises a success response; `result` is any serialisable result (a `Value`, or a typed
/// result written without building a value first).
pub fn result_response_bytes<R: Serialize + ?Sized>(id: &RequestId, result: &R) -> Vec<u8> {
    to_bytes(&OutResponse {
        jsonrpc: "2.0",
        id: Some(id),
        result: Some(result),
        error: None,
    })
}

/// Serialises an error response (`id` null when the request's id is unknown).
pub fn error_response_bytes(id: Option<&RequestId>, error: &ErrorObject) -> Vec<u8> {
    to_bytes(&OutResponse::<Value> {
        jsonrpc: "2.0",
        id,
        result: None,
        error: Some(error),
    })
}

/// Serialises a notification.
pub fn notification_bytes(method: &str, params: Option<&Value>) -> Vec<u8> {
    to_bytes(&OutRequest {
        jsonrpc: "2.0",
        id: None,
        method,
        params,
    })
}

/// Serialises a request.
pub fn request_bytes(id: &RequestId, method: &str, params: Option<&Value>) -> Vec<u8> {
    to_bytes(&OutRequest {
        jsonrpc: "2.0",
        id: Some(id),
        method,
        params,
    })
}

/// Serialises a request whose params are any serialisable value (typed params are written
/// without building a value first).
pub fn request_bytes_with<P: Serialize + ?Sized>(
    id: &RequestId,
    method: &str,
    params: &P,
) -> Vec<u8> {
    to_bytes(&OutRequest {
        jsonrpc: "2.0",
        id: Some(id),
        method,
        params: Some(params),
    })
}

impl Message {
    /// Serialises this message.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Message::Request(r) => request_bytes(&r.id, &r.method, r.params.as_ref()),
            Message::Notification(n) => notification_bytes(&n.method, n.params.as_ref()),
            Message::Response(r) => match &r.outcome {
                Ok(v) => result_response_bytes(&r.id, v),
                Err(e) => error_response_bytes(Some(&r.id), e),
            },
        }
    }
}

fn to_bytes<T: Serialize>(v: &T) -> Vec<u8> {
    // Serialising these plain structs into a Vec cannot fail: no maps with non-string keys, no
    // custom serialisers that error.
    serde_json::to_vec(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Result<Message, FrameError> {
        parse_message(s.as_bytes())
    }

    #[test]
    fn reads_requests_with_string_and_number_ids() {
        let m = parse(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
        assert_eq!(
            m,
            Message::Request(Request {
                id: RequestId::Number(7),
                method: "ping".into(),
                params: None
            })
        );
        let m = parse(r#"{"jsonrpc":"2.0","id":"7","method":"ping","params":{}}"#).unwrap();
        let Message::Request(r) = m else { panic!() };
        assert_eq!(r.id, RequestId::String("7".into()));
        assert_ne!(r.id, RequestId::Number(7));
    }

    #[test]
    fn reads_notifications_and_responses() {
        let m = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(m, Message::Notification(n) if n.method == "notifications/initialized"));
        let m = parse(r#"{"jsonrpc":"2.0","id":1,"result":{"a":1}}"#).unwrap();
        assert!(matches!(
            m,
            Message::Response(Response { outcome: Ok(_), .. })
        ));
        let m = parse(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#).unwrap();
        assert!(matches!(m, Message::Response(Response { outcome: Err(e), .. }) if e.code == -1));
    }

    #[test]
    fn a_request_with_typed_params_is_the_request_with_their_value() {
        #[derive(Serialize)]
        struct Params<'a> {
            name: &'a str,
        }
        let id = RequestId::Number(3);
        let typed = request_bytes_with(&id, "tools/call", &Params { name: "echo" });
        let valued = request_bytes(&id, "tools/call", Some(&json!({"name": "echo"})));
        assert_eq!(typed, valued);
        assert_eq!(
            String::from_utf8(typed).unwrap(),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}"#
        );
    }

    #[test]
    fn garbage_is_a_parse_error() {
        for s in ["", "{", "nope", "{\"jsonrpc\":\"2.0\",}", "\u{0}"] {
            let e = parse(s).unwrap_err();
            assert_eq!(e.to_error().code, codes::PARSE_ERROR, "{s:?}");
            assert_eq!(e.id(), None);
        }
    }

    #[test]
    fn wrong_shapes_are_invalid_requests() {
        let cases = [
            r#"[]"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            r#"42"#,
            r#""str""#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
            r#"{"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":"bad"}"#,
        ];
        for s in cases {
            let e = parse(s).unwrap_err();
            assert_eq!(e.to_error().code, codes::INVALID_REQUEST, "{s}");
        }
    }

    #[test]
    fn invalid_request_keeps_a_readable_id() {
        let e = parse(r#"{"jsonrpc":"1.0","id":"abc","method":"ping"}"#).unwrap_err();
        assert_eq!(e.id(), Some(&RequestId::String("abc".into())));
        let bytes = e.to_response_bytes();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["id"], json!("abc"));
        assert_eq!(v["error"]["code"], json!(-32600));
    }

    #[test]
    fn serialises_round_trip() {
        let msgs = [
            Message::Request(Request {
                id: RequestId::String("a".into()),
                method: "tools/call".into(),
                params: Some(json!({"name":"echo"})),
            }),
            Message::Notification(Notification {
                method: "notifications/progress".into(),
                params: Some(json!({"progressToken":1,"progress":2})),
            }),
            Message::Response(Response {
                id: RequestId::Number(3),
                outcome: Ok(json!({})),
            }),
            Message::Response(Response {
                id: RequestId::Number(4),
                outcome: Err(ErrorObject::new(-32601, "nope").with_data(json!([1]))),
            }),
        ];
        for m in msgs {
            assert_eq!(parse_message(&m.to_bytes()).unwrap(), m);
        }
    }
}

#[cfg(test)]
mod bounded_names {
    use super::*;

    #[test]
    fn client_names_are_bounded_where_they_are_repeated() {
        assert_eq!(echo_name("tools/list"), "tools/list");
        let long = "é".repeat(5000);
        let e = echo_name(&long);
        assert!(
            e.starts_with(&"é".repeat(100)) && e.ends_with("… (10000 bytes)"),
            "{e}"
        );
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label(&"m".repeat(65)), "_OTHER");
        assert_eq!(method_label("a b"), "_OTHER");
        assert_eq!(method_label(""), "_OTHER");
        assert!(ErrorObject::method_not_found(&long).message.len() < 400);
    }
}
