//! The upstreams' tools on a `ServerBuilder`: listed from each upstream at start, renamed with
//! the upstream's prefix, shaped by its rules (`job` tools through staunch-jobs:
//! `x`, `start_x`, `get_x`, `cancel_x` and tasks), collisions refused.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use staunch_client::{CallOptions, ConnectOptions};
use staunch_jobs::{JobRuntime, JobTool, JobsExt};
use staunch_server::{Metrics, ServerBuilder, Shape, ToolSpec};

use crate::ProxyError;
use crate::forward::{ForwardTool, UpstreamJob};
use crate::pool::Pool;
use crate::spec::UpstreamSpec;

/// How often idle per-session upstreams (`isolate`) are looked for.
const REAP_EVERY: Duration = Duration::from_secs(30);

/// One served tool: its name here, its upstream, its name there, its shape.
pub type ServedTool = (String, String, String, Shape);

/// What [`register`] put on the server.
#[derive(Debug)]
pub struct Registered {
    /// One pool per upstream, in the order given.
    pub pools: Vec<Arc<Pool>>,
    /// What was served at start: served tool name, upstream, its own tool name, shape
    /// ([`crate::follow`] keeps the current list).
    pub tools: Vec<ServedTool>,
}

impl Registered {
    /// With `--isolate`, ends per-session upstreams idle for the session idle time: a backstop,
    /// since a session's upstream ends when the session does ([`Pool`]).
    pub fn reap_isolated(&self, idle: Duration) {
        for pool in self.pools.iter().filter(|p| p.spec().isolate) {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(REAP_EVERY);
                loop {
                    tick.tick().await;
                    pool.reap_idle(idle).await;
                }
            });
        }
    }

    /// Ends every upstream connection (the spec's shutdown for processes).
    pub async fn shut_down(&self) {
        for p in &self.pools {
            p.shut_down().await;
        }
    }
}

/// The upstream's tools as it lists them (its shared connection).
pub(crate) async fn list_tools(pool: &Pool) -> Result<Vec<Value>, ProxyError> {
    let client = pool.shared().client().await?;
    client
        .list_tools(&CallOptions::default())
        .await
        .map_err(|source| ProxyError::Request {
            upstream: pool.spec().name.clone(),
            what: "tools/list".into(),
            source,
        })
}

/// An upstream tool's description and input schema (`{"type": "object"}` when it has none).
fn described(tool: &Value) -> (String, Value) {
    let description = tool["description"].as_str().unwrap_or_default().to_string();
    let schema = tool
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "object"}));
    (description, schema)
}

/// The names a tool takes on the server (job tools have three more faces).
pub(crate) fn names_of(name: &str, shape: Shape) -> Vec<String> {
    let mut v = vec![name.to_string()];
    if shape == Shape::Job {
        v.extend(["start", "get", "cancel"].map(|f| format!("{f}_{name}")));
    }
    v
}

/// Connects every upstream, lists its tools and adds them to `builder`; what an upstream
/// sends after a cancel is counted in `metrics`.
pub async fn register(
    mut builder: ServerBuilder,
    specs: Vec<UpstreamSpec>,
    jobs: Option<&JobRuntime>,
    opts: &ConnectOptions,
    metrics: &Metrics,
) -> Result<(ServerBuilder, Registered), ProxyError> {
    let mut pools = Vec::new();
    let mut served: Vec<(String, String, String, Shape)> = Vec::new();
    let mut claimed: HashMap<String, String> = HashMap::new();
    for spec in specs {
        let pool = Pool::start(spec, opts, metrics).await?;
        pools.push(pool.clone());
        let spec = pool.spec();
        let listed = list_tools(&pool).await?;
        let own: Vec<&str> = listed.iter().filter_map(|t| t["name"].as_str()).collect();
        if let Some(missing) = spec.tools.keys().find(|k| !own.contains(&k.as_str())) {
            return Err(ProxyError::UnknownTool {
                upstream: spec.name.clone(),
                tool: missing.clone(),
                known: own.join(", "),
            });
        }
        for tool in &listed {
            let Some(own_name) = tool["name"].as_str() else {
                tracing::warn!(upstream = %spec.name, "skipping an upstream tool without a name");
                continue;
            };
            let name = format!("{}{own_name}", spec.prefix);
            let shape = spec.shape_of(own_name);
            for n in names_of(&name, shape) {
                if let Some(first) = claimed.insert(n.clone(), spec.name.clone()) {
                    return Err(ProxyError::Collision {
                        name: n,
                        first,
                        second: spec.name.clone(),
                    });
                }
            }
            builder = add_tool(builder, &pool, tool, own_name, &name, shape, jobs)?;
            served.push((name, spec.name.clone(), own_name.to_string(), shape));
        }
    }
    builder = crate::methods::register(builder, &pools);
    let tables = pools
        .iter()
        .filter(|p| p.shared().runs_tasks())
        .map(|p| p.tasks().clone())
        .collect();
    builder = crate::tasks::register(builder, tables);
    // An upstream that may change its tools (it says so) makes the proxy's tool set dynamic:
    // downstream sessions are told when `crate::follow` applies a change.
    if pools.iter().any(|p| {
        p.shared()
            .capabilities()
            .is_some_and(|c| c["tools"]["listChanged"] == true)
    }) {
        builder = builder.dynamic_tools();
    }
    Ok((
        builder,
        Registered {
            pools,
            tools: served,
        },
    ))
}

