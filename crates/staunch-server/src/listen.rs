//! `subscriptions/listen` (stateless era): long-lived streams of list-changed,
//! resource-updated and task (`notifications/tasks`, the tasks extension, for the `taskIds`
//! asked) notifications, replacing the session era's GET stream and `resources/subscribe`.
//!
//! A listen is an ordinary request in the request core: its handler subscribes to the server's
//! [`ListenHub`] *before* it acknowledges (so no change between the two is missed), sends
//! `notifications/subscriptions/acknowledged` with the filter it honours, then forwards each
//! change its filter asked for, every notification tagged with the subscription id (the listen
//! request's own JSON-RPC id). It ends like any request: the client closes the stream (HTTP) or
//! cancels it (stdio) — no response — or the server shuts down, when it answers with a
//! completion result first (graceful closure).

use serde_json::{Map, Value, json};
use staunch_protocol::mcp::methods;
use tokio::sync::broadcast;

use crate::changes::{Change, ListenHub};
use crate::codec::{self, declares_tasks, missing_tasks_extension};
use crate::context::Context;
use crate::error::ToolError;

/// What a listen request asked for, cut to what the server offers.
#[derive(Debug, Default, PartialEq)]
struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
    task_ids: Vec<String>,
    /// The listener's owner key ([`crate::owner_key`]): a task's notifications go only to its
    /// owner, whatever ids a listener names.
    owner: String,
}

impl Filter {
    /// `tasks`: whether the server offers the tasks extension and the client declared it
    /// (`None`: the server does not offer it; `Some(false)`: the client did not declare it).
    fn from_params(
        params: Option<&Value>,
        caps: &Map<String, Value>,
        tasks: Option<bool>,
    ) -> Result<Self, ToolError> {
        let bad = |m: &str| {
            ToolError::Rpc(staunch_protocol::ErrorObject::invalid_params(format!(
                "subscriptions/listen: {m}"
            )))
        };
        let Some(n) = params.and_then(|p| p.get("notifications")) else {
            return Ok(Self::default());
        };
        let Value::Object(n) = n else {
            return Err(bad("`notifications` must be an object"));
        };
        let flag = |k: &str| -> Result<bool, ToolError> {
            match n.get(k) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(bad(&format!("`notifications.{k}` must be a boolean"))),
            }
        };
        let has = |cap: &str, flag: &str| {
            caps.get(cap)
                .is_some_and(|c| c.get(flag) == Some(&Value::Bool(true)))
        };
        let uris = match n.get("resourceSubscriptions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|u| u.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("`notifications.resourceSubscriptions` must be strings"))?,
            Some(_) => {
                return Err(bad(
                    "`notifications.resourceSubscriptions` must be an array",
                ));
            }
        };
        let task_ids = match n.get("taskIds") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|u| u.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("`notifications.taskIds` must be strings"))?,
            Some(_) => return Err(bad("`notifications.taskIds` must be an array")),
        };
        let task_ids = match tasks {
            _ if task_ids.is_empty() => task_ids,
            // Not offered: nothing to honour.
            None => Vec::new(),
            Some(false) => {
                return Err(ToolError::Rpc(missing_tasks_extension()));
            }
            Some(true) => task_ids,
        };
        Ok(Self {
            task_ids,
            owner: String::new(),
            tools: flag("toolsListChanged")? && has("tools", "listChanged"),
            prompts: flag("promptsListChanged")? && has("prompts", "listChanged"),
            resources: flag("resourcesListChanged")? && has("resources", "listChanged"),
            uris: if has("resources", "subscribe") {
                uris
            } else {
                Vec::new()
            },
        })
    }

    fn wants(&self, c: &Change) -> bool {
        match c {
            Change::ToolsListChanged => self.tools,
            Change::PromptsListChanged => self.prompts,
            Change::ResourcesListChanged => self.resources,
            Change::ResourceUpdated(u) => self.uris.iter().any(|x| x == u),
            Change::Task { id, owner, .. } => {
                *owner == self.owner && self.task_ids.iter().any(|x| x == id)
            }
        }
    }

    fn honoured(&self) -> Value {
        let mut o = Map::new();
        if self.tools {
            o.insert("toolsListChanged".into(), true.into());
        }
        if self.prompts {
            o.insert("promptsListChanged".into(), true.into());
        }
        if self.resources {
            o.insert("resourcesListChanged".into(), true.into());
        }
        if !self.uris.is_empty() {
            o.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        if !self.task_ids.is_empty() {
            o.insert("taskIds".into(), json!(self.task_ids));
        }
        Value::Object(o)
    }
}

