//! [`ServerInner`]: the state every session and request of one server shares — its tools and
//! methods, capabilities, limits, lifecycle log, the request Registry, the key that seals
//! input-required rounds and the hub that feeds `subscriptions/listen`. Built once by
//! [`crate::ServerBuilder`]; everything below the public `Server` reads it.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use staunch_protocol::mcp::Implementation;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::changes::ListenHub;
use crate::config::Config;
use crate::input::StateKey;
use crate::lifecycle::LifecycleLog;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::tool::{MethodHandler, ToolHandler, ToolSpec};

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
    /// Stateless-era extensions, by id (advertised in `server/discover`).
    pub(crate) extensions: Map<String, Value>,
    pub(crate) config: Config,
    pub(crate) log: LifecycleLog,
    pub(crate) limiter: Arc<Semaphore>,
    /// The HTTP sessions' fair share of the limiter's slots.
    pub(crate) fair: crate::fair::FairShare,
    pub(crate) shutdown: CancellationToken,
    /// Every request in flight, in every era.
    pub(crate) registry: Registry,
    /// Seals the `requestState` of input-required rounds.
    pub(crate) state_key: StateKey,
    /// Where list changes are announced to `subscriptions/listen` streams.
    pub(crate) listen: ListenHub,
    /// Prometheus metrics (a no-op unless enabled).
    pub(crate) metrics: Metrics,
    /// Span hooks (a no-op unless enabled).
    pub(crate) traces: crate::trace::Traces,
    /// `serverInfo` as JSON, for every stateless result's `_meta`.
    pub(crate) server_info_value: Value,
    /// Tells this process's stateless requests apart in the lifecycle log.
    pub(crate) instance_tag: String,
    /// Per tool: arguments that HTTP clients mirror into `Mcp-Param-{name}` headers
    /// (`x-mcp-header` in the input schema), as (argument, header name).
    pub(crate) header_params: HashMap<String, Vec<(String, String)>>,
    /// Per tool: the OAuth scopes its callers need ([`crate::ToolSpec::scopes`]).
    pub(crate) tool_scopes: HashMap<String, Vec<String>>,
}
