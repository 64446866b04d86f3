//! `set_value {key, value}` (atomic) and `get_value {key}` (quick).
//!
//! `set_value` is a short write that ignores cancellation: a half-applied abort would leave
//! state the client cannot inspect (it stopped listening), so the write finishes and the
//! client reads the outcome with `get_value`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use staunch_server::{CallToolResult, ServerBuilder, ToolSpec};

#[derive(Deserialize, JsonSchema)]
struct SetArgs {
    key: String,
    value: String,
    /// Milliseconds the write takes (simulated).
    #[serde(default = "default_write_ms")]
    write_ms: u64,
}

fn default_write_ms() -> u64 {
    200
}

#[derive(Deserialize, JsonSchema)]
struct GetArgs {
    key: String,
}

type Store = Arc<Mutex<HashMap<String, String>>>;

pub(crate) fn register(b: ServerBuilder) -> ServerBuilder {
    let store: Store = Store::default();
    let reader = store.clone();
    b.tool(
        ToolSpec::atomic(
            "set_value",
            "Stores a value under a key. A short write that always completes, even if the \
             call is cancelled; read it back with get_value.",
        )
        .annotations(serde_json::json!({"idempotentHint": true})),
        move |_ctx, a: SetArgs| {
            let store = store.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(a.write_ms)).await;
                store
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(a.key.clone(), a.value);
                Ok(CallToolResult::text(format!("stored {}", a.key)))
            }
        },
    )
    .tool(
        ToolSpec::quick("get_value", "Reads the value stored under a key.")
            .annotations(serde_json::json!({"readOnlyHint": true})),
        move |_ctx, a: GetArgs| {
            let v = reader
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&a.key)
                .cloned();
            async move {
                Ok(match v {
                    Some(v) => CallToolResult::text(v),
                    None => CallToolResult::error(format!("no value stored under {:?}", a.key)),
                })
            }
        },
    )
}