/// The handler of one `subscriptions/listen` request. `tasks_offered`: whether the server
/// declared the tasks extension.
pub(crate) async fn listen(
    ctx: Context,
    hub: ListenHub,
    caps: Map<String, Value>,
    tasks_offered: bool,
    params: Option<Value>,
) -> Result<Value, ToolError> {
    let declared = declares_tasks(&ctx.client_capabilities());
    let mut filter =
        Filter::from_params(params.as_ref(), &caps, tasks_offered.then_some(declared))?;
    filter.owner = crate::owner_key(ctx.principal(), ctx.owning_session());
    let sub_id = ctx.request_id().to_value();
    let tag = |p: Map<String, Value>| codec::tag_subscription(p, &sub_id);
    // Watch and subscribe first: a change between the acknowledgement and the first recv is
    // not lost.
    let _watch = hub.watch_tasks(&filter.task_ids);
    let _resources = hub.watch_resources(&filter.uris);
    let mut rx = hub.subscribe();
    let mut ack = Map::new();
    ack.insert("notifications".into(), filter.honoured());
    ctx.notify(methods::SUBSCRIPTIONS_ACKNOWLEDGED, tag(ack));
    loop {
        let change = tokio::select! {
            biased;
            // Before the cancel: at shutdown the hub closes first, and the subscription ends
            // with its graceful response.
            _ = hub.closing() => break,
            _ = ctx.cancelled() => return Err(ToolError::Cancelled),
            c = rx.recv() => c,
        };
        match change {
            Ok(c) if filter.wants(&c) => {
                let mut p = Map::new();
                match &c {
                    Change::ResourceUpdated(uri) => {
                        p.insert("uri".into(), uri.clone().into());
                    }
                    Change::Task {
                        detail: Value::Object(d),
                        ..
                    } => p.extend(d.clone()),
                    _ => {}
                }
                ctx.notify(c.method(), tag(p));
            }
            Ok(_) => {}
            // Fell behind: say that each wanted list may have changed (a client re-lists).
            Err(broadcast::error::RecvError::Lagged(_)) => {
                for c in [
                    Change::ToolsListChanged,
                    Change::PromptsListChanged,
                    Change::ResourcesListChanged,
                ] {
                    if filter.wants(&c) {
                        ctx.notify(c.method(), tag(Map::new()));
                    }
                }
            }
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
    // Graceful closure: the server ends the subscription with a completion result.
    Ok(tag(Map::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Map<String, Value> {
        json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"subscribe": true}})
            .as_object()
            .cloned()
            .unwrap()
    }

    #[test]
    fn the_filter_keeps_only_what_was_asked_and_is_offered() {
        let p = json!({"notifications": {
            "toolsListChanged": true, "promptsListChanged": true,
            "resourceSubscriptions": ["test://a"]
        }});
        let f = Filter::from_params(Some(&p), &caps(), None).unwrap();
        assert!(f.wants(&Change::ToolsListChanged));
        // prompts.listChanged is not offered: not honoured.
        assert!(!f.wants(&Change::PromptsListChanged));
        assert!(f.wants(&Change::ResourceUpdated("test://a".into())));
        assert!(!f.wants(&Change::ResourceUpdated("test://b".into())));
        assert_eq!(
            f.honoured(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["test://a"]})
        );
        assert_eq!(
            Filter::from_params(None, &caps(), None).unwrap(),
            Filter::default()
        );
    }

    #[test]
    fn task_ids_need_the_extension_on_both_sides() {
        let p = json!({"notifications": {"taskIds": ["t1"]}});
        let f = Filter::from_params(Some(&p), &caps(), Some(true)).unwrap();
        let task = |id: &str| Change::Task {
            id: id.into(),
            owner: String::new(),
            detail: json!({}),
        };
        assert!(f.wants(&task("t1")));
        assert!(!f.wants(&task("t2")));
        assert_eq!(f.honoured(), json!({"taskIds": ["t1"]}));
        // The server does not offer tasks: not honoured.
        let f = Filter::from_params(Some(&p), &caps(), None).unwrap();
        assert!(!f.wants(&task("t1")));
        // The client did not declare the extension: -32021.
        match Filter::from_params(Some(&p), &caps(), Some(false)) {
            Err(ToolError::Rpc(e)) => assert_eq!(e.code, -32021),
            other => panic!("expected -32021, got {other:?}"),
        }
    }

    #[test]
    fn a_task_is_heard_only_by_its_owner_whatever_ids_a_listener_names() {
        let p = json!({"notifications": {"taskIds": ["t1"]}});
        let mut f = Filter::from_params(Some(&p), &caps(), Some(true)).unwrap();
        f.owner = crate::owner_key(Some("alice"), None);
        let task = |owner: &str| Change::Task {
            id: "t1".into(),
            owner: owner.into(),
            detail: json!({}),
        };
        assert!(f.wants(&task("alice")));
        assert!(!f.wants(&task("bob")), "another principal's task");
        assert!(
            !f.wants(&task("")),
            "an id holder's task is not a principal's"
        );
        let session = crate::owner_key(None, Some("sess-1"));
        assert!(!f.wants(&task(&session)));
        // Without auth, a stateless listener is an id holder: it hears id-holder tasks only.
        f.owner = crate::owner_key(None, None);
        assert!(f.wants(&task("")));
        assert!(!f.wants(&task("alice")));
        assert!(!f.wants(&task(&session)), "a 2025 session's task");
    }

    #[test]
    fn malformed_filters_are_invalid_params() {
        for bad in [
            json!({"notifications": 1}),
            json!({"notifications": {"toolsListChanged": "yes"}}),
            json!({"notifications": {"resourceSubscriptions": "test://a"}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
        ] {
            assert!(
                Filter::from_params(Some(&bad), &caps(), None).is_err(),
                "{bad}"
            );
        }
    }
}
