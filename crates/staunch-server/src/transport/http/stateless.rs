//! Stateless-era (2026-07-28) requests on the MCP endpoint: one POST, one request, no session.
//!
//! Before anything runs, the request is checked the way the revision requires, each failure
//! with its own code and HTTP 400: `MCP-Protocol-Version` present (-32020), the required `_meta`
//! fields present (-32602), header and `_meta` versions equal (-32020), the version served
//! (-32022 with `data.supported`), `Mcp-Method` equal to the method and `Mcp-Name` to the name,
//! uri or task id the method carries (-32020; values may be `=?base64?…?=`). Every error carries
//! the request's id.
//!
//! Then the request goes to the request core with a sink of its own: this response stream.
//! Nothing is written until the request's first message: when that is its response, the answer
//! is a single JSON body whose status follows the error (-32601 → 404; -32020/-32021/-32022 →
//! 400); when it is a notification (progress, a log line), the answer becomes an SSE stream that
//! ends after the response. There are no event ids and no resumption in this era.
//!
//! **Closing the stream is the cancellation.** The request's guard lives in this handler and
//! then in the stream's body; when the client goes away hyper drops them, and the guard cancels
//! the request through the core (`cancel_received` with reason `stream closed`). While nothing
//! has been written, a silent handler's stream is held with SSE keep-alive comments after a
//! short wait, so a closed connection is seen within one keep-alive interval even when hyper
//! would not notice on its own.
//!
//! **A stream that is not read is a client that has gone.** A request's messages wait for its
//! stream in a queue of at most `--max-connection-backlog` messages. A client that stops
//! reading while its request keeps producing (progress, log lines) falls behind; once it is
//! that far behind, nothing more is queued, the request is cancelled as if the stream had
//! closed (the lifecycle log shows `stream closed`), the stream ends after what is queued, and
//! [`super::EventQueueStats::streams_cut`] counts it. There is no resumption in this era, so
//! there is nothing to keep.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::json;
use staunch_protocol::stateless::{
    RequestMeta, decode_header_value, expected_name, header_mismatch,
};
use staunch_protocol::{ErrorObject, Request, codes, version};

use super::HttpState;
use super::answer_queue::{self, NotQueued};
use super::batch::Batcher;
use super::head::Head;
use super::peer_share::HeldSink;
use super::sse;
use crate::fair::PeerSlot;
use crate::outbound::{Outbound, OutboundKind, Sink};
use crate::server::StandaloneRequest;

pub(crate) use super::head::VERSION_HEADER;
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

/// A request's messages, from the core to this response: a queue of at most the connection
/// backlog ([`answer_queue`], which costs a waiting request a few words).
struct StreamSink {
    /// `None` once the client fell the whole backlog behind: nothing more is queued, and the
    /// stream ends after what is.
    tx: Mutex<Option<answer_queue::Sender<Outbound>>>,
    /// The request, to cancel when its client falls behind. Weak: the request's connection
    /// holds this sink, and the response stream owns the request.
    request: OnceLock<Weak<StandaloneRequest>>,
    batcher: Batcher,
}

impl StreamSink {
    fn new(backlog: usize, batcher: Batcher) -> (Self, answer_queue::Receiver<Outbound>) {
        let (tx, rx) = answer_queue::queue(backlog);
        let sink = Self {
            tx: Mutex::new(Some(tx)),
            request: OnceLock::new(),
            batcher,
        };
        (sink, rx)
    }

    /// Whether the client fell behind (the queue is closed).
    fn is_cut(&self) -> bool {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// The request's client stopped reading: cancel it the way a closed stream does. From a
    /// task of its own, because `send` may be called while the core holds its own locks.
    fn cancel(request: Arc<StandaloneRequest>) {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { request.stream_closed() });
            }
            Err(_) => request.stream_closed(),
        }
    }
}

impl Sink for StreamSink {
    fn send(&self, msg: Outbound) {
        let mut tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let Some(sender) = tx.as_ref() else {
            // Cut off already: the request is being cancelled.
            return;
        };
        match sender.try_send(msg) {
            // Closed: the response is gone (the client closed it); nothing to deliver to.
            Ok(()) | Err(NotQueued::Closed) => {}
            Err(NotQueued::Full) => {
                let backlog = sender.capacity();
                // Dropping the sender ends the stream once the client read what is queued.
                *tx = None;
                drop(tx);
                self.batcher.stream_cut();
                let request = self.request.get().and_then(Weak::upgrade);
                tracing::warn!(
                    request = request.as_ref().map_or("", |r| r.log_key()),
                    backlog,
                    "client stopped reading its response stream: request cancelled (stream closed)"
                );
                // Before the handle is set, `post` sees the cut and cancels instead.
                if let Some(r) = request {
                    Self::cancel(r);
                }
            }
        }
    }
}

/// Cancels the request when dropped before its response went out: the stream closed.
struct CancelOnDrop {
    request: Arc<StandaloneRequest>,
    answered: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.answered {
            self.request.stream_closed();
        }
    }
}

