//! Trace hooks: a span per request and per job attempt, for an exporter this crate does not
//! know (`staunch-otel` implements them with OpenTelemetry; `staunch serve --otlp-endpoint`).
//!
//! The hooks sit at the same points as the lifecycle log — a request's start, its end (with
//! the outcome the log names and the cancel it received, if any) — so a span and the log
//! lines of one request always agree. [`Traces`] is a cheap handle like [`crate::Metrics`]:
//! disabled (the default) it holds nothing, and each hook is one branch on a `None`, before
//! anything is built or allocated. The server crate itself stays free of OpenTelemetry.
//!
//! Trace context comes in the request's `params._meta` (`traceparent`, `tracestate`; both
//! eras). The implementation reads it from [`RequestStart::meta`] and decides what is valid
//! (W3C trace-context rules: anything invalid is ignored, never an error). A request span's
//! own context ([`RequestSpan::traceparent`]) is what a job started by the request stores, so
//! the job's attempt spans can link back to it ([`JobAttempt::link`]).

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use staunch_protocol::RequestId;

/// Makes spans. Implemented outside this crate (`staunch-otel`).
pub trait Tracer: Send + Sync + 'static {
    /// A request started (or was answered or refused at once; then `end` follows directly).
    fn request(&self, start: &RequestStart<'_>) -> Box<dyn RequestSpan>;
    /// A job attempt started.
    fn job_attempt(&self, attempt: &JobAttempt<'_>) -> Box<dyn AttemptSpan>;
}

/// What is known when a request starts.
#[derive(Debug)]
pub struct RequestStart<'a> {
    /// The JSON-RPC method (`tools/call`, `tools/list`, …).
    pub method: &'a str,
    /// The tool, for `tools/call`.
    pub tool: Option<&'a str>,
    /// The JSON-RPC id as the client sent it.
    pub request_id: &'a RequestId,
    /// A short hash of the HTTP session's id ([`crate::session_hash`]); never the id itself
    /// (a credential). `None` for stdio and stateless requests.
    pub session_hash: Option<&'a str>,
    /// The request's protocol era: `2025` (a session) or `2026` (stateless), as the metrics
    /// label it.
    pub era: &'static str,
    /// The negotiated (2025) or declared (2026-07-28) protocol version.
    pub protocol_version: Option<&'a str>,
    /// The request's `params._meta`, where `traceparent`/`tracestate` travel.
    pub meta: Option<&'a Value>,
}

/// How a request ended.
#[derive(Debug)]
pub struct RequestEnd<'a> {
    /// As the lifecycle log names it: ok, error, cancelled, late_finish, aborted, deadline,
    /// panic, rejected, input_required.
    pub outcome: &'a str,
    /// The cancel it received, if any (its own deadline included).
    pub cancel: Option<CancelSeen<'a>>,
    /// Why it was refused (`busy`, `duplicate_id`), for `rejected`.
    pub rejected_why: Option<&'a str>,
    /// The panic message, for `panic`.
    pub panic: Option<&'a str>,
}

/// A cancel as a span event: when it arrived and why.
#[derive(Debug, Clone, Copy)]
pub struct CancelSeen<'a> {
    /// When the cancel arrived.
    pub at: SystemTime,
    /// The client's reason, `stream closed`, `session deleted`, `server shutdown`, `deadline`…
    pub reason: Option<&'a str>,
}

/// One request's span.
pub trait RequestSpan: Send + Sync {
    /// This span's context as a W3C `traceparent` value, for work that outlives the request
    /// (a job records it and links its attempts to it).
    fn traceparent(&self) -> Option<String>;
    /// Ends the span.
    fn end(&self, end: &RequestEnd<'_>);
}

/// What is known when a job attempt starts.
#[derive(Debug)]
pub struct JobAttempt<'a> {
    /// The job's id.
    pub job_id: &'a str,
    /// The job's tool.
    pub tool: &'a str,
    /// The attempt's number: 1 for the first run.
    pub attempt: u32,
    /// The `traceparent` of the request span that started the job, as recorded with it.
    pub link: Option<&'a str>,
}

/// One job attempt's span.
pub trait AttemptSpan: Send + Sync {
    /// Ends the span with the state the attempt left the job in: succeeded, failed,
    /// cancelled — or `lease_lost` / `released` when this attempt recorded nothing.
    fn end(&self, state: &str, reason: Option<&str>);
}

/// The handle every hook goes through. Cheap to clone; disabled by default.
#[derive(Clone, Default)]
pub struct Traces {
    tracer: Option<Arc<dyn Tracer>>,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces")
            .field("enabled", &self.tracer.is_some())
            .finish()
    }
}

impl Traces {
    /// No spans at all.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Spans made by `tracer`.
    pub fn new(tracer: Arc<dyn Tracer>) -> Self {
        Self {
            tracer: Some(tracer),
        }
    }

    /// Whether a tracer makes spans.
    pub fn enabled(&self) -> bool {
        self.tracer.is_some()
    }

    /// A request span, or `None` when disabled (the caller builds nothing then: `start` is
    /// only called with a tracer present).
    pub(crate) fn request<'a>(
        &self,
        start: impl FnOnce() -> RequestStartOwned<'a>,
    ) -> Option<Box<dyn RequestSpan>> {
        let t = self.tracer.as_ref()?;
        let s = start();
        Some(t.request(&s.as_ref()))
    }

    /// A job attempt span, or `None` when disabled.
    pub fn job_attempt(&self, attempt: &JobAttempt<'_>) -> Option<Box<dyn AttemptSpan>> {
        Some(self.tracer.as_ref()?.job_attempt(attempt))
    }
}

/// [`RequestStart`]'s fields gathered by the request core (borrowed from what it holds).
pub(crate) struct RequestStartOwned<'a> {
    pub(crate) method: &'a str,
    pub(crate) tool: Option<&'a str>,
    pub(crate) request_id: &'a RequestId,
    pub(crate) session_hash: Option<&'a str>,
    pub(crate) era: &'static str,
    pub(crate) protocol_version: Option<String>,
    pub(crate) meta: Option<&'a Value>,
}

impl RequestStartOwned<'_> {
    fn as_ref(&self) -> RequestStart<'_> {
        RequestStart {
            method: self.method,
            tool: self.tool,
            request_id: self.request_id,
            session_hash: self.session_hash,
            era: self.era,
            protocol_version: self.protocol_version.as_deref(),
            meta: self.meta,
        }
    }
}
