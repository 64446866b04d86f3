//! Routing one request to what serves it: the request is decoded once into a `Route` (the
//! methods the server answers itself, a tool call with its params typed, a registered method,
//! or an unknown one), in the spirit of mini-redis's `Command`, and each route becomes an
//! answer now or work for the request core.
//!
//! The session handles `initialize` and `logging/setLevel` (they change the session) before it
//! gets here. The request's era was decided where it came in, and its peer
//! ([`crate::codec::Peer`]) answers what the era changes: it refuses the methods its era does
//! not have (`admits`), says whether a `tools/call`, `prompts/get` or `resources/read` can ask
//! the client for input in rounds (`asks_in_rounds`), and whether tasks are negotiated with a
//! session (2025-11-25 tasks) or declared per request (the tasks extension, SEP-2663, from
//! `clientCapabilities.extensions`). Everything else is routed the same way whatever the era.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use staunch_protocol::mcp::{CallToolParams, CallToolResult, methods};
use staunch_protocol::{ErrorObject, Request, codes};

use crate::codec::{TASKS_EXTENSION, declares_tasks, discover, missing_tasks_extension};
use crate::error::ToolError;
use crate::fingerprint::Fingerprint;
use crate::input::{Binding, Rounds};
use crate::listen;
use crate::request::{self, Make, Origin, Work};
use crate::shared::ServerInner;
use crate::tool::MethodHandler;
use crate::tool::Shape;

/// What a request asks for, decoded once from its method (and, for a tool call, its params):
/// a method the server answers itself, one registered on it (`ServerBuilder::method`: the
/// resources, prompts and task methods of the libraries on top), or one nobody serves.
enum Route {
    Ping,
    ListTools,
    Discover,
    Listen,
    CallTool(CallToolParams),
    Registered(Arc<dyn MethodHandler>),
    Unknown,
}

impl Route {
    /// The route of `req`; a tool call's params are taken out of it (its arguments moved, not
    /// copied), and params that are not a tool call's are the error to answer.
    fn of(server: &ServerInner, req: &mut Request) -> Result<Route, ErrorObject> {
        Ok(match req.method.as_str() {
            methods::PING => Route::Ping,
            methods::TOOLS_LIST => Route::ListTools,
            methods::SERVER_DISCOVER => Route::Discover,
            methods::SUBSCRIPTIONS_LISTEN => Route::Listen,
            methods::TOOLS_CALL => Route::CallTool(take_call_params(req)?),
            other => match server.methods.get(other) {
                Some(entry) => Route::Registered(entry.handler.clone()),
                None => Route::Unknown,
            },
        })
    }
}

/// Routes `req`; answers it inline or starts it in its own task. Never blocks.
pub(crate) fn dispatch(server: &Arc<ServerInner>, origin: &Origin, mut req: Request) {
    if let Err(e) = origin.peer.admits(&req.method) {
        request::answer_now(server, origin, &req, Err(e));
        return;
    }
    let route = match Route::of(server, &mut req) {
        Ok(route) => route,
        Err(e) => return request::answer_now(server, origin, &req, Err(e)),
    };
    match route {
        Route::Ping => request::answer_now(server, origin, &req, Ok(json!({}))),
        Route::ListTools => {
            let list = server.tool_table().tool_list.clone();
            request::answer_now(server, origin, &req, Ok(list));
        }
        Route::Discover => {
            let found = discover(
                &server.capabilities,
                &server.extensions,
                server.instructions.as_deref(),
            );
            request::answer_now(server, origin, &req, Ok(found));
        }
        Route::Listen => {
            let hub = server.listen.clone();
            let caps = server.capabilities.clone();
            let tasks_offered = server.extensions.contains_key(TASKS_EXTENSION);
            let work = Work {
                tool: None,
                shape: None,
                // Open until the client leaves or the server shuts down.
                deadline: None,
                fingerprint: None,
                is_tool_call: false,
                rounds: None,
                answers_at_shutdown: true,
                make: Make::Value(Box::new(move |ctx, params| {
                    Box::pin(listen::listen(ctx, hub, caps, tasks_offered, params))
                })),
            };
            request::start(server, origin, req, work);
        }
        Route::CallTool(params) => match tool_call_work(server, origin, &req, params) {
            Ok(work) => request::start(server, origin, req, work),
            Err(e) => request::answer_now(server, origin, &req, Err(e)),
        },
        Route::Registered(handler) => {
            let method = req.method.as_str();
            let rounds = match input_rounds(server, origin, &req, method, || name_of(&req), None) {
                Ok(r) => r,
                Err(e) => return request::answer_now(server, origin, &req, Err(e)),
            };
            let work = Work {
                tool: None,
                shape: None,
                deadline: handler.deadline(server.config.quick_deadline),
                fingerprint: None,
                is_tool_call: false,
                rounds,
                answers_at_shutdown: false,
                // The params as sent, moved rather than copied (the request core reads what it
                // needs first).
                make: Make::Value(Box::new(move |ctx, params| handler.call(ctx, params))),
            };
            request::start(server, origin, req, work);
        }
        Route::Unknown => {
            let e = ErrorObject::method_not_found(&req.method);
            // A name the server does not know is the client's choice, of any length: the log,
            // metrics and traces see it as a bounded label, never as sent.
            req.method = staunch_protocol::method_label(&req.method).to_owned();
            request::answer_now(server, origin, &req, Err(e));
        }
    }
}

