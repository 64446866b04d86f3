//! Resource subscriptions through the proxy.
//!
//! A 2025 session's `resources/subscribe` goes to the upstream that listed the resource, on the
//! connection that serves the session: the shared one, or with `isolate` the session's own
//! process, where its resources live. A 2026-07-28 client's `subscriptions/listen` with
//! `resourceSubscriptions` subscribes the same way on the shared connection, through the
//! server's [`ListenHub::watched_resources`]. Each resource is subscribed once per connection
//! however many clients ask. The upstream's `notifications/resources/updated` reaches each
//! session subscribed on that connection with its params unchanged, and (from the shared
//! connection) every listen stream that asked for the uri. When the last subscriber goes (its
//! `resources/unsubscribe`, the end of its session, the close of its listen stream) the upstream
//! is unsubscribed; a connection that restarts is told its subscriptions again.
//!
//! One lock orders the subscription changes, held across the upstream's answer, so a subscribe
//! and an unsubscribe of one resource never reach the upstream out of order.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use staunch_client::CallOptions;
use staunch_server::{Change, Context, ListenHub, Notifier, ServerBuilder, ToolError};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::error::rpc;
use crate::owners::{Routes, invalid};
use crate::pool::Pool;
use crate::upstream::{Followed, Upstream};

/// How long a subscription change made for a listen stream (no request to bound it) may take.
const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether `pool`'s upstream declared `resources.subscribe`.
pub(crate) fn takes_subscriptions(pool: &Pool) -> bool {
    pool.shared()
        .capabilities()
        .is_some_and(|c| c["resources"]["subscribe"] == true)
}

/// A resource on one upstream connection: its uri and the connection's [`Upstream::id`].
type Key = (String, u64);

/// Who wants one resource on one connection.
struct Entry {
    /// The connection it is subscribed on (or about to be).
    upstream: Arc<Upstream>,
    /// Whether the upstream said yes.
    subscribed: bool,
    /// The downstream sessions subscribed, by id, each with the handle that reaches it.
    sessions: HashMap<String, Notifier>,
    /// Whether an open listen stream asked for it (shared connections only).
    listened: bool,
}

impl Entry {
    fn new(upstream: Arc<Upstream>) -> Self {
        Self {
            upstream,
            subscribed: false,
            sessions: HashMap::new(),
            listened: false,
        }
    }

    fn wanted(&self) -> bool {
        self.listened || !self.sessions.is_empty()
    }
}

/// Every resource some downstream client is subscribed to.
struct Subscriptions {
    routes: Arc<Routes>,
    hub: ListenHub,
    table: tokio::sync::Mutex<HashMap<Key, Entry>>,
    /// The connections whose updates and restarts are followed, by id.
    followed: Followed,
}

/// Adds `resources/subscribe` and `resources/unsubscribe` for the upstreams of `routes` that
/// take subscriptions, and keeps the listen streams' subscriptions.
pub(crate) fn register(mut builder: ServerBuilder, routes: Arc<Routes>) -> ServerBuilder {
    let subs = Arc::new(Subscriptions {
        routes,
        hub: builder.listen_hub(),
        table: tokio::sync::Mutex::default(),
        followed: Followed::default(),
    });
    let s = subs.clone();
    builder = builder.method(
        "resources/subscribe",
        move |ctx: Context, params: Option<Value>| {
            let s = s.clone();
            async move { s.subscribe(&ctx, params).await }
        },
    );
    let s = subs.clone();
    builder = builder.method(
        "resources/unsubscribe",
        move |ctx: Context, params: Option<Value>| {
            let s = s.clone();
            async move {
                let uri = uri_of("resources/unsubscribe", params.as_ref())?;
                s.forget_session(&uri, ctx.session_id()).await;
                Ok(json!({}))
            }
        },
    );
    let s = subs.clone();
    tokio::spawn(async move { s.follow_listeners().await });
    builder
}

