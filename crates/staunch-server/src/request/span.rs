//! The request's span (when traces are on, [`crate::trace`]): what it starts with, and how
//! its end — the outcome and the cancel it received — is handed to the tracer. Called from
//! the same points as the lifecycle log's start and end lines.

use staunch_lifecycle::Outcome;
use staunch_protocol::Request;
use tokio::time::Instant;

use super::Origin;
use crate::trace::{CancelSeen, RequestEnd, RequestSpan, RequestStartOwned};

/// What a request span starts with (called only when spans are on).
pub(super) fn span_start<'a>(
    origin: &'a Origin,
    req: &'a Request,
    tool: Option<&'a str>,
    protocol_version: Option<String>,
) -> RequestStartOwned<'a> {
    RequestStartOwned {
        method: &req.method,
        tool,
        request_id: &req.id,
        // The hash the lifecycle log uses, never the session id (a credential).
        session_hash: origin.conn.owns_work.then_some(&*origin.conn.log_label),
        era: origin.peer.era_label(),
        protocol_version,
        meta: req.params.as_ref().and_then(|p| p.get("_meta")),
    }
}

pub(super) fn end_span(
    span: &dyn RequestSpan,
    outcome: Outcome,
    cancel: Option<(Instant, Option<String>)>,
    now: Instant,
    panic: Option<&str>,
) {
    let cancel = cancel.as_ref().map(|(at, reason)| CancelSeen {
        // The registry keeps a monotonic instant; the span wants wall-clock time.
        at: std::time::SystemTime::now()
            .checked_sub(now.saturating_duration_since(*at))
            .unwrap_or_else(std::time::SystemTime::now),
        reason: reason.as_deref(),
    });
    span.end(&RequestEnd {
        outcome: outcome.as_str(),
        cancel,
        rejected_why: None,
        panic,
    });
}