fn add_tool(
    builder: ServerBuilder,
    pool: &Arc<Pool>,
    tool: &Value,
    own_name: &str,
    name: &str,
    shape: Shape,
    jobs: Option<&JobRuntime>,
) -> Result<ServerBuilder, ProxyError> {
    if shape != Shape::Job {
        let (spec, handler) = forward_tool(pool, tool, own_name, name, shape);
        return Ok(builder.tool_handler(spec, handler));
    }
    let rule = pool.spec().rule(own_name);
    let (description, schema) = described(tool);
    let rt = jobs.ok_or_else(|| ProxyError::NoJobRuntime(name.to_string()))?;
    let body = UpstreamJob::new(pool.clone(), own_name).as_task(task_required(tool));
    let mut job = JobTool::with_body(name.to_string(), description, schema, body)
        .side_effects(rule.side_effects.unwrap_or(true))
        .retry_safe(rule.retry_safe);
    if let Some(t) = tool["title"].as_str() {
        job = job.title(t.to_string());
    }
    if let Some(d) = rule.deadline {
        job = job.max_runtime(d);
    }
    Ok(builder.job_tool(rt, job))
}

/// The declaration and handler of a forwarded (not job-shaped) upstream tool.
pub(crate) fn forward_tool(
    pool: &Arc<Pool>,
    tool: &Value,
    own_name: &str,
    name: &str,
    shape: Shape,
) -> (ToolSpec, ForwardTool) {
    let rule = pool.spec().rule(own_name);
    let (description, schema) = described(tool);
    let mut spec = ToolSpec::new(name.to_string(), shape, description).input_schema(schema);
    if let Some(t) = tool["title"].as_str() {
        spec = spec.title(t.to_string());
    }
    if let Some(o) = tool.get("outputSchema").filter(|v| v.is_object()) {
        spec = spec.output_schema(o.clone());
    }
    let mut annotations = tool.get("annotations").filter(|v| v.is_object()).cloned();
    if rule.retry_safe {
        // Declared safe to run again: clients may retry it, and its answers need not be
        // resumable (a 2025 client that loses one calls again), as for a command tool.
        if let Some(a) = annotations
            .get_or_insert_with(|| serde_json::json!({}))
            .as_object_mut()
        {
            a.insert("idempotentHint".into(), Value::Bool(true));
        }
    }
    if let Some(a) = annotations {
        spec = spec.annotations(a);
    }
    if let Some(d) = rule.deadline {
        spec = spec.deadline(d);
    }
    // A tool the upstream runs as a task is offered as one to clients of its era, which may
    // also call it plainly (the proxy then follows the task itself where the upstream requires
    // one). Not under the stop policy: its calls run in processes of their own, ended with
    // the call, which a task outlives.
    let runs_as_task = matches!(
        tool.pointer("/execution/taskSupport")
            .and_then(Value::as_str),
        Some("optional" | "required")
    );
    if pool.shared().runs_tasks()
        && pool.spec().kill_after_cancel_of(own_name).is_none()
        && runs_as_task
    {
        spec = spec.execution(serde_json::json!({"taskSupport": "optional"}));
    }
    let handler = ForwardTool::new(pool.clone(), own_name)
        .as_task(task_required(tool))
        .runs_as_task(runs_as_task);
    (spec, handler)
}

/// Whether the upstream runs `tool` only as a task (`execution.taskSupport: "required"`): the
/// proxy then calls it as one and follows it ([`ForwardTool::as_task`]).
fn task_required(tool: &Value) -> bool {
    tool.pointer("/execution/taskSupport")
        .and_then(Value::as_str)
        == Some("required")
}

/// How the proxy connects upstream: it offers to forward sampling and elicitation to the
/// downstream client that caused them.
pub fn connect_options() -> ConnectOptions {
    ConnectOptions {
        client_name: "staunch-proxy".into(),
        capabilities: serde_json::json!({"sampling": {}, "elicitation": {}}),
        ..ConnectOptions::default()
    }
}
