//! The `conformance` profile: what the official MCP conformance suite's server scenarios call
//! (`@modelcontextprotocol/conformance`, the "everything-server" contract), written with
//! staunch's own API. It doubles as a tour of the library: typed and hand-schema'd tools,
//! client-visible logging, progress, requests to the client (sampling, elicitation), closing an
//! SSE connection mid-call, and resources, prompts and completions as custom methods; and the
//! stateless era's fixtures (input-required rounds, capability checks, list-change triggers,
//! an `x-mcp-header` parameter); and the tasks extension's, as durable jobs (`tasks.rs`).

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use staunch_server::protocol::ErrorObject;
use staunch_server::protocol::mcp::Content;
use staunch_server::{
    CallToolResult, Change, Context, LoggingLevel, ServerBuilder, ToolError, ToolSpec,
};

use crate::no_args::NoArgs;

/// A 1×1 transparent PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
/// A tiny silent WAV (44-byte header, 2 samples).
const WAV: &str = "UklGRigAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQQAAAAAAAAA";

#[derive(Deserialize, JsonSchema)]
struct SamplingArgs {
    /// The prompt to send to the client's model.
    prompt: String,
}

#[derive(Deserialize, JsonSchema)]
struct ElicitArgs {
    /// The question to ask the user.
    message: String,
}

fn image() -> Content {
    Content::image(PNG, "image/png")
}

fn text(s: &str) -> Result<CallToolResult, ToolError> {
    Ok(CallToolResult::text(s))
}

mod tasks;

/// The profile; with a job runtime, also the tasks extension's fixtures (real durable jobs).
pub fn register(b: ServerBuilder, jobs: Option<&staunch_jobs::JobRuntime>) -> ServerBuilder {
    let b = b
        .title("mcp-conformance-test-server")
        .capability("tools", json!({"listChanged": true}))
        .capability("resources", json!({"subscribe": true, "listChanged": true}))
        .capability("prompts", json!({"listChanged": true}))
        .capability("completions", json!({}));
    let b = content_tools(b);
    let b = interactive_tools(b);
    let b = stateless_tools(b);
    let b = resources(b);
    let b = prompts(b);
    match jobs {
        Some(rt) => tasks::register(b, rt),
        None => b,
    }
}

