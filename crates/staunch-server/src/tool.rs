//! Tools: their declaration ([`ToolSpec`], [`Shape`]) and their handlers ([`ToolHandler`]).
//!
//! Typed tools deserialise their arguments into a Rust type whose JSON Schema comes from
//! schemars. Arguments that do not fit are answered with a tool execution error
//! (`isError: true`) naming the field, so the model can correct the call.

use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use staunch_protocol::mcp::{CallToolResult, Tool};

use crate::context::Context;
use crate::error::ToolError;
use crate::json_result::JsonToolResult;

/// How the runtime treats a tool on cancel and timeout (DESIGN.md, "Tool shapes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Read-only, finishes well under the client timeout. On cancel the token fires; after
    /// the grace period the handler is dropped.
    Quick,
    /// Read-only, minutes, with progress. Cancel as `Quick`; a longer default deadline.
    Streaming,
    /// A write under a second. Cancellation is ignored: the write finishes, its outcome is
    /// logged, and no response goes to a client that stopped listening.
    Atomic,
    /// Long or side-effecting work as a durable job (start/get/cancel tools and tasks). The
    /// handler behind a `Job` tool is the job runtime's, which never runs the body inside the
    /// request.
    Job,
}

impl Shape {
    /// The name used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Quick => "quick",
            Shape::Streaming => "streaming",
            Shape::Atomic => "atomic",
            Shape::Job => "job",
        }
    }
}

/// A tool's declaration: what `tools/list` shows plus how the runtime runs it.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: String,
    pub(crate) shape: Shape,
    pub(crate) deadline: Option<Duration>,
    pub(crate) input_schema: Option<Value>,
    pub(crate) output_schema: Option<Value>,
    pub(crate) annotations: Option<Value>,
    pub(crate) execution: Option<Value>,
    /// OAuth scopes a caller's token must carry to call the tool (HTTP with auth on).
    pub(crate) scopes: Vec<String>,
}

impl ToolSpec {
    /// A tool of the given shape.
    pub fn new(name: impl Into<String>, shape: Shape, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: description.into(),
            shape,
            deadline: None,
            input_schema: None,
            output_schema: None,
            annotations: None,
            execution: None,
            scopes: Vec::new(),
        }
    }

    /// A `quick` tool.
    pub fn quick(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self::new(name, Shape::Quick, description)
    }

    /// A `streaming` tool.
    pub fn streaming(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self::new(name, Shape::Streaming, description)
    }

    /// An `atomic` tool.
    pub fn atomic(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self::new(name, Shape::Atomic, description)
    }

    /// Display title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The tool's own deadline (overrides the server default for its shape).
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = Some(d);
        self
    }

    /// A hand-written input schema, shown as is (typed tools derive theirs).
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }

    /// The schema of `structuredContent`.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Annotations (`readOnlyHint`, `destructiveHint`, `idempotentHint` …).
    pub fn annotations(mut self, a: Value) -> Self {
        self.annotations = Some(a);
        self
    }

    /// `execution` (e.g. `{"taskSupport":"optional"}`).
    pub fn execution(mut self, e: Value) -> Self {
        self.execution = Some(e);
        self
    }

    /// Scopes a caller's token must carry to call this tool when the HTTP transport
    /// authenticates requests; a token without them gets 403 `insufficient_scope`. Ignored
    /// without auth (stdio, or HTTP without `--auth`).
    pub fn scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Whether calling it again after a lost answer is harmless: its annotations say it
    /// only reads (`readOnlyHint`) or that a repeat has no further effect (`idempotentHint`).
    pub fn rerun_safe(&self) -> bool {
        let hint = |k: &str| {
            self.annotations
                .as_ref()
                .and_then(|a| a.get(k))
                .and_then(Value::as_bool)
                == Some(true)
        };
        hint("readOnlyHint") || hint("idempotentHint")
    }

    /// `execution.taskSupport`: `forbidden` (the default), `optional` or `required`.
    pub fn task_support(&self) -> &str {
        self.execution
            .as_ref()
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
            .unwrap_or("forbidden")
    }

    pub(crate) fn to_tool(&self) -> Tool {
        Tool {
            name: self.name.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            input_schema: self
                .input_schema
                .clone()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            output_schema: self.output_schema.clone(),
            annotations: self.annotations.clone(),
            execution: self.execution.clone(),
        }
    }
}

/// Handles a custom request method (resources, prompts, tasks …). Runs in the request's own
/// task, like a tool.
pub trait MethodHandler: Send + Sync + 'static {
    /// Starts handling; `params` as sent.
    fn call(
        &self,
        ctx: Context,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, ToolError>>;

    /// This method's deadline, given the server's `quick` default. `None` lets the request
    /// run until it ends or is cancelled (e.g. `tasks/result`, which must block until the
    /// task is terminal).
    fn deadline(&self, default: std::time::Duration) -> Option<std::time::Duration> {
        Some(default)
    }
}

impl<F, Fut> MethodHandler for F
where
    F: Fn(Context, Option<Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    fn call(
        &self,
        ctx: Context,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        Box::pin(self(ctx, params))
    }
}

