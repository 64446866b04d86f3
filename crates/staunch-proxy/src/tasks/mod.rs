//! Upstream tasks offered to the proxy's clients, of either era. A 2025 session's
//! task-augmented `tools/call` of a tool whose upstream runs 2025-11-25 tasks becomes the
//! upstream's own task; so does a 2026-07-28 client's call under the tasks extension when
//! the upstream offers the extension and makes a task of it. The client gets the upstream's
//! answer under an id of the proxy's, and its `tasks/get`, `tasks/result`, `tasks/cancel` and
//! `tasks/update` for that id reach exactly that upstream task, answered with every field the
//! upstream wrote but its own hop's (`io.modelcontextprotocol/*` in `_meta`, the related task
//! aside), the id put back.
//!
//! The id is unguessable (`up-` and 128 random bits) and bound like staunch's own tasks: to
//! the caller's principal, else its session; any other caller gets -32602 "unknown task", as
//! for an id that never existed. Ids the proxy did not make go on to the handler registered
//! before (the job runtime's tasks), or get that same error. Where the job runtime lists tasks
//! (requests carry a principal), `tasks/list` lists the principal's upstream tasks too.
//!
//! The upstream's `notifications/tasks/status` about a task a 2025 session holds reaches that
//! session (on HTTP, its standalone stream) with the proxy's id in place of the upstream's; a
//! 2026-07-28 client has no session to be told on and asks with `tasks/get`, or listens: the
//! proxy listens upstream for a 2026 upstream's task (`subscriptions/listen` with its
//! `taskIds`), and what the upstream says of it reaches the proxy's listen streams that watch
//! it, under the proxy's id. The progress such
//! a task reports after the call that made it reaches the session too, under the client's own
//! token ([`UpstreamTasks::pass_progress`]), until the task is known to have ended.
//!
//! Across eras, a client of the extension calling a tool an upstream runs as a 2025-11-25 task
//! gets that task written the extension's way ([`Kind::TasksToExtension`]): a flat task with `ttlMs`
//! and `pollIntervalMs`, and a `tasks/get` that carries the outcome (the upstream's
//! `tasks/result`, fetched once the task is terminal: a result is `completed`, an error
//! `failed`); `tasks/cancel` reaches the upstream task and answers the extension's empty ack.
//! Such a task takes no `tasks/update`: a 2025-11-25 task asks its questions on the session
//! that waits in `tasks/result`, which a client of the extension does not have. Its
//! upstream's status notifications reach the listen streams that watch it, as
//! `notifications/tasks` written the extension's way. The other way
//! ([`Kind::ExtensionToTasks`]), a 2025 session's task-augmented call of a tool an upstream
//! runs under the extension only becomes that upstream's task written the 2025-11-25 way
//! (`ttl`, `pollInterval`, no inlined outcome); its `tasks/result` follows the upstream task to
//! its end, putting the questions it asks while `input_required` to the session and sending
//! the answers with `tasks/update`; its `tasks/cancel` answers the task as it stands after the
//! cancel. The proxy listens upstream for such a task's changes (`subscriptions/listen` with
//! its `taskIds`, until it ends), and each `notifications/tasks` reaches the session as
//! `notifications/tasks/status`, written the 2025-11-25 way.
//!
//! The table is in memory and bounded ([`MAX_TASKS`] per upstream; the oldest entry goes
//! first): a task outlives neither the proxy's process nor the upstream connection it was made
//! on (a restarted upstream has lost it, and says so).
//!
//! Here the table and its followers; in `methods` the task methods that serve it, in `shapes` a
//! task in the other era's words and the requests about one held across eras, in `pace` a
//! held task's progress after its call.

mod methods;
mod pace;
mod shapes;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use staunch_client::ProgressStream;
use staunch_protocol::mcp::methods::SUBSCRIPTIONS_LISTEN;
use staunch_server::{Change, Context, ListenHub, Notifier};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::upstream::{Followed, Upstream, request_options};

