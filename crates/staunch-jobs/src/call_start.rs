//! Starting a job for a tool call, whichever face made it (the tool faces, 2025 tasks, the
//! 2026 extension): the idempotency key from the arguments or `_meta`, the owner the job and
//! its key belong to, and the submit.

use std::time::Duration;

use serde_json::{Map, Value};
use staunch_server::Context;

use crate::error::JobRuntimeError;
use crate::idempotency::take_key;
use crate::runtime::{JobRuntime, Submit, Submitted};
use crate::scope::OwnerScope;

/// Records a job from a tool call's arguments (and `_meta`), for every face that creates one.
pub(crate) async fn create(
    rt: &JobRuntime,
    tool: &str,
    ctx: &Context,
    args: Value,
    ttl: Option<Duration>,
) -> Result<Submitted, JobRuntimeError> {
    let mut map = match args {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let key = take_key(&mut map, ctx.meta())?;
    let scope = rt.scope_of(ctx);
    // Without auth, staunch cannot tell one client from another: a session is only a
    // connection, and a client that lost it (a restart of either side) retries in a new one.
    // So a keyed job of an unauthenticated session is recorded in the server's one key space
    // (the id holders', as on stdio and for stateless requests): the retry gets the same job,
    // and follows it by its id from the new session. Unkeyed work stays the session's.
    let shared_key = key.is_some() && matches!(scope, OwnerScope::Session(_));
    let (principal, session_id) = if shared_key {
        (OwnerScope::IdHolder.key(), None)
    } else {
        (
            // The store scopes keys and dedupe by this, so another scope can neither join
            // this job nor learn its id through a reused key.
            scope.key(),
            // As the lifecycle log names it: the id is a credential and stays out of job rows.
            ctx.owning_session()
                .filter(|s| !s.is_empty())
                .map(staunch_server::session_hash),
        )
    };
    let submitted = rt
        .submit(Submit {
            tool: tool.to_string(),
            args: Value::Object(map),
            idempotency_key: key,
            principal,
            session_id,
            ttl,
            // The request span, when traces are on: the job's attempt spans link to it.
            trace_parent: ctx.traceparent(),
        })
        .await;
    match submitted {
        // A shared key used with other arguments: the job may be another client's, and only
        // the same key with the same arguments may lead to it. Refused without its id.
        Err(JobRuntimeError::KeyReused { key, .. }) if shared_key => {
            Err(JobRuntimeError::KeyReused {
                key,
                existing_job_id: String::new(),
            })
        }
        other => other,
    }
}
