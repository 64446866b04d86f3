//! GET: the standalone stream, and resuming any stream with `Last-Event-ID` — from memory, the
//! store, or by following the store while another instance runs the request.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use staunch_protocol::codes;
use staunch_store::Replay;

use super::HttpState;
use super::head::Head;
use super::lookup::find_session;
use super::session::{Attach, HttpSession};
use super::sse::{self, error};
use super::stream_id::{event_id, parse_event_id};
use super::writer;

/// How long a resume on another instance waits for a stream that is not in the store yet.
const NEW_STREAM_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Events read from the store per query when replaying.
pub(super) const REPLAY_PAGE: usize = 512;

pub(super) async fn get(state: Arc<HttpState>, head: Head, principal: Option<&str>) -> Response {
    if !head.accept.sse {
        return error(
            StatusCode::NOT_ACCEPTABLE,
            codes::INVALID_REQUEST,
            "GET needs Accept: text/event-stream",
        );
    }
    let session = match find_session(&state, &head, principal).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    session.mark_used();
    if session.open_connections() >= state.cfg.max_streams_per_session {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            codes::SERVER_BUSY,
            "too many open streams in this session",
        );
    }
    match head.last_event_id() {
        Some(last) => resume(state, session, last).await,
        None => standalone(state, session).await,
    }
}

async fn standalone(state: Arc<HttpState>, session: Arc<HttpSession>) -> Response {
    let Ok((stream_id, rx)) = session.open_standalone() else {
        return error(
            StatusCode::CONFLICT,
            codes::INVALID_REQUEST,
            "a standalone stream is already open for this session",
        );
    };
    let guard = session.connection_guard();
    let first = vec![sse::priming(&event_id(&stream_id, 0), state.cfg.sse_retry)];
    let open = state.server.metrics().sse_stream_opened();
    sse::body(
        stream_id,
        first,
        Some(rx),
        None,
        state.cfg.keep_alive,
        guard,
        open,
    )
}

/// Resumes a stream after `last` (`"{stream}:{seq}"`): missed events first (from memory, or the
/// store when they are older or the stream ran elsewhere), then the live connection, with no
/// gap and no duplicate.
async fn resume(state: Arc<HttpState>, session: Arc<HttpSession>, last: &str) -> Response {
    let Some((stream_id, after)) = parse_event_id(last) else {
        return error(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST,
            "malformed Last-Event-ID",
        );
    };
    let unknown = || {
        error(
            StatusCode::NOT_FOUND,
            codes::INVALID_REQUEST,
            "unknown Last-Event-ID for this session",
        )
    };
    // Sequence numbers are stored as signed 64-bit integers: a larger one was never sent.
    if i64::try_from(after).is_err() {
        return unknown();
    }
    let stream_id: Arc<str> = Arc::from(stream_id);
    let (follow, from_store, memory, live) = match session.attach(&stream_id, after) {
        Attach::PastEnd => return unknown(),
        Attach::Local {
            from_store,
            events,
            live,
        } => (false, from_store.is_some(), events, live),
        Attach::Ended => (false, true, Vec::new(), None),
        // Another instance runs this stream's request (or ran it before this one forgot the
        // stream): follow the store until the response has been delivered.
        Attach::NotLocal => (true, true, Vec::new(), None),
    };
    if from_store {
        // What this instance queued for the store must be there before it is read back.
        state.batcher.flush().await;
    }
    // From the store: everything before the first event still in memory.
    let upto = memory.first().map_or(u64::MAX, |(s, _)| s - 1);
    let mut first = Vec::new();
    let mut cursor = after;
    if from_store {
        // A stream another instance opened a moment ago may not be in the store yet (its
        // writes are batched): a client that reconnects at once through a balancer would be
        // told it does not exist. Look again for a short while before saying so.
        let patience = tokio::time::Instant::now() + NEW_STREAM_PATIENCE;
        let replayed = loop {
            let r = replay_range(&state, session.id(), &stream_id, after, upto, &mut first).await;
            let not_yet = r
                .as_ref()
                .is_err_and(|e| follow && e.status() == StatusCode::NOT_FOUND);
            if !not_yet || tokio::time::Instant::now() >= patience {
                break r;
            }
            drop(r);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        match replayed {
            Ok(c) => cursor = c,
            Err(r) => {
                if r.status() == StatusCode::GONE {
                    state.server.metrics().sse_resume(true);
                }
                return r;
            }
        }
    }
    for (seq, data) in memory {
        cursor = seq;
        first.push(sse::event_at(&stream_id, seq, &data));
    }
    let live = match live {
        Some(rx) => Some(rx),
        None if follow && !ends_with_response(&first) => {
            if !writer::writer_gone(&state, &stream_id).await {
                Some(follow_store(
                    state.clone(),
                    session.id().to_string(),
                    stream_id.to_string(),
                    cursor,
                ))
            } else if first.is_empty() {
                // Nothing left to give, and nobody will write the response: say so, instead
                // of an open stream that stays silent.
                return writer_died(&stream_id);
            } else {
                // What the store holds, then the end; the client's next resume is told.
                None
            }
        }
        None => None,
    };
    let guard = session.connection_guard();
    state.server.metrics().sse_resume(false);
    sse::body(
        stream_id,
        first,
        live,
        state.cfg.poll_after,
        state.cfg.keep_alive,
        guard,
        state.server.metrics().sse_stream_opened(),
    )
}

/// The answer to a resume of a stream whose writer died before its response.
fn writer_died(stream_id: &str) -> Response {
    tracing::warn!(stream = %stream_id, "resume of a stream whose writer stopped before it answered");
    error(
        StatusCode::NOT_FOUND,
        codes::INTERNAL_ERROR,
        "the instance that ran this request stopped before it answered, and every event it \
         wrote has been delivered; the request's outcome is unknown (a job or task it started \
         can still be read by its id)",
    )
}

/// Replays `(after, upto]` of a stream from the store into `out`; returns the last seq read.
async fn replay_range(
    state: &HttpState,
    session: &str,
    stream_id: &str,
    after: u64,
    upto: u64,
    out: &mut Vec<Bytes>,
) -> Result<u64, Response> {
    let mut cursor = after;
    while cursor < upto {
        match state
            .events
            .replay_after(session, stream_id, cursor, REPLAY_PAGE)
            .await
        {
            Ok(Replay::Events(evs)) => {
                let n = evs.len();
                for e in evs {
                    if e.seq > upto {
                        return Ok(cursor);
                    }
                    cursor = e.seq;
                    out.push(sse::event(
                        &event_id(stream_id, e.seq),
                        e.payload.as_bytes(),
                    ));
                }
                if n < REPLAY_PAGE {
                    break;
                }
            }
            Ok(Replay::Gone { oldest_retained }) => {
                return Err(error(
                    StatusCode::GONE,
                    codes::INVALID_REQUEST,
                    &format!(
                        "events after {} are no longer retained (oldest kept: {}); the stream \
                         cannot be resumed without a gap",
                        event_id(stream_id, after),
                        event_id(stream_id, oldest_retained)
                    ),
                ));
            }
            Ok(Replay::UnknownStream) => {
                return Err(error(
                    StatusCode::NOT_FOUND,
                    codes::INVALID_REQUEST,
                    "unknown Last-Event-ID for this session",
                ));
            }
            Err(e) => {
                tracing::error!(error = %e, "replay failed");
                return Err(error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    codes::INTERNAL_ERROR,
                    "event store unavailable",
                ));
            }
        }
    }
    Ok(cursor)
}