use methods::{ListMethod, TaskMethod};
use shapes::bridged;
pub(crate) use shapes::{extension_task, tasks_task};

/// Upstream tasks kept at most per upstream; past it the oldest is forgotten.
pub(crate) const MAX_TASKS: usize = 10_000;

/// Upstream tasks listened for at once ([`UpstreamTasks::listen_upstream`]): over HTTP each
/// listen holds a connection to the upstream open until its task ends. Past it, the session
/// holding a task reads its changes with `tasks/get`.
pub(crate) const MAX_TASK_LISTENS: usize = 64;

/// The `_meta` key that ties a message to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Whom the caller of `ctx` is, as tasks are bound ([`staunch_server::owner_key`]): its
/// principal, else the 2025 session it speaks in, else `""` — whoever holds a task's id
/// (stdio, a request without a session).
fn owner_of(ctx: &Context) -> String {
    staunch_server::owner_key(ctx.principal(), ctx.owning_session())
}

/// How a held task is spoken of, by its client and by its upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A 2025-11-25 task on both sides.
    Tasks,
    /// A task of the 2026-07-28 extension on both sides: every request about it declares the
    /// extension.
    Extension,
    /// A 2025-11-25 upstream task held by a client of the extension: its requests declare the
    /// extension, and every answer is written the extension's way.
    TasksToExtension,
    /// An upstream task of the extension held by a 2025 session: every answer is written the
    /// 2025-11-25 way, and `tasks/result` waits for the end, putting the task's questions to
    /// the session.
    ExtensionToTasks,
}

impl Kind {
    /// Whether the client speaks of it under the extension.
    fn client_declares(self) -> bool {
        matches!(self, Kind::Extension | Kind::TasksToExtension)
    }
}

struct HeldTask {
    up: Arc<Upstream>,
    upstream_id: String,
    kind: Kind,
    /// Whom it answers to ([`owner_of`]), on a listen stream too.
    owner: String,
    made: Instant,
    /// The 2025 session (or stdio connection) told of the task's status changes.
    session: Option<Notifier>,
    /// Marked once the task is known to be terminal (or forgotten): its progress stops.
    ended: Ended,
    /// A 2026 upstream's `subscriptions/listen` for the task's changes
    /// ([`UpstreamTasks::listen_upstream`]); dropped, which ends it, once the task has ended or
    /// is forgotten.
    listen: Option<staunch_client::PendingRequest>,
}

impl HeldTask {
    fn found(&self) -> Found {
        Found {
            up: self.up.clone(),
            upstream_id: self.upstream_id.clone(),
            kind: self.kind,
            ended: self.ended.clone(),
        }
    }
}

/// Where an upstream task is: its connection, its id there, how it is spoken of.
struct Found {
    up: Arc<Upstream>,
    upstream_id: String,
    kind: Kind,
    ended: Ended,
}

/// The upstream tasks the proxy's clients hold, by the proxy's id.
#[derive(Default)]
pub(crate) struct UpstreamTasks {
    entries: Mutex<HashMap<String, HeldTask>>,
    /// The connections (by [`Upstream::id`]) whose status notifications are followed.
    followed: Followed,
    /// Where the proxy's `subscriptions/listen` streams hear task changes (set when the task
    /// methods are registered).
    hub: std::sync::OnceLock<ListenHub>,
}

impl std::fmt::Debug for UpstreamTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTasks")
            .field("held", &self.lock().len())
            .finish()
    }
}

