//! Resource subscriptions through the proxy.
//!
//! A 2025 session's `resources/subscribe` goes to the upstream that listed the resource, once
//! per resource however many sessions ask; a 2026-07-28 client's `subscriptions/listen` with
//! `resourceSubscriptions` subscribes the same way, through the server's
//! [`ListenHub::watched_resources`]. The upstream's `notifications/resources/updated` reaches
//! each subscribed session with its params unchanged, and every listen stream that asked for
//! the uri. When the last subscriber goes (its `resources/unsubscribe`, the end of its session,
//! the close of its listen stream) the upstream is unsubscribed.
//!
//! Subscriptions are made on each upstream's shared connection, where its notifications
//! arrive, and made again when that connection restarts. One lock orders them, held across the upstream's answer, so a subscribe and an
//! unsubscribe of one resource never reach the upstream out of order.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use staunch_client::CallOptions;
use staunch_server::{Change, Context, ListenHub, Notifier, ServerBuilder, ToolError};
use tokio_util::sync::CancellationToken;

use crate::owners::{Routes, invalid, rpc};
use crate::upstream::Pool;

/// How long a subscription change made for a listen stream (no request to bound it) may take.
const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether `pool`'s upstream declared `resources.subscribe`.
pub(crate) fn takes_subscriptions(pool: &Pool) -> bool {
    pool.shared()
        .capabilities()
        .is_some_and(|c| c["resources"]["subscribe"] == true)
}

/// Who wants one resource, and where it is subscribed.
#[derive(Default)]
struct Entry {
    /// The downstream sessions subscribed, by id, each with the handle that reaches it.
    sessions: HashMap<String, Notifier>,
    /// Whether an open listen stream asked for it.
    listened: bool,
    /// The upstream it is subscribed at; `None` until the upstream said yes.
    upstream: Option<Arc<Pool>>,
}

impl Entry {
    fn wanted(&self) -> bool {
        self.listened || !self.sessions.is_empty()
    }
}

/// Every resource some downstream client is subscribed to.
struct Subscriptions {
    routes: Arc<Routes>,
    hub: ListenHub,
    table: tokio::sync::Mutex<HashMap<String, Entry>>,
}