/// Whether the replayed events end with a response (a request stream's last message).
fn ends_with_response(events: &[Bytes]) -> bool {
    events.last().is_some_and(|e| is_response_event(e))
}

fn is_response_event(frame: &[u8]) -> bool {
    let text = String::from_utf8_lossy(frame);
    let data: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str::<serde_json::Value>(&data).is_ok_and(|v| {
        v.get("method").is_none() && (v.get("result").is_some() || v.get("error").is_some())
    })
}

/// Polls the store for events a request running on another instance appends to `stream_id`,
/// until its response is delivered or the client goes away.
fn follow_store(
    state: Arc<HttpState>,
    session: String,
    stream_id: String,
    mut cursor: u64,
) -> super::session::LiveRx {
    // Bounded: a client that stops reading stops the polling (backpressure), not memory.
    let (tx, rx) = super::live::channel(state.cfg.connection_backlog);
    tokio::spawn(async move {
        let mut wait = std::time::Duration::from_millis(20);
        let mut quiet_since = tokio::time::Instant::now();
        while !tx.is_closed() {
            match state
                .events
                .replay_after(&session, &stream_id, cursor, REPLAY_PAGE)
                .await
            {
                Ok(Replay::Events(evs)) if !evs.is_empty() => {
                    wait = std::time::Duration::from_millis(20);
                    quiet_since = tokio::time::Instant::now();
                    for e in evs {
                        cursor = e.seq;
                        let frame = sse::event(&event_id(&stream_id, e.seq), e.payload.as_bytes());
                        let done = is_response_event(&frame);
                        let item = super::session::SseItem::Event {
                            seq: e.seq,
                            data: e.payload.into(),
                            last: done,
                        };
                        if !tx.send(item).await || done {
                            return;
                        }
                    }
                }
                Ok(Replay::Events(_)) => {
                    // Back off while nothing happens, up to half a second.
                    wait = (wait * 2).min(std::time::Duration::from_millis(500));
                    // Quiet for a beat: is anyone still writing? If not, end the stream (the
                    // client's next resume is told why).
                    if quiet_since.elapsed() >= writer::BEAT {
                        if writer::writer_gone(&state, &stream_id).await {
                            return;
                        }
                        quiet_since = tokio::time::Instant::now();
                    }
                }
                Ok(Replay::Gone { .. } | Replay::UnknownStream) | Err(_) => return,
            }
            tokio::time::sleep(wait).await;
        }
    });
    rx
}