/// The `uri` of a subscribe or unsubscribe request.
fn uri_of(method: &str, params: Option<&Value>) -> Result<String, ToolError> {
    params
        .and_then(|p| p["uri"].as_str())
        .map(str::to_string)
        .ok_or_else(|| invalid(format!("{method} needs params.uri")))
}

impl Subscriptions {
    /// The upstream that serves `uri`, if it takes subscriptions.
    fn owner(&self, uri: &str) -> Result<Arc<Pool>, ToolError> {
        let pool = self
            .routes
            .owner_of_uri(uri)
            .ok_or_else(|| invalid(format!("unknown resource {uri:?}: list resources first")))?;
        if !takes_subscriptions(pool) {
            return Err(invalid(format!(
                "the upstream {:?} that serves {uri:?} does not take subscriptions",
                pool.spec().name
            )));
        }
        Ok(pool.clone())
    }

    async fn subscribe(
        self: &Arc<Self>,
        ctx: &Context,
        params: Option<Value>,
    ) -> Result<Value, ToolError> {
        let uri = uri_of("resources/subscribe", params.as_ref())?;
        let pool = self.owner(&uri)?;
        let up = pool
            .for_request(ctx)
            .await
            .map_err(|e| ToolError::Internal(e.to_string()))?;
        self.follow(&up, Arc::ptr_eq(&up, pool.shared()));
        let key = (uri.clone(), up.id());
        let mut table = self.table.lock().await;
        let entry = table
            .entry(key.clone())
            .or_insert_with(|| Entry::new(up.clone()));
        if !entry.subscribed {
            let params = params.unwrap_or_else(|| json!({"uri": uri}));
            let cancel = ctx.cancellation_token();
            match tell(&up, "resources/subscribe", params, Some(cancel)).await {
                Ok(_) => entry.subscribed = true,
                Err(e) => {
                    if !entry.wanted() {
                        table.remove(&key);
                    }
                    return Err(e);
                }
            }
        }
        let session = ctx.session_id().to_string();
        let fresh = entry
            .sessions
            .insert(session.clone(), ctx.notifier())
            .is_none();
        drop(table);
        // An HTTP session that ends without unsubscribing is unsubscribed then.
        if fresh && let Some(closed) = ctx.session_closed() {
            let this = self.clone();
            tokio::spawn(async move {
                closed.await;
                this.forget_session(&uri, &session).await;
            });
        }
        Ok(json!({}))
    }

    /// `session` no longer wants `uri`; an upstream nobody wants it from is unsubscribed.
    async fn forget_session(&self, uri: &str, session: &str) {
        let mut table = self.table.lock().await;
        let keys: Vec<Key> = table
            .iter_mut()
            .filter(|((u, _), _)| u == uri)
            .filter_map(|(k, e)| e.sessions.remove(session).map(|_| k.clone()))
            .collect();
        for key in keys {
            settle(&mut table, &key).await;
        }
    }

