//! The task methods for the upstream tasks the proxy's clients hold: `tasks/get`,
//! `tasks/result`, `tasks/cancel`, `tasks/update` (in front of whatever handled them before),
//! and `tasks/list`'s first page.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use staunch_protocol::{ErrorObject, codes};
use staunch_server::{Context, MethodHandler, ToolError, declares_tasks, missing_tasks_extension};

use super::shapes::{as_tasks, bridged, tasks_task};
use super::{Found, Kind, UpstreamTasks, is_terminal, with_id};
use crate::error::rpc;
use crate::upstream::request_options;

/// `tasks/get`, `tasks/result`, `tasks/cancel` or `tasks/update` for an upstream task, else
/// for whatever handled the method before.
pub(super) struct TaskMethod {
    pub(super) method: &'static str,
    /// The tables of the upstreams that run tasks.
    pub(super) tables: Vec<Arc<UpstreamTasks>>,
    pub(super) before: Option<Arc<dyn MethodHandler>>,
}

impl TaskMethod {
    fn find(&self, id: &str, ctx: &Context) -> Option<Found> {
        self.tables.iter().find_map(|t| t.find(id, ctx))
    }
}

impl MethodHandler for TaskMethod {
    fn call(
        &self,
        ctx: Context,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        let id = params
            .as_ref()
            .and_then(|p| p.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let found = id.as_deref().and_then(|id| self.find(id, &ctx));
        let (Some(id), Some(found)) = (id, found) else {
            return match &self.before {
                Some(h) => h.call(ctx, params),
                None => Box::pin(async move { Err(unknown(&params)) }),
            };
        };
        // A stateless request about an extension task declares the extension, as it must
        // for staunch's own (SEP-2663: -32021 otherwise).
        if found.kind.client_declares()
            && !ctx.has_session()
            && !declares_tasks(&ctx.client_capabilities())
        {
            return Box::pin(async { Err(ToolError::Rpc(missing_tasks_extension())) });
        }
        let method = self.method;
        Box::pin(async move {
            let Found {
                up,
                upstream_id,
                kind,
                ended,
            } = found;
            let mut params = params.unwrap_or_else(|| Value::Object(Default::default()));
            params["taskId"] = Value::String(upstream_id.clone());
            // The downstream request's own `_meta` describes the downstream hop.
            if let Some(o) = params.as_object_mut() {
                o.remove("_meta");
            }
            let client = up
                .client()
                .await
                .map_err(|e| ToolError::Internal(e.to_string()))?;
            let opts = request_options(false, ctx.cancellation_token());
            match kind {
                Kind::TasksToExtension => {
                    let v = bridged(method, &client, params, &opts, (&upstream_id, &id)).await?;
                    return Ok(with_id(v, &upstream_id, &id));
                }
                Kind::ExtensionToTasks => {
                    let params = client.with_tasks_extension(params).map_err(rpc)?;
                    let v = as_tasks(method, &client, params, &opts, &ctx, &upstream_id).await?;
                    return Ok(with_id(v, &upstream_id, &id));
                }
                Kind::Extension => {
                    params = client.with_tasks_extension(params).map_err(rpc)?;
                }
                Kind::Tasks => {}
            }
            let v = client
                .request(method, Some(params), &opts)
                .await
                .map_err(rpc)?;
            // A result, or a terminal task: its progress is over.
            if method == "tasks/result" || is_terminal(&v) {
                ended.mark();
            }
            Ok(with_id(v, &upstream_id, &id))
        })
    }

    fn deadline(&self, default: Duration) -> Option<Duration> {
        // `tasks/result` blocks until the task is terminal, however long that takes; the
        // client's cancel still ends the wait.
        (self.method != "tasks/result").then_some(default)
    }
}

/// Upstream tasks one `tasks/list` lists at most, after the job runtime's own page.
const LIST_MAX: usize = 100;

/// `tasks/list` (registered by the job runtime where requests carry a principal): its first
/// page also lists the upstream tasks the caller's principal holds in a session — an upstream's
/// 2025 task, or its extension task held the 2025 way — each as its upstream reads it now (one
/// that no longer answers is left out).
pub(super) struct ListMethod {
    pub(super) tables: Vec<Arc<UpstreamTasks>>,
    pub(super) before: Arc<dyn MethodHandler>,
}

impl MethodHandler for ListMethod {
    fn call(
        &self,
        ctx: Context,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        let first_page = params
            .as_ref()
            .and_then(|p| p.get("cursor"))
            .is_none_or(Value::is_null);
        let held: Vec<(String, Found)> = match ctx.principal() {
            Some(p) if first_page => self
                .tables
                .iter()
                .flat_map(|t| t.held_by(p, LIST_MAX))
                // `tasks/list` is the 2025 revision's: the tasks its clients hold are listed,
                // an extension client's are not.
                .filter(|(_, found)| matches!(found.kind, Kind::Tasks | Kind::ExtensionToTasks))
                .take(LIST_MAX)
                .collect(),
            _ => Vec::new(),
        };
        let page = self.before.call(ctx.clone(), params);
        Box::pin(async move {
            let mut page = page.await?;
            let mut upstream = Vec::new();
            for (id, found) in held {
                let Ok(client) = found.up.client().await else {
                    continue;
                };
                let opts = request_options(false, ctx.cancellation_token());
                let params = serde_json::json!({"taskId": found.upstream_id});
                let get = match found.kind {
                    // An extension task held the 2025 way is read as `tasks/get` reads it.
                    Kind::ExtensionToTasks => match client.with_tasks_extension(params) {
                        Ok(params) => client
                            .request("tasks/get", Some(params), &opts)
                            .await
                            .ok()
                            .map(|task| tasks_task(&task)),
                        Err(_) => None,
                    },
                    _ => client.request("tasks/get", Some(params), &opts).await.ok(),
                };
                if let Some(task) = get {
                    upstream.push(with_id(task, &found.upstream_id, &id));
                }
            }
            if let Some(Value::Array(tasks)) = page.get_mut("tasks") {
                tasks.extend(upstream);
            }
            Ok(page)
        })
    }
}

/// -32602 for a task id nobody here holds (or none given).
fn unknown(params: &Option<Value>) -> ToolError {
    let message = match params.as_ref().and_then(|p| p.get("taskId")) {
        Some(Value::String(id)) => format!("unknown task {id}"),
        _ => "taskId (a string) is required".to_string(),
    };
    ToolError::Rpc(ErrorObject::new(codes::INVALID_PARAMS, message))
}