fn name_of(req: &Request) -> Arc<str> {
    let p = req.params.as_ref();
    p.and_then(|p| p.get("name").or_else(|| p.get("uri")))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .into()
}

/// The input-required rounds of a request that may have them.
/// `args_fingerprint` is the arguments' [`Fingerprint`] when the caller has it already (a
/// tool call computes it once for the log and for the binding).
fn input_rounds(
    server: &ServerInner,
    origin: &Origin,
    req: &Request,
    method: &str,
    name: impl FnOnce() -> Arc<str>,
    args_fingerprint: Option<Fingerprint>,
) -> Result<Option<Rounds>, ErrorObject> {
    if !origin.peer.asks_in_rounds() {
        return Ok(None);
    }
    // The methods that have rounds, as names the binding keeps without a copy.
    let method: &'static str = match method {
        methods::TOOLS_CALL => methods::TOOLS_CALL,
        "prompts/get" => "prompts/get",
        "resources/read" => "resources/read",
        _ => return Ok(None),
    };
    let args_fingerprint = args_fingerprint.unwrap_or_else(|| {
        let args = req.params.as_ref().and_then(|p| p.get("arguments"));
        Fingerprint::of(args.unwrap_or(&Value::Null))
    });
    let binding = Binding {
        method,
        name: name(),
        fingerprint: args_fingerprint,
        caller: origin.conn.principal.clone(),
    };
    Rounds::from_params(
        &server.state_key,
        binding,
        req.params.as_ref(),
        staunch_store::now_ms(),
    )
    .map(Some)
}

fn tool_call_work(
    server: &Arc<ServerInner>,
    origin: &Origin,
    req: &Request,
    p: CallToolParams,
) -> Result<Work, ErrorObject> {
    let Some(entry) = server.tool_table().by_name.get(&p.name).cloned() else {
        return Err(ErrorObject::invalid_params(format!(
            "unknown tool: {}",
            staunch_protocol::echo_name(&p.name)
        )));
    };
    // The binding fingerprints the arguments as sent (`null` when absent), the log `{}`.
    let sent_arguments = p.arguments.is_some();
    let args = Value::Object(p.arguments.unwrap_or_default());
    // Once for both users: the log's `args_fingerprint` and the binding of a call's input
    // rounds (SHA-256 of the arguments; computing it twice was 7 % of a call with rounds).
    let asks_in_rounds = origin.peer.asks_in_rounds();
    let log = server.log.enabled();
    let computed = (log || asks_in_rounds).then(|| Fingerprint::of(&args));
    // The binding needs it for a call with rounds whose arguments were sent; the log always.
    let (fingerprint, binding) = match computed {
        Some(f) if asks_in_rounds && sent_arguments => (log.then_some(f), Some(f)),
        f => (f.filter(|_| log), None),
    };
    let rounds = input_rounds(
        server,
        origin,
        req,
        methods::TOOLS_CALL,
        || entry.name.clone(),
        binding,
    )?;
    // Tasks (2025-11-25) are negotiated with a session; a server that does not declare them,
    // or a request without a session, ignores the `task` field.
    let tasks_declared = origin.peer.has_session()
        && server
            .capabilities
            .get("tasks")
            // `get` rather than `pointer`: this runs on every call, and `pointer` allocates
            // a string per path segment.
            .and_then(|t| t.get("requests")?.get("tools")?.get("call"))
            .is_some();
    let support = entry.spec.task_support();
    // The tasks extension is declared per request, by a request without a session.
    if !origin.peer.has_session()
        && support != "forbidden"
        && server.extensions.contains_key(TASKS_EXTENSION)
    {
        if declares_tasks(&origin.peer.client_capabilities()) {
            return Ok(extension_task_work(
                server,
                entry,
                args,
                fingerprint,
                rounds,
            ));
        }
        if support == "required" {
            // SEP-2663: a tool that cannot run without returning a task refuses a client
            // that cannot take one.
            let mut e = missing_tasks_extension();
            e.message = format!("tool {} runs only as a task: {}", p.name, e.message);
            return Err(e);
        }
    }
    let task = p.task.filter(|_| tasks_declared);
    if tasks_declared && task.is_none() && support == "required" {
        return Err(ErrorObject::new(
            codes::METHOD_NOT_FOUND,
            format!(
                "tool {} must be called as a task (execution.taskSupport = required)",
                p.name
            ),
        ));
    }
    if let Some(task) = task {
        if support == "forbidden" {
            return Err(ErrorObject::new(
                codes::METHOD_NOT_FOUND,
                format!("tool {} does not support tasks", p.name),
            ));
        }
        let name = p.name.clone();
        return Ok(Work {
            tool: Some(entry.name.clone()),
            shape: Some(entry.spec.shape),
            deadline: Some(server.config.quick_deadline),
            fingerprint,
            is_tool_call: false,
            rounds: None,
            answers_at_shutdown: false,
            make: Make::Value(Box::new(move |ctx, _| {
                match entry.handler.call_as_task(ctx, args, task) {
                    Some(fut) => fut,
                    None => Box::pin(std::future::ready(Err(ToolError::Rpc(ErrorObject::new(
                        codes::METHOD_NOT_FOUND,
                        format!("tool {name} does not run as a task"),
                    ))))),
                }
            })),
        });
    }
    let cfg = &server.config;
    let deadline: Option<Duration> = entry.spec.deadline.or(match entry.spec.shape {
        Shape::Quick => Some(cfg.quick_deadline),
        Shape::Streaming => Some(cfg.streaming_deadline),
        // An atomic write is never interrupted; a job tool answers at once.
        Shape::Atomic | Shape::Job => None,
    });
    Ok(Work {
        tool: Some(entry.name.clone()),
        shape: Some(entry.spec.shape),
        deadline,
        fingerprint,
        is_tool_call: true,
        rounds,
        answers_at_shutdown: false,
        make: Make::Tool(entry, args),
    })
}

