//! The example tools of `staunch serve`, one file per idea. Each shows one tool shape and is
//! what the tests, `staunch probe` and the benchmarks call.

pub mod conformance;
mod counting;
mod echo;
mod export;
mod fail;
mod kv;

use staunch_server::ServerBuilder;

/// The `demo` profile: every shape, plus a tool that fails on purpose.
pub fn demo(builder: ServerBuilder) -> ServerBuilder {
    let builder = echo::register(builder);
    let builder = counting::register(builder);
    let builder = counting::register_flood(builder);
    let builder = export::register(builder);
    let builder = kv::register(builder);
    fail::register(builder)
}