/// Runs one tool call. `args` is always a JSON object.
pub trait ToolHandler: Send + Sync + 'static {
    /// Starts the call; the returned future is the request's work.
    fn call(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<CallToolResult, ToolError>>;

    /// A task-augmented call (MCP tasks, 2025-11-25): `task` is the request's `task` param; the
    /// future yields the `CreateTaskResult` (`{"task": {…}}`). `None` means this tool does not
    /// run as a task (the client gets -32601). Only asked when the server declares
    /// `tasks.requests.tools.call` and the tool's `execution.taskSupport` allows it.
    fn call_as_task(
        &self,
        ctx: Context,
        args: Value,
        task: Value,
    ) -> Option<BoxFuture<'static, Result<Value, ToolError>>> {
        let _ = (ctx, args, task);
        None
    }

    /// A call from a stateless request whose client declared the tasks extension
    /// ([`crate::TASKS_EXTENSION`]): the future yields either a `CreateTaskResult` (`resultType:
    /// "task"`, sent only once the task is durable) or a plain tool result, as the handler
    /// decides. `None` means the tool never runs as a task (it is called as usual). Only asked
    /// when the server declared the extension and `execution.taskSupport` is not `forbidden`.
    fn call_with_tasks(
        &self,
        ctx: Context,
        args: Value,
    ) -> Option<BoxFuture<'static, Result<Value, ToolError>>> {
        let _ = (ctx, args);
        None
    }

    /// Whether the call is answered with [`call_json`](Self::call_json) rather than
    /// [`call`](Self::call): a handler that already holds its result as JSON (a proxy's
    /// upstream answer) says yes, so the result reaches the client with every field it
    /// carried, those [`CallToolResult`] does not model included (new content types, keys of
    /// later protocol versions). Asked once, when the tool is registered.
    fn answers_json(&self) -> bool {
        false
    }

    /// The call, answered with a tool result (`{"content": […], …}`) as JSON the server
    /// sends on unread: it adds only what the request's era needs (`resultType` and
    /// `_meta`'s `serverInfo` in 2026-07-28). A [`ToolError::Tool`] still becomes an
    /// `isError` result. Called instead of [`call`](Self::call) when
    /// [`answers_json`](Self::answers_json) says so; by default, `call`'s result serialised.
    fn call_json(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<JsonToolResult, ToolError>> {
        let call = self.call(ctx, args);
        Box::pin(async move { call.await.map(|r| JsonToolResult::from_result(&r)) })
    }
}

/// Closures over untyped arguments are handlers too.
impl<F, Fut> ToolHandler for F
where
    F: Fn(Context, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
{
    fn call(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<CallToolResult, ToolError>> {
        Box::pin(self(ctx, args))
    }
}

/// A handler whose arguments are deserialised into `A` first.
pub(crate) struct Typed<A, F> {
    f: F,
    _args: PhantomData<fn(A)>,
}

impl<A, F> Typed<A, F> {
    pub(crate) fn new(f: F) -> Self {
        Self {
            f,
            _args: PhantomData,
        }
    }
}

impl<A, F, Fut> ToolHandler for Typed<A, F>
where
    A: DeserializeOwned + Send + 'static,
    F: Fn(Context, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
{
    fn call(
        &self,
        ctx: Context,
        args: Value,
    ) -> BoxFuture<'static, Result<CallToolResult, ToolError>> {
        match decode_args::<A>(args) {
            Ok(a) => Box::pin((self.f)(ctx, a)),
            Err(message) => Box::pin(std::future::ready(Ok(CallToolResult::error(message)))),
        }
    }
}

/// The input schema of `A`, as MCP wants it (an object schema).
pub fn schema_of<A: JsonSchema>() -> Value {
    let schema = schemars::schema_for!(A);
    serde_json::to_value(schema).unwrap_or_else(|_| serde_json::json!({"type": "object"}))
}

/// Deserialises arguments, describing a failure in terms the model can act on.
pub fn decode_args<A: DeserializeOwned>(args: Value) -> Result<A, String> {
    // The common case first: plain deserialisation from the borrowed value. Only a failure
    // pays for the path-tracking deserialiser, which allocates a path segment per key.
    if let Ok(a) = A::deserialize(&args) {
        return Ok(a);
    }
    serde_path_to_error::deserialize::<_, A>(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            format!("invalid arguments: {inner}")
        } else {
            format!("invalid arguments: field `{path}`: {inner}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        steps: u32,
        delay_ms: Option<u64>,
    }

    #[test]
    fn errors_name_the_field() {
        let e = decode_args::<Args>(json!({"steps": "many"})).unwrap_err();
        assert!(e.contains("`steps`"), "{e}");
        assert!(e.contains("expected u32"), "{e}");
        let e = decode_args::<Args>(json!({})).unwrap_err();
        assert!(e.contains("missing field `steps`"), "{e}");
        let e = decode_args::<Args>(json!({"steps": 1, "delay_ms": -4})).unwrap_err();
        assert!(e.contains("`delay_ms`"), "{e}");
    }

    #[test]
    fn schema_is_an_object_schema_with_required_fields() {
        let s = schema_of::<Args>();
        assert_eq!(s["type"], json!("object"));
        assert_eq!(s["required"], json!(["steps"]));
        assert!(s["properties"]["delay_ms"].is_object());
    }
}
