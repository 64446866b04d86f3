//! The SSE bodies: a few events known up front (priming, replay), then the live connection.
//!
//! Encoded here rather than with axum's `Sse` because the priming event needs an empty
//! `data:` line (SEP-1699), which axum's encoder omits.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use tokio::time::{Instant, Sleep};

use super::HttpState;
use super::session::{ConnectionGuard, LiveRx, SseItem};
use super::stream_id::event_id;

struct SseState {
    /// The stream the live events belong to (their ids are `{stream}:{seq}`).
    stream_id: Arc<str>,
    first: std::vec::IntoIter<Bytes>,
    live: Option<LiveRx>,
    close_at: Option<Instant>,
    keep_alive: Duration,
    /// One timer for the stream's life, moved on only when it fires: arming a timer for
    /// every frame cost more than the frame. Registered on the first wait that finds
    /// nothing queued.
    timer: Pin<Box<Sleep>>,
    /// When the last frame went out: silence is measured from here.
    last_frame: Instant,
    _guard: ConnectionGuard,
    /// Counts the stream in `staunch_sse_streams_open` while it lives.
    _open: crate::metrics::StreamGuard,
}

impl SseState {
    /// The next frame from the live connection: an event, a keep-alive comment after
    /// `keep_alive` of silence, or `None` when it ends, asks to close, or `close_at` passes.
    async fn next_live(&mut self) -> Option<Bytes> {
        let rx = self.live.as_mut()?;
        loop {
            tokio::select! {
                biased;
                item = rx.recv() => {
                    return match item {
                        Some(SseItem::Event { seq, data, .. }) => {
                            self.last_frame = Instant::now();
                            Some(event_at(&self.stream_id, seq, &data))
                        }
                        Some(SseItem::Close) | None => None,
                    };
                }
                () = self.timer.as_mut() => {
                    let now = Instant::now();
                    if self.close_at.is_some_and(|at| now >= at) {
                        return None;
                    }
                    let quiet_until = self.last_frame + self.keep_alive;
                    let beat = now >= quiet_until;
                    if beat {
                        self.last_frame = now;
                    }
                    let next = self.last_frame + self.keep_alive;
                    self.timer.as_mut().reset(self.close_at.map_or(next, |at| at.min(next)));
                    if beat {
                        return Some(Bytes::from_static(b": keep-alive\n\n"));
                    }
                }
            }
        }
    }
}

/// An SSE response: `first` events, then whatever `live` delivers until it ends, asks to close,
/// or `close_after` passes (SEP-1699 polling; the client resumes with `Last-Event-ID`). A
/// comment goes out every `keep_alive` of silence so proxies keep the connection.
pub(crate) fn body(
    stream_id: Arc<str>,
    first: Vec<Bytes>,
    live: Option<LiveRx>,
    close_after: Option<Duration>,
    keep_alive: Duration,
    guard: ConnectionGuard,
    open: crate::metrics::StreamGuard,
) -> Response {
    let now = Instant::now();
    let close_at = close_after.map(|d| now + d);
    let first_wake = close_at.map_or(now + keep_alive, |at| at.min(now + keep_alive));
    let state = SseState {
        stream_id,
        first: first.into_iter(),
        live,
        close_at,
        keep_alive,
        timer: Box::pin(tokio::time::sleep_until(first_wake)),
        last_frame: now,
        _guard: guard,
        _open: open,
    };
    // Boxed: the state moves into each step's future and back out of it.
    let frames = stream::unfold(Box::new(state), |mut st| async move {
        let frame = match st.first.next() {
            Some(e) => e,
            None => st.next_live().await?,
        };
        Some((Ok::<_, Infallible>(frame), st))
    });
    stream_response(Body::from_stream(frames))
}

/// An SSE response around `body`. Its three headers are a map made once and cloned: inserting
/// them one by one (hashing each name) cost more than copying the map.
pub(crate) fn stream_response(body: Body) -> Response {
    static HEADERS: LazyLock<HeaderMap> = LazyLock::new(|| {
        // A map made for three: one grown from empty makes room for six, and an in-flight
        // stream holds its response head.
        let mut h = HeaderMap::with_capacity(3);
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert(
            header::HeaderName::from_static("x-accel-buffering"),
            HeaderValue::from_static("no"),
        );
        h
    });
    let mut r = Response::new(body);
    *r.headers_mut() = HEADERS.clone();
    r
}

