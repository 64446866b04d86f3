//! What a handler answers, kept in its own type until it is written out.
//!
//! A tool handler returns a [`CallToolResult`]. Turning it into a `serde_json::Value` first —
//! a map and a string per key — only to serialise that value and drop it was a tenth of an echo
//! call, so a tool's result stays typed ([`Answer::Tool`]) and is serialised once, straight
//! into the response. Everything else (methods, task handles, input-required rounds) is a
//! value ([`Answer::Value`]). The result of a tool whose handler holds it as JSON text already
//! ([`crate::ToolHandler::answers_json`], a proxy's) is that text ([`Answer::Json`]), sent on
//! unread: every field kept, in its order, every number as written.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use futures_util::future::BoxFuture;
use serde_json::Value;
use staunch_protocol::mcp::CallToolResult;
use staunch_protocol::{ErrorObject, codes};

use crate::context::Context;
use crate::error::ToolError;
use crate::json_result::JsonToolResult;
use crate::toolset::ToolEntry;

/// A successful answer to a request.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Any method's result.
    Value(Value),
    /// A tool call's result.
    Tool(CallToolResult),
    /// A tool call's result as JSON text, sent as it is.
    Json(JsonToolResult),
}

impl Answer {
    /// Whether it is a tool result that reports a tool execution error (`isError: true`).
    pub(crate) fn is_tool_error(&self) -> bool {
        match self {
            Answer::Value(v) => v.get("isError") == Some(&Value::Bool(true)),
            Answer::Tool(r) => r.is_error == Some(true),
            Answer::Json(r) => r.is_error(),
        }
    }

    /// The answer as a value (the stateless era adds fields to it).
    pub(crate) fn into_value(self) -> Value {
        match self {
            Answer::Value(v) => v,
            Answer::Tool(r) => serde_json::to_value(r).unwrap_or_default(),
            Answer::Json(r) => r.to_value(),
        }
    }
}

/// Makes a method's future from its context and params.
pub(crate) type MakeValue =
    Box<dyn FnOnce(Context, Option<Value>) -> BoxFuture<'static, Result<Value, ToolError>> + Send>;

/// Makes a request's handler future from its context and the params that are left.
pub(crate) enum Make {
    /// A method, or a tool call answered with a value (a task handle).
    Value(MakeValue),
    /// An ordinary tool call: the tool and its arguments (no closure to box).
    Tool(Arc<ToolEntry>, Value),
}

impl Make {
    pub(crate) fn make(self, ctx: Context, params: Option<Value>) -> HandlerFuture {
        match self {
            Make::Value(f) => HandlerFuture::Value(f(ctx, params)),
            Make::Tool(entry, args) if entry.answers_json => {
                HandlerFuture::ToolJson(entry.handler.call_json(ctx, args))
            }
            Make::Tool(entry, args) => HandlerFuture::Tool(entry.handler.call(ctx, args)),
        }
    }
}

/// The handler's future, either kind, without a box around the box.
pub(crate) enum HandlerFuture {
    Value(BoxFuture<'static, Result<Value, ToolError>>),
    Tool(BoxFuture<'static, Result<CallToolResult, ToolError>>),
    /// A tool whose handler answers with JSON ([`crate::ToolHandler::call_json`]).
    ToolJson(BoxFuture<'static, Result<JsonToolResult, ToolError>>),
}

impl Future for HandlerFuture {
    type Output = Result<Answer, ToolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        // Both variants hold a `Pin<Box<…>>`, so the enum is `Unpin`.
        match self.get_mut() {
            HandlerFuture::Value(f) => f.as_mut().poll(cx).map(|r| r.map(Answer::Value)),
            HandlerFuture::Tool(f) => f.as_mut().poll(cx).map(|r| match r {
                Ok(r) => Ok(Answer::Tool(r)),
                // A tool's own error is a result the model reads, not a protocol error.
                Err(ToolError::Tool(m)) => Ok(Answer::Tool(CallToolResult::error(m))),
                Err(e) => Err(e),
            }),
            HandlerFuture::ToolJson(f) => f.as_mut().poll(cx).map(|r| match r {
                Ok(r) => Ok(Answer::Json(r)),
                Err(ToolError::Tool(m)) => Ok(Answer::Tool(CallToolResult::error(m))),
                Err(e) => Err(e),
            }),
        }
    }
}

/// A handler's error as the JSON-RPC error its request is answered with.
pub(crate) fn error_object(e: ToolError) -> ErrorObject {
    match e {
        ToolError::Rpc(e) => e,
        ToolError::Tool(m) => ErrorObject::invalid_params(m),
        ToolError::Internal(m) => ErrorObject::internal(m),
        // Only reached when the runtime itself did not cancel: the handler gave up on its own.
        ToolError::Cancelled => ErrorObject::internal("the handler stopped as if cancelled"),
        ToolError::DeadlineExceeded => {
            ErrorObject::new(codes::DEADLINE_EXCEEDED, "deadline exceeded")
        }
        // Asked outside a stateless request's rounds (cannot happen through Context).
        ToolError::InputRequired => {
            ErrorObject::internal("the handler needs input from the client but cannot ask it")
        }
    }
}
