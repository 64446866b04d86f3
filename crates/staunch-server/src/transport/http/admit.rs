//! The checks a POST passes before anything serves it, one function each.
//!
//! The endpoint ([`super::handlers`]) runs them in this order; each lets the request on or
//! answers it with the refusal the client reads — an HTTP status with a JSON-RPC error that says
//! what to do, logged where the refusal is a sign of trouble:
//!
//! 1. the `Host` and `Origin` ([`host_and_origin`]), then the bearer token ([`super::auth`]),
//!    for every method;
//! 2. the body: its size and read time ([`body`]), its media type
//!    ([`json_body`]), a JSON-RPC message ([`message`]);
//! 3. the caller's scopes for the tool it calls ([`tool_permitted`]);
//! 4. a request without a session: an `Accept` that can take its answer ([`stream_accepted`]),
//!    then the peer's share of the in-flight slots ([`super::peer_share`]);
//! 5. a request in a session: a protocol version this server speaks ([`protocol_version`]),
//!    the session itself (`lookup`), the event store keeping up ([`super::batch`]), how the
//!    client takes its answer ([`answer_form`]) and room for one more stream in the session
//!    ([`stream_room`]).
//!
//! Plain functions rather than tower layers: the endpoint's path skips the router (its path
//! match and per-request boxing were about 4k instructions of a call; see `accept.rs`), and
//! checks 3 to 5 need the parsed message, which no layer in front of the body has.

use std::future::Future;
use std::task::Poll;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use staunch_protocol::{ErrorObject, Message, Request, codes, parse_message, version};

use super::HttpState;
use super::auth::Identity;
use super::head::Head;
use super::session::HttpSession;
use super::sse::{self, error};
use crate::codec;

/// A refusal: the whole answer to the request (boxed: it is the rare path, and a bare
/// `Response` would make every check's result 128 bytes).
pub(super) type Refusal = Box<Response>;

/// The request body, within the size limit and the body-read timeout (hyper has a timer for
/// the head only).
pub(super) async fn body<B>(state: &HttpState, body: B) -> Result<Bytes, Response>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limit = state.cfg.max_body_bytes;
    let collect = async {
        http_body_util::BodyExt::collect(http_body_util::Limited::new(body, limit))
            .await
            .map(http_body_util::Collected::to_bytes)
    };
    let mut read = std::pin::pin!(collect);
    // A small body usually arrived with its head: take it without arming the timer (a timer
    // entry is a lock and a wheel insert and removal, ~1.6k instructions per request).
    let ready = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    let read = match ready {
        Poll::Ready(r) => Ok(r),
        Poll::Pending => tokio::time::timeout(state.cfg.body_read_timeout, read).await,
    };
    match read {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => {
            let e: &(dyn std::error::Error + 'static) = &*e;
            let too_large = std::iter::successors(Some(e), |e| e.source())
                .any(|e| e.is::<http_body_util::LengthLimitError>());
            if too_large {
                tracing::warn!(limit, "request refused: body too large");
                Err(error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    codes::INVALID_REQUEST,
                    &format!("request body larger than {limit} bytes (--max-message-bytes)"),
                ))
            } else {
                Err(error(
                    StatusCode::BAD_REQUEST,
                    codes::INVALID_REQUEST,
                    "the request body could not be read",
                ))
            }
        }
        Err(_) => {
            tracing::warn!("request refused: body not received in time");
            Err(error(
                StatusCode::REQUEST_TIMEOUT,
                codes::INVALID_REQUEST,
                &format!(
                    "request body not received within {} ms (--body-read-timeout-ms)",
                    state.cfg.body_read_timeout.as_millis()
                ),
            ))
        }
    }
}

/// The `Host` and `Origin` ([`super::guard`]): a refusal (403, or 400 for a doubled header)
/// when either names a host not allowed.
pub(super) fn host_and_origin(state: &HttpState, head: &Head) -> Option<Response> {
    state
        .cfg
        .allow
        .judge(
            head.hosts,
            head.host.as_ref(),
            head.origins,
            head.origin.as_ref(),
        )
        .err()
        .map(|refusal| refusal.answer(head.host.as_ref(), head.origin.as_ref()))
}