fn content_tools(b: ServerBuilder) -> ServerBuilder {
    b.tool(
        ToolSpec::quick("test_simple_text", "Returns a simple text response."),
        |_c, _a: NoArgs| async { text("This is a simple text response for testing.") },
    )
    .tool(
        ToolSpec::quick("test_image_content", "Returns an image."),
        |_c, _a: NoArgs| async {
            Ok(CallToolResult {
                content: vec![image()],
                ..Default::default()
            })
        },
    )
    .tool(
        ToolSpec::quick("test_audio_content", "Returns audio."),
        |_c, _a: NoArgs| async {
            Ok(CallToolResult {
                content: vec![Content::audio(WAV, "audio/wav")],
                ..Default::default()
            })
        },
    )
    .tool(
        ToolSpec::quick("test_embedded_resource", "Returns an embedded resource."),
        |_c, _a: NoArgs| async {
            Ok(CallToolResult {
                content: vec![Content::resource(
                    json!({"uri": "test://embedded-resource", "mimeType": "text/plain",
                           "text": "This is an embedded resource content."}),
                )],
                ..Default::default()
            })
        },
    )
    .tool(
        ToolSpec::quick("test_multiple_content_types", "Returns text, an image and a resource."),
        |_c, _a: NoArgs| async {
            Ok(CallToolResult {
                content: vec![
                    Content::text("Multiple content types test:"),
                    image(),
                    Content::resource(
                        json!({"uri": "test://mixed-content-resource", "mimeType": "application/json",
                               "text": "{\"test\":\"data\",\"value\":123}"}),
                    ),
                ],
                ..Default::default()
            })
        },
    )
    .tool(
        ToolSpec::quick("test_error_handling", "Always fails with a tool error."),
        |_c, _a: NoArgs| async {
            Err::<CallToolResult, _>(ToolError::tool(
                "This tool intentionally returns an error for testing",
            ))
        },
    )
    .tool_handler(
        ToolSpec::quick("json_schema_2020_12_tool", "Echoes its arguments; its schema uses JSON Schema 2020-12.")
            .input_schema(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {
                    "street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            })),
        |_c: Context, args: Value| async move {
            Ok(CallToolResult::text(format!("Received: {args}")))
        },
    )
}

fn interactive_tools(b: ServerBuilder) -> ServerBuilder {
    b.tool(
        ToolSpec::quick("test_tool_with_logging", "Sends three log messages while it runs."),
        |ctx: Context, _a: NoArgs| async move {
            for (i, m) in ["Tool execution started", "Tool processing data", "Tool execution completed"]
                .into_iter()
                .enumerate()
            {
                if i > 0 {
                    ctx.sleep(Duration::from_millis(50)).await?;
                }
                ctx.log(LoggingLevel::Info, m);
            }
            text("Tool with logging executed successfully")
        },
    )
    .tool(
        ToolSpec::streaming("test_tool_with_progress", "Reports progress 0, 50 and 100."),
        |ctx: Context, _a: NoArgs| async move {
            for (i, p) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    ctx.sleep(Duration::from_millis(50)).await?;
                }
                ctx.progress(p, Some(100.0), Some(format!("Completed step {p} of 100")));
            }
            text(&format!("progress reported for request {}", ctx.request_id()))
        },
    )
    .tool(
        ToolSpec::streaming(
            "test_reconnection",
            "Closes its SSE connection mid-call; the result arrives after the client resumes.",
        ),
        |ctx: Context, _a: NoArgs| async move {
            ctx.close_sse_stream();
            ctx.sleep(Duration::from_millis(100)).await?;
            text("Reconnection test completed successfully. The result was delivered after the stream was resumed.")
        },
    )
    .tool(
        ToolSpec::quick("test_sampling", "Asks the client's model to answer a prompt."),
        |ctx: Context, a: SamplingArgs| async move {
            let params = json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": a.prompt}}],
                "maxTokens": 100
            });
            match ctx.request_client("sampling/createMessage", params).await {
                Ok(r) => text(&format!("LLM response: {}", r["content"]["text"].as_str().unwrap_or_default())),
                Err(ToolError::Rpc(e)) => text(&format!("Sampling failed: {}", e.message)),
                Err(e) => Err(e),
            }
        },
    )
    .tool(
        ToolSpec::quick("test_elicitation", "Asks the user a question."),
        |ctx: Context, a: ElicitArgs| async move {
            let params = json!({"message": a.message, "requestedSchema": {
                "type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"]}});
            elicit(&ctx, params).await
        },
    )
    .tool(
        ToolSpec::quick("test_elicitation_sep1034_defaults", "Elicitation with default values."),
        |ctx: Context, _a: NoArgs| async move {
            let params = json!({"message": "Please confirm your details", "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "default": true}
                },
                "required": []
            }});
            elicit(&ctx, params).await
        },
    )
    .tool(
        ToolSpec::quick("test_elicitation_sep1330_enums", "Elicitation with every enum shape."),
        |ctx: Context, _a: NoArgs| async move {
            let params = json!({"message": "Pick some options", "requestedSchema": {
                "type": "object",
                "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}]},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                                   "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "minItems": 1, "maxItems": 3,
                                      "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}]}}
                },
                "required": []
            }});
            elicit(&ctx, params).await
        },
    )
}

async fn elicit(ctx: &Context, params: Value) -> Result<CallToolResult, ToolError> {
    match ctx.request_client("elicitation/create", params).await {
        Ok(r) => text(&format!(
            "User response: action={}, content={}",
            r["action"].as_str().unwrap_or("?"),
            r["content"]
        )),
        Err(ToolError::Rpc(e)) => text(&format!("Elicitation failed: {}", e.message)),
        Err(e) => Err(e),
    }
}

