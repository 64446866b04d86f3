//! [`Server`] and its builder: the tools, custom methods, capabilities and limits shared by
//! every session.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, RwLock};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use staunch_protocol::mcp::{CallToolResult, Implementation};
use staunch_protocol::{Request, RequestId};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::changes::{Change, ListenHub};
use crate::codec::{AnswerKeys, Peer, RequestMeta};
use crate::config::Config;
use crate::conn::Conn;
use crate::context::Context;
use crate::error::ToolError;
use crate::input::StateKey;
use crate::lifecycle::LifecycleLog;
use crate::metrics::Metrics;
use crate::outbound::Sink;
use crate::registry::{CancelReason, Registry};
use crate::request::{self, Origin};
use crate::session::Session;
use crate::shared::{MethodEntry, ServerInner, ToolEntry};
use crate::tool::{MethodHandler, ToolHandler, ToolSpec, Typed, schema_of};
use crate::toolset::{ToolTable, ToolUpdate, ToolsChanged};

/// An MCP server: shared by all its sessions. Cheap to clone.
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<ServerInner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.inner.info.name)
            .field("tools", &self.inner.tool_table().len())
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
            extensions: Map::new(),
            config: Config::default(),
            log: LifecycleLog::disabled(),
            state_key: None,
            listen: ListenHub::default(),
            metrics: Metrics::disabled(),
            traces: crate::trace::Traces::disabled(),
        }
    }

    /// A new session whose messages go to `sink`.
    pub fn session(&self, id: impl Into<String>, sink: Arc<dyn Sink>) -> Session {
        Session::new(self.inner.clone(), id.into(), sink, false, None, None)
    }

    /// A new session on a transport many clients share (HTTP), bound to `principal` when the
    /// transport authenticated one: every request of it sees that principal in
    /// [`Context::principal`], and the work its requests start (jobs, tasks) belongs to it —
    /// to the principal, else to the session ([`Context::owning_session`]). Its requests count
    /// in the fair share of the server's slots against the principal, else against `peer`,
    /// the address that opened it.
    pub fn session_for(
        &self,
        id: impl Into<String>,
        sink: Arc<dyn Sink>,
        principal: Option<String>,
        peer: Option<std::net::IpAddr>,
    ) -> Session {
        Session::new(
            self.inner.clone(),
            id.into(),
            sink,
            true,
            principal.map(Arc::from),
            peer,
        )
    }

    /// The limits and timings.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The lifecycle log.
    pub fn lifecycle_log(&self) -> &LifecycleLog {
        &self.inner.log
    }

    /// The metrics handle (disabled unless the builder was given one).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The span hooks (disabled unless the builder was given some).
    pub fn traces(&self) -> &crate::trace::Traces {
        &self.inner.traces
    }

    /// Requests in flight across all sessions.
    pub fn in_flight(&self) -> usize {
        self.inner.config.max_in_flight - self.inner.limiter.available_permits()
    }

    /// Requests registered in the request core right now (in flight, in every era).
    pub fn registered(&self) -> usize {
        self.inner.registry.len()
    }

    /// What is in flight right now, longest-running first, with each request's cancel state
    /// and whether it is orphaned (cancelled and still running after the grace period).
    pub fn in_flight_requests(&self) -> Vec<crate::registry::InFlight> {
        self.inner.registry.snapshot(self.inner.config.cancel_grace)
    }

    /// Fires when the server starts shutting down: transports stop accepting, and call
    /// [`Server::cancel_all_requests`].
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    /// Shutdown: ends every `subscriptions/listen` stream gracefully (each answers its
    /// request), then cancels every request still in flight with reason "server shutdown" (no
    /// response goes to any of them). Returns how many requests it cancelled.
    pub fn cancel_all_requests(&self) -> usize {
        self.inner.listen.close();
        request::cancel_everything(&self.inner)
    }

    /// Arguments of tool `name` that HTTP clients mirror into `Mcp-Param-{header}` headers, as
    /// (argument, header).
    pub fn header_params(&self, name: &str) -> Vec<(String, String)> {
        self.inner
            .tool_table()
            .header_params
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether a lost answer of tool `name` costs at most a short re-run: it is `quick` (ends
    /// well under the client's timeout) and safe to run again
    /// ([`crate::ToolSpec::rerun_safe`]). `false` for a tool it does not serve.
    pub fn tool_quick_and_rerun_safe(&self, name: &str) -> bool {
        self.inner
            .tool_table()
            .by_name
            .get(name)
            .is_some_and(|t| t.spec.shape() == crate::Shape::Quick && t.spec.rerun_safe())
    }

    /// The OAuth scopes tool `name` declares its callers need ([`ToolSpec::scopes`]).
    pub fn tool_scopes(&self, name: &str) -> Vec<String> {
        self.inner
            .tool_table()
            .tool_scopes
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// Every scope some tool declares, sorted, once each.
    pub fn declared_scopes(&self) -> Vec<String> {
        let table = self.inner.tool_table();
        let mut all: Vec<String> = table.tool_scopes.values().flatten().cloned().collect();
        all.sort();
        all.dedup();
        all
    }

    /// Adds, replaces and removes tools of the running server in one step (see
    /// [`ToolUpdate`]): every request that arrives afterwards sees the new set, calls in flight
    /// keep the tool they started with (a removed tool's running calls end normally; a new
    /// call of it gets the unknown-tool error). When `tools/list` changed, the change is
    /// announced: 2025 sessions get `notifications/tools/list_changed` if the server declares
    /// `capabilities.tools.listChanged: true` (see [`ServerBuilder::dynamic_tools`]), and
    /// `subscriptions/listen` streams that asked for `toolsListChanged` get it too.
    pub fn update_tools(&self, update: ToolUpdate) -> ToolsChanged {
        let changed = {
            let mut table = self.inner.tools.write().unwrap_or_else(|p| p.into_inner());
            let (next, changed) = table.apply(update);
            *table = Arc::new(next);
            changed
        };
        if changed.list_changed {
            tracing::info!(
                added = ?changed.added, replaced = ?changed.replaced, removed = ?changed.removed,
                "tools.list_changed"
            );
            self.inner.listen.announce(Change::ToolsListChanged);
        }
        changed
    }

    /// Where list changes are announced (to `subscriptions/listen` streams).
    pub fn listen_hub(&self) -> &ListenHub {
        &self.inner.listen
    }

    /// Serves one request that stands alone — no session; what the client says about itself
    /// is in the request's own `_meta`, already read by the transport — whose messages go to
    /// `sink`, one HTTP response stream. The returned handle cancels it when the stream closes
    /// before the response.
    pub fn serve_standalone(
        &self,
        req: Request,
        meta: RequestMeta,
        sink: Arc<dyn Sink>,
    ) -> StandaloneRequest {
        self.serve_standalone_for(req, meta, sink, None)
    }

    /// [`Server::serve_standalone`] for a request the transport authenticated as `principal`
    /// (seen by its handler in [`Context::principal`]).
    pub fn serve_standalone_for(
        &self,
        req: Request,
        meta: RequestMeta,
        sink: Arc<dyn Sink>,
        principal: Option<String>,
    ) -> StandaloneRequest {
        self.serve_standalone_with(req, meta, sink, principal, false)
    }

    /// [`Server::serve_standalone_for`]; with `eager`, for a transport whose caller does
    /// nothing but wait for the answer, the request's first step runs on the caller
    /// ([`Origin::eager`]).
    pub(crate) fn serve_standalone_with(
        &self,
        req: Request,
        meta: RequestMeta,
        sink: Arc<dyn Sink>,
        principal: Option<String>,
        eager: bool,
    ) -> StandaloneRequest {
        let n = NEXT_STANDALONE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let label = format!("req-{}-{n}", self.inner.instance_tag);
        let conn = Conn::with_principal(label, sink, principal.map(Arc::from));
        let origin = Origin {
            conn: conn.clone(),
            peer: Peer::standalone(meta),
            eager,
        };
        let id = req.id.clone();
        crate::dispatch::dispatch(&self.inner, &origin, req);
        StandaloneRequest {
            server: self.inner.clone(),
            conn,
            id,
        }
    }

    /// The tools served now, in `tools/list` order.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.tool_table().names()
    }
}

static NEXT_STANDALONE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A request that stands alone, being served (see [`Server::serve_standalone`]).
pub struct StandaloneRequest {
    server: Arc<ServerInner>,
    conn: Arc<Conn>,
    id: RequestId,
}

impl std::fmt::Debug for StandaloneRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandaloneRequest")
            .field("key", &self.conn.label)
            .finish()
    }
}