/// The body must say it is JSON (415).
pub(super) fn json_body(head: &Head) -> Result<(), Refusal> {
    if head.json_body {
        return Ok(());
    }
    Err(Box::new(error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        codes::INVALID_REQUEST,
        "Content-Type must be application/json",
    )))
}

/// The body must be one JSON-RPC message (400 with the parse error, id null).
pub(super) fn message(body: &[u8]) -> Result<Message, Refusal> {
    parse_message(body).map_err(|e| {
        tracing::warn!(error = %e, "malformed POST body");
        let body = String::from_utf8_lossy(&e.to_response_bytes()).into_owned();
        Box::new(
            (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response(),
        )
    })
}

/// With auth on, a `tools/call` needs the tool's scopes (403 with `insufficient_scope`).
pub(super) fn tool_permitted(
    state: &HttpState,
    identity: Option<&Identity>,
    msg: &Message,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
    let (Some(auth), Some(identity), Message::Request(r)) = (&state.auth, identity, msg) else {
        return Ok(());
    };
    if r.method != "tools/call" {
        return Ok(());
    }
    let Some(tool) = r
        .params
        .as_ref()
        .and_then(|p| p.get("name"))
        .and_then(serde_json::Value::as_str)
    else {
        return Ok(());
    };
    match auth.check_tool(
        &state.server,
        identity,
        tool,
        &r.id,
        headers,
        &state.cfg.endpoint,
    ) {
        Some(refusal) => Err(Box::new(refusal)),
        None => Ok(()),
    }
}

/// A request whose answer can only be a stream, from a client that does not accept one, is
/// refused at once (406), before it takes a slot: it would otherwise wait, silent, until the
/// client gave up. `streams_only` says which methods answer only with a stream.
pub(super) fn stream_accepted(
    head: &Head,
    req: &Request,
    streams_only: impl FnOnce(&str) -> bool,
) -> Result<(), Refusal> {
    if head.accept.sse || !streams_only(&req.method) {
        return Ok(());
    }
    Err(Box::new(sse::error_answer(
        StatusCode::NOT_ACCEPTABLE,
        Some(&req.id),
        &ErrorObject::new(
            codes::INVALID_REQUEST,
            format!(
                "{} answers with a stream: Accept must include text/event-stream",
                req.method
            ),
        ),
    )))
}

/// An `MCP-Protocol-Version` header, when sent, must name a version served in a session (400
/// listing what is served).
pub(super) fn protocol_version(head: &Head) -> Result<(), Refusal> {
    match head.protocol_version() {
        Some(v) if !version::is_supported(v) => Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST,
            &format!(
                "unsupported MCP-Protocol-Version {v:?}; supported: {}",
                codec::versions_served()
            ),
        ))),
        _ => Ok(()),
    }
}

/// How a session's request is answered, from what its client accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AnswerForm {
    /// One JSON body (the client accepts no stream, or sent no `Accept`).
    Json,
    /// A stream; `or_plain`: the client accepts JSON too, so a request that sends nothing
    /// before its answer may be answered plainly.
    Stream { or_plain: bool },
}

/// The form of a session's answer, or 406 when the client accepts neither.
pub(super) fn answer_form(head: &Head) -> Result<AnswerForm, Refusal> {
    let accept = head.accept;
    if accept.sse {
        return Ok(AnswerForm::Stream {
            or_plain: accept.json,
        });
    }
    if accept.json || accept.absent {
        return Ok(AnswerForm::Json);
    }
    Err(Box::new(error(
        StatusCode::NOT_ACCEPTABLE,
        codes::INVALID_REQUEST,
        "Accept must include application/json and text/event-stream",
    )))
}

