//! The one error type of the client.

use std::time::Duration;

use staunch_protocol::ErrorObject;

/// Why a client operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The server command could not be started.
    #[error("could not start `{command}`: {message}")]
    Spawn {
        /// The program.
        command: String,
        /// The OS error.
        message: String,
    },
    /// The URL is not an `http://` URL the client can use.
    #[error("invalid URL {url:?}: {why}")]
    InvalidUrl {
        /// What was given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The TCP connection or the HTTP exchange failed.
    #[error("connection failed: {0}")]
    Connect(String),
    /// The server answered with an HTTP error status (and no JSON-RPC error).
    #[error("{}", http_message(*.status, body))]
    Http {
        /// The status code.
        status: u16,
        /// The start of the body, for the evidence.
        body: String,
    },
    /// HTTP 404 on a request that carried a session id: the server forgot the session.
    #[error("the server no longer knows this session (HTTP 404); it must be re-initialized")]
    SessionExpired,
    /// The connection closed (stdio EOF, process exit, client closed).
    #[error("the connection closed: {0}")]
    Closed(String),
    /// An HTTP response stream dropped and could not be resumed. The call was *not* repeated.
    #[error("the response stream was lost and could not be resumed: {0}")]
    StreamLost(String),
    /// The server answered the request with a JSON-RPC error.
    #[error("the server answered with an error: {0}")]
    Rpc(ErrorObject),
    /// No answer in time; `notifications/cancelled` was sent.
    #[error("{}", timeout_message(*.elapsed, *.ceiling))]
    Timeout {
        /// Time since the request was sent.
        elapsed: Duration,
        /// Whether the hard ceiling (`max_total`) expired rather than the idle timeout.
        ceiling: bool,
    },
    /// The caller cancelled (e.g. Ctrl-C); `notifications/cancelled` was sent.
    #[error("cancelled by the caller")]
    Cancelled,
    /// A tool reported an execution error (`isError: true`) where a value was needed (a job
    /// tool's start or status).
    #[error("the tool reported an error: {0}")]
    Tool(String),
    /// The server sent something this client cannot make sense of.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A 2026-07-28 result with a `resultType` this client does not know.
    #[error("the server answered with an unknown resultType {0:?}")]
    UnknownResultType(String),
    /// The server needs input (a 2026-07-28 `input_required` result) that the caller did not
    /// give; the value is the result, with its `inputRequests`.
    #[error("{}", input_message(.0))]
    InputRequired(serde_json::Value),
}

fn input_message(result: &serde_json::Value) -> String {
    let keys: Vec<String> = result["inputRequests"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k} ({})", v["method"].as_str().unwrap_or("?")))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "the server needs input to go on: {}",
        if keys.is_empty() {
            "(no inputRequests)".to_string()
        } else {
            keys.join(", ")
        }
    )
}

/// An HTTP error status, with what it most likely means for an MCP endpoint and the start of
/// the body when there is one.
fn http_message(status: u16, body: &str) -> String {
    let meaning = match status {
        404 => " (Not Found): no MCP endpoint at this URL — check the path (staunch serves /mcp)",
        405 => " (Method Not Allowed): this URL does not take MCP's POST — check the path",
        401 => {
            " (Unauthorized): the server wants credentials, e.g. --header 'Authorization: Bearer …'"
        }
        403 => " (Forbidden): the server refused this client or its Host/Origin",
        406 => " (Not Acceptable): the server cannot answer in a form this client accepts",
        415 => " (Unsupported Media Type): the server does not take JSON at this URL",
        _ => "",
    };
    let body = body.trim();
    if body.is_empty() {
        format!("HTTP {status}{meaning}")
    } else {
        format!("HTTP {status}{meaning}: {body}")
    }
}

fn timeout_message(elapsed: Duration, ceiling: bool) -> String {
    let what = if ceiling {
        "maximum total timeout"
    } else {
        "timeout"
    };
    format!(
        "{what} expired after {} ms; the request was cancelled",
        elapsed.as_millis()
    )
}

impl ClientError {
    /// Whether repeating the operation could succeed and is safe *for an idempotent call*
    /// (a job start carrying its idempotency key): transport trouble, server busy, timeouts.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connect(_) | Self::StreamLost(_) => true,
            Self::Http { status, .. } => *status >= 500 || *status == 429,
            Self::Timeout { ceiling, .. } => !ceiling,
            Self::Rpc(e) => e.code == staunch_protocol::codes::SERVER_BUSY,
            _ => false,
        }
    }
}