impl UpstreamTasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HeldTask>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes in the upstream task `upstream_id`, made on `up` for the caller of `ctx`, spoken
    /// of as `kind`; the id the client knows it by.
    pub(crate) fn adopt(
        self: &Arc<Self>,
        up: Arc<Upstream>,
        upstream_id: &str,
        kind: Kind,
        ctx: &Context,
    ) -> String {
        let id = fresh_id();
        // A task held the 2025 way is a session's (stdio's too), which is told of its changes;
        // the extension's client has no session, and hears of them on its listen streams.
        let session = matches!(kind, Kind::Tasks | Kind::ExtensionToTasks).then(|| ctx.notifier());
        self.follow_statuses(&up);
        let mut entries = self.lock();
        if entries.len() >= MAX_TASKS
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, e)| e.made)
                .map(|(k, _)| k.clone())
            && let Some(forgotten) = entries.remove(&oldest)
        {
            forgotten.ended.mark();
        }
        entries.insert(
            id.clone(),
            HeldTask {
                up,
                upstream_id: upstream_id.to_string(),
                kind,
                owner: owner_of(ctx),
                made: Instant::now(),
                session,
                ended: Ended::default(),
                listen: None,
            },
        );
        id
    }

    /// Asks the 2026 upstream `client` for the changes of the task held as `id`, until it ends
    /// (at most [`MAX_TASK_LISTENS`] tasks at once): its `notifications/tasks` reach a 2025
    /// session holding the task ([`Kind::ExtensionToTasks`]) as `notifications/tasks/status`,
    /// written the 2025-11-25 way, and the proxy's listen streams that watch it
    /// ([`Kind::Extension`]) as they are.
    ///
    /// A task that ended before the listen was open is not told of on it: the task is read
    /// once the listen is open, and an end found so is passed on as the note would have been
    /// (and ends the listen, which would otherwise hold its place until the task is forgotten).
    pub(crate) fn listen_upstream(self: &Arc<Self>, id: &str, client: &staunch_client::Client) {
        let (up, upstream_id) = {
            let entries = self.lock();
            let Some(e) = entries.get(id) else { return };
            if entries.values().filter(|e| e.listen.is_some()).count() >= MAX_TASK_LISTENS {
                tracing::debug!(task = %e.upstream_id, "upstream task not listened for: {MAX_TASK_LISTENS} are");
                return;
            }
            (e.up.clone(), e.upstream_id.clone())
        };
        let started = (|| {
            let listen = json!({"notifications": {"taskIds": [upstream_id]}});
            let listen = client.with_tasks_extension(listen)?;
            let get = client.with_tasks_extension(json!({"taskId": upstream_id}))?;
            let listen = client.start_request(SUBSCRIPTIONS_LISTEN, Some(listen), false)?;
            Ok::<_, staunch_client::ClientError>((listen, get))
        })();
        let (listen, get) = match started {
            Ok(started) => started,
            Err(e) => {
                return tracing::warn!(task = %upstream_id, error = %e,
                    "cannot listen for an upstream task's changes; its holder reads them with tasks/get");
            }
        };
        if let Some(e) = self.lock().get_mut(id) {
            e.listen = Some(listen);
        }
        let (this, client, id) = (self.clone(), client.clone(), id.to_string());
        tokio::spawn(async move {
            let still_listening = || this.lock().get(&id).is_some_and(|e| e.listen.is_some());
            if let Ok(mut task) = client
                .request("tasks/get", Some(get), &unwaited_read())
                .await
                && is_terminal(&task)
                && still_listening()
            {
                // The answer's own field, not the task's: a note carries none.
                if let Some(fields) = task.as_object_mut() {
                    fields.remove("resultType");
                }
                this.status(&up, task);
            }
        });
    }

    /// Passes `up`'s `notifications/tasks/status` (and a 2026 upstream's `notifications/tasks`)
    /// on to the sessions and listeners holding those tasks, from now until the connection is
    /// gone (once per connection).
    fn follow_statuses(self: &Arc<Self>, up: &Arc<Upstream>) {
        let id = up.id();
        if !self.followed.start(up) {
            return;
        }
        let mut statuses = up.task_statuses();
        let up = Arc::downgrade(up);
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                match statuses.recv().await {
                    Ok(params) => match up.upgrade() {
                        Some(up) => this.status(&up, params),
                        None => break,
                    },
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(
                            missed = n,
                            "task status notifications from an upstream were dropped: too many at once"
                        );
                    }
                    Err(RecvError::Closed) => break,
                }
            }
            this.followed.end(id);
        });
    }

    /// One status notification of `up`'s, to the session holding its task (none: dropped).
    fn status(&self, up: &Arc<Upstream>, params: Value) {
        let Some(upstream_id) = params.get("taskId").and_then(Value::as_str) else {
            return;
        };
        type Holder = (String, Kind, String, Option<Notifier>, Ended);
        let held: Vec<Holder> = self
            .lock()
            .iter()
            .filter(|(_, e)| Arc::ptr_eq(&e.up, up) && e.upstream_id == upstream_id)
            .map(|(id, e)| {
                let session = e.session.clone();
                (
                    id.clone(),
                    e.kind,
                    e.owner.clone(),
                    session,
                    e.ended.clone(),
                )
            })
            .collect();
        let terminal = is_terminal(&params);
        for (id, kind, owner, session, ended) in held {
            match kind {
                Kind::TasksToExtension => {
                    self.tell_listeners(up, (upstream_id, &id), owner, &params, terminal);
                }
                // The extension's own note, outcome and all: only the id changes.
                Kind::Extension => {
                    if let Some(hub) = self.hub.get().filter(|hub| hub.watches_task(&id)) {
                        let detail = with_id(params.clone(), upstream_id, &id);
                        hub.announce(Change::Task {
                            id: id.clone(),
                            owner,
                            detail,
                        });
                    }
                }
                Kind::Tasks | Kind::ExtensionToTasks => {}
            }
            let tell = || {
                if let Some(session) = &session {
                    // A 2026 upstream's note carries the whole task, the extension's way.
                    let task = match kind {
                        Kind::ExtensionToTasks => tasks_task(&params),
                        _ => params.clone(),
                    };
                    session.notify(
                        "notifications/tasks/status",
                        with_id(task, upstream_id, &id),
                    );
                }
            };
            if terminal {
                // Nothing more to hear of the task upstream. (Ended outside the lock: ending it
                // sends upstream.)
                let listen = self.lock().get_mut(&id).and_then(|e| e.listen.take());
                drop(listen);
                // No progress report of the task after its terminal status.
                ended.mark_then(tell);
            } else {
                tell();
            }
        }
    }

    /// Tells the listen streams that watch a task held across eras ([`Kind::TasksToExtension`];
    /// `upstream_id` upstream, `id` to its client, who is `owner`) of its upstream's status
    /// change, written the extension's way: at once while it runs, and, once it has ended,
    /// with its outcome inlined (read from the upstream first).
    fn tell_listeners(
        &self,
        up: &Arc<Upstream>,
        (upstream_id, id): (&str, &str),
        owner: String,
        params: &Value,
        terminal: bool,
    ) {
        let Some(hub) = self.hub.get().filter(|hub| hub.watches_task(id)) else {
            return;
        };
        let announce = {
            let (hub, id) = (hub.clone(), id.to_string());
            move |detail: Value| hub.announce(Change::Task { id, owner, detail })
        };
        if !terminal {
            announce(with_id(extension_task(params), upstream_id, id));
            return;
        }
        let (up, upstream_id, id) = (up.clone(), upstream_id.to_string(), id.to_string());
        tokio::spawn(async move {
            let Ok(client) = up.client().await else {
                return;
            };
            let get = json!({"taskId": upstream_id});
            let ids = (upstream_id.as_str(), id.as_str());
            if let Ok(detail) = bridged("tasks/get", &client, get, &unwaited_read(), ids).await {
                announce(with_id(detail, &upstream_id, &id));
            }
        });
    }

    /// Passes the progress of the task held as `id` after the call that made it (a 2025-11-25
    /// task's token stays valid until it ends) on to the session holding it, under its
    /// `token`: strictly increasing values, at most [`ProgressRate`]'s default rate (a value
    /// that comes sooner waits, replaced by any later one), none once the task is known to be
    /// terminal, and none after the session or the upstream connection is gone.
    pub(crate) fn pass_progress(&self, id: &str, progress: ProgressStream, token: Value) {
        let Some((ended, session, upstream_id)) = self
            .lock()
            .get(id)
            .and_then(|e| Some((e.ended.clone(), e.session.clone()?, e.upstream_id.clone())))
        else {
            return;
        };
        tokio::spawn(pace::pass_on(
            progress,
            ended,
            session,
            token,
            (upstream_id, id.to_string()),
        ));
    }

    /// The tasks a principal holds (oldest first, at most `limit`): their ids and where each
    /// is.
    fn held_by(&self, principal: &str, limit: usize) -> Vec<(String, Found)> {
        let entries = self.lock();
        let mut held: Vec<(&String, &HeldTask)> = entries
            .iter()
            .filter(|(_, e)| e.owner == principal)
            .collect();
        held.sort_by_key(|(_, e)| e.made);
        held.into_iter()
            .take(limit)
            .map(|(id, e)| (id.clone(), e.found()))
            .collect()
    }

    /// Where task `id` is, if the caller of `ctx` holds it.
    fn find(&self, id: &str, ctx: &Context) -> Option<Found> {
        let entries = self.lock();
        let e = entries.get(id)?;
        (e.owner.is_empty() || e.owner == owner_of(ctx)).then(|| e.found())
    }
}

