//! The spans: `OtelTracer` implements `staunch_server::trace::Tracer` with the OpenTelemetry
//! SDK.
//!
//! - A request span (kind `SERVER`) is named `{method} {tool}` (the MCP semantic conventions'
//!   shape) and is the child of the `traceparent` in the request's `_meta` when that is valid;
//!   W3C trace-context parsing is the SDK's propagator, so an invalid header is ignored and the
//!   span starts a new trace. The cancel it received is a `cancelled` event with its reason,
//!   stamped when the cancel arrived.
//! - A job attempt span (kind `CONSUMER`) starts its own trace and is linked to the request
//!   span that started the job, from the `traceparent` recorded with the job: attempts may run
//!   long after, and on another instance.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanKind, Status, TraceContextExt, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, Span};
use serde_json::Value;
use staunch_server::protocol::RequestId;
use staunch_server::trace::{
    AttemptSpan, JobAttempt, RequestEnd, RequestSpan, RequestStart, Tracer,
};

/// Attribute keys. `mcp.*`, `jsonrpc.*` and `gen_ai.tool.name` follow the OpenTelemetry MCP
/// semantic conventions; the rest are staunch's own.
pub mod attr {
    /// The JSON-RPC method (`tools/call`, …).
    pub const METHOD: &str = "mcp.method.name";
    /// The tool called, for `tools/call`.
    pub const TOOL: &str = "gen_ai.tool.name";
    /// The JSON-RPC request id, as text.
    pub const REQUEST_ID: &str = "jsonrpc.request.id";
    /// The MCP protocol version of the request, when known.
    pub const PROTOCOL_VERSION: &str = "mcp.protocol.version";
    /// The session as the lifecycle log names it (a hash: the session id is a credential).
    pub const SESSION_HASH: &str = "staunch.session.hash";
    /// `2025` (session era) or `2026` (stateless era).
    pub const ERA: &str = "staunch.era";
    /// How the request ended, as the lifecycle log names it (`ok`, `error`, `cancelled`, …).
    pub const OUTCOME: &str = "staunch.outcome";
    /// Why a `rejected` request was refused (`busy`, `duplicate_id`).
    pub const REJECTED_WHY: &str = "staunch.rejected.why";
    /// The panic message, for `panic`.
    pub const PANIC: &str = "staunch.panic";
    /// On the `cancelled` event: the cancel's reason, when it gave one.
    pub const CANCEL_REASON: &str = "reason";
    /// The job's id.
    pub const JOB_ID: &str = "staunch.job.id";
    /// The job's tool.
    pub const JOB_TOOL: &str = "staunch.job.tool";
    /// The attempt's number: 1 for the first run.
    pub const JOB_ATTEMPT: &str = "staunch.job.attempt";
    /// What the attempt left the job in: `succeeded`, `failed`, `cancelled`, `lease_lost`, …
    pub const JOB_STATE: &str = "staunch.job.state";
    /// Why a `failed` attempt failed: `error`, `max_runtime` or `panic`.
    pub const JOB_REASON: &str = "staunch.job.reason";
}

/// The name of the cancel's span event.
pub const CANCEL_EVENT: &str = "cancelled";

/// Outcomes that mark a request span as failed (the rest leave its status unset).
const FAILED_OUTCOMES: &[&str] = &["error", "panic", "deadline", "aborted", "rejected"];

pub(crate) struct OtelTracer {
    pub(crate) tracer: SdkTracer,
    pub(crate) propagator: TraceContextPropagator,
}

/// `traceparent`/`tracestate` read from `_meta` (string values only; anything else is absent).
struct MetaCarrier<'a>(Option<&'a serde_json::Map<String, Value>>);

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0?.get(key)?.as_str()
    }
    fn keys(&self) -> Vec<&str> {
        self.0
            .map_or_else(Vec::new, |m| m.keys().map(String::as_str).collect())
    }
}

impl OtelTracer {
    /// The remote parent in `_meta`, or an empty context (a new trace) when there is none or
    /// it is invalid.
    fn parent(&self, meta: Option<&Value>) -> Context {
        self.propagator
            .extract(&MetaCarrier(meta.and_then(Value::as_object)))
    }

    /// The span context a recorded `traceparent` names, if valid.
    fn linked(&self, traceparent: &str) -> Option<SpanContext> {
        let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
        let cx = self.propagator.extract(&carrier);
        let sc = cx.span().span_context().clone();
        sc.is_valid().then_some(sc)
    }
}

