//! The shared driver suite against `--store :memory:`: the in-memory event and session stores,
//! and jobs on a private in-memory SQLite database. Both handles are the same stores.

use crate::testsuite::{CaseFuture, Harness};

async fn fixture(_name: &'static str, case: impl FnOnce(Harness) -> CaseFuture) {
    let a = staunch_store::open(":memory:").await.unwrap();
    case(Harness { b: a.clone(), a }).await;
}

crate::event_store_suite!(fixture);
crate::session_store_suite!(fixture);
crate::job_store_suite!(fixture);
