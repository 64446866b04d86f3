//! [`Catalog`]: the command tools currently defined, by name, shared by their handlers. A
//! reload swaps definitions in one step; a call looks its tool up when it starts and keeps
//! that definition to its end, so in-flight work is never touched by a reload.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::config::CommandConfig;
use crate::runner::Runner;

/// What a reload changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// Tools whose definition was replaced.
    pub updated: Vec<String>,
    /// Tools in the new file that the running server does not list (they need a restart).
    pub added: Vec<String>,
    /// Tools missing from the new file: calls now get an error saying so.
    pub removed: Vec<String>,
    /// Tools whose shape changed: they keep their old definition until a restart.
    pub shape_changed: Vec<String>,
}

/// The current definitions. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    inner: Arc<RwLock<HashMap<String, Arc<Runner>>>>,
}

impl Catalog {
    /// A catalog of `config`'s tools.
    pub fn new(config: &CommandConfig) -> Self {
        let map = config
            .tools
            .iter()
            .map(|t| (t.name.clone(), Arc::new(Runner::new(t.clone()))))
            .collect();
        Self {
            inner: Arc::new(RwLock::new(map)),
        }
    }

    /// The tool called `name`, as defined now.
    pub fn get(&self, name: &str) -> Option<Arc<Runner>> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// The names defined now.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// Replaces the definitions with `config`'s. `served` are the names the server lists: a
    /// tool outside it cannot be called until a restart. A tool whose concurrency limit did
    /// not change keeps its permits, so calls in flight still count against it.
    pub fn reload(&self, config: &CommandConfig, served: &[String]) -> ReloadReport {
        let mut map = self.inner.write().unwrap_or_else(|p| p.into_inner());
        let mut report = ReloadReport::default();
        let mut next = HashMap::new();
        for t in &config.tools {
            if !served.contains(&t.name) {
                report.added.push(t.name.clone());
                continue;
            }
            let runner = match map.get(&t.name) {
                Some(old) if old.tool.shape != t.shape => {
                    report.shape_changed.push(t.name.clone());
                    next.insert(t.name.clone(), old.clone());
                    continue;
                }
                Some(old) if old.tool.concurrency == t.concurrency => Runner {
                    tool: t.clone(),
                    permits: old.permits.clone(),
                },
                _ => Runner::new(t.clone()),
            };
            report.updated.push(t.name.clone());
            next.insert(t.name.clone(), Arc::new(runner));
        }
        report.removed = map
            .keys()
            .filter(|k| !next.contains_key(*k))
            .cloned()
            .collect();
        report.removed.sort();
        *map = next;
        report
    }
}