/// Whether a held task is known to have ended, when its progress stops. Its lock orders a
/// progress report against the end: a report is sent, and the end marked and told, each under
/// it, so no report follows the terminal status on the session.
#[derive(Clone, Default)]
struct Ended {
    token: CancellationToken,
    order: Arc<Mutex<()>>,
}

impl Ended {
    fn mark(&self) {
        self.mark_then(|| {});
    }

    /// Marks the end and, before any report can be sent, `tell`s it.
    fn mark_then(&self, tell: impl FnOnce()) {
        let _order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        self.token.cancel();
        tell();
    }

    /// `send`s a report unless the task has ended: whether it was sent (`send` says whether the
    /// session is still there).
    fn unless_ended(&self, send: impl FnOnce() -> bool) -> bool {
        let _order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        !self.token.is_cancelled() && send()
    }

    /// Until the end is marked.
    async fn wait(&self) {
        self.token.cancelled().await;
    }
}

/// Whether a task (or a status notification's params) is in a terminal status.
fn is_terminal(task: &Value) -> bool {
    matches!(
        task.get("status").and_then(Value::as_str),
        Some("completed" | "failed" | "cancelled")
    )
}

/// `up-` and 128 random bits in hex.
fn fresh_id() -> String {
    format!("up-{}", crate::park::random_id())
}

