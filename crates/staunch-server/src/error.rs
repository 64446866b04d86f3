//! How a handler ends when it does not return a result.

use staunch_protocol::ErrorObject;

/// A handler's failure. The runtime maps each variant to what the client sees.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// The request was cancelled (returned by [`crate::Context::check`] and friends). No
    /// response is sent.
    #[error("cancelled")]
    Cancelled,
    /// The tool's own deadline passed. Answered with a clear error.
    #[error("deadline exceeded")]
    DeadlineExceeded,
    /// A tool execution error: answered as a result with `isError: true` so the model can read
    /// it and correct itself.
    #[error("{0}")]
    Tool(String),
    /// A protocol error: answered as a JSON-RPC error.
    #[error("{0}")]
    Rpc(ErrorObject),
    /// The server failed: answered as -32603.
    #[error("internal error: {0}")]
    Internal(String),
    /// The stateless era: the handler asked the client a question that has no answer yet
    /// ([`crate::Context::elicit`] and friends return it). Propagate it: the request is answered
    /// with an input-required result, and the client retries with the answer.
    #[error("input required from the client")]
    InputRequired,
}

impl ToolError {
    /// A tool execution error with this message.
    pub fn tool(message: impl Into<String>) -> Self {
        Self::Tool(message.into())
    }
}

impl From<ErrorObject> for ToolError {
    fn from(e: ErrorObject) -> Self {
        Self::Rpc(e)
    }
}
