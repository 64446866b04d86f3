//! `fail {how}`: fails on purpose, to show (and test) how each failure reaches the client.

use schemars::JsonSchema;
use serde::Deserialize;
use staunch_server::protocol::ErrorObject;
use staunch_server::{CallToolResult, ServerBuilder, ToolError, ToolSpec};

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum How {
    /// The handler panics: answered with an internal error; the server lives on.
    Panic,
    /// A tool execution error (`isError: true`) the model can read.
    ToolError,
    /// A JSON-RPC error.
    RpcError,
}

#[derive(Deserialize, JsonSchema)]
struct FailArgs {
    how: How,
}

pub(crate) fn register(b: ServerBuilder) -> ServerBuilder {
    b.tool(
        ToolSpec::quick(
            "fail",
            "Fails on purpose in the given way (for testing clients).",
        ),
        |_ctx, a: FailArgs| async move { fail(a.how) },
    )
}

fn fail(how: How) -> Result<CallToolResult, ToolError> {
    match how {
        How::Panic => panic!("fail tool asked to panic"),
        How::ToolError => Err(ToolError::tool("this tool failed on purpose")),
        How::RpcError => Err(ToolError::Rpc(ErrorObject::new(
            -32050,
            "failed on purpose",
        ))),
    }
}
