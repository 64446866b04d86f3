//! The integration tests of `staunch-server`, in one test binary (one link instead of one
//! per file): each former `tests/*.rs` file is a module, and the helpers they share are
//! declared once here.

mod http_client;
mod support;

mod crate_dependencies;
mod eras;
mod fuzz_regressions;
mod healthz;
mod http_auth;
mod http_auth_library;
mod http_conn_workers;
mod http_plain_answers;
mod http_pressure;
mod http_security;
mod http_stateless;
mod http_transport;
mod lifecycle;
mod listen_streams;
mod metrics_listener;
mod metrics_scrape;
mod multi_instance_http;
mod results;
mod security_fairness;
mod session_closed;
mod stateless_unread_stream;
mod stdio_duplex;
mod stdio_lifecycle;
mod tool_updates;
mod trace_hooks;
