//! The example tools of `staunch serve`, one file per idea. Each shows one tool shape and is
//! what the tests, `staunch probe` and the benchmarks call.
//!
//! - [`demo`] registers the `demo` profile: every shape, a tool that fails on purpose, and the
//!   job tools when a job runtime is given ([`jobs`]).
//! - [`conformance::register`] registers the `conformance` profile: the tools, prompts and
//!   resources the official MCP conformance suite calls.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
pub mod conformance;
mod counting;
mod echo;
mod export;
mod fail;
mod greet;
pub mod jobs;
mod kv;
mod no_args;

use staunch_server::ServerBuilder;

/// The `demo` profile: every shape, plus a tool that fails on purpose, plus the job tools
/// when a job runtime is given.
pub fn demo(
    builder: ServerBuilder,
    job_tools: Option<(&staunch_jobs::JobRuntime, jobs::ImportDb)>,
) -> ServerBuilder {
    let builder = echo::register(builder);
    let builder = counting::register(builder);
    let builder = counting::register_flood(builder);
    let builder = export::register(builder);
    let builder = kv::register(builder);
    let builder = fail::register(builder);
    let builder = greet::register(builder);
    match job_tools {
        Some((rt, db)) => jobs::register(builder, rt, db),
        None => builder,
    }
}
