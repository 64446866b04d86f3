//! Prometheus metrics (`staunch serve --metrics ADDR`), exposed in the OpenMetrics text format
//! by the `prometheus-client` crate.
//!
//! [`Metrics`] is a cheap handle that every hook goes through: disabled (the default) it holds
//! nothing and every hook is one branch on a `None`; enabled it holds the metric families. Call
//! sites are one line each — the request core (start, end, cancel → stop), the HTTP transport
//! (SSE streams, resumes, 410s), the event store's write-behind queue, and the job runtime
//! (lease losses, reaper actions, idempotency hits). Jobs by state are read from the store at
//! scrape time through a hook ([`Metrics::on_scrape`]), so they are right on every instance
//! whichever instance changed them.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `staunch_requests_in_flight` | gauge | `tool` (or the method), `era` (`2025` session, `2026` stateless) |
//! | `staunch_requests_total` | counter | `tool`, `era`, `outcome` (ok, error, cancelled, late_finish, aborted, deadline, panic, rejected, input_required) |
//! | `staunch_cancel_to_stop_seconds` | histogram | — (from the cancel to the handler's end) |
//! | `staunch_progress_sent_total`, `staunch_progress_coalesced_total` | counter | — |
//! | `staunch_sse_streams_open` | gauge | — |
//! | `staunch_sse_resumes_total` | counter | `result` (`replayed`, `gone` = 410) |
//! | `staunch_store_write_seconds` | histogram | — (one write-behind batch) |
//! | `staunch_write_behind_queue_depth` | gauge | — |
//! | `staunch_jobs` | gauge | `state` |
//! | `staunch_job_lease_losses_total` | counter | — |
//! | `staunch_job_reaper_actions_total` | counter | `action` (`requeued`, `failed`, `cancelled`, `purged`) |
//! | `staunch_idempotency_hits_total` | counter | — |
//! | `staunch_upstream_late_total` | counter | `upstream`, `tool`, `kind` (`progress`, `response`, `error`): what a proxied upstream sent after its call was cancelled — work that went on, or (`error`) a late answer saying it stopped |
//! | `staunch_upstream_stopped_total` | counter | `upstream`, `tool`, `how` (`exited`, `killed`): upstream processes of cancelled calls ended by the stop policy (`kill_after_cancel`); `killed` were still running after the grace |
//! | `staunch_upstream_parked` | gauge | `upstream`: calls parked while their 2026-07-28 client answers a question the (session-era) upstream asked in the middle of the call |
//! | `staunch_upstream_unanswered_total` | counter | `upstream`, `tool`: parked calls cancelled upstream because their client did not answer within `question_wait` |

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The media type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolEra {
    tool: String,
    era: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolEraOutcome {
    tool: String,
    era: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobStateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Action {
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamStopped {
    upstream: String,
    tool: String,
    how: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamName {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamTool {
    upstream: String,
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLate {
    upstream: String,
    tool: String,
    kind: &'static str,
}

/// Runs before every scrape (e.g. reads jobs by state from the store).
pub type ScrapeHook = Arc<dyn Fn(Metrics) -> BoxFuture<'static, ()> + Send + Sync>;

struct Families {
    registry: Registry,
    in_flight: Family<ToolEra, Gauge>,
    requests: Family<ToolEraOutcome, Counter>,
    cancel_to_stop: Histogram,
    progress_sent: Counter,
    progress_coalesced: Counter,
    sse_open: Gauge,
    resumes: Family<Kind, Counter>,
    answers: Family<AnswerLabel, Counter>,
    store_write: Histogram,
    queue_depth: Gauge,
    jobs: Family<JobStateLabel, Gauge>,
    lease_losses: Counter,
    reaper: Family<Action, Counter>,
    idempotency_hits: Counter,
    upstream_late: Family<UpstreamLate, Counter>,
    upstream_stopped: Family<UpstreamStopped, Counter>,
    upstream_parked: Family<UpstreamName, Gauge>,
    upstream_unanswered: Family<UpstreamTool, Counter>,
    hooks: Mutex<Vec<ScrapeHook>>,
    /// Method names seen on requests answered inline: a client chooses them (an unknown
    /// method is answered inline too), so their number is capped to keep series bounded.
    inline_methods: Mutex<std::collections::HashSet<String>>,
}

/// Distinct inline method labels before the rest are counted as `other`.
const MAX_INLINE_METHODS: usize = 64;

/// The metrics handle: disabled by default (every hook a no-op), cheap to clone.
#[derive(Clone, Default)]
pub struct Metrics(Option<Arc<Families>>);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Metrics(enabled)"
        } else {
            "Metrics(disabled)"
        })
    }
}

/// Job states, in the order they are exported (so a state with no jobs reads 0, not absent).
const JOB_STATES: [&str; 5] = ["queued", "running", "succeeded", "failed", "cancelled"];

impl Metrics {
    /// Hooks that do nothing.
    pub fn disabled() -> Self {
        Self(None)
    }

    /// Collecting metrics.
    pub fn enabled() -> Self {
        let f = Families {
            registry: Registry::default(),
            in_flight: Family::default(),
            requests: Family::default(),
            // 0.5 ms … ~12 s: a cooperative handler stops in milliseconds, an ignoring one
            // after the grace period (2 s by default).
            cancel_to_stop: Histogram::new(exponential_buckets(0.0005, 2.5, 12)),
            progress_sent: Counter::default(),
            progress_coalesced: Counter::default(),
            sse_open: Gauge::default(),
            resumes: Family::default(),
            answers: Family::default(),
            // 50 µs … ~1.6 s: one batched transaction, fsync included.
            store_write: Histogram::new(exponential_buckets(0.00005, 2.0, 16)),
            queue_depth: Gauge::default(),
            jobs: Family::default(),
            lease_losses: Counter::default(),
            reaper: Family::default(),
            idempotency_hits: Counter::default(),
            upstream_late: Family::default(),
            upstream_stopped: Family::default(),
            upstream_parked: Family::default(),
            upstream_unanswered: Family::default(),
            hooks: Mutex::new(Vec::new()),
            inline_methods: Mutex::new(std::collections::HashSet::new()),
        };
        let mut f = f;
        let r = &mut f.registry;
        r.register(
            "staunch_requests_in_flight",
            "Requests in flight, by tool (or method) and protocol era.",
            f.in_flight.clone(),
        );
        r.register(
            "staunch_requests",
            "Requests ended, by tool (or method), era and outcome.",
            f.requests.clone(),
        );
        r.register(
            "staunch_cancel_to_stop_seconds",
            "Time from a request's cancel to its handler's end.",
            f.cancel_to_stop.clone(),
        );
        r.register(
            "staunch_progress_sent",
            "Progress notifications sent.",
            f.progress_sent.clone(),
        );
        r.register(
            "staunch_progress_coalesced",
            "Progress reports coalesced by the rate limit (never sent).",
            f.progress_coalesced.clone(),
        );
        r.register(
            "staunch_sse_streams_open",
            "SSE response streams open.",
            f.sse_open.clone(),
        );
        r.register(
            "staunch_sse_resumes",
            "Last-Event-ID resumes: replayed, or gone (410).",
            f.resumes.clone(),
        );
        r.register(
            "staunch_http_answers",
            "2025 session requests by how they were answered: plain (one JSON body, nothing \
             stored), upgraded (planned plain, became a stream) or stream (a stored SSE stream).",
            f.answers.clone(),
        );
        r.register(
            "staunch_store_write_seconds",
            "Latency of one write-behind batch to the event store.",
            f.store_write.clone(),
        );
        r.register(
            "staunch_write_behind_queue_depth",
            "Event-store writes queued behind the batch being written.",
            f.queue_depth.clone(),
        );
        r.register(
            "staunch_jobs",
            "Jobs in the store, by state (read at scrape time).",
            f.jobs.clone(),
        );
        r.register(
            "staunch_job_lease_losses",
            "Job attempts whose lease was lost (their outcome discarded).",
            f.lease_losses.clone(),
        );
        r.register(
            "staunch_job_reaper_actions",
            "Jobs moved by the reaper (expired leases) or purged after retention.",
            f.reaper.clone(),
        );
        r.register(
            "staunch_idempotency_hits",
            "Job starts answered with an existing job (idempotency key or in-flight dedupe).",
            f.idempotency_hits.clone(),
        );
        r.register(
            "staunch_upstream_late",
            "What a proxied upstream sent after its call was cancelled (its work went on).",
            f.upstream_late.clone(),
        );
        r.register(
            "staunch_upstream_stopped",
            "Upstream processes of cancelled calls ended by the stop policy (killed: still \
             running after the grace).",
            f.upstream_stopped.clone(),
        );
        r.register(
            "staunch_upstream_parked",
            "Calls parked while their 2026-07-28 client answers the upstream's question.",
            f.upstream_parked.clone(),
        );
        r.register(
            "staunch_upstream_unanswered",
            "Parked calls cancelled upstream: their client did not answer within the wait.",
            f.upstream_unanswered.clone(),
        );
        Self(Some(Arc::new(f)))
    }

    /// A request was admitted. `era` is the label of the request's era (`2025`, `2026`).
    pub fn request_started(&self, tool: &str, era: &'static str) {
        if let Some(f) = &self.0 {
            f.in_flight.get_or_create(&tool_era(tool, era)).inc();
        }
    }

    /// A request ended with `outcome` (the lifecycle log's word). `after_cancel`: how long its
    /// handler ran after the cancel; `progress`: (sent, coalesced) notifications.
    pub fn request_ended(
        &self,
        tool: &str,
        era: &'static str,
        outcome: &'static str,
        after_cancel: Option<Duration>,
        progress: (u64, u64),
    ) {
        let Some(f) = &self.0 else { return };
        f.in_flight.get_or_create(&tool_era(tool, era)).dec();
        f.count(tool, era, outcome);
        if let Some(d) = after_cancel {
            f.cancel_to_stop.observe(d.as_secs_f64());
        }
        f.progress_sent.inc_by(progress.0);
        f.progress_coalesced.inc_by(progress.1);
    }

    /// A request answered without being admitted (busy, duplicate id): counted, never in
    /// flight.
    pub fn request_answered(&self, tool: &str, era: &'static str, outcome: &'static str) {
        if let Some(f) = &self.0 {
            f.count(tool, era, outcome);
        }
    }

    /// A request answered inline (cheap methods, and every unknown method): counted under its
    /// method while fewer than 64 distinct ones were seen, as `other` after that.
    pub fn request_answered_inline(&self, method: &str, era: &'static str, outcome: &'static str) {
        let Some(f) = &self.0 else { return };
        let known = {
            let mut seen = f.inline_methods.lock().unwrap_or_else(|p| p.into_inner());
            seen.contains(method)
                || (seen.len() < MAX_INLINE_METHODS && seen.insert(method.to_owned()))
        };
        f.count(if known { method } else { "other" }, era, outcome);
    }

    /// An SSE response stream opened; it counts as open until the guard is dropped.
    pub fn sse_stream_opened(&self) -> StreamGuard {
        if let Some(f) = &self.0 {
            f.sse_open.inc();
        }
        StreamGuard(self.clone())
    }

    /// How a 2025 session request was answered over HTTP: `plain`, `upgraded` or `stream`.
    pub fn http_answer(&self, kind: &'static str) {
        if let Some(f) = &self.0 {
            f.answers.get_or_create(&AnswerLabel { kind }).inc();
        }
    }

    /// A `Last-Event-ID` resume: replayed, or answered 410 Gone.
    pub fn sse_resume(&self, gone: bool) {
        if let Some(f) = &self.0 {
            let result = if gone { "gone" } else { "replayed" };
            f.resumes.get_or_create(&Kind { result }).inc();
        }
    }

    /// One write-behind batch reached the store in `took`; `queued` writes wait behind it.
    pub fn store_write(&self, took: Duration, queued: usize) {
        if let Some(f) = &self.0 {
            f.store_write.observe(took.as_secs_f64());
            f.queue_depth.set(i64::try_from(queued).unwrap_or(i64::MAX));
        }
    }

    /// Jobs by state, as the store counts them (states not listed are 0).
    pub fn set_jobs_by_state<'a>(&self, counts: impl IntoIterator<Item = (&'a str, u64)>) {
        let Some(f) = &self.0 else { return };
        let counts: Vec<(&str, u64)> = counts.into_iter().collect();
        for state in JOB_STATES {
            let n = counts
                .iter()
                .find(|(s, _)| *s == state)
                .map_or(0, |(_, n)| *n);
            f.jobs
                .get_or_create(&JobStateLabel { state })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// A job attempt lost its lease.
    pub fn job_lease_lost(&self) {
        if let Some(f) = &self.0 {
            f.lease_losses.inc();
        }
    }

    /// The reaper moved (or purged) `n` jobs; `action` is `requeued`, `failed`, `cancelled` or
    /// `purged`.
    pub fn job_reaped(&self, action: &'static str, n: u64) {
        if let Some(f) = &self.0
            && n > 0
        {
            f.reaper.get_or_create(&Action { action }).inc_by(n);
        }
    }

    /// A proxied upstream sent `kind` (`progress` or `response`) for a call of `tool` after the
    /// call was cancelled: orphaned upstream work. Upstream names come from the configuration
    /// and tools from the upstream's own list, so the series stay bounded.
    pub fn upstream_late(&self, upstream: &str, tool: &str, kind: &'static str) {
        if let Some(f) = &self.0 {
            f.upstream_late
                .get_or_create(&UpstreamLate {
                    upstream: upstream.to_string(),
                    tool: tool.to_string(),
                    kind,
                })
                .inc();
        }
    }

    /// The stop policy ended the upstream process of a cancelled call of `tool`: it exited
    /// within the grace (`killed` false) or was still running and its group was killed.
    pub fn upstream_stopped(&self, upstream: &str, tool: &str, killed: bool) {
        if let Some(f) = &self.0 {
            f.upstream_stopped
                .get_or_create(&UpstreamStopped {
                    upstream: upstream.to_string(),
                    tool: tool.to_string(),
                    how: if killed { "killed" } else { "exited" },
                })
                .inc();
        }
    }

    /// A call of `upstream` was parked (`delta` 1) while its 2026-07-28 client answers the
    /// upstream's question, or left the lot (-1): answered, or given up.
    pub fn upstream_parked(&self, upstream: &str, delta: i64) {
        if let Some(f) = &self.0 {
            f.upstream_parked
                .get_or_create(&UpstreamName {
                    upstream: upstream.to_string(),
                })
                .inc_by(delta);
        }
    }

    /// A parked call of `tool` was cancelled upstream: its client did not answer in time.
    pub fn upstream_unanswered(&self, upstream: &str, tool: &str) {
        if let Some(f) = &self.0 {
            f.upstream_unanswered
                .get_or_create(&UpstreamTool {
                    upstream: upstream.to_string(),
                    tool: tool.to_string(),
                })
                .inc();
        }
    }

    /// A job start found an existing job (idempotency key or in-flight dedupe).
    pub fn idempotency_hit(&self) {
        if let Some(f) = &self.0 {
            f.idempotency_hits.inc();
        }
    }

    /// Runs `hook` before every scrape.
    pub fn on_scrape(&self, hook: ScrapeHook) {
        if let Some(f) = &self.0 {
            f.hooks.lock().unwrap_or_else(|p| p.into_inner()).push(hook);
        }
    }

    /// Runs the scrape hooks, then encodes every metric (empty when disabled).
    pub async fn scrape(&self) -> String {
        let Some(f) = &self.0 else {
            return String::new();
        };
        let hooks: Vec<ScrapeHook> = f.hooks.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for h in hooks {
            h(self.clone()).await;
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &f.registry);
        out
    }
}

impl Families {
    fn count(&self, tool: &str, era: &'static str, outcome: &'static str) {
        self.requests
            .get_or_create(&ToolEraOutcome {
                tool: tool.to_owned(),
                era,
                outcome,
            })
            .inc();
    }
}

fn tool_era(tool: &str, era: &'static str) -> ToolEra {
    ToolEra {
        tool: tool.to_owned(),
        era,
    }
}

/// Counts an SSE stream as open until dropped.
#[derive(Debug)]
pub struct StreamGuard(Metrics);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(f) = &(self.0).0 {
            f.sse_open.dec();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn disabled_metrics_collect_nothing() {
        let m = Metrics::disabled();
        m.request_started("echo", "2025");
        m.request_ended("echo", "2025", "ok", None, (1, 2));
        drop(m.sse_stream_opened());
        assert_eq!(m.scrape().await, "");
    }

    #[tokio::test]
    async fn hooks_show_up_in_the_exposition() {
        let m = Metrics::enabled();
        m.request_started("slow_count", "2026");
        m.request_started("slow_count", "2026");
        m.request_ended(
            "slow_count",
            "2026",
            "cancelled",
            Some(Duration::from_millis(3)),
            (5, 7),
        );
        m.request_answered("echo", "2025", "rejected");
        for i in 0..200 {
            m.request_answered_inline(&format!("made/up/{i}"), "2025", "error");
        }
        let guard = m.sse_stream_opened();
        m.sse_resume(true);
        m.job_reaped("failed", 2);
        m.job_reaped("requeued", 0);
        m.on_scrape(Arc::new(|m: Metrics| {
            Box::pin(async move { m.set_jobs_by_state([("running", 3)]) })
        }));
        let text = m.scrape().await;
        for want in [
            r#"staunch_requests_in_flight{tool="slow_count",era="2026"} 1"#,
            r#"staunch_requests_total{tool="slow_count",era="2026",outcome="cancelled"} 1"#,
            r#"staunch_requests_total{tool="echo",era="2025",outcome="rejected"} 1"#,
            "staunch_cancel_to_stop_seconds_count 1",
            "staunch_progress_sent_total 5",
            "staunch_progress_coalesced_total 7",
            "staunch_sse_streams_open 1",
            r#"staunch_sse_resumes_total{result="gone"} 1"#,
            r#"staunch_job_reaper_actions_total{action="failed"} 2"#,
            r#"staunch_jobs{state="running"} 3"#,
            r#"staunch_jobs{state="queued"} 0"#,
            "# EOF",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert!(
            !text.contains("requeued"),
            "a zero reaper action is not a series"
        );
        // Client-chosen method names are capped: 64 series, the rest under `other`.
        assert_eq!(text.matches("made/up/").count(), MAX_INLINE_METHODS);
        let other = r#"staunch_requests_total{tool="other",era="2025",outcome="error"} 136"#;
        assert!(text.contains(other), "{text}");
        drop(guard);
        assert!(m.scrape().await.contains("staunch_sse_streams_open 0"));
    }
}
