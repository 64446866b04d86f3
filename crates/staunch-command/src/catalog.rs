//! [`Catalog`]: the command tools currently defined, by name, shared by their handlers. A
//! reload swaps definitions in one step; a call looks its tool up when it starts and keeps
//! that definition to its end, so in-flight work is never touched by a reload. The reload
//! also says what the server's tool list must do ([`ServedChanges`]); `CommandTools::reload`
//! applies that with `Server::update_tools`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use staunch_server::Shape;

use crate::config::{CommandConfig, CommandTool};
use crate::runner::Runner;

/// What a reload changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// Tools whose definition was replaced.
    pub updated: Vec<String>,
    /// Tools new in the file, served from now on.
    pub added: Vec<String>,
    /// Tools missing from the new file: no longer served (calls in flight run to their end).
    pub removed: Vec<String>,
    /// Removed job tools: their `start_`/`get_`/`cancel_` tools stay listed until a restart
    /// (so their jobs can still be read and cancelled); a new start gets an error.
    pub removed_jobs_listed: Vec<String>,
    /// New job-shaped tools: the job runtime's tools are fixed at start, so they need a
    /// restart.
    pub added_need_restart: Vec<String>,
    /// Tools whose shape changed to or from `job`: they keep their old definition until a
    /// restart (a change among quick, streaming and atomic applies at once).
    pub shape_changed: Vec<String>,
    /// New tools whose name another tool of the server (not a command tool) already has.
    pub conflicts: Vec<String>,
}

/// What the server's tool list must do after a reload: tools to add or replace (request
/// shapes), and names to remove.
#[derive(Debug, Default)]
pub struct ServedChanges {
    /// Tools to add, or to replace under their name.
    pub put: Vec<Arc<CommandTool>>,
    /// Names of tools to take off the list.
    pub remove: Vec<String>,
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

    /// Replaces the definitions with `config`'s. `jobs` are the job tools the server was
    /// started with (the job runtime's tools cannot change while it runs); `taken` says
    /// whether a name is served by some other tool. A tool whose concurrency limit did not
    /// change keeps its permits, so calls in flight still count against it.
    pub fn reload(
        &self,
        config: &CommandConfig,
        jobs: &[String],
        taken: &dyn Fn(&str) -> bool,
    ) -> (ReloadReport, ServedChanges) {
        let mut map = self.inner.write().unwrap_or_else(|p| p.into_inner());
        let mut report = ReloadReport::default();
        let mut served = ServedChanges::default();
        let mut next = HashMap::new();
        for t in &config.tools {
            let old = map.get(&t.name);
            let is_job = t.shape == Shape::Job;
            let was_job = jobs.contains(&t.name);
            if is_job != was_job {
                match old {
                    // The job runtime's faces cannot appear or go while it runs.
                    Some(old) => {
                        report.shape_changed.push(t.name.clone());
                        next.insert(t.name.clone(), old.clone());
                    }
                    None if is_job => report.added_need_restart.push(t.name.clone()),
                    // A request tool named like a removed job tool whose faces are listed.
                    None => report.conflicts.push(t.name.clone()),
                }
                continue;
            }
            if old.is_none() && !is_job && taken(&t.name) {
                report.conflicts.push(t.name.clone());
                continue;
            }
            let runner = match old {
                Some(old) if old.tool.concurrency == t.concurrency => Runner {
                    tool: t.clone(),
                    permits: old.permits.clone(),
                },
                _ => Runner::new(t.clone()),
            };
            if old.is_some() {
                report.updated.push(t.name.clone());
            } else {
                report.added.push(t.name.clone());
            }
            if !is_job {
                served.put.push(t.clone());
            }
            next.insert(t.name.clone(), Arc::new(runner));
        }
        for name in map.keys().filter(|k| !next.contains_key(*k)) {
            report.removed.push(name.clone());
            if jobs.contains(name) {
                report.removed_jobs_listed.push(name.clone());
            } else {
                served.remove.push(name.clone());
            }
        }
        report.removed.sort();
        report.removed_jobs_listed.sort();
        served.remove.sort();
        *map = next;
        (report, served)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tools: &[(&str, &str)]) -> CommandConfig {
        let text: String = tools
            .iter()
            .map(|(name, shape)| {
                format!(
                    "[[tool]]\nname = \"{name}\"\ndescription = \"d\"\nshape = \"{shape}\"\nprogram = \"true\"\n\n"
                )
            })
            .collect();
        crate::config::parse(
            &text,
            std::path::Path::new("/tmp/staunch.toml"),
            &crate::config::NoFlags,
        )
        .unwrap()
    }

    #[test]
    fn a_reload_adds_and_removes_request_tools_and_leaves_job_changes_to_a_restart() {
        let start = config(&[("a", "quick"), ("b", "streaming"), ("j", "job")]);
        let catalog = Catalog::new(&start);
        let jobs = ["j".to_string()];
        let taken = |n: &str| ["a", "b", "j", "start_j", "get_j", "cancel_j", "demo"].contains(&n);
        let next = config(&[
            ("a", "atomic"),
            ("c", "quick"),
            ("k", "job"),
            ("demo", "quick"),
            ("j", "quick"),
        ]);
        let (report, served) = catalog.reload(&next, &jobs, &taken);
        // `a` changed among request shapes: applied at once.
        assert_eq!(report.updated, ["a"]);
        assert_eq!(report.added, ["c"]);
        assert_eq!(report.removed, ["b"]);
        assert_eq!(report.added_need_restart, ["k"]);
        assert_eq!(report.shape_changed, ["j"]);
        assert_eq!(report.conflicts, ["demo"]);
        let put: Vec<&str> = served.put.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(put, ["a", "c"]);
        assert_eq!(served.remove, ["b"]);
        assert_eq!(catalog.names(), ["a", "c", "j"]);
        assert_eq!(catalog.get("a").unwrap().tool.shape, Shape::Atomic);
        // The job tool keeps its old definition (and shape) until a restart.
        assert_eq!(catalog.get("j").unwrap().tool.shape, Shape::Job);

        // A removed job tool: gone from the catalog, its faces stay listed.
        let (report, served) = catalog.reload(&config(&[("a", "atomic")]), &jobs, &taken);
        assert_eq!(report.removed, ["c", "j"]);
        assert_eq!(report.removed_jobs_listed, ["j"]);
        assert_eq!(served.remove, ["c"]);
    }
}
