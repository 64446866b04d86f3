//! The only ways a request's token fires: [`cancel`] (a client's cancel, or the stream that
//! carried the request closing), [`cancel_quietly`], [`cancel_conn`] (the connection or
//! session ended) and [`cancel_everything`] (shutdown). Each records why under the Registry's
//! lock and writes `request.cancel_received` there, so the cancel line always precedes the
//! request's end line.

use staunch_lifecycle::{Event, IgnoredWhy};
use staunch_protocol::RequestId;

use super::ms;
use crate::conn::{Conn, RequestKey};
use crate::registry::{CancelReason, CancelResult, Routed};
use crate::shared::ServerInner;

/// Cancels one request of a connection for `reason`; logs what happened. Unknown ids are
/// ignored (and logged as such).
pub(crate) fn cancel(
    server: &ServerInner,
    conn: &Conn,
    id: &RequestId,
    reason: CancelReason,
    not_cancellable: bool,
) -> CancelResult {
    let key = RequestKey {
        conn: conn.id,
        id: id.clone(),
    };
    let text = reason.log_text().map(str::to_owned);
    let result = server.registry.cancel(&key, reason, |routed| {
        log_cancel(server, &conn.log_label, id, text.as_deref(), routed);
    });
    match result {
        // No response will follow: the request's stream (HTTP) can end now. (Not with the
        // injected `answer_after_cancel`, whose answer goes out on it: see `run`.)
        #[cfg(debug_assertions)]
        CancelResult::Routed if crate::fault_injected("answer_after_cancel") => {}
        CancelResult::Routed => conn.sink.end_stream(id),
        CancelResult::Repeated => {}
        CancelResult::Unknown => {
            let why = if not_cancellable {
                IgnoredWhy::NotCancellable
            } else {
                IgnoredWhy::UnknownId
            };
            tracing::info!(conn = %conn.log_label, request_id = %id, why = why.as_str(), "cancel ignored");
            server.log.event(
                &conn.log_label,
                id,
                &Event::CancelIgnored {
                    why: Some(why.as_str().into()),
                    reason: text.as_deref().map(Into::into),
                },
            );
        }
    }
    result
}

/// Cancels a request if it is still in flight, saying nothing when it is not (a stream that
/// closed right after its response).
pub(crate) fn cancel_quietly(
    server: &ServerInner,
    conn: &Conn,
    id: &RequestId,
    reason: CancelReason,
) {
    let key = RequestKey {
        conn: conn.id,
        id: id.clone(),
    };
    let text = reason.log_text().map(str::to_owned);
    if server.registry.cancel(&key, reason, |routed| {
        log_cancel(server, &conn.log_label, id, text.as_deref(), routed);
    }) == CancelResult::Routed
    {
        conn.sink.end_stream(id);
    }
}

/// Cancels every request of connection `conn` (its session or transport closed).
pub(crate) fn cancel_conn(server: &ServerInner, conn: &Conn, reason: CancelReason) {
    let text = reason.log_text().map(str::to_owned);
    let mut routed_ids = Vec::new();
    server.registry.cancel_conn(conn.id, reason, |id, routed| {
        log_cancel(server, &conn.log_label, id, text.as_deref(), routed);
        routed_ids.push(id.clone());
    });
    for id in routed_ids {
        conn.sink.end_stream(&id);
    }
}

/// Cancels everything in flight (the server is shutting down). Returns how many requests it
/// reached. Their connections end their streams when the requests end.
pub(crate) fn cancel_everything(server: &ServerInner) -> usize {
    let mut n = 0;
    server
        .registry
        .cancel_all(CancelReason::Shutdown, |key, label, routed| {
            n += 1;
            log_cancel(server, label, &key.id, Some("server shutdown"), routed);
        });
    n
}

fn log_cancel(
    server: &ServerInner,
    label: &str,
    id: &RequestId,
    reason: Option<&str>,
    routed: Routed,
) {
    server.log.event(
        label,
        id,
        &Event::CancelReceived {
            reason: reason.map(Into::into),
            since_start_ms: Some(ms(routed.since_start)),
        },
    );
    if routed.ignored {
        server.log.event(
            label,
            id,
            &Event::CancelIgnored {
                why: Some(IgnoredWhy::Atomic.as_str().into()),
                reason: reason.map(Into::into),
            },
        );
    }
}