/// A `tools/call` from a client with the tasks extension: the handler decides whether to answer
/// with a task. The request keeps its input-required rounds (a tool may ask first and create
/// its task on the last round).
fn extension_task_work(
    server: &ServerInner,
    entry: Arc<crate::shared::ToolEntry>,
    args: Value,
    fingerprint: Option<Fingerprint>,
    rounds: Option<Rounds>,
) -> Work {
    let deadline = entry.spec.deadline.or(Some(server.config.quick_deadline));
    Work {
        tool: Some(entry.name.clone()),
        shape: Some(entry.spec.shape),
        deadline,
        fingerprint,
        is_tool_call: true,
        rounds,
        answers_at_shutdown: false,
        make: Make::Value(Box::new(move |ctx, _| {
            let args2 = args.clone();
            match entry.handler.call_with_tasks(ctx.clone(), args) {
                Some(fut) => fut,
                // The tool does not make tasks: an ordinary call, its result as a value
                // (`call_json` serialises a typed result, or passes a JSON one on).
                None => {
                    let fut = entry.handler.call_json(ctx, args2);
                    Box::pin(async move {
                        match fut.await {
                            Ok(r) => Ok(r.to_value()),
                            Err(ToolError::Tool(m)) => Ok(to_value(&CallToolResult::error(m))),
                            Err(e) => Err(e),
                        }
                    })
                }
            }
        })),
    }
}

/// A `tools/call`'s params, with the arguments *moved* out of the request (the handler gets
/// them; nothing after dispatch reads them from the params). Anything but a string `name` and
/// an object (or absent, or null) `arguments` is answered by [`parse_params`]'s error.
fn take_call_params(req: &mut Request) -> Result<CallToolParams, ErrorObject> {
    if let Some(Value::Object(params)) = req.params.as_mut()
        && matches!(params.get("name"), Some(Value::String(_)))
        && matches!(
            params.get("arguments"),
            None | Some(Value::Null | Value::Object(_))
        )
    {
        // Moved out too: nothing after dispatch reads the name from the params.
        let name = match params.get_mut("name") {
            Some(Value::String(name)) => std::mem::take(name),
            _ => String::new(),
        };
        let task = params.get("task").filter(|t| !t.is_null()).cloned();
        let arguments = match params.remove("arguments") {
            Some(Value::Object(args)) => Some(args),
            _ => None,
        };
        return Ok(CallToolParams {
            name,
            arguments,
            task,
        });
    }
    parse_params(req.params.as_ref())
}

pub(crate) fn parse_params<T: serde::de::DeserializeOwned>(
    params: Option<&Value>,
) -> Result<T, ErrorObject> {
    // Fast path (every well-formed request): straight from the borrowed value — no copy of the
    // whole params, no path tracking. serde_path_to_error allocates a path segment per key and
    // was ~15 % of the instructions of a `tools/call` (callgrind, benches/profile); only a
    // failure pays for it now, to say where the input is wrong.
    let empty = Value::Object(Map::new());
    let v = params.unwrap_or(&empty);
    if let Ok(t) = <T as serde::Deserialize>::deserialize(v) {
        return Ok(t);
    }
    serde_path_to_error::deserialize::<_, T>(v.clone()).map_err(|e| {
        let path = e.path().to_string();
        ErrorObject::invalid_params(if path == "." {
            format!("invalid params: {}", e.into_inner())
        } else {
            format!("invalid params: `{path}`: {}", e.into_inner())
        })
    })
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}
