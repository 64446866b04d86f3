//! The tools a server serves, as one immutable [`ToolTable`] that a running server can swap
//! for another ([`ToolUpdate`], applied by `Server::update_tools`).
//!
//! Why a table swapped whole rather than a map edited in place: a `tools/list` answer, the
//! `Mcp-Param-*` header rules and the per-tool scopes must all describe the same set of tools,
//! and a call must find its handler in that same set. Readers clone an `Arc` to the table they
//! saw; a call keeps the `Arc<ToolEntry>` it started with, so an update never touches work in
//! flight — a removed tool's running calls end as they would have, and only calls that arrive
//! after the swap see the new set (an unknown tool gets the usual error).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use staunch_protocol::mcp::CallToolResult;

use crate::context::Context;
use crate::error::ToolError;
use crate::fast_map::FastMap;
use crate::tool::{ToolHandler, ToolSpec, Typed, schema_of};

pub(crate) struct ToolEntry {
    pub(crate) spec: ToolSpec,
    pub(crate) handler: Arc<dyn ToolHandler>,
    /// The name, shared with every call's log, metrics and in-flight record (no copy per
    /// call).
    pub(crate) name: Arc<str>,
    /// The handler answers with JSON ([`ToolHandler::answers_json`]), asked once here.
    pub(crate) answers_json: bool,
}

impl ToolEntry {
    pub(crate) fn new(spec: ToolSpec, handler: Arc<dyn ToolHandler>) -> Self {
        Self {
            name: Arc::from(spec.name.as_str()),
            answers_json: handler.answers_json(),
            spec,
            handler,
        }
    }
}

/// Every tool of a server at one moment, with what is derived from them.
pub(crate) struct ToolTable {
    /// In declaration order (`tools/list` order); a replaced tool keeps its place.
    entries: Vec<Arc<ToolEntry>>,
    pub(crate) by_name: FastMap<String, Arc<ToolEntry>>,
    /// `tools/list` result, built once per table.
    pub(crate) tool_list: Value,
    /// Per tool: arguments that HTTP clients mirror into `Mcp-Param-{name}` headers
    /// (`x-mcp-header` in the input schema), as (argument, header name).
    pub(crate) header_params: HashMap<String, Vec<(String, String)>>,
    /// Per tool: the OAuth scopes its callers need ([`crate::ToolSpec::scopes`]).
    pub(crate) tool_scopes: HashMap<String, Vec<String>>,
}

impl ToolTable {
    pub(crate) fn new(entries: Vec<Arc<ToolEntry>>) -> Self {
        let tool_list = json!({
            "tools": entries.iter().map(|t| t.spec.to_tool()).collect::<Vec<_>>()
        });
        let header_params = entries
            .iter()
            .filter_map(|t| {
                let params = header_params_of(t.spec.input_schema.as_ref()?);
                (!params.is_empty()).then(|| (t.spec.name.clone(), params))
            })
            .collect();
        let tool_scopes = entries
            .iter()
            .filter(|t| !t.spec.scopes.is_empty())
            .map(|t| (t.spec.name.clone(), t.spec.scopes.clone()))
            .collect();
        let by_name = entries
            .iter()
            .map(|t| (t.spec.name.clone(), t.clone()))
            .collect();
        Self {
            entries,
            by_name,
            tool_list,
            header_params,
            tool_scopes,
        }
    }

    /// The names, in `tools/list` order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.entries.iter().map(|t| t.spec.name.clone()).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The table after `update`, and what changed.
    pub(crate) fn apply(&self, update: ToolUpdate) -> (ToolTable, ToolsChanged) {
        let mut changed = ToolsChanged::default();
        let mut entries: Vec<Arc<ToolEntry>> = self
            .entries
            .iter()
            .filter(|t| {
                let gone = update.removes.contains(&t.spec.name)
                    && !update.puts.iter().any(|p| p.spec.name == t.spec.name);
                if gone {
                    changed.removed.push(t.spec.name.clone());
                }
                !gone
            })
            .cloned()
            .collect();
        for put in update.puts {
            let put = Arc::new(put);
            match entries.iter_mut().find(|t| t.spec.name == put.spec.name) {
                Some(slot) => {
                    // Only a different declaration changes what clients see; a new handler
                    // behind the same declaration is not worth a list_changed.
                    if listed(&slot.spec) != listed(&put.spec) {
                        changed.list_changed = true;
                    }
                    changed.replaced.push(put.spec.name.clone());
                    *slot = put;
                }
                None => {
                    changed.added.push(put.spec.name.clone());
                    entries.push(put);
                }
            }
        }
        if !changed.added.is_empty() || !changed.removed.is_empty() {
            changed.list_changed = true;
        }
        (ToolTable::new(entries), changed)
    }
}

/// A change to a running server's tools: tools to add or replace and tools to remove, applied
/// in one step by [`crate::Server::update_tools`]. A name both removed and put is replaced.
#[derive(Default)]
pub struct ToolUpdate {
    puts: Vec<ToolEntry>,
    removes: Vec<String>,
}

impl std::fmt::Debug for ToolUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let puts: Vec<&str> = self.puts.iter().map(|p| p.spec.name.as_str()).collect();
        f.debug_struct("ToolUpdate")
            .field("puts", &puts)
            .field("removes", &self.removes)
            .finish()
    }
}

impl ToolUpdate {
    /// An update that changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool with any handler, or replaces the declaration and handler of the tool of
    /// the same name (it keeps its place in `tools/list`).
    pub fn put(self, spec: ToolSpec, handler: impl ToolHandler) -> Self {
        self.put_shared(spec, Arc::new(handler))
    }

    /// [`ToolUpdate::put`] with a handler already shared (e.g. by several tools).
    pub fn put_shared(mut self, spec: ToolSpec, handler: Arc<dyn ToolHandler>) -> Self {
        self.puts.retain(|p| p.spec.name != spec.name);
        self.puts.push(ToolEntry::new(spec, handler));
        self
    }

    /// A typed tool, as [`crate::ServerBuilder::tool`] declares one.
    pub fn tool<A, F, Fut>(self, mut spec: ToolSpec, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(Context, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
    {
        if spec.input_schema.is_none() {
            spec.input_schema = Some(schema_of::<A>());
        }
        self.put(spec, Typed::<A, F>::new(f))
    }

    /// Removes the tool called `name` (nothing happens when there is none). Its calls in
    /// flight run to their end; later calls get the unknown-tool error.
    pub fn remove(mut self, name: impl Into<String>) -> Self {
        self.removes.push(name.into());
        self
    }

    /// Whether the update changes nothing.
    pub fn is_empty(&self) -> bool {
        self.puts.is_empty() && self.removes.is_empty()
    }
}

/// What [`crate::Server::update_tools`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolsChanged {
    /// Tools that were not served before.
    pub added: Vec<String>,
    /// Tools whose declaration and handler were replaced.
    pub replaced: Vec<String>,
    /// Tools no longer served.
    pub removed: Vec<String>,
    /// Whether `tools/list` changed (and so `notifications/tools/list_changed` was announced).
    pub list_changed: bool,
}

/// How `tools/list` shows a tool.
fn listed(spec: &ToolSpec) -> Value {
    serde_json::to_value(spec.to_tool()).unwrap_or_default()
}

/// The `x-mcp-header` annotations of an input schema's top-level properties.
fn header_params_of(schema: &Value) -> Vec<(String, String)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .filter_map(|(name, def)| {
                    let h = def.get("x-mcp-header")?.as_str()?;
                    Some((name.clone(), h.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}