impl StandaloneRequest {
    /// The key the lifecycle log uses for the request's connection.
    pub fn log_key(&self) -> &str {
        &self.conn.label
    }

    /// The client closed the response stream before the response: for a request that stands
    /// alone, that is its cancellation. A request that already ended is left alone.
    pub fn stream_closed(&self) {
        request::cancel_quietly(
            &self.server,
            &self.conn,
            &self.id,
            CancelReason::StreamClosed,
        );
    }
}

/// Declares a [`Server`].
pub struct ServerBuilder {
    info: Implementation,
    instructions: Option<String>,
    tools: Vec<ToolEntry>,
    methods: HashMap<String, MethodEntry>,
    capabilities: Map<String, Value>,
    extensions: Map<String, Value>,
    config: Config,
    log: LifecycleLog,
    state_key: Option<StateKey>,
    listen: ListenHub,
    metrics: Metrics,
    traces: crate::trace::Traces,
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

    /// Where the request core, the HTTP transport and the job runtime count what they do
    /// (disabled by default; `staunch serve --metrics` enables it).
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Where request spans go (disabled by default; `staunch serve --otlp-endpoint` enables
    /// it). Share the handle with the job runtime so attempt spans go to the same place.
    pub fn traces(mut self, traces: crate::trace::Traces) -> Self {
        self.traces = traces;
        self
    }

    /// The key that seals input-required rounds' `requestState`. Instances that share a store
    /// should share the key (so any of them can continue a round); by default each server
    /// makes a random one.
    pub fn state_key(mut self, key: StateKey) -> Self {
        self.state_key = Some(key);
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
        self.tools.push(ToolEntry::new(spec, Arc::new(handler)));
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

    /// The handler registered for method `name` so far, for a component that serves some of
    /// that method's requests itself and hands it the rest (the proxy's upstream tasks beside
    /// the job runtime's).
    pub fn method_handler(&self, name: &str) -> Option<Arc<dyn MethodHandler>> {
        self.methods.get(name).map(|m| m.handler.clone())
    }

    /// The capability `name` as declared so far.
    pub fn declared_capability(&self, name: &str) -> Option<&Value> {
        self.capabilities.get(name)
    }

    /// Declares `capabilities.tools.listChanged: true`: the tool set may change while the
    /// server runs ([`Server::update_tools`]), and 2025 sessions are told when it does.
    pub fn dynamic_tools(mut self) -> Self {
        let tools = self
            .capabilities
            .entry("tools")
            .or_insert_with(|| json!({}));
        if let Value::Object(o) = tools {
            o.insert("listChanged".into(), Value::Bool(true));
        }
        self
    }

    /// Declares a capability (e.g. `resources`, `prompts`, `completions`, `tasks`).
    pub fn capability(mut self, name: impl Into<String>, value: Value) -> Self {
        self.capabilities.insert(name.into(), value);
        self
    }

    /// Declares an extension of the stateless era (e.g. [`crate::TASKS_EXTENSION`]): advertised
    /// under `capabilities.extensions` in `server/discover` only, never at a session's
    /// `initialize`.
    pub fn extension(mut self, id: impl Into<String>, settings: Value) -> Self {
        self.extensions.insert(id.into(), settings);
        self
    }

    /// The hub the built server announces changes on (for components, such as a job runtime,
    /// that announce changes outside any request).
    pub fn listen_hub(&self) -> ListenHub {
        self.listen.clone()
    }

    /// Finishes the declaration.
    pub fn build(self) -> Server {
        let mut capabilities = self.capabilities;
        capabilities
            .entry("tools")
            .or_insert_with(|| json!({"listChanged": false}));
        capabilities.entry("logging").or_insert_with(|| json!({}));
        let tools = ToolTable::new(self.tools.into_iter().map(Arc::new).collect());
        let server_info_value = serde_json::to_value(&self.info).unwrap_or_default();
        let mut tag = [0u8; 3];
        let _ = getrandom::fill(&mut tag);
        let instance_tag = tag.iter().map(|b| format!("{b:02x}")).collect();
        Server {
            inner: Arc::new(ServerInner {
                answer_keys: AnswerKeys {
                    server_info_json: serde_json::value::to_raw_value(&server_info_value)
                        .unwrap_or_default(),
                    server_info: server_info_value,
                    list_ttl_ms: self.config.list_ttl_ms,
                },
                instance_tag,
                registry: Registry::default(),
                state_key: self.state_key.unwrap_or_else(StateKey::random),
                listen: self.listen,
                metrics: self.metrics,
                traces: self.traces,
                extensions: self.extensions,
                info: self.info,
                instructions: self.instructions,
                tools: RwLock::new(Arc::new(tools)),
                methods: self.methods,
                capabilities,
                limiter: Arc::new(Semaphore::new(self.config.max_in_flight)),
                fair: Arc::default(),
                config: self.config,
                log: self.log,
                shutdown: CancellationToken::new(),
            }),
        }
    }
}
