//! A task written in the other era's words, and the requests about a task held across eras
//! answered in its client's ([`super::Kind::TasksToExtension`], [`super::Kind::ExtensionToTasks`]).

use std::time::Duration;

use serde_json::{Value, json};
use staunch_client::ClientError;
use staunch_protocol::{ErrorObject, codes};
use staunch_server::{Context, ToolError};

use super::{RELATED_TASK, with_id};
use crate::error::rpc;

/// A 2025-11-25 task written the extension's way: `ttl` and `pollInterval` become `ttlMs`
/// and `pollIntervalMs`; every other field stays.
pub(crate) fn extension_task(task: &Value) -> Value {
    let mut out = serde_json::Map::new();
    if let Value::Object(fields) = task {
        for (k, v) in fields {
            let k = match k.as_str() {
                "ttl" => "ttlMs",
                "pollInterval" => "pollIntervalMs",
                other => other,
            };
            out.insert(k.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// A request of the extension's about a 2025-11-25 upstream task (`upstream_id` upstream, `id`
/// to the client), answered the extension's way.
pub(super) async fn bridged(
    method: &str,
    client: &staunch_client::Client,
    params: Value,
    opts: &staunch_client::CallOptions,
    (upstream_id, id): (&str, &str),
) -> Result<Value, ToolError> {
    match method {
        "tasks/get" => {
            let task = client
                .request("tasks/get", Some(params.clone()), opts)
                .await
                .map_err(rpc)?;
            let mut detailed = extension_task(&task);
            if let Some("completed" | "failed") = task["status"].as_str() {
                // Terminal: `tasks/result` answers at once, with the result or the error.
                let (status, key, value) =
                    match client.request("tasks/result", Some(params), opts).await {
                        Ok(result) => ("completed", "result", with_id(result, upstream_id, id)),
                        Err(ClientError::Rpc(e)) => ("failed", "error", json!(e)),
                        Err(e) => return Err(rpc(e)),
                    };
                detailed["status"] = status.into();
                detailed[key] = value;
            }
            Ok(detailed)
        }
        "tasks/cancel" => {
            client
                .request("tasks/cancel", Some(params), opts)
                .await
                .map_err(rpc)?;
            Ok(json!({}))
        }
        _ => Err(ToolError::Rpc(ErrorObject::new(
            codes::INVALID_PARAMS,
            format!(
                "task {id} takes no {method}: its upstream runs it as a 2025-11-25 task, which \
                 asks its questions on a session"
            ),
        ))),
    }
}

/// A task of the extension written the 2025-11-25 way: `ttlMs` and `pollIntervalMs` become
/// `ttl` and `pollInterval`; the outcome, the open questions and the result type go (they are
/// `tasks/result`'s and the session's there); every other field stays.
pub(crate) fn tasks_task(task: &Value) -> Value {
    let mut out = serde_json::Map::new();
    if let Value::Object(fields) = task {
        for (k, v) in fields {
            let k = match k.as_str() {
                "ttlMs" => "ttl",
                "pollIntervalMs" => "pollInterval",
                "result" | "error" | "inputRequests" | "resultType" => continue,
                other => other,
            };
            out.insert(k.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// The shortest and longest wait between two looks at an upstream task whose end a
/// `tasks/result` waits for (the upstream's `pollIntervalMs`, clamped).
const POLL_BOUNDS: (Duration, Duration) = (Duration::from_millis(20), Duration::from_secs(5));

/// A 2025-11-25 request about an upstream task of the extension (`params` declare it),
/// answered the 2025-11-25 way.
pub(super) async fn as_tasks(
    method: &str,
    client: &staunch_client::Client,
    params: Value,
    opts: &staunch_client::CallOptions,
    ctx: &Context,
    upstream_id: &str,
) -> Result<Value, ToolError> {
    let get = || client.request("tasks/get", Some(params.clone()), opts);
    match method {
        "tasks/get" => Ok(tasks_task(&get().await.map_err(rpc)?)),
        "tasks/cancel" => {
            client
                .request("tasks/cancel", Some(params.clone()), opts)
                .await
                .map_err(rpc)?;
            Ok(tasks_task(&get().await.map_err(rpc)?))
        }
        "tasks/result" => {
            // Keys of `inputRequests` are unique for the life of a task: one answered (an
            // update the upstream has not applied yet) is not asked again.
            let mut answered = std::collections::HashSet::new();
            loop {
                let task = get().await.map_err(rpc)?;
                match task["status"].as_str() {
                    Some("completed") => {
                        let mut result = task.get("result").cloned().unwrap_or(Value::Null);
                        if let Value::Object(r) = &mut result {
                            let meta = r.entry("_meta").or_insert_with(|| json!({}));
                            meta[RELATED_TASK] = json!({"taskId": upstream_id});
                        }
                        return Ok(result);
                    }
                    Some("failed") => {
                        let e = serde_json::from_value::<ErrorObject>(task["error"].clone())
                            .unwrap_or_else(|_| {
                                let said = task["statusMessage"].as_str().unwrap_or("it failed");
                                ErrorObject::new(codes::INTERNAL_ERROR, said)
                            });
                        return Err(ToolError::Rpc(e));
                    }
                    Some("cancelled") => {
                        return Err(ToolError::Rpc(ErrorObject::new(
                            codes::INVALID_PARAMS,
                            "the task was cancelled: it has no result",
                        )));
                    }
                    Some("input_required") => {
                        let open: serde_json::Map<String, Value> = task["inputRequests"]
                            .as_object()
                            .into_iter()
                            .flatten()
                            .filter(|(k, _)| !answered.contains(k.as_str()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        if !open.is_empty() {
                            let keys: Vec<String> = open.keys().cloned().collect();
                            let asked = json!({"inputRequests": open});
                            let answers = crate::ask::ask_downstream(ctx, &asked).await?;
                            let mut update = params.clone();
                            update["inputResponses"] = answers;
                            client
                                .request("tasks/update", Some(update), opts)
                                .await
                                .map_err(rpc)?;
                            answered.extend(keys);
                            continue;
                        }
                    }
                    _ => {}
                }
                let wait = task["pollIntervalMs"]
                    .as_u64()
                    .map_or(POLL_BOUNDS.0, Duration::from_millis)
                    .clamp(POLL_BOUNDS.0, POLL_BOUNDS.1);
                tokio::select! {
                    _ = ctx.cancelled() => return Err(ToolError::Cancelled),
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
        _ => Err(ToolError::Rpc(ErrorObject::method_not_found(method))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_task_is_written_in_the_other_eras_words_with_every_other_field_kept() {
        let task = json!({"taskId": "t1", "status": "working", "ttl": 60000, "pollInterval": 100,
                          "createdAt": "2026-12-06T00:00:00Z", "x.example": 1});
        let ext = extension_task(&task);
        assert_eq!(
            ext,
            json!({"taskId": "t1", "status": "working", "ttlMs": 60000, "pollIntervalMs": 100,
                   "createdAt": "2026-12-06T00:00:00Z", "x.example": 1})
        );
        // And back, the outcome, the open questions and the result type left to `tasks/result`
        // and the session.
        let mut detailed = ext.clone();
        detailed["resultType"] = json!("task");
        detailed["result"] = json!({"content": []});
        detailed["inputRequests"] = json!({"q": {}});
        assert_eq!(tasks_task(&detailed), task);
        assert_eq!(
            tasks_task(&json!({"taskId": "t2", "error": {"code": 1}}))["error"],
            Value::Null
        );
    }
}