/// Puts the proxy's id where the upstream's stands — the task's `taskId`, a `task` object's,
/// the related-task `_meta` of a `tasks/result` — and drops what describes the upstream's
/// own hop (the protocol's other `_meta` keys, its server's identity among them).
pub(crate) fn with_id(mut v: Value, upstream_id: &str, id: &str) -> Value {
    if let Some(Value::Object(meta)) = v.get_mut("_meta") {
        meta.retain(|k, _| k == RELATED_TASK || !k.starts_with("io.modelcontextprotocol/"));
        if meta.is_empty()
            && let Some(o) = v.as_object_mut()
        {
            o.remove("_meta");
        }
    }
    let put = |slot: Option<&mut Value>| {
        if let Some(t) = slot
            && t.as_str() == Some(upstream_id)
        {
            *t = Value::String(id.to_string());
        }
    };
    put(v.get_mut("taskId"));
    put(v.get_mut("task").and_then(|t| t.get_mut("taskId")));
    put(v
        .get_mut("_meta")
        .and_then(|m| m.get_mut(RELATED_TASK))
        .and_then(|r| r.get_mut("taskId")));
    v
}

/// The longest read of an upstream task that no request waits on (for its listeners, or to
/// learn whether it ended before its listen opened).
const LISTENER_READ: Duration = Duration::from_secs(30);

