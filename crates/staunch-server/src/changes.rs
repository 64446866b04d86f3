//! [`ListenHub`]: where a server announces changes — tool, prompt and resource lists, updated
//! resources, tasks — to every open `subscriptions/listen` stream (the `listen` module serves them).

use tokio::sync::broadcast;
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
        id: String,
        /// Its owner key ([`crate::owner_key`]): only a listener with the same key hears it.
        owner: String,
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
}

impl Default for ListenHub {
    fn default() -> Self {
        // A stream that falls this far behind gets told "something changed" once per kind
        // instead (see `Lagged` below), so the bound costs nothing but precision.
        let (tx, _) = broadcast::channel(256);
        Self {
            tx,
            closing: CancellationToken::new(),
        }
    }
}

impl ListenHub {
    /// Announces a change to every listen stream whose filter asked for it.
    pub fn announce(&self, change: Change) {
        // No receivers is fine: nobody listens.
        let _ = self.tx.send(change);
    }

    /// Whether any listen stream is open (so a caller can skip building a change nobody
    /// would receive).
    pub fn has_listeners(&self) -> bool {
        self.tx.receiver_count() > 0
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