/// The stateless era's fixtures (2026-07-28): input-required rounds written with the same
/// `Context` calls a session-era handler uses, a tool that needs a capability the client may
/// not declare, per-request logging, list-change triggers for `subscriptions/listen`, and a
/// parameter mirrored into an `Mcp-Param-*` header.
fn stateless_tools(b: ServerBuilder) -> ServerBuilder {
    let ask_name = || {
        json!({"message": "What is your name?", "requestedSchema": {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}})
    };
    let confirm = || {
        json!({"message": "Please confirm", "requestedSchema": {
            "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}})
    };
    let sampling = |text: &str, max: u32| json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max});
    b.tool(
        ToolSpec::quick("test_missing_capability", "Needs the client's sampling capability."),
        move |ctx: Context, _a: NoArgs| async move {
            let r = ctx.sample(sampling("Say hello", 20)).await?;
            text(&format!("sampled: {}", r["content"]["text"].as_str().unwrap_or_default()))
        },
    )
    .tool(
        ToolSpec::quick("test_input_required_result_elicitation", "Asks the user's name, then greets them."),
        move |ctx: Context, _a: NoArgs| async move {
            let r = ctx.elicit_as("user_name", ask_name()).await?;
            text(&format!("Hello, {}!", r["content"]["name"].as_str().unwrap_or("friend")))
        },
    )
    .tool(
        ToolSpec::quick("test_input_required_result_sampling", "Asks the client's model a question."),
        move |ctx: Context, _a: NoArgs| async move {
            let r = ctx
                .ask(Some("capital_question"), "sampling/createMessage", sampling("What is the capital of France?", 100))
                .await?;
            text(&format!("The model said: {}", r["content"]["text"].as_str().unwrap_or_default()))
        },
    )
    .tool(
        ToolSpec::quick("test_input_required_result_list_roots", "Asks for the client's roots."),
        |ctx: Context, _a: NoArgs| async move {
            let r = ctx.ask(Some("client_roots"), "roots/list", json!({})).await?;
            let uris: Vec<&str> = r["roots"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x["uri"].as_str()).collect())
                .unwrap_or_default();
            text(&format!("Roots: {}", uris.join(", ")))
        },
    )
    .tool(
        ToolSpec::quick("test_input_required_result_request_state", "Round-trips sealed requestState."),
        move |ctx: Context, _a: NoArgs| async move {
            let r = ctx.elicit_as("confirm", confirm()).await?;
            // Answered in an earlier round: the sealed state came back intact.
            let verified = if ctx.input_round() > 0 { "state-ok" } else { "state-missing" };
            text(&format!("{verified}: confirmed={}", r["content"]["ok"]))
        },
    )
    .tool(
        ToolSpec::quick("test_input_required_result_multiple_inputs", "Asks three things in one round."),
        move |ctx: Context, _a: NoArgs| async move {
            let answers = ctx
                .ask_all(vec![
                    (Some("user_name"), "elicitation/create", ask_name()),
                    (Some("greeting"), "sampling/createMessage", sampling("Generate a greeting", 50)),
                    (Some("client_roots"), "roots/list", json!({})),
                ])
                .await?;
            text(&format!(
                "{}, {}! ({} roots)",
                answers[1]["content"]["text"].as_str().unwrap_or("Hello"),
                answers[0]["content"]["name"].as_str().unwrap_or("friend"),
                answers[2]["roots"].as_array().map_or(0, Vec::len)
            ))
        },
    )
    .tool(
        ToolSpec::quick("test_input_required_result_multi_round", "Asks two questions, one per round."),
        |ctx: Context, _a: NoArgs| async move {
            let name = ctx
                .elicit_as("step1", json!({"message": "Step 1: What is your name?", "requestedSchema": {
                    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}))
                .await?;
            let color = ctx
                .elicit_as("step2", json!({"message": "Step 2: What is your favorite color?", "requestedSchema": {
                    "type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}}))
                .await?;
            text(&format!(
                "Multi-round complete for {} who likes {}",
                name["content"]["name"].as_str().unwrap_or("friend"),
                color["content"]["color"].as_str().unwrap_or("?")
            ))
        },
    )
    .tool(
        ToolSpec::quick("test_input_required_result_tampered_state", "Refuses a tampered requestState."),
        move |ctx: Context, _a: NoArgs| async move {
            ctx.elicit_as("confirm", confirm()).await?;
            text("integrity-ok: state verified")
        },
    )
    .tool(
        ToolSpec::quick(
            "test_input_required_result_capabilities",
            "Asks only through the capabilities the client declared.",
        ),
        move |ctx: Context, _a: NoArgs| async move {
            let caps = ctx.client_capabilities();
            let mut questions = Vec::new();
            if caps.get("elicitation").is_some() {
                questions.push((Some("elicit_input"), "elicitation/create", json!({"message": "Elicitation input",
                    "requestedSchema": {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}})));
            }
            if caps.get("sampling").is_some() {
                questions.push((Some("sample_input"), "sampling/createMessage", sampling("Sample request", 50)));
            }
            if questions.is_empty() {
                return text("No supported capabilities declared");
            }
            let n = questions.len();
            ctx.ask_all(questions).await?;
            text(&format!("capabilities-ok: received {n} answers"))
        },
    )
    .tool(
        ToolSpec::streaming("test_streaming_elicitation", "Streams progress, then answers."),
        |ctx: Context, _a: NoArgs| async move {
            ctx.progress(50.0, Some(100.0), None);
            ctx.sleep(Duration::from_millis(20)).await?;
            text("Streaming complete")
        },
    )
    .tool(
        ToolSpec::quick("test_logging_tool", "Logs once, at info (only if the request asked for logs)."),
        |ctx: Context, _a: NoArgs| async move {
            ctx.log(LoggingLevel::Info, "Diagnostic trace logging activated");
            text("Logging evaluated")
        },
    )
    .tool(
        ToolSpec::quick("test_trigger_tool_change", "Announces a tool list change to listeners."),
        |ctx: Context, _a: NoArgs| async move {
            ctx.announce(Change::ToolsListChanged);
            text("Mutation triggered")
        },
    )
    .tool(
        ToolSpec::quick("test_trigger_prompt_change", "Announces a prompt list change to listeners."),
        |ctx: Context, _a: NoArgs| async move {
            ctx.announce(Change::PromptsListChanged);
            text("Mutation triggered")
        },
    )
    .tool_handler(
        ToolSpec::quick("test_header_param", "Echoes `region`, which HTTP clients mirror into Mcp-Param-Region.")
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "query": {"type": "string"}
                },
                "required": ["region"]
            })),
        |_c: Context, args: Value| async move {
            Ok(CallToolResult::text(format!("region={}", args["region"].as_str().unwrap_or_default())))
        },
    )
}

fn resource_contents(uri: &str) -> Option<Value> {
    Some(match uri {
        "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
                                       "text": "This is the content of the static text resource."}),
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
        "test://watched-resource" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"})
        }
        _ => {
            let id = uri
                .strip_prefix("test://template/")?
                .strip_suffix("/data")?;
            if id.is_empty() || id.contains('/') {
                return None;
            }
            json!({"uri": uri, "mimeType": "application/json",
                   "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string()})
        }
    })
}