/// A request's SSE answer: the priming event (the id a dropped client resumes from), `taken`
/// (an event already received from the stream), then the live connection.
pub(super) fn request_stream(
    state: &HttpState,
    stream_id: Arc<str>,
    taken: Option<Bytes>,
    rx: LiveRx,
    guard: ConnectionGuard,
) -> Response {
    let mut first = vec![priming(&event_id(&stream_id, 0), state.cfg.sse_retry)];
    first.extend(taken);
    body(
        stream_id,
        first,
        Some(rx),
        state.cfg.poll_after,
        state.cfg.keep_alive,
        guard,
        state.server.metrics().sse_stream_opened(),
    )
}

/// 409: the session already has a request with this id in flight.
pub(super) fn already_in_flight(req_id: &staunch_protocol::RequestId) -> Response {
    error_answer(
        StatusCode::CONFLICT,
        None,
        &staunch_protocol::ErrorObject::new(
            staunch_protocol::codes::INVALID_REQUEST,
            format!("request id {req_id} is already in flight in this session"),
        ),
    )
}

/// A JSON-RPC error with no id (the request could not be read, or is refused as a whole).
pub(super) fn error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A JSON-RPC error as the whole answer, with its id.
pub(crate) fn error_answer(
    status: StatusCode,
    id: Option<&staunch_protocol::RequestId>,
    e: &staunch_protocol::ErrorObject,
) -> Response {
    json_body(status, staunch_protocol::error_response_bytes(id, e))
}

/// A whole JSON answer with `status`. Built directly: axum's `(headers, body)` tuples copy
/// each header value and set the body's content type twice.
pub(crate) fn json_body(status: StatusCode, body: impl Into<Bytes>) -> Response {
    let mut r = Response::new(Body::from(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The priming event: an id the client can resume from, the reconnect delay, empty data.
/// (Written by hand: `format!` was 1.2k instructions of every request's stream.)
pub(crate) fn priming(id: &str, retry: Duration) -> Bytes {
    let mut millis = itoa::Buffer::new();
    let millis = millis.format(retry.as_millis());
    let mut out = Vec::with_capacity(id.len() + millis.len() + 24);
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\nretry: ");
    out.extend_from_slice(millis.as_bytes());
    out.extend_from_slice(b"\ndata: \n\n");
    Bytes::from(out)
}

/// Event `seq` of stream `stream_id` (its id `{stream}:{seq}` written in place).
pub(crate) fn event_at(stream_id: &str, seq: u64, data: &[u8]) -> Bytes {
    let mut digits = itoa::Buffer::new();
    let seq = digits.format(seq);
    let mut out = Vec::with_capacity(data.len() + stream_id.len() + seq.len() + 16);
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(stream_id.as_bytes());
    out.push(b':');
    out.extend_from_slice(seq.as_bytes());
    out.push(b'\n');
    data_lines(&mut out, data);
    Bytes::from(out)
}

/// One message as an event (`id` may be empty when the message could not be stored).
pub(crate) fn event(id: &str, data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + id.len() + 16);
    if !id.is_empty() {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    data_lines(&mut out, data);
    Bytes::from(out)
}

/// The `data:` lines of an event and the blank line that ends it.
fn data_lines(out: &mut Vec<u8>, data: &[u8]) {
    // Serialised JSON has no raw newlines: one line, found with a fast search. A stored
    // payload is data, though: split defensively.
    if !data.contains(&b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(data.strip_suffix(b"\r").unwrap_or(data));
        out.extend_from_slice(b"\n\n");
        return;
    }
    for line in data.split(|b| *b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.push(b'\n');
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priming_has_id_retry_and_empty_data() {
        assert_eq!(
            priming("s:0", Duration::from_millis(1500)),
            Bytes::from_static(b"id: s:0\nretry: 1500\ndata: \n\n")
        );
    }

    #[test]
    fn an_event_at_a_sequence_number_has_the_same_frame_as_one_with_its_id() {
        assert_eq!(event_at("s-1f", 12, b"{}"), event("s-1f:12", b"{}"));
        assert_eq!(event_at("s", 0, b"a\nb"), event("s:0", b"a\nb"));
    }

    #[test]
    fn events_are_framed() {
        assert_eq!(
            event("s:1", b"{}"),
            Bytes::from_static(b"id: s:1\ndata: {}\n\n")
        );
        assert_eq!(
            event("", b"a\nb"),
            Bytes::from_static(b"data: a\ndata: b\n\n")
        );
    }
}
