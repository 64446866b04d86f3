//! Requests the server sends to the client (`sampling/createMessage`, `elicitation/create`,
//! `roots/list` …) and who answers them.
//!
//! By default a client offers none of these and answers only `ping`. A caller that can answer
//! (a proxy forwarding them to its own client, a UI asking a person) installs a
//! [`ServerRequestHandler`] in [`ConnectOptions`](crate::ConnectOptions). Each request is
//! answered from its own task, so a slow answer never holds up the connection's reader.

use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;
use staunch_protocol::{ErrorObject, RequestId};

/// One request from the server.
#[derive(Debug, Clone)]
pub struct ServerRequest {
    /// Its id (the server's; the answer carries it back).
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// Its params, as sent.
    pub params: Option<Value>,
    /// The client request whose response stream carried it (Streamable HTTP), i.e. the
    /// request that caused it. `None` on stdio and on the standalone GET stream, where the
    /// wire does not say.
    pub on_stream_of: Option<RequestId>,
}

type AnswerFuture = BoxFuture<'static, Result<Value, ErrorObject>>;

/// Answers server requests: a closure from [`ServerRequest`] to the result (or the JSON-RPC
/// error) sent back.
#[derive(Clone)]
pub struct ServerRequestHandler(Arc<dyn Fn(ServerRequest) -> AnswerFuture + Send + Sync>);

impl ServerRequestHandler {
    /// Wraps `f`.
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(ServerRequest) -> AnswerFuture + Send + Sync + 'static,
    {
        Self(Arc::new(f))
    }

    pub(crate) fn answer(&self, req: ServerRequest) -> AnswerFuture {
        (self.0)(req)
    }
}

impl fmt::Debug for ServerRequestHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerRequestHandler")
    }
}

/// Sees every notification the server sends that the client does not consume itself
/// (everything but `notifications/progress`): method and params. It runs on the connection's
/// reader, so it must not block — hand the work to a task (e.g. wake a `Notify`).
#[derive(Clone)]
pub struct NotificationHandler(Arc<NotifyFn>);

/// What a [`NotificationHandler`] calls: the method and its params.
type NotifyFn = dyn Fn(&str, Option<&Value>) + Send + Sync;

impl NotificationHandler {
    /// Wraps `f`.
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(&str, Option<&Value>) + Send + Sync + 'static,
    {
        Self(Arc::new(f))
    }

    pub(crate) fn notify(&self, method: &str, params: Option<&Value>) {
        (self.0)(method, params)
    }
}

impl fmt::Debug for NotificationHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NotificationHandler")
    }
}
