//! Limits and timings of a server; every one has a default that suits an interactive client.

use std::time::Duration;

/// The progress rate limit: a token bucket. A burst of up to `burst` notifications passes
/// unchanged; past it, notifications go out at `per_second` and values that arrive faster are
/// coalesced (the latest wins).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProgressRate {
    /// Bucket size: how many notifications may go out back to back.
    pub burst: u32,
    /// Refill rate: the sustained notifications per second.
    pub per_second: f64,
}

impl Default for ProgressRate {
    fn default() -> Self {
        Self {
            burst: 20,
            per_second: 20.0,
        }
    }
}

/// Server-wide limits and timings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Requests in flight across all sessions; one more is answered with a "server busy"
    /// error (-32000) at once instead of queueing.
    pub max_in_flight: usize,
    /// Requests in flight in one HTTP session; one more gets "server busy" (-32000).
    pub max_in_flight_per_session: usize,
    /// Requests in flight from one HTTP client — its principal when authenticated, else its
    /// address — in both eras together; one more gets "server busy" (-32000; HTTP 429 for a
    /// stateless request). Once a quarter of `max_in_flight` is left, each busy client is held
    /// to an equal share of the rest (see `fair`).
    pub max_in_flight_per_peer: usize,
    /// How long a handler may run after its cancel before its task is aborted (the future is
    /// dropped at its next await).
    pub cancel_grace: Duration,
    /// When a session closes (stdin EOF, DELETE, expiry): how long in-flight requests get to
    /// wind down after their cancel before the session is gone.
    pub drain_timeout: Duration,
    /// Deadline of `quick` tools unless the tool sets its own. Shorter than the common 60 s
    /// client timeout, so the server gives up first and says so.
    pub quick_deadline: Duration,
    /// Deadline of `streaming` tools unless the tool sets its own (progress may keep a
    /// client waiting that long).
    pub streaming_deadline: Duration,
    /// Upper bound for one `Context::cleanup` unless the call gives a smaller one.
    pub max_cleanup: Duration,
    /// Progress rate limit per request.
    pub progress_rate: ProgressRate,
    /// Longest accepted frame (a stdio line or an HTTP body), in bytes.
    pub max_message_bytes: usize,
    /// Stateless era: how long a client may cache list results and `server/discover`
    /// (`ttlMs`, SEP-2549). Lists change only when the server's tools or configuration do, and
    /// `subscriptions/listen` tells a listening client at once.
    pub list_ttl_ms: u64,
    /// stdio: bytes queued for stdout and not yet written at which the server stops reading
    /// stdin until the client reads (back-pressure on a client that does not read).
    pub stdout_queue_max: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_in_flight: 1024,
            max_in_flight_per_session: 256,
            max_in_flight_per_peer: 256,
            cancel_grace: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(5),
            quick_deadline: Duration::from_secs(50),
            streaming_deadline: Duration::from_secs(300),
            max_cleanup: Duration::from_secs(10),
            progress_rate: ProgressRate::default(),
            max_message_bytes: 4 * 1024 * 1024,
            list_ttl_ms: 60_000,
            stdout_queue_max: 16 * 1024 * 1024,
        }
    }
}
