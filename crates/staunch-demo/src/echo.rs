//! `echo {text}`: the smallest quick tool (the throughput benchmark's call).

use schemars::JsonSchema;
use serde::Deserialize;
use staunch_server::{CallToolResult, ServerBuilder, ToolSpec};

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

pub(crate) fn register(b: ServerBuilder) -> ServerBuilder {
    b.tool(
        ToolSpec::quick("echo", "Returns the given text unchanged.")
            .annotations(serde_json::json!({"readOnlyHint": true})),
        |_ctx, a: EchoArgs| async move { Ok(CallToolResult::text(a.text)) },
    )
}
