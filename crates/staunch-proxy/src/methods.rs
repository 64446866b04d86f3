//! Resources, prompts and completions of the upstreams, served through the proxy: lists are
//! merged (prompt names get their upstream's prefix), and each `resources/read`,
//! `prompts/get` and `completion/complete` goes to the upstream that listed the resource or
//! prompt. Each runs in its own downstream request, so cancels and deadlines apply as to tools.
//! Subscriptions to resources are `subscriptions`'.

use std::sync::Arc;

use serde_json::{Value, json};
use staunch_server::{Context, ServerBuilder, ToolError};

use crate::error::rpc;
use crate::owners::{Routes, invalid};
use crate::pool::Pool;
use crate::upstream::request_options;

/// Pages fetched per upstream list.
const MAX_PAGES: usize = 100;

async fn ask(
    pool: &Pool,
    ctx: &Context,
    method: &str,
    params: Option<Value>,
) -> Result<Value, ToolError> {
    let (_, client) = pool.connection(ctx).await?;
    client
        .request(
            method,
            params,
            &request_options(false, ctx.cancellation_token()),
        )
        .await
        .map_err(rpc)
}

/// Every page of `method`'s `key` list from `pool`.
async fn list_all(
    pool: &Pool,
    ctx: &Context,
    method: &str,
    key: &str,
) -> Result<Vec<Value>, ToolError> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|c| json!({"cursor": c}));
        let page = ask(pool, ctx, method, params).await?;
        out.extend(page[key].as_array().into_iter().flatten().cloned());
        match page["nextCursor"].as_str() {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => break,
        }
    }
    Ok(out)
}

/// The upstream whose prefix starts `name`, and the name it knows.
fn by_prefix<'a>(pools: &'a [Arc<Pool>], name: &'a str) -> Option<(&'a Arc<Pool>, &'a str)> {
    // The longest matching prefix wins, so "" (no prefix) is the last resort.
    pools
        .iter()
        .filter_map(|p| {
            name.strip_prefix(p.spec().prefix.as_str())
                .map(|rest| (p, rest))
        })
        .max_by_key(|(p, _)| p.spec().prefix.len())
}

/// Adds the resource, prompt and completion methods the upstreams declare.
pub(crate) fn register(mut builder: ServerBuilder, pools: &[Arc<Pool>]) -> ServerBuilder {
    let with = |cap: &str| -> Vec<Arc<Pool>> {
        pools
            .iter()
            .filter(|p| {
                p.shared()
                    .capabilities()
                    .is_some_and(|c| c.get(cap).is_some_and(|v| !v.is_null()))
            })
            .cloned()
            .collect()
    };
    // A list that may change upstream may change here: its changes are passed on (follow.rs).
    let list_changed = |pools: &[Arc<Pool>], cap: &str| {
        let dynamic = pools.iter().any(|p| {
            p.shared()
                .capabilities()
                .is_some_and(|c| c[cap]["listChanged"] == true)
        });
        if dynamic {
            json!({"listChanged": true})
        } else {
            json!({})
        }
    };
    let resources = Arc::new(Routes::new(with("resources")));
    if !resources.pools.is_empty() {
        let mut declared = list_changed(&resources.pools, "resources");
        if resources
            .pools
            .iter()
            .any(|p| crate::subscriptions::takes_subscriptions(p))
        {
            declared["subscribe"] = json!(true);
            builder = crate::subscriptions::register(builder, resources.clone());
        }
        builder = builder.capability("resources", declared);
        for (method, key) in [
            ("resources/list", "resources"),
            ("resources/templates/list", "resourceTemplates"),
        ] {
            let r = resources.clone();
            builder = builder.method(method, move |ctx: Context, _params: Option<Value>| {
                let r = r.clone();
                async move {
                    let mut all = Vec::new();
                    for (i, pool) in r.pools.iter().enumerate() {
                        let items = list_all(pool, &ctx, method, key).await?;
                        r.listed(i, &items);
                        all.extend(items);
                    }
                    Ok(json!({ key: all }))
                }
            });
        }
        let r = resources.clone();
        builder = builder.method(
            "resources/read",
            move |ctx: Context, params: Option<Value>| {
                let r = r.clone();
                async move {
                    let uri = params
                        .as_ref()
                        .and_then(|p| p["uri"].as_str())
                        .ok_or_else(|| invalid("resources/read needs params.uri".into()))?;
                    let pool = r
                        .owner_of_uri(uri)
                        .ok_or_else(|| {
                            invalid(format!("unknown resource {uri:?}: list resources first"))
                        })?
                        .clone();
                    ask(&pool, &ctx, "resources/read", params).await
                }
            },
        );
    }
    let prompts = with("prompts");
    if !prompts.is_empty() {
        builder = builder.capability("prompts", list_changed(&prompts, "prompts"));
        let ps = prompts.clone();
        builder = builder.method(
            "prompts/list",
            move |ctx: Context, _params: Option<Value>| {
                let ps = ps.clone();
                async move {
                    let mut all = Vec::new();
                    for pool in &ps {
                        for mut p in list_all(pool, &ctx, "prompts/list", "prompts").await? {
                            if let Some(name) = p["name"].as_str() {
                                p["name"] = json!(format!("{}{name}", pool.spec().prefix));
                            }
                            all.push(p);
                        }
                    }
                    Ok(json!({"prompts": all}))
                }
            },
        );
        let ps = prompts.clone();
        builder = builder.method("prompts/get", move |ctx: Context, params: Option<Value>| {
            let ps = ps.clone();
            async move {
                let mut params = params.unwrap_or_else(|| json!({}));
                let name = params["name"]
                    .as_str()
                    .ok_or_else(|| invalid("prompts/get needs params.name".into()))?
                    .to_string();
                let (pool, own) = by_prefix(&ps, &name)
                    .ok_or_else(|| invalid(format!("unknown prompt {name:?}")))?;
                params["name"] = json!(own);
                let pool = pool.clone();
                ask(&pool, &ctx, "prompts/get", Some(params)).await
            }
        });
    }
    let completions = with("completions");
    if !completions.is_empty() {
        builder = builder.capability("completions", json!({}));
        let r = resources.clone();
        builder = builder.method(
            "completion/complete",
            move |ctx: Context, params: Option<Value>| {
                let (cs, r) = (completions.clone(), r.clone());
                async move {
                    let mut params = params.unwrap_or_else(|| json!({}));
                    let pool = match params["ref"]["type"].as_str() {
                        Some("ref/prompt") => {
                            let name = params["ref"]["name"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string();
                            let (pool, own) = by_prefix(&cs, &name)
                                .ok_or_else(|| invalid(format!("unknown prompt {name:?}")))?;
                            params["ref"]["name"] = json!(own);
                            pool.clone()
                        }
                        _ => {
                            let uri = params["ref"]["uri"].as_str().unwrap_or_default();
                            r.owner_of_uri(uri)
                                .or(cs.first())
                                .ok_or_else(|| invalid("completion/complete: unknown ref".into()))?
                                .clone()
                        }
                    };
                    ask(&pool, &ctx, "completion/complete", Some(params)).await
                }
            },
        );
    }
    builder
}