/// How such a read is made: bounded by [`LISTENER_READ`], with no progress and no cancel.
fn unwaited_read() -> staunch_client::CallOptions {
    staunch_client::CallOptions {
        timeout: Some(LISTENER_READ),
        max_total: Some(LISTENER_READ),
        ..request_options(false, CancellationToken::new())
    }
}

/// Serves the task methods for the upstream tasks in `tables` — those of the upstreams that
/// run tasks, in either era's way — in front of the handlers already registered for them, and
/// declares both faces: tool tasks (when nothing has yet) and the tasks extension. Each
/// upstream task is offered to clients of either era, bridged where the eras differ.
pub(crate) fn register(
    mut builder: staunch_server::ServerBuilder,
    tables: Vec<Arc<UpstreamTasks>>,
) -> staunch_server::ServerBuilder {
    if tables.is_empty() {
        return builder;
    }
    let hub = builder.listen_hub();
    for table in &tables {
        let _ = table.hub.set(hub.clone());
    }
    // `tasks/result` is the 2025 revision's, `tasks/update` the extension's.
    for method in ["tasks/get", "tasks/cancel", "tasks/result", "tasks/update"] {
        let before = builder.method_handler(method);
        builder = builder.method(
            method,
            TaskMethod {
                method,
                tables: tables.clone(),
                before,
            },
        );
    }
    // Listing is the job runtime's (with a principal on every request); it lists the
    // upstream's 2025 tasks of that principal too.
    if let Some(before) = builder.method_handler("tasks/list") {
        builder = builder.method(
            "tasks/list",
            ListMethod {
                tables: tables.clone(),
                before,
            },
        );
    }
    if builder.declared_capability("tasks").is_none() {
        builder = builder.capability(
            "tasks",
            serde_json::json!({"cancel": {}, "requests": {"tools": {"call": {}}}}),
        );
    }
    builder.extension(staunch_server::TASKS_EXTENSION, serde_json::json!({}))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_proxys_id_stands_where_the_upstreams_stood_and_nowhere_else() {
        let task = json!({"task": {"taskId": "t1", "status": "working"}});
        assert_eq!(with_id(task, "t1", "up-x")["task"]["taskId"], "up-x");
        let got = json!({"taskId": "t1", "status": "completed", "statusMessage": "t1"});
        let got = with_id(got, "t1", "up-x");
        assert_eq!(got["taskId"], "up-x");
        assert_eq!(got["statusMessage"], "t1", "only the id is rewritten");
        let result = json!({"content": [], "_meta": {RELATED_TASK: {"taskId": "t1"}}});
        assert_eq!(
            with_id(result, "t1", "up-x")["_meta"][RELATED_TASK]["taskId"],
            "up-x"
        );
        let other = json!({"taskId": "t2"});
        assert_eq!(with_id(other, "t1", "up-x")["taskId"], "t2");
        // The upstream's hop is not passed on: its identity goes, the related task and keys of
        // others stay.
        let hop = json!({"taskId": "t1", "_meta": {
            "io.modelcontextprotocol/serverInfo": {"name": "upstream"},
            "x.example/k": 1}});
        assert_eq!(
            with_id(hop, "t1", "up-x")["_meta"],
            json!({"x.example/k": 1})
        );
        let only_hop = json!({"taskId": "t1", "_meta": {
            "io.modelcontextprotocol/serverInfo": {"name": "upstream"}}});
        assert!(with_id(only_hop, "t1", "up-x").get("_meta").is_none());
    }

    #[test]
    fn fresh_ids_are_long_random_and_distinct() {
        let (a, b) = (fresh_id(), fresh_id());
        assert!(a.starts_with("up-") && a.len() == 35, "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn terminal_statuses() {
        for (status, terminal) in [
            ("working", false),
            ("input_required", false),
            ("completed", true),
            ("failed", true),
            ("cancelled", true),
        ] {
            assert_eq!(
                is_terminal(&json!({"status": status})),
                terminal,
                "{status}"
            );
        }
        assert!(!is_terminal(&json!({})));
    }
}