/// Adds `resources/subscribe` and `resources/unsubscribe` for the upstreams of `routes` that
/// take subscriptions, and starts passing their updates on.
pub(crate) fn register(mut builder: ServerBuilder, routes: Arc<Routes>) -> ServerBuilder {
    let subs = Arc::new(Subscriptions {
        routes,
        hub: builder.listen_hub(),
        table: tokio::sync::Mutex::default(),
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
            async move { s.unsubscribe(&ctx, params).await }
        },
    );
    for pool in subs.routes.pools.iter().filter(|p| takes_subscriptions(p)) {
        let mut updates = pool.shared().resource_updates();
        let s = subs.clone();
        tokio::spawn(async move {
            loop {
                match updates.recv().await {
                    Ok(params) => s.updated(params).await,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(
                            missed = n,
                            "resource updates from an upstream were dropped: too many at once"
                        );
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }
    for pool in subs.routes.pools.iter().filter(|p| takes_subscriptions(p)) {
        let mut reconnected = pool.shared().reconnected();
        let (s, pool) = (subs.clone(), pool.clone());
        tokio::spawn(async move {
            while reconnected.changed().await.is_ok() {
                s.subscribe_again(&pool).await;
            }
        });
    }
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
        let mut table = self.table.lock().await;
        let entry = table.entry(uri.clone()).or_default();
        if entry.upstream.is_none() {
            let params = params.unwrap_or_else(|| json!({"uri": uri}));
            let cancel = ctx.cancellation_token();
            match tell(&pool, "resources/subscribe", params, Some(cancel)).await {
                Ok(_) => entry.upstream = Some(pool),
                Err(e) => {
                    if !entry.wanted() {
                        table.remove(&uri);
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

    async fn unsubscribe(&self, ctx: &Context, params: Option<Value>) -> Result<Value, ToolError> {
        let uri = uri_of("resources/unsubscribe", params.as_ref())?;
        self.forget_session(&uri, ctx.session_id()).await;
        Ok(json!({}))
    }

    /// `session` no longer wants `uri`; the upstream is unsubscribed if nobody does.
    async fn forget_session(&self, uri: &str, session: &str) {
        let mut table = self.table.lock().await;
        if let Some(entry) = table.get_mut(uri) {
            entry.sessions.remove(session);
        }
        settle(&mut table, uri).await;
    }

    /// The upstream says `params.uri` changed: each subscribed session hears it, as sent, and
    /// so does each listen stream that asked for it.
    async fn updated(&self, params: Value) {
        let Some(uri) = params["uri"].as_str().map(str::to_string) else {
            return;
        };
        let mut table = self.table.lock().await;
        if let Some(entry) = table.get_mut(&uri) {
            // A session that is gone cannot hear it, nor unsubscribe: forget it here.
            entry
                .sessions
                .retain(|_, n| n.notify("notifications/resources/updated", params.clone()));
            settle(&mut table, &uri).await;
        }
        drop(table);
        self.hub.announce(Change::ResourceUpdated(uri));
    }

    /// `pool`'s upstream restarted and knows no subscription: it is told each one again.
    async fn subscribe_again(&self, pool: &Arc<Pool>) {
        let table = self.table.lock().await;
        for (uri, entry) in table.iter() {
            if !entry
                .upstream
                .as_ref()
                .is_some_and(|p| Arc::ptr_eq(p, pool))
            {
                continue;
            }
            if let Err(e) = tell(pool, "resources/subscribe", json!({"uri": uri}), None).await {
                tracing::warn!(uri = %uri, upstream = %pool.spec().name, error = ?e,
                    "a restarted upstream refused a subscription it had before");
            }
        }
    }

    /// Keeps the upstreams subscribed to what open listen streams ask for.
    async fn follow_listeners(&self) {
        let mut watched = self.hub.watched_resources();
        loop {
            let now: BTreeSet<String> = watched.borrow_and_update().clone();
            let mut table = self.table.lock().await;
            let before: Vec<String> = table
                .iter()
                .filter(|(_, e)| e.listened)
                .map(|(u, _)| u.clone())
                .collect();
            for uri in before.iter().filter(|u| !now.contains(*u)) {
                if let Some(e) = table.get_mut(uri) {
                    e.listened = false;
                }
                settle(&mut table, uri).await;
            }
            for uri in now.iter().filter(|u| !before.contains(*u)) {
                let Ok(pool) = self.owner(uri) else {
                    tracing::warn!(uri = %uri, "a listen stream asked for a resource no upstream that takes subscriptions has listed");
                    continue;
                };
                let entry = table.entry(uri.clone()).or_default();
                entry.listened = true;
                if entry.upstream.is_none() {
                    let params = json!({"uri": uri});
                    match tell(&pool, "resources/subscribe", params, None).await {
                        Ok(_) => entry.upstream = Some(pool),
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

/// Drops `uri`'s entry once nobody wants it, unsubscribing its upstream.
async fn settle(table: &mut HashMap<String, Entry>, uri: &str) {
    let Some(entry) = table.get(uri) else { return };
    if entry.wanted() {
        return;
    }
    if let Some(pool) = table.remove(uri).and_then(|e| e.upstream)
        && let Err(e) = tell(&pool, "resources/unsubscribe", json!({"uri": uri}), None).await
    {
        tracing::warn!(uri = %uri, upstream = %pool.spec().name, error = ?e,
            "the upstream refused to unsubscribe");
    }
}

/// Sends a subscription change to `pool`'s shared connection, where its updates arrive.
async fn tell(
    pool: &Pool,
    method: &str,
    params: Value,
    cancel: Option<CancellationToken>,
) -> Result<Value, ToolError> {
    let client = pool
        .shared()
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