fn resources(b: ServerBuilder) -> ServerBuilder {
    b.method("resources/list", |_c: Context, _p: Option<Value>| async {
        Ok(json!({"resources": [
            {"uri": "test://static-text", "name": "Static Text Resource", "mimeType": "text/plain",
             "description": "A static text resource"},
            {"uri": "test://static-binary", "name": "Static Binary Resource", "mimeType": "image/png",
             "description": "A static binary resource"},
            {"uri": "test://watched-resource", "name": "Watched Resource", "mimeType": "text/plain",
             "description": "A resource that can be subscribed to"}
        ]}))
    })
    .method("resources/templates/list", |_c: Context, _p: Option<Value>| async {
        Ok(json!({"resourceTemplates": [
            {"uriTemplate": "test://template/{id}/data", "name": "Template Resource",
             "mimeType": "application/json", "description": "A resource template with an id"}
        ]}))
    })
    .method("resources/read", |_c: Context, p: Option<Value>| async move {
        let uri = uri_param(&p)?;
        match resource_contents(&uri) {
            Some(c) => Ok(json!({"contents": [c]})),
            None => Err(ToolError::Rpc(
                ErrorObject::new(-32002, format!("resource not found: {uri}")).with_data(json!({"uri": uri})),
            )),
        }
    })
    .method("resources/subscribe", |_c: Context, p: Option<Value>| async move {
        uri_param(&p)?;
        Ok(json!({}))
    })
    .method("resources/unsubscribe", |_c: Context, p: Option<Value>| async move {
        uri_param(&p)?;
        Ok(json!({}))
    })
}