    /// Passes on connection `from`'s updates and, after each restart, tells it its
    /// subscriptions again; once per connection, for as long as it lives. `shared`: the
    /// upstream's shared connection, whose updates listen streams hear too.
    fn follow(self: &Arc<Self>, up: &Arc<Upstream>, shared: bool) {
        let id = up.id();
        if !self.followed.start(up) {
            return;
        }
        let mut updates = up.resource_updates();
        let mut reconnected = up.reconnected();
        let up = Arc::downgrade(up);
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    u = updates.recv() => match u {
                        Ok(params) => this.updated(params, id, shared).await,
                        Err(RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "resource updates from an upstream were dropped: too many at once");
                        }
                        Err(RecvError::Closed) => break,
                    },
                    r = reconnected.changed() => match (r, up.upgrade()) {
                        (Ok(()), Some(up)) => this.subscribe_again(&up).await,
                        _ => break,
                    },
                }
            }
            this.followed.end(id);
        });
    }

    /// Connection `from` says `params.uri` changed: each session subscribed on it hears it, as
    /// sent, and, from a shared connection, each listen stream that asked for it.
    async fn updated(&self, params: Value, from: u64, shared: bool) {
        let Some(uri) = params["uri"].as_str().map(str::to_string) else {
            return;
        };
        let key = (uri, from);
        let mut table = self.table.lock().await;
        if let Some(entry) = table.get_mut(&key) {
            // A session that is gone cannot hear it, nor unsubscribe: forget it here.
            entry
                .sessions
                .retain(|_, n| n.notify("notifications/resources/updated", params.clone()));
            settle(&mut table, &key).await;
        }
        drop(table);
        if shared {
            self.hub.announce(Change::ResourceUpdated(key.0));
        }
    }

    /// `up` restarted and knows no subscription: it is told each one again.
    async fn subscribe_again(&self, up: &Arc<Upstream>) {
        let table = self.table.lock().await;
        for ((uri, _), entry) in table
            .iter()
            .filter(|((_, id), e)| *id == up.id() && e.subscribed)
        {
            if let Err(e) = tell(
                &entry.upstream,
                "resources/subscribe",
                json!({"uri": uri}),
                None,
            )
            .await
            {
                tracing::warn!(uri = %uri, upstream = %up.name(), error = ?e,
                    "a restarted upstream refused a subscription it had before");
            }
        }
    }

    /// Keeps the upstreams' shared connections subscribed to what open listen streams ask for.
    async fn follow_listeners(self: &Arc<Self>) {
        let mut watched = self.hub.watched_resources();
        loop {
            let now: BTreeSet<String> = watched.borrow_and_update().clone();
            let mut table = self.table.lock().await;
            let gone: Vec<Key> = table
                .iter()
                .filter(|((uri, _), e)| e.listened && !now.contains(uri))
                .map(|(k, _)| k.clone())
                .collect();
            for key in gone {
                if let Some(e) = table.get_mut(&key) {
                    e.listened = false;
                }
                settle(&mut table, &key).await;
            }
            for uri in &now {
                let Ok(pool) = self.owner(uri) else {
                    tracing::warn!(uri = %uri, "a listen stream asked for a resource no upstream that takes subscriptions has listed");
                    continue;
                };
                let up = pool.shared().clone();
                self.follow(&up, true);
                let entry = table
                    .entry((uri.clone(), up.id()))
                    .or_insert_with(|| Entry::new(up.clone()));
                entry.listened = true;
                if !entry.subscribed {
                    match tell(&up, "resources/subscribe", json!({"uri": uri}), None).await {
                        Ok(_) => entry.subscribed = true,
                        Err(e) => {
                            tracing::warn!(uri = %uri, upstream = %pool.spec().name, error = ?e,
                                "the upstream refused a subscription a listen stream asked for");
                        }
                    }
                }
            }
            drop(table);
            if watched.changed().await.is_err() {
                return;
            }
        }
    }
}

/// Drops `key`'s entry once nobody wants it, unsubscribing its upstream.
async fn settle(table: &mut HashMap<Key, Entry>, key: &Key) {
    if table.get(key).is_none_or(Entry::wanted) {
        return;
    }
    if let Some(entry) = table.remove(key).filter(|e| e.subscribed) {
        let uri = json!({"uri": key.0});
        if let Err(e) = tell(&entry.upstream, "resources/unsubscribe", uri, None).await {
            tracing::warn!(uri = %key.0, upstream = %entry.upstream.name(), error = ?e,
                "the upstream refused to unsubscribe");
        }
    }
}

/// Sends a subscription change to the connection `up`.
async fn tell(
    up: &Upstream,
    method: &str,
    params: Value,
    cancel: Option<CancellationToken>,
) -> Result<Value, ToolError> {
    let client = up
        .client()
        .await
        .map_err(|e| ToolError::Internal(e.to_string()))?;
    let opts = CallOptions {
        timeout: cancel.is_none().then_some(BACKGROUND_TIMEOUT),
        reset_on_progress: false,
        max_total: None,
        progress: false,
        cancel,
    };
    client
        .request(method, Some(params), &opts)
        .await
        .map_err(rpc)
}
