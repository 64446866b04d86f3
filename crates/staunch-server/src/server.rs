//! [`Server`] and its builder: the tools, custom methods, capabilities and limits shared by
//! every session.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use staunch_protocol::mcp::{CallToolResult, Implementation};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::context::Context;
use crate::error::ToolError;
use crate::lifecycle::LifecycleLog;
use crate::outbound::Sink;
use crate::session::Session;
use crate::tool::{ToolHandler, ToolSpec, Typed, schema_of};

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

pub(crate) struct ToolEntry {
    pub(crate) spec: ToolSpec,
    pub(crate) handler: Arc<dyn ToolHandler>,
}

pub(crate) struct MethodEntry {
    pub(crate) handler: Arc<dyn MethodHandler>,
}

pub(crate) struct ServerInner {
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    pub(crate) tools: HashMap<String, Arc<ToolEntry>>,
    /// `tools/list` result, built once.
    pub(crate) tool_list: Value,
    pub(crate) methods: HashMap<String, MethodEntry>,
    pub(crate) capabilities: Map<String, Value>,
    pub(crate) config: Config,
    pub(crate) log: LifecycleLog,
    pub(crate) limiter: Arc<Semaphore>,
    pub(crate) shutdown: CancellationToken,
}

/// An MCP server: shared by all its sessions. Cheap to clone.
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<ServerInner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.inner.info.name)
            .field("tools", &self.inner.tools.len())
            .finish()
    }
}

impl Server {
    /// Starts declaring a server.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder {
            info: Implementation {
                name: name.into(),
                version: version.into(),
                title: None,
            },
            instructions: None,
            tools: Vec::new(),
            methods: HashMap::new(),
            capabilities: Map::new(),
            config: Config::default(),
            log: LifecycleLog::disabled(),
        }
    }

    /// A new session whose messages go to `sink`.
    pub fn session(&self, id: impl Into<String>, sink: Arc<dyn Sink>) -> Session {
        Session::new(self.inner.clone(), id.into(), sink)
    }

    /// The limits and timings.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The lifecycle log.
    pub fn lifecycle_log(&self) -> &LifecycleLog {
        &self.inner.log
    }

    /// Requests in flight across all sessions.
    pub fn in_flight(&self) -> usize {
        self.inner.config.max_in_flight - self.inner.limiter.available_permits()
    }

    /// Fires on server shutdown; every session's token is a child of it.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    /// The declared tool names, in declaration order.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.tool_list["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Declares a [`Server`].
pub struct ServerBuilder {
    info: Implementation,
    instructions: Option<String>,
    tools: Vec<ToolEntry>,
    methods: HashMap<String, MethodEntry>,
    capabilities: Map<String, Value>,
    config: Config,
    log: LifecycleLog,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("name", &self.info.name)
            .finish()
    }
}

impl ServerBuilder {
    /// Guidance for the model, sent at `initialize`.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Display title of the server.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.info.title = Some(title.into());
        self
    }

    /// Limits and timings.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Where lifecycle lines go (disabled by default in the library; `staunch serve` writes
    /// them to stderr).
    pub fn lifecycle_log(mut self, log: LifecycleLog) -> Self {
        self.log = log;
        self
    }

    /// A typed tool: arguments are deserialised into `A`, whose JSON Schema is the tool's
    /// input schema (unless the spec sets one).
    pub fn tool<A, F, Fut>(self, mut spec: ToolSpec, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(Context, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
    {
        if spec.input_schema.is_none() {
            spec.input_schema = Some(schema_of::<A>());
        }
        self.tool_handler(spec, Typed::<A, F>::new(f))
    }

    /// A tool with any handler (arguments as a JSON object).
    pub fn tool_handler(mut self, spec: ToolSpec, handler: impl ToolHandler) -> Self {
        self.tools.retain(|t| t.spec.name != spec.name);
        self.tools.push(ToolEntry {
            spec,
            handler: Arc::new(handler),
        });
        self
    }

    /// A custom request method, run in its own task like a tool.
    pub fn method(mut self, name: impl Into<String>, handler: impl MethodHandler) -> Self {
        self.methods.insert(
            name.into(),
            MethodEntry {
                handler: Arc::new(handler),
            },
        );
        self
    }

    /// Declares a capability (e.g. `resources`, `prompts`, `completions`, `tasks`).
    pub fn capability(mut self, name: impl Into<String>, value: Value) -> Self {
        self.capabilities.insert(name.into(), value);
        self
    }

    /// Finishes the declaration.
    pub fn build(self) -> Server {
        let mut capabilities = self.capabilities;
        capabilities
            .entry("tools")
            .or_insert_with(|| json!({"listChanged": false}));
        capabilities.entry("logging").or_insert_with(|| json!({}));
        let tool_list = json!({
            "tools": self.tools.iter().map(|t| t.spec.to_tool()).collect::<Vec<_>>()
        });
        let tools = self
            .tools
            .into_iter()
            .map(|t| (t.spec.name.clone(), Arc::new(t)))
            .collect();
        Server {
            inner: Arc::new(ServerInner {
                info: self.info,
                instructions: self.instructions,
                tools,
                tool_list,
                methods: self.methods,
                capabilities,
                limiter: Arc::new(Semaphore::new(self.config.max_in_flight)),
                config: self.config,
                log: self.log,
                shutdown: CancellationToken::new(),
            }),
        }
    }
}
