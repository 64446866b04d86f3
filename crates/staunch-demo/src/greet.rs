//! `greet {}`: asks the user's name, then greets them — one tool, both protocol eras.
//!
//! `Context::elicit` is a server→client `elicitation/create` request on a 2025 session and an
//! input-required round on a 2026-07-28 request (the client answers by retrying with
//! `inputResponses`; the handler runs again from the top with the answer replayed). The
//! handler asks before it does anything, so a re-run repeats nothing.

use serde_json::json;
use staunch_server::{CallToolResult, Context, ServerBuilder, ToolError, ToolSpec};

use crate::no_args::NoArgs;

pub(crate) fn register(b: ServerBuilder) -> ServerBuilder {
    b.tool(
        ToolSpec::streaming(
            "greet",
            "Asks the user's name (elicitation), then greets them. Declining is answered too.",
        )
        .annotations(json!({"readOnlyHint": true})),
        |ctx: Context, _: NoArgs| greet(ctx),
    )
}

async fn greet(ctx: Context) -> Result<CallToolResult, ToolError> {
    let answer = ctx
        .elicit_as(
            "name",
            json!({
                "message": "What is your name?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "Your name"}},
                    "required": ["name"],
                },
            }),
        )
        .await?;
    let name = answer["content"]["name"]
        .as_str()
        .filter(|_| answer["action"] == "accept");
    Ok(match name {
        Some(name) => CallToolResult::text(format!("Hello, {name}!")),
        None => CallToolResult::text(format!(
            "No name given (the user chose {}).",
            answer["action"].as_str().unwrap_or("nothing")
        )),
    })
}
