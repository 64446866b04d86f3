//! The test kit of staunch's crates: a server in the test's own process, driven the way a
//! client drives it, with what it logged read back. Crates take it as a dev-dependency; their
//! behaviour tests then run in-process, and only what needs the `staunch` binary (its command
//! line, signals, real clients of other makers, the conformance suite) spawns it.
//!
//! - [`TestServer`] ([`server`]): `staunch serve --http 127.0.0.1:0` built in-process — the
//!   demo or conformance tools, the job runtime, a store of the test's choosing, the lifecycle
//!   log in a file — with every library setting at hand.
//! - [`Endpoint`] ([`http`]): a raw Streamable HTTP driver for any server on loopback (one
//!   connection per request, SSE read event by event, both protocol eras' messages built by
//!   hand) and the helpers that read its lifecycle log.
//! - [`StdioClient`] ([`stdio`]): one stdio session driven by hand, on an in-memory duplex
//!   (under tokio's paused time when the test asks for it) or a spawned server's pipes;
//!   [`StdioServer`] is the demo server behind it, in-process.
//! - [`CapturedLog`] ([`log`]): a lifecycle log kept in memory and parsed back.
//! - [`auth`]: signing keys, JWTs, a JWKS server and requests with a token; [`peers`]: the
//!   SDK peers and real clients' interpreters `scripts/setup-tools` installs; [`pg`]: a
//!   PostgreSQL schema of a test's own.
//! - [`tasks`]: a client of the 2026-07-28 tasks extension, by hand; [`jobs`]: of the demo's
//!   job tools over stdio, with the rows `import_rows` wrote read back.

#![warn(missing_docs, unreachable_pub)]

pub mod auth;
pub mod http;
pub mod jobs;
pub mod log;
pub mod peers;
pub mod pg;
pub mod server;
pub mod stdio;
pub mod tasks;

pub use http::{Endpoint, Event, Resp};
pub use log::CapturedLog;
pub use server::{Profile, Running, Setup, StdioServer, TestServer};
pub use stdio::StdioClient;