fn status_for(code: i64) -> StatusCode {
    match code {
        codes::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        codes::HEADER_MISMATCH
        | codes::MISSING_REQUIRED_CLIENT_CAPABILITY
        | codes::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

fn header_value<'h>(
    headers: &'h HeaderMap,
    name: &str,
) -> Result<Option<Cow<'h, str>>, ErrorObject> {
    let mut values = headers.get_all(name).iter();
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(header_mismatch(format!(
            "the {name} header is repeated; send it once"
        )));
    }
    let v = v
        .to_str()
        .map_err(|_| header_mismatch(format!("the {name} header is not visible ASCII")))?;
    decode_header_value(v).map(Some).ok_or_else(|| {
        header_mismatch(format!(
            "the {name} header has a malformed =?base64?…?= value"
        ))
    })
}

/// `Mcp-Param-{name}` headers of a `tools/call` against the arguments they mirror (SEP-2243):
/// a value in the body needs its header, and the header (decoded) must equal it — numbers
/// compared as numbers. Null or absent values need no header.
fn check_param_headers(
    headers: &HeaderMap,
    req: &Request,
    params: &[(String, String)],
) -> Result<(), ErrorObject> {
    let args = req.params.as_ref().and_then(|p| p.get("arguments"));
    for (arg, name) in params {
        let header = format!("mcp-param-{}", name.to_ascii_lowercase());
        let body = args.and_then(|a| a.get(arg)).filter(|v| !v.is_null());
        let got = header_value(headers, &header)?;
        let Some(body) = body else { continue };
        let Some(got) = got else {
            return Err(header_mismatch(format!(
                "missing Mcp-Param-{name} header: argument {arg:?} is in the body"
            )));
        };
        let equal = match body {
            serde_json::Value::String(s) => *s == got,
            serde_json::Value::Number(n) => got
                .parse::<f64>()
                .ok()
                .zip(n.as_f64())
                .is_some_and(|(a, b)| a == b),
            serde_json::Value::Bool(b) => got == if *b { "true" } else { "false" },
            _ => false,
        };
        if !equal {
            return Err(header_mismatch(format!(
                "Mcp-Param-{name} header {got:?} does not match argument {arg:?} in the body"
            )));
        }
    }
    Ok(())
}

/// Checks the request against its headers and `_meta`, whose protocol keys move into the
/// [`RequestMeta`] it returns; the error to answer with otherwise.
fn validate(
    headers: &HeaderMap,
    req: &mut Request,
    server: &crate::Server,
) -> Result<RequestMeta, (StatusCode, ErrorObject)> {
    let bad = |e: ErrorObject| (StatusCode::BAD_REQUEST, e);
    let header_version = header_value(headers, VERSION_HEADER)
        .map_err(bad)?
        .ok_or_else(|| {
            bad(header_mismatch(
                "missing MCP-Protocol-Version header: a stateless request must name its version \
                 in the header and in _meta",
            ))
        })?;
    let meta = RequestMeta::take_from(&mut req.params).map_err(bad)?;
    if header_version != meta.protocol_version {
        return Err(bad(header_mismatch(format!(
            "MCP-Protocol-Version header {header_version:?} does not match \
             _meta[\"io.modelcontextprotocol/protocolVersion\"] {:?}",
            meta.protocol_version
        ))));
    }
    meta.check_version().map_err(bad)?;
    match header_value(headers, METHOD_HEADER).map_err(bad)? {
        Some(m) if m == req.method => {}
        Some(m) => {
            return Err(bad(header_mismatch(format!(
                "Mcp-Method header {m:?} does not match the method {:?}",
                req.method
            ))));
        }
        None => {
            return Err(bad(header_mismatch(format!(
                "missing Mcp-Method header (the method is {:?})",
                req.method
            ))));
        }
    }
    if let Some(expected) = expected_name(&req.method, req.params.as_ref()) {
        let got = header_value(headers, NAME_HEADER).map_err(bad)?;
        match (got, expected) {
            (Some(g), Some(e)) if g == e => {}
            (None, None) => {}
            (Some(g), Some(e)) => {
                return Err(bad(header_mismatch(format!(
                    "Mcp-Name header {g:?} does not match {e:?} in the body"
                ))));
            }
            (None, Some(e)) => {
                return Err(bad(header_mismatch(format!(
                    "missing Mcp-Name header (the body names {e:?})"
                ))));
            }
            (Some(g), None) => {
                return Err(bad(header_mismatch(format!(
                    "Mcp-Name header {g:?} names nothing in the body"
                ))));
            }
        }
    }
    if req.method == "tools/call"
        && let Some(tool) = req
            .params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(serde_json::Value::as_str)
    {
        // Read in place from the tool table (most tools mirror nothing into headers).
        let table = server.inner.tool_table();
        if let Some(params) = table.header_params.get(tool) {
            check_param_headers(headers, req, params).map_err(bad)?;
        }
    }
    Ok(meta)
}

