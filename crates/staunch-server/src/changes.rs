//! [`ListenHub`]: where a server announces changes — tool, prompt and resource lists, updated
//! resources, tasks — to every open `subscriptions/listen` stream (the `listen` module serves them).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// A change a listen stream may carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The tool list changed.
    ToolsListChanged,
    /// The prompt list changed.
    PromptsListChanged,
    /// The resource list changed.
    ResourcesListChanged,
    /// The resource with this URI changed.
    ResourceUpdated(String),
    /// A task of the tasks extension changed: its id and its full `DetailedTask`, the params
    /// of `notifications/tasks`.
    Task {
        /// The task's id.
        id: String,
        /// Its owner key ([`crate::owner_key`]): only a listener with the same key hears it.
        owner: String,
        /// The task's `DetailedTask`.
        detail: serde_json::Value,
    },
}

impl Change {
    pub(crate) fn method(&self) -> &'static str {
        match self {
            Change::ToolsListChanged => "notifications/tools/list_changed",
            Change::PromptsListChanged => "notifications/prompts/list_changed",
            Change::ResourcesListChanged => "notifications/resources/list_changed",
            Change::ResourceUpdated(_) => "notifications/resources/updated",
            Change::Task { .. } => "notifications/tasks",
        }
    }
}

/// Where changes are announced, for every open listen stream. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ListenHub {
    tx: broadcast::Sender<Change>,
    closing: CancellationToken,
    tasks: Arc<Mutex<HashMap<String, WatchedTask>>>,
    /// How many open listen streams asked for each resource uri; the set of those uris is
    /// published on `uris` for whoever must subscribe to them at their source (a proxy's
    /// upstream).
    resources: Arc<Mutex<HashMap<String, usize>>>,
    uris: Arc<watch::Sender<BTreeSet<String>>>,
}

/// A task id some open listen stream asked for.
#[derive(Debug, Default)]
struct WatchedTask {
    /// How many open streams asked for it.
    streams: usize,
    /// The `DetailedTask` last announced: a change may be reported more than once (by this
    /// process and by a signal, or re-read after a reconnect), a listener hears it once.
    last: Option<Value>,
}

/// Keeps task ids watched while a listen stream is open; forgets them when dropped.
#[derive(Debug)]
pub(crate) struct TaskWatch {
    hub: ListenHub,
    ids: Vec<String>,
}

impl Drop for TaskWatch {
    fn drop(&mut self) {
        let mut tasks = self.hub.lock_tasks();
        for id in &self.ids {
            if let Some(w) = tasks.get_mut(id) {
                w.streams -= 1;
                if w.streams == 0 {
                    tasks.remove(id);
                }
            }
        }
    }
}

/// Keeps resource uris watched while a listen stream is open; forgets them when dropped.
#[derive(Debug)]
pub(crate) struct ResourceWatch {
    hub: ListenHub,
    uris: Vec<String>,
}

impl Drop for ResourceWatch {
    fn drop(&mut self) {
        let mut counts = self.hub.lock_resources();
        for uri in &self.uris {
            if let Some(n) = counts.get_mut(uri) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(uri);
                    self.hub.uris.send_modify(|set| {
                        set.remove(uri);
                    });
                }
            }
        }
    }
}

impl Default for ListenHub {
    fn default() -> Self {
        // A stream that falls this far behind gets told "something changed" once per kind
        // instead (see `Lagged` below), so the bound costs nothing but precision.
        let (tx, _) = broadcast::channel(256);
        Self {
            tx,
            closing: CancellationToken::new(),
            tasks: Arc::default(),
            resources: Arc::default(),
            uris: Arc::new(watch::channel(BTreeSet::new()).0),
        }
    }
}

impl ListenHub {
    /// Announces a change to every listen stream whose filter asked for it. A task change
    /// nobody asked for, or one that says what was last announced for the task, goes nowhere.
    pub fn announce(&self, change: Change) {
        if let Change::Task { id, detail, .. } = &change {
            let mut tasks = self.lock_tasks();
            match tasks.get_mut(id) {
                None => return,
                Some(w) if w.last.as_ref() == Some(detail) => return,
                Some(w) => w.last = Some(detail.clone()),
            }
        }
        // No receivers is fine: nobody listens.
        let _ = self.tx.send(change);
    }

    /// Whether an open listen stream asked for this task (so a caller can skip reading it).
    pub fn watches_task(&self, id: &str) -> bool {
        self.lock_tasks().contains_key(id)
    }

