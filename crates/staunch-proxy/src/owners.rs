//! Which upstream serves what: the upstreams that declared one capability and, for
//! resources, which of them listed each uri; and how an upstream's failure is answered.
//! Shared by the methods forwarded to upstreams (`methods`) and the resource subscriptions
//! (`subscriptions`); an upstream's failure as a request's error is `error::rpc`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use staunch_protocol::{ErrorObject, codes};
use staunch_server::ToolError;

use crate::pool::Pool;

/// The upstreams that serve one capability, and which upstream a resource uri came from.
pub(crate) struct Routes {
    pub(crate) pools: Vec<Arc<Pool>>,
    uri_owner: Mutex<HashMap<String, usize>>,
}

impl Routes {
    /// The upstreams `pools` serve one capability.
    pub(crate) fn new(pools: Vec<Arc<Pool>>) -> Self {
        Self {
            pools,
            uri_owner: Mutex::default(),
        }
    }

    /// Remembers that the upstream at `index` listed `items` (resources or templates).
    pub(crate) fn listed(&self, index: usize, items: &[serde_json::Value]) {
        let mut owners = self.uri_owner.lock().unwrap_or_else(|p| p.into_inner());
        for item in items {
            if let Some(uri) = item["uri"].as_str() {
                owners.insert(uri.to_string(), index);
            }
        }
    }

    /// The upstream that listed `uri` (the only one, if there is one).
    pub(crate) fn owner_of_uri(&self, uri: &str) -> Option<&Arc<Pool>> {
        if self.pools.len() == 1 {
            return self.pools.first();
        }
        let i = *self
            .uri_owner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(uri)?;
        self.pools.get(i)
    }
}

/// -32602 with `message`.
pub(crate) fn invalid(message: String) -> ToolError {
    ToolError::Rpc(ErrorObject::new(codes::INVALID_PARAMS, message))
}