impl Tracer for OtelTracer {
    fn request(&self, start: &RequestStart<'_>) -> Box<dyn RequestSpan> {
        let name: Cow<'static, str> = match start.tool {
            Some(t) => format!("{} {t}", start.method).into(),
            None => start.method.to_string().into(),
        };
        let mut attrs = vec![
            KeyValue::new(attr::METHOD, start.method.to_string()),
            KeyValue::new(attr::REQUEST_ID, id_text(start.request_id)),
            KeyValue::new(attr::ERA, start.era),
        ];
        if let Some(t) = start.tool {
            attrs.push(KeyValue::new(attr::TOOL, t.to_string()));
        }
        if let Some(v) = start.protocol_version {
            attrs.push(KeyValue::new(attr::PROTOCOL_VERSION, v.to_string()));
        }
        if let Some(h) = start.session_hash {
            attrs.push(KeyValue::new(attr::SESSION_HASH, h.to_string()));
        }
        let parent = self.parent(start.meta);
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attrs)
            .start_with_context(&self.tracer, &parent);
        Box::new(OtelRequestSpan {
            span: Mutex::new(span),
        })
    }

    fn job_attempt(&self, attempt: &JobAttempt<'_>) -> Box<dyn AttemptSpan> {
        let links = attempt
            .link
            .and_then(|tp| self.linked(tp))
            .map(|sc| vec![Link::with_context(sc)])
            .unwrap_or_default();
        let span = self
            .tracer
            .span_builder(format!("job {}", attempt.tool))
            .with_kind(SpanKind::Consumer)
            .with_links(links)
            .with_attributes(vec![
                KeyValue::new(attr::JOB_ID, attempt.job_id.to_string()),
                KeyValue::new(attr::JOB_TOOL, attempt.tool.to_string()),
                KeyValue::new(attr::JOB_ATTEMPT, i64::from(attempt.attempt)),
            ])
            // A new trace: the job outlives the request (and may run elsewhere).
            .start_with_context(&self.tracer, &Context::new());
        Box::new(OtelAttemptSpan {
            span: Mutex::new(span),
        })
    }
}

fn id_text(id: &RequestId) -> String {
    match id {
        RequestId::Number(n) => n.to_string(),
        RequestId::String(s) => s.clone(),
    }
}

struct OtelRequestSpan {
    span: Mutex<Span>,
}

impl RequestSpan for OtelRequestSpan {
    fn traceparent(&self) -> Option<String> {
        let span = self.span.lock().unwrap_or_else(|p| p.into_inner());
        let sc = span.span_context();
        sc.is_valid().then(|| {
            format!(
                "00-{}-{}-{:02x}",
                sc.trace_id(),
                sc.span_id(),
                sc.trace_flags().to_u8()
            )
        })
    }

    fn end(&self, end: &RequestEnd<'_>) {
        let mut span = self.span.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = &end.cancel {
            let attrs = c
                .reason
                .map(|r| vec![KeyValue::new(attr::CANCEL_REASON, r.to_string())])
                .unwrap_or_default();
            span.add_event_with_timestamp(CANCEL_EVENT, c.at, attrs);
        }
        span.set_attribute(KeyValue::new(attr::OUTCOME, end.outcome.to_string()));
        if let Some(w) = end.rejected_why {
            span.set_attribute(KeyValue::new(attr::REJECTED_WHY, w.to_string()));
        }
        if let Some(p) = end.panic {
            span.set_attribute(KeyValue::new(attr::PANIC, p.to_string()));
        }
        if FAILED_OUTCOMES.contains(&end.outcome) {
            span.set_status(Status::error(end.outcome.to_string()));
        }
        span.end();
    }
}

struct OtelAttemptSpan {
    span: Mutex<Span>,
}

impl AttemptSpan for OtelAttemptSpan {
    fn end(&self, state: &str, reason: Option<&str>) {
        let mut span = self.span.lock().unwrap_or_else(|p| p.into_inner());
        span.set_attribute(KeyValue::new(attr::JOB_STATE, state.to_string()));
        if let Some(r) = reason {
            span.set_attribute(KeyValue::new(attr::JOB_REASON, r.to_string()));
        }
        if state != "succeeded" && state != "cancelled" {
            span.set_status(Status::error(state.to_string()));
        }
        span.end();
    }
}