    /// Every task id an open listen stream asked for: what a job runtime re-reads when it may
    /// have missed changes (its store's signals reconnected or lagged).
    pub fn watched_tasks(&self) -> Vec<String> {
        self.lock_tasks().keys().cloned().collect()
    }

    /// Watches `ids` until the returned guard is dropped.
    pub(crate) fn watch_tasks(&self, ids: &[String]) -> TaskWatch {
        let mut tasks = self.lock_tasks();
        for id in ids {
            tasks.entry(id.clone()).or_default().streams += 1;
        }
        TaskWatch {
            hub: self.clone(),
            ids: ids.to_vec(),
        }
    }

    /// The resource uris some open listen stream asked for (`resourceSubscriptions`), kept
    /// current: what a server whose resources live elsewhere subscribes to at their source.
    pub fn watched_resources(&self) -> watch::Receiver<BTreeSet<String>> {
        self.uris.subscribe()
    }

    /// Watches the resource `uris` until the returned guard is dropped.
    pub(crate) fn watch_resources(&self, uris: &[String]) -> ResourceWatch {
        let mut counts = self.lock_resources();
        for uri in uris {
            let n = counts.entry(uri.clone()).or_default();
            *n += 1;
            if *n == 1 {
                self.uris.send_modify(|set| {
                    set.insert(uri.clone());
                });
            }
        }
        ResourceWatch {
            hub: self.clone(),
            uris: uris.to_vec(),
        }
    }

    fn lock_resources(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.resources.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_tasks(&self) -> std::sync::MutexGuard<'_, HashMap<String, WatchedTask>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends every listen stream gracefully (server shutdown): each answers its request.
    pub fn close(&self) {
        self.closing.cancel();
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }

    /// Completes when the hub closes (shutdown).
    pub(crate) async fn closing(&self) {
        self.closing.cancelled().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(id: &str, status: &str) -> Change {
        Change::Task {
            id: id.into(),
            owner: "o".into(),
            detail: json!({"taskId": id, "status": status}),
        }
    }

    /// The watched uris are published while a stream wants them, once however many streams
    /// do, and withdrawn when the last one ends.
    #[test]
    fn resource_uris_are_published_while_some_stream_watches_them() {
        let hub = ListenHub::default();
        let watched = hub.watched_resources();
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let a = hub.watch_resources(&["r://a".into(), "r://b".into()]);
        let b = hub.watch_resources(&["r://b".into()]);
        assert_eq!(*watched.borrow(), set(&["r://a", "r://b"]));
        drop(a);
        assert_eq!(*watched.borrow(), set(&["r://b"]), "b is still wanted");
        drop(b);
        assert!(watched.borrow().is_empty());
    }

    #[test]
    fn a_task_change_reaches_listeners_once_and_only_while_watched() {
        let hub = ListenHub::default();
        let mut rx = hub.subscribe();
        // Nobody asked for t1 yet: announced to nobody.
        hub.announce(task("t1", "working"));
        assert!(rx.try_recv().is_err());

        let watch = hub.watch_tasks(&["t1".to_string()]);
        let again = hub.watch_tasks(&["t1".to_string()]);
        assert!(hub.watches_task("t1"));
        assert_eq!(hub.watched_tasks(), vec!["t1".to_string()]);
        hub.announce(task("t1", "working"));
        // The same status read twice (a signal and this process both reported it): once.
        hub.announce(task("t1", "working"));
        hub.announce(task("t1", "completed"));
        assert_eq!(rx.try_recv().unwrap(), task("t1", "working"));
        assert_eq!(rx.try_recv().unwrap(), task("t1", "completed"));
        assert!(rx.try_recv().is_err());

        // Watched while any stream that asked is open.
        drop(watch);
        assert!(hub.watches_task("t1"));
        drop(again);
        assert!(!hub.watches_task("t1"));
        hub.announce(task("t1", "failed"));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn list_changes_go_to_every_listener_each_time() {
        let hub = ListenHub::default();
        let mut rx = hub.subscribe();
        hub.announce(Change::ToolsListChanged);
        hub.announce(Change::ToolsListChanged);
        assert_eq!(rx.try_recv().unwrap(), Change::ToolsListChanged);
        assert_eq!(rx.try_recv().unwrap(), Change::ToolsListChanged);
    }
}