/// Serves one stateless request POSTed with `headers`.
pub(crate) async fn post(
    state: Arc<HttpState>,
    headers: HeaderMap,
    mut req: Request,
    sse_ok: bool,
    principal: Option<String>,
    slot: Option<PeerSlot>,
) -> Response {
    let meta = match validate(&headers, &mut req, &state.server) {
        Ok(m) => m,
        Err((status, e)) => {
            tracing::info!(method = %req.method, code = e.code, error = %e.message, "stateless request refused");
            return sse::error_answer(status, Some(&req.id), &e);
        }
    };
    // Checked: the headers are not held for as long as the request runs.
    drop(headers);
    let (sink, mut rx) = StreamSink::new(state.cfg.connection_backlog, state.batcher.clone());
    let sink = Arc::new(sink);
    // Eager: this task only waits for the request's messages, so its first step may run here.
    let request = Arc::new(state.server.serve_standalone_with(
        req,
        meta,
        HeldSink::wrap(sink.clone(), slot),
        principal,
        true,
    ));
    let _ = sink.request.set(Arc::downgrade(&request));
    if sink.is_cut() {
        // Fell behind before the handle was set (only with a tiny backlog).
        StreamSink::cancel(request.clone());
    }
    let mut guard = CancelOnDrop {
        request,
        answered: false,
    };
    // Wait for the first message; if the handler is silent for a while, open the stream anyway
    // so that keep-alives can notice a client that left.
    let first = tokio::select! {
        m = rx.recv() => match m {
            Some(m) => m,
            None => {
                // The request ended without an answer (the server is shutting down).
                guard.answered = true;
                return StatusCode::ACCEPTED.into_response();
            }
        },
        _ = tokio::time::sleep(state.cfg.stateless_hold), if sse_ok => {
            return sse_body(
                None,
                rx,
                guard,
                state.cfg.keep_alive_stateless,
                state.server.metrics().sse_stream_opened(),
            );
        }
    };
    if first.kind == OutboundKind::Response {
        guard.answered = true;
        let status = first.error_code.map_or(StatusCode::OK, status_for);
        return sse::json_body(status, first.bytes);
    }
    if !sse_ok {
        // A JSON-only client: the notifications cannot reach it; wait for the response.
        while let Some(m) = rx.recv().await {
            if m.kind == OutboundKind::Response {
                guard.answered = true;
                let status = m.error_code.map_or(StatusCode::OK, status_for);
                return sse::json_body(status, m.bytes);
            }
        }
        guard.answered = true;
        return StatusCode::ACCEPTED.into_response();
    }
    sse_body(
        Some(first),
        rx,
        guard,
        state.cfg.keep_alive_stateless,
        state.server.metrics().sse_stream_opened(),
    )
}

struct BodyState {
    pending: Option<Outbound>,
    rx: answer_queue::Receiver<Outbound>,
    guard: CancelOnDrop,
    keep_alive: Duration,
    done: bool,
    /// Counts the stream in `staunch_sse_streams_open` while it lives.
    _open: crate::metrics::StreamGuard,
}

/// The SSE answer: `first` (if any), then every message until the response; keep-alive
/// comments while silent.
fn sse_body(
    first: Option<Outbound>,
    rx: answer_queue::Receiver<Outbound>,
    guard: CancelOnDrop,
    keep_alive: Duration,
    open: crate::metrics::StreamGuard,
) -> Response {
    let st = BodyState {
        pending: first,
        rx,
        guard,
        keep_alive,
        done: false,
        _open: open,
    };
    let frames = stream::unfold(st, |mut st| async move {
        if st.done {
            return None;
        }
        let msg = match st.pending.take() {
            Some(m) => Some(m),
            None => match tokio::time::timeout(st.keep_alive, st.rx.recv()).await {
                Ok(m) => m,
                Err(_) => {
                    return Some((
                        Ok::<_, Infallible>(Bytes::from_static(b": keep-alive\n\n")),
                        st,
                    ));
                }
            },
        };
        let msg = msg?;
        if msg.kind == OutboundKind::Response {
            st.guard.answered = true;
            st.done = true;
        }
        Some((Ok(sse::event("", &msg.bytes)), st))
    });
    sse::stream_response(Body::from_stream(frames))
}

/// A client of this era: no session, and a protocol version header that names no session-era
/// revision.
pub(crate) fn is_client(head: &Head) -> bool {
    !head.has_session_id()
        && head
            .protocol_version()
            .is_some_and(|v| !version::is_session_era(v.trim()))
}

/// Whether `method`'s answer can only be an SSE stream (it never ends with a lone response while
/// the client listens): `subscriptions/listen`.
pub(crate) fn answers_only_as_a_stream(method: &str) -> bool {
    method == "subscriptions/listen"
}

/// A stateless POST that is not a request (a notification or a response): nothing in this era
/// is sent that way over HTTP; accepted and ignored.
pub(crate) fn not_a_request() -> Response {
    StatusCode::ACCEPTED.into_response()
}

/// `GET`/`DELETE` from a stateless client: those belong to sessions.
pub(crate) fn method_not_allowed() -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {
        "code": codes::INVALID_REQUEST,
        "message": "GET and DELETE are not part of protocol 2026-07-28: POST each request; use \
                    subscriptions/listen for updates"
    }});
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::ALLOW, "POST"),
        ],
        body.to_string(),
    )
        .into_response()
}
