//! An upstream's tools at run time: its `notifications/tools/list_changed` (or a restart of
//! its process, which may serve other tools) makes the proxy list them again and apply the
//! difference to the served set with [`Server::update_tools`], which tells downstream
//! sessions in turn.
//!
//! Its prompts and resources are read from it at each request, so their list changes only
//! need telling: an upstream's `notifications/prompts/list_changed` or
//! `notifications/resources/list_changed` is announced to every downstream 2025 session and
//! 2026-07-28 listen stream that asked for it.
//!
//! Quick and streaming tools are added, replaced (a changed schema or description) and
//! removed. Job-shaped tools are not: their `start_`/`get_`/`cancel_` faces and their durable
//! records belong to the job runtime, which is fixed at start, so one added later is served
//! after a restart of the proxy (a warning says so) and one the upstream dropped stays
//! declared (its calls get the upstream's own error). A new name that another tool of the
//! proxy already has is refused with a warning, as a collision at start is.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use staunch_server::{Change, Server, Shape, ToolUpdate};
use tokio::sync::Mutex;

use crate::register::{Registered, ServedTool, forward_tool, list_tools, names_of};
use crate::upstream::ListChanged;
use crate::{Pool, ProxyError};

/// Starts the followers of every upstream (its tools, and its prompt and resource list
/// changes); they run until the process ends.
pub fn follow_tool_changes(reg: &Registered, server: Server) {
    for pool in &reg.pools {
        let mut changes = pool.shared().lists_changed();
        let hub = server.listen_hub().clone();
        tokio::spawn(async move {
            loop {
                let change = match changes.recv().await {
                    Ok(ListChanged::Prompts) => Change::PromptsListChanged,
                    Ok(ListChanged::Resources) => Change::ResourcesListChanged,
                    // Missed some: announcing both is never wrong (a client lists again).
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        hub.announce(Change::PromptsListChanged);
                        Change::ResourcesListChanged
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                hub.announce(change);
            }
        });
    }
    let served = Arc::new(Mutex::new(reg.tools.clone()));
    for pool in &reg.pools {
        let (pool, server, served) = (pool.clone(), server.clone(), served.clone());
        tokio::spawn(async move {
            let changed = pool.shared().tools_changed().clone();
            loop {
                // A change announced while the last one was applied leaves a permit: the
                // list is read once more, never missed.
                changed.notified().await;
                if let Err(e) = apply(&pool, &server, &served).await {
                    tracing::warn!(upstream = %pool.spec().name, error = %e,
                        "upstream tools could not be listed again; keeping the current set");
                }
            }
        });
    }
}

/// Lists `pool`'s tools and brings the served set in line with them.
async fn apply(
    pool: &Arc<Pool>,
    server: &Server,
    served: &Mutex<Vec<ServedTool>>,
) -> Result<(), ProxyError> {
    let spec = pool.spec();
    let listed = list_tools(pool).await?;
    let mut served = served.lock().await;
    let mine: HashMap<String, (String, Shape)> = served
        .iter()
        .filter(|t| t.1 == spec.name)
        .map(|t| (t.2.clone(), (t.0.clone(), t.3)))
        .collect();
    let taken: HashSet<String> = server.tool_names().into_iter().collect();
    let mut update = ToolUpdate::new();
    let mut listed_names = HashSet::new();
    let mut added: Vec<ServedTool> = Vec::new();
    for tool in &listed {
        let Some(own) = tool["name"].as_str() else {
            continue;
        };
        listed_names.insert(own.to_string());
        let name = format!("{}{own}", spec.prefix);
        let shape = spec.shape_of(own);
        let known = mine.contains_key(own);
        if shape == Shape::Job {
            if !known {
                tracing::warn!(upstream = %spec.name, tool = %name,
                    "a job-shaped upstream tool appeared at run time; it is served after a restart");
            }
            continue;
        }
        if !known {
            if let Some(clash) = names_of(&name, shape)
                .into_iter()
                .find(|n| taken.contains(n))
            {
                tracing::warn!(upstream = %spec.name, tool = %clash,
                    "an upstream tool that appeared at run time has the name of a tool already served; not served");
                continue;
            }
            added.push((name.clone(), spec.name.clone(), own.to_string(), shape));
        }
        let (decl, handler) = forward_tool(pool, tool, own, &name, shape);
        update = update.put(decl, handler);
    }
    let mut removed = HashSet::new();
    for (own, (name, shape)) in &mine {
        if listed_names.contains(own) {
            continue;
        }
        if *shape == Shape::Job {
            tracing::warn!(upstream = %spec.name, tool = %name,
                "the upstream no longer lists a job-shaped tool; it stays declared until a restart");
            continue;
        }
        update = update.remove(name.clone());
        removed.insert(own.clone());
    }
    let changed = server.update_tools(update);
    tracing::info!(upstream = %spec.name, added = ?changed.added, replaced = ?changed.replaced,
        removed = ?changed.removed, "upstream.tools_changed");
    served.retain(|t| !(t.1 == spec.name && removed.contains(&t.2)));
    served.extend(added);
    Ok(())
}
