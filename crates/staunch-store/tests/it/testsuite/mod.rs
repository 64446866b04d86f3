//! The driver test suite, written once over the traits and run against every backend.
//!
//! Each case is an `async fn(Harness)`. A backend's test file supplies a *fixture* that builds
//! a fresh, empty database for one case, opens it twice (so cases can race two independent
//! handles, as two instances would), runs the case and cleans up:
//!
//! ```text
//! async fn fixture(name: &'static str, case: impl FnOnce(Harness) -> CaseFuture) { … }
//! crate::event_store_suite!(fixture);
//! crate::session_store_suite!(fixture);
//! crate::job_store_suite!(fixture);
//! ```
//!
//! The macros expand to one `#[tokio::test]` per case on the multi-thread runtime (the calling
//! crate needs tokio with `macros` and `rt-multi-thread`). Time is passed explicitly, so no
//! case sleeps; cases that wait for a signal wait on the channel with a generous timeout.

mod events;
mod jobs;
mod operator;
mod sessions;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use staunch_store::Stores;

pub use events::*;
pub use jobs::*;
pub use operator::*;
pub use sessions::*;

/// Two handles on one fresh database. For drivers that cannot open a second handle (the
/// in-memory stores), `b` is a clone of `a`.
#[derive(Debug, Clone)]
pub struct Harness {
    pub a: Stores,
    pub b: Stores,
}

/// What a fixture gets from the generated test: the case, ready to run on a harness.
pub type CaseFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An arbitrary, fixed "now" (2023-11-14T22:13:20Z) so cases are reproducible.
pub const T0: i64 = 1_700_000_000_000;

/// Upper bound for waiting on a signal; a healthy run needs milliseconds.
pub const SIGNAL_WAIT: Duration = Duration::from_secs(20);

/// Generates one test per named case: `store_cases!(fixture => case_a, case_b)`.
#[macro_export]
macro_rules! store_cases {
    ($fixture:path => $($case:ident),+ $(,)?) => {$(
        #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $case() {
            $fixture(stringify!($case), |h| ::std::boxed::Box::pin($crate::testsuite::$case(h)))
                .await;
        }
    )+};
}

/// Every [`staunch_store::EventStore`] case.
#[macro_export]
macro_rules! event_store_suite {
    ($fixture:path) => {
        $crate::store_cases!($fixture =>
            events_seq_is_per_stream_and_replay_is_exact,
            events_never_cross_streams_or_sessions,
            events_gone_after_retention_by_count,
            events_gone_after_retention_by_age,
            events_closed_streams_keep_events_then_go,
            events_concurrent_appends_are_gap_free,
            events_batches_apply_in_order_and_skip_what_cannot_apply,
            events_batched_stream_runs_match_single_writes,
        );
    };
}

/// Every [`staunch_store::SessionStore`] case.
#[macro_export]
macro_rules! session_store_suite {
    ($fixture:path) => {
        $crate::store_cases!($fixture =>
            sessions_crud,
            sessions_missing_after_a_delete_elsewhere,
            shared_secret_first_writer_wins,
            sessions_expire_idle,
            sessions_answers_wait_for_the_instance_that_asked,
            sessions_stream_writers_beat,
        );
    };
}

/// Every [`staunch_store::JobStore`] case.
#[macro_export]
macro_rules! job_store_suite {
    ($fixture:path) => {
        $crate::store_cases!($fixture =>
            jobs_lifecycle_success,
            jobs_failure_and_cancel_paths,
            jobs_terminal_states_never_change,
            jobs_stale_token_is_lost_and_changes_nothing,
            jobs_reaper_transitions,
            jobs_reaper_on_two_handles_moves_each_job_once,
            jobs_release_owner,
            jobs_idempotency_rules,
            jobs_idempotency_key_expiry,
            jobs_fifty_concurrent_creates_one_key_make_one_job,
            jobs_inflight_dedupe,
            jobs_max_active_per_principal,
            jobs_claim_next_order_and_tools,
            jobs_claim_next_is_fair_between_owners,
            jobs_claim_next_keeps_workers_for_other_owners,
            jobs_concurrent_claim_next_claims_each_job_once,
            jobs_ttl_purge,
            jobs_success_racing_cancel_is_recorded_as_success,
            jobs_list_pages,
            jobs_signals,
            jobs_input_validation,
            jobs_inputs_asked_by_the_lease_holder_answered_anywhere,
            jobs_operator_list_all_filters,
            jobs_operator_count_by_state,
            jobs_operator_ids_starting_with,
            jobs_operator_purge_finished_before,
            jobs_trace_parent_round_trips,
        );
    };
}
