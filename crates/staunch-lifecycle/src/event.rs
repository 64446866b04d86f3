//! The events of a request's life, as one typed enum for the writer (`staunch-server`) and the
//! reader (`staunch-audit`).
//!
//! Strings are `Cow`: the writer borrows what the request already holds (no copy per line),
//! the reader owns what it parsed. Optional fields are optional in the format
//! (`docs/lifecycle-log.md`) because other servers may emit only the minimal subset.

use std::borrow::Cow;

/// Event names on the wire.
pub mod names {
    /// The request was accepted and its task spawned.
    pub const START: &str = "request.start";
    /// A cancel reached an in-flight request.
    pub const CANCEL_RECEIVED: &str = "request.cancel_received";
    /// A cancel that did not stop anything.
    pub const CANCEL_IGNORED: &str = "request.cancel_ignored";
    /// The handler ignored its cancel for the whole grace period and was dropped.
    pub const ABORTED: &str = "request.aborted";
    /// The request's task is gone.
    pub const END: &str = "request.end";
    /// The writer fell behind and dropped `count` lines: the log is incomplete.
    pub const DROPPED: &str = "log.dropped";
    /// `staunch proxy`: the request was forwarded to an upstream server under a new id.
    pub const UPSTREAM_SENT: &str = "upstream.sent";
    /// `staunch proxy`: the upstream request was cancelled (the downstream one was).
    pub const UPSTREAM_CANCEL: &str = "upstream.cancel_sent";
    /// `staunch proxy`: the upstream answered or reported progress after its cancel; dropped.
    pub const UPSTREAM_LATE: &str = "upstream.late";
    /// `staunch proxy`: the upstream process that served only this (cancelled) request was
    /// ended by the stop policy (`kill_after_cancel`).
    pub const UPSTREAM_STOPPED: &str = "upstream.stopped";
}

/// What a proxy did with a request's upstream twin ([`Event::Upstream`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamStep {
    /// Forwarded under `upstream_id`.
    Sent,
    /// Cancelled upstream (`notifications/cancelled`, or a closed stream for a 2026 upstream).
    CancelSent,
    /// Something arrived after the cancel (`late`: `response` or `progress`) and was dropped.
    Late,
}

/// How a request ended (`request.end`'s `outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The handler returned a result; it was sent.
    Ok,
    /// The handler returned an error (tool error or JSON-RPC error); it was sent.
    Error,
    /// The handler observed its cancel and stopped; nothing was sent.
    Cancelled,
    /// The handler finished with a result after its cancel; nothing was sent (orphaned work
    /// that completed).
    LateFinish,
    /// The handler ignored its cancel and was aborted after the grace period.
    Aborted,
    /// The tool's own deadline passed first; an error was sent.
    Deadline,
    /// The handler panicked; an internal error was sent (unless it had been cancelled).
    Panic,
    /// Refused before running (a limit, a duplicate id); an error was sent.
    Rejected,
    /// The stateless era: the handler needs input from the client (an input-required round);
    /// the `InputRequiredResult` was sent and the client retries with the answers.
    InputRequired,
}

impl Outcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::LateFinish => "late_finish",
            Outcome::Aborted => "aborted",
            Outcome::Deadline => "deadline",
            Outcome::Panic => "panic",
            Outcome::Rejected => "rejected",
            Outcome::InputRequired => "input_required",
        }
    }

    /// Parses a wire name; `None` for outcomes other servers may invent.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ok" => Outcome::Ok,
            "error" => Outcome::Error,
            "cancelled" => Outcome::Cancelled,
            "late_finish" => Outcome::LateFinish,
            "aborted" => Outcome::Aborted,
            "deadline" => Outcome::Deadline,
            "panic" => Outcome::Panic,
            "rejected" => Outcome::Rejected,
            "input_required" => Outcome::InputRequired,
            _ => return None,
        })
    }
}

/// Why a cancel did not stop anything (`request.cancel_ignored`'s `why`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IgnoredWhy {
    /// Never seen, or already finished.
    UnknownId,
    /// `initialize` may not be cancelled.
    NotCancellable,
    /// The tool's shape ignores cancels: the write finishes.
    Atomic,
}

