//! An upstream's questions (`inputRequests`, from a 2026-07-28 upstream's input-required
//! answer or its task's `input_required` state) put to the downstream client that caused them:
//! as requests on its session, or in an input-required round of its own
//! ([`Context::ask_all`] knows which).

use serde_json::{Value, json};
use staunch_server::{Context, ToolError};

/// Puts an upstream's `inputRequests` to the downstream client; the answers by the same keys.
pub(crate) async fn ask_downstream(
    ctx: &Context,
    input_required: &Value,
) -> Result<Value, ToolError> {
    let Some(requests) = input_required["inputRequests"].as_object() else {
        return Err(ToolError::Internal(
            "the upstream asked for input without inputRequests".into(),
        ));
    };
    let questions: Vec<(&str, &str, Value)> = requests
        .iter()
        .map(|(k, q)| {
            (
                k.as_str(),
                q["method"].as_str().unwrap_or_default(),
                q.get("params").cloned().unwrap_or_else(|| json!({})),
            )
        })
        .collect();
    let asked = questions
        .iter()
        .map(|(k, m, p)| (Some(*k), *m, p.clone()))
        .collect();
    let answers = ctx.ask_all(asked).await?;
    Ok(Value::Object(
        questions
            .iter()
            .zip(answers)
            .map(|((k, _, _), a)| (k.to_string(), a))
            .collect(),
    ))
}