fn uri_param(p: &Option<Value>) -> Result<String, ToolError> {
    p.as_ref()
        .and_then(|p| p["uri"].as_str())
        .map(String::from)
        .ok_or_else(|| {
            ToolError::Rpc(ErrorObject::invalid_params(
                "params.uri (a string) is required",
            ))
        })
}

fn prompts(b: ServerBuilder) -> ServerBuilder {
    b.method("prompts/list", |_c: Context, _p: Option<Value>| async {
        Ok(json!({"prompts": [
            {"name": "test_simple_prompt", "description": "A simple prompt without arguments"},
            {"name": "test_prompt_with_arguments", "description": "A prompt with required arguments",
             "arguments": [{"name": "arg1", "description": "First test argument", "required": true},
                           {"name": "arg2", "description": "Second test argument", "required": true}]},
            {"name": "test_prompt_with_embedded_resource", "description": "A prompt with an embedded resource",
             "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]},
            {"name": "test_prompt_with_image", "description": "A prompt with an image"},
            {"name": "test_input_required_result_prompt", "description": "A prompt that asks the user for context first"}
        ]}))
    })
    .method("prompts/get", |ctx: Context, p: Option<Value>| async move {
        let p = p.unwrap_or_default();
        let name = p["name"].as_str().unwrap_or_default().to_string();
        let args = &p["arguments"];
        let arg = |k: &str| args[k].as_str().unwrap_or_default().to_string();
        let user = |content: Value| json!({"role": "user", "content": content});
        let messages = match name.as_str() {
            "test_simple_prompt" => vec![user(json!({"type": "text", "text": "This is a simple prompt for testing."}))],
            "test_prompt_with_arguments" => vec![user(json!({"type": "text",
                "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}))],
            "test_prompt_with_embedded_resource" => vec![
                user(json!({"type": "resource", "resource": {"uri": arg("resourceUri"), "mimeType": "text/plain",
                            "text": "Embedded resource content for testing."}})),
                user(json!({"type": "text", "text": "Please process the embedded resource above."})),
            ],
            "test_prompt_with_image" => vec![
                user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
                user(json!({"type": "text", "text": "Please analyze the image above."})),
            ],
            "test_input_required_result_prompt" => {
                let r = ctx
                    .elicit_as("user_context", json!({"message": "What context should the prompt use?",
                        "requestedSchema": {"type": "object", "properties": {"context": {"type": "string"}},
                                            "required": ["context"]}}))
                    .await?;
                let context = r["content"]["context"].as_str().unwrap_or_default();
                vec![user(json!({"type": "text", "text": format!("Prompt with context: {context}")}))]
            }
            _ => return Err(ToolError::Rpc(ErrorObject::invalid_params(format!("unknown prompt: {name}")))),
        };
        Ok(json!({"messages": messages}))
    })
    .method("completion/complete", |_c: Context, _p: Option<Value>| async {
        Ok(json!({"completion": {"values": [], "total": 0, "hasMore": false}}))
    })
}
