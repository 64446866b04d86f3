//! The request core's flags: how many requests at once, how long each may take, how a cancel
//! ends it, how much progress goes out.

use std::time::Duration;

use clap::Args;

use super::heading::REQUESTS;
use super::parse::{millis, parse_at_least_one, parse_millis};
use crate::{Config, ProgressRate};

/// Flags of the request core ([`Config`]).
#[derive(Debug, Clone, Args)]
pub struct RequestArgs {
    /// Requests in flight across all sessions before new ones get "server busy".
    #[arg(
        long,
        default_value_t = Config::default().max_in_flight,
        env = "STAUNCH_MAX_IN_FLIGHT",
        value_name = "N",
        value_parser = parse_at_least_one,
        help_heading = REQUESTS
    )]
    pub max_in_flight: usize,
    /// Milliseconds a handler may run after its cancel before it is aborted.
    #[arg(
        long,
        default_value_t = millis(Config::default().cancel_grace),
        env = "STAUNCH_CANCEL_GRACE_MS",
        value_name = "MS",
        help_heading = REQUESTS,
        value_parser = parse_millis
    )]
    pub cancel_grace_ms: u64,
    /// Milliseconds in-flight requests get to wind down when the session closes.
    #[arg(
        long,
        default_value_t = millis(Config::default().drain_timeout),
        env = "STAUNCH_DRAIN_TIMEOUT_MS",
        value_name = "MS",
        help_heading = REQUESTS,
        value_parser = parse_millis
    )]
    pub drain_timeout_ms: u64,
    /// Deadline of `quick` tools, in milliseconds (under a client's usual 60 s timeout).
    #[arg(
        long,
        default_value_t = millis(Config::default().quick_deadline),
        env = "STAUNCH_QUICK_DEADLINE_MS",
        value_name = "MS",
        help_heading = REQUESTS,
        value_parser = parse_millis
    )]
    pub quick_deadline_ms: u64,
    /// Deadline of `streaming` tools, in milliseconds.
    #[arg(
        long,
        default_value_t = millis(Config::default().streaming_deadline),
        env = "STAUNCH_STREAMING_DEADLINE_MS",
        value_name = "MS",
        help_heading = REQUESTS,
        value_parser = parse_millis
    )]
    pub streaming_deadline_ms: u64,
    /// Progress notifications that may go out back to back per request.
    #[arg(
        long,
        default_value_t = ProgressRate::default().burst,
        env = "STAUNCH_PROGRESS_BURST",
        value_name = "N",
        hide_short_help = true,
        help_heading = REQUESTS
    )]
    pub progress_burst: u32,
    /// Sustained progress notifications per second per request (a flood is coalesced).
    #[arg(
        long,
        default_value_t = ProgressRate::default().per_second,
        env = "STAUNCH_PROGRESS_RATE",
        value_name = "PER_SEC",
        hide_short_help = true,
        help_heading = REQUESTS
    )]
    pub progress_rate: f64,
    /// Largest accepted message (stdio line or HTTP body), in bytes.
    #[arg(
        long,
        default_value_t = Config::default().max_message_bytes,
        env = "STAUNCH_MAX_MESSAGE_BYTES",
        value_name = "BYTES",
        help_heading = REQUESTS
    )]
    pub max_message_bytes: usize,
}

impl RequestArgs {
    /// Sets the request core's part of `config`.
    pub fn apply(&self, config: &mut Config) {
        config.max_in_flight = self.max_in_flight;
        config.cancel_grace = Duration::from_millis(self.cancel_grace_ms);
        config.drain_timeout = Duration::from_millis(self.drain_timeout_ms);
        config.quick_deadline = Duration::from_millis(self.quick_deadline_ms);
        config.streaming_deadline = Duration::from_millis(self.streaming_deadline_ms);
        config.progress_rate = ProgressRate {
            burst: self.progress_burst.max(1),
            per_second: self.progress_rate,
        };
        config.max_message_bytes = self.max_message_bytes;
    }
}