impl IgnoredWhy {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            IgnoredWhy::UnknownId => "unknown_id",
            IgnoredWhy::NotCancellable => "not_cancellable",
            IgnoredWhy::Atomic => "atomic",
        }
    }
}

/// One step in the life of a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Event<'a> {
    /// `request.start`.
    Start {
        /// The JSON-RPC method.
        method: Option<Cow<'a, str>>,
        /// The tool, for `tools/call`.
        tool: Option<Cow<'a, str>>,
        /// First 16 hex digits of SHA-256 of the canonical arguments, for `tools/call`.
        args_fingerprint: Option<Cow<'a, str>>,
        /// `quick`, `streaming`, `atomic` or `job`.
        shape: Option<Cow<'a, str>>,
        /// The protocol version the request was served in (a session's negotiated version,
        /// or a stateless request's own).
        protocol_version: Option<Cow<'a, str>>,
    },
    /// `request.cancel_received`.
    CancelReceived {
        /// Why: the client's own text, or `stream closed`, `session deleted`, `session
        /// expired`, `transport closed`, `server shutdown`.
        reason: Option<Cow<'a, str>>,
        /// How long the request had been running.
        since_start_ms: Option<u64>,
    },
    /// `request.cancel_ignored`.
    CancelIgnored {
        /// Why nothing was stopped (`unknown_id`, `not_cancellable`, `atomic`, or newer).
        why: Option<Cow<'a, str>>,
        /// The cancel's reason, as sent.
        reason: Option<Cow<'a, str>>,
    },
    /// `request.aborted`.
    Aborted {
        /// How long after the cancel the handler was dropped.
        since_cancel_ms: Option<u64>,
    },
    /// `request.end`.
    End {
        /// The JSON-RPC method.
        method: Option<Cow<'a, str>>,
        /// The tool, for `tools/call`.
        tool: Option<Cow<'a, str>>,
        /// How it ended (an [`Outcome`] name; other servers may write others).
        outcome: Cow<'a, str>,
        /// From start to end.
        duration_ms: Option<u64>,
        /// How long it ran past its cancel, when one was received.
        after_cancel_ms: Option<u64>,
        /// For `rejected`: which limit (`busy`, `duplicate_id`).
        why: Option<Cow<'a, str>>,
        /// For `panic`: the panic message.
        panic: Option<Cow<'a, str>>,
        /// An `atomic` tool finished after its cancel; its result was not sent.
        response_suppressed: bool,
    },
    /// `upstream.*` (`staunch proxy`): the request's twin on an upstream server.
    Upstream {
        /// Which step.
        step: UpstreamStep,
        /// The upstream's name.
        upstream: Cow<'a, str>,
        /// The id the proxy gave the request upstream.
        upstream_id: i64,
        /// For `Late`: `response` or `progress`.
        late: Option<Cow<'a, str>>,
    },
    /// `upstream.stopped` (`staunch proxy`, `kill_after_cancel`): the upstream process of a
    /// cancelled call was ended. It got `grace_ms` after its stdin closed; `killed` says it
    /// was still running then and its process group was killed (work that would have gone on).
    UpstreamStopped {
        /// The upstream's name.
        upstream: Cow<'a, str>,
        /// What it was given to exit on its own, in milliseconds.
        grace_ms: u64,
        /// Still running after the grace: its process group was killed.
        killed: bool,
    },
}

impl Event<'_> {
    /// The wire name of this event.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Start { .. } => names::START,
            Event::CancelReceived { .. } => names::CANCEL_RECEIVED,
            Event::CancelIgnored { .. } => names::CANCEL_IGNORED,
            Event::Aborted { .. } => names::ABORTED,
            Event::End { .. } => names::END,
            Event::Upstream { step, .. } => match step {
                UpstreamStep::Sent => names::UPSTREAM_SENT,
                UpstreamStep::CancelSent => names::UPSTREAM_CANCEL,
                UpstreamStep::Late => names::UPSTREAM_LATE,
            },
            Event::UpstreamStopped { .. } => names::UPSTREAM_STOPPED,
        }
    }
}
