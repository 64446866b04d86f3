//! [`ServerInner`]: the state every session and request of one server shares — its tools and
//! methods, capabilities, limits, lifecycle log, the request Registry, the key that seals
//! input-required rounds and the hub that feeds `subscriptions/listen`. Built once by
//! [`crate::ServerBuilder`]; everything below the public `Server` reads it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

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
use crate::tool::MethodHandler;
pub(crate) use crate::toolset::ToolEntry;
use crate::toolset::ToolTable;

pub(crate) struct MethodEntry {
    pub(crate) handler: Arc<dyn MethodHandler>,
}

pub(crate) struct ServerInner {
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    /// The tools served now; `Server::update_tools` swaps the table whole.
    pub(crate) tools: RwLock<Arc<ToolTable>>,
    pub(crate) methods: HashMap<String, MethodEntry>,
    pub(crate) capabilities: Map<String, Value>,
    /// Stateless-era extensions, by id (advertised in `server/discover`).
    pub(crate) extensions: Map<String, Value>,
    pub(crate) config: Config,
    pub(crate) log: LifecycleLog,
    pub(crate) limiter: Arc<Semaphore>,
    /// The HTTP clients' fair share of the limiter's slots.
    pub(crate) fair: Arc<crate::fair::FairShare>,
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
    /// What the server writes into the answers of an era that asks for it.
    pub(crate) answer_keys: crate::codec::AnswerKeys,
    /// Tells this process's stateless requests apart in the lifecycle log.
    pub(crate) instance_tag: String,
}

impl ServerInner {
    /// The caps the fair share applies ([`crate::fair`]).
    pub(crate) fn fair_caps(&self) -> crate::fair::Caps {
        crate::fair::Caps {
            max: self.config.max_in_flight,
            per_session: self.config.max_in_flight_per_session,
            per_peer: self.config.max_in_flight_per_peer,
        }
    }

    /// The tools served right now (a snapshot: an update swaps in a new table).
    pub(crate) fn tool_table(&self) -> Arc<ToolTable> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