/// A session may hold at most `--max-streams-per-session` open streams (429).
pub(super) fn stream_room(session: &HttpSession, limit: usize) -> Result<(), Refusal> {
    if session.open_connections() < limit {
        return Ok(());
    }
    Err(Box::new(error(
        StatusCode::TOO_MANY_REQUESTS,
        codes::SERVER_BUSY,
        &format!("too many open streams in this session (limit {limit}); wait for calls to finish"),
    )))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use staunch_protocol::RequestId;

    use super::*;

    fn head(pairs: &[(&'static str, &'static str)]) -> Head {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        Head::read(&headers)
    }

    /// A refusal's status and JSON body.
    async fn refusal_body(r: Refusal) -> (StatusCode, serde_json::Value) {
        let status = r.status();
        let bytes: Bytes = http_body_util::BodyExt::collect(r.into_body())
            .await
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    fn request(method: &str) -> Request {
        Request {
            id: RequestId::Number(7),
            method: method.into(),
            params: None,
        }
    }

    #[tokio::test]
    async fn a_body_not_said_to_be_json_is_415() {
        assert!(
            json_body(&head(&[(
                "content-type",
                "application/json; charset=utf-8"
            )]))
            .is_ok()
        );
        let (status, body) =
            refusal_body(json_body(&head(&[("content-type", "text/plain")])).unwrap_err()).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(body["error"]["code"], codes::INVALID_REQUEST);
        assert!(body["id"].is_null());
        assert!(json_body(&head(&[])).is_err());
    }

    #[tokio::test]
    async fn a_body_that_is_no_message_is_400_with_the_parse_error() {
        let ok = message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert!(matches!(ok, Ok(Message::Request(r)) if r.method == "ping"));
        let (status, body) = refusal_body(message(b"{not json").unwrap_err()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"]["code"], codes::PARSE_ERROR);
        let (status, body) =
            refusal_body(message(br#"{"jsonrpc":"1.0","id":1}"#).unwrap_err()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"]["code"], codes::INVALID_REQUEST);
    }

    #[tokio::test]
    async fn a_stream_only_answer_needs_a_client_that_takes_a_stream() {
        let streams = |m: &str| m == "subscriptions/listen";
        let json_only = head(&[("accept", "application/json")]);
        assert!(stream_accepted(&json_only, &request("tools/call"), streams).is_ok());
        let both = head(&[("accept", "application/json, text/event-stream")]);
        assert!(stream_accepted(&both, &request("subscriptions/listen"), streams).is_ok());
        let refused = stream_accepted(&json_only, &request("subscriptions/listen"), streams);
        let (status, body) = refusal_body(refused.unwrap_err()).await;
        assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(body["id"], 7, "answered under the request's own id");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("text/event-stream")
        );
    }

    #[tokio::test]
    async fn a_version_header_must_name_a_version_served() {
        assert!(protocol_version(&head(&[])).is_ok());
        for served in version::SUPPORTED {
            let h = Head::read(&HeaderMap::from_iter([(
                axum::http::HeaderName::from_static("mcp-protocol-version"),
                HeaderValue::from_static(served),
            )]));
            assert!(protocol_version(&h).is_ok(), "{served}");
        }
        let old = head(&[("mcp-protocol-version", "2024-01-01")]);
        let (status, body) = refusal_body(protocol_version(&old).unwrap_err()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let text = body["error"]["message"].as_str().unwrap();
        assert!(
            text.contains("2024-01-01") && text.contains(version::LATEST),
            "{text}"
        );
    }

    #[tokio::test]
    async fn the_answer_takes_the_form_the_client_accepts() {
        let form = |pairs: &[(&'static str, &'static str)]| answer_form(&head(pairs));
        assert_eq!(form(&[]).ok(), Some(AnswerForm::Json));
        assert_eq!(
            form(&[("accept", "application/json")]).ok(),
            Some(AnswerForm::Json)
        );
        assert_eq!(
            form(&[("accept", "text/event-stream")]).ok(),
            Some(AnswerForm::Stream { or_plain: false })
        );
        assert_eq!(
            form(&[("accept", "application/json, text/event-stream")]).ok(),
            Some(AnswerForm::Stream { or_plain: true })
        );
        let (status, _) = refusal_body(form(&[("accept", "text/html")]).unwrap_err()).await;
        assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    }
}
