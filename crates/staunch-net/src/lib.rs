//! staunch's outbound HTTP client, shared by everything that dials out: the MCP client
//! (`staunch call`, `staunch probe`, the proxy's upstreams), the JWKS fetcher of `--auth oauth`
//! and the OTLP trace exporter.
//!
//! One hyper client (HTTP/1.1, `TCP_NODELAY`, a bounded connect) for `http://` and — with the
//! `tls` feature, which the `staunch` binary turns on — `https://` through rustls, trusting the
//! system's root certificates or the ones `SSL_CERT_FILE` / `SSL_CERT_DIR` name. Callers check
//! a URL once with [`check_url`] when they are configured, so that "https needs TLS" or "no
//! trusted roots" is said at start-up, not on the first request. A client for one URL
//! ([`client_for`]) loads the roots only when that URL is `https://`. An MCP endpoint, which
//! sends every request to one URL, keeps its connections in an [`Origin`] of its own.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
mod client;
mod error;
mod fetch;
mod origin;
#[cfg(feature = "tls")]
mod tls;

pub use client::{HttpClient, check_url, client, client_for, tls_built};
pub use error::{NetError, error_chain};
pub use fetch::{get, send};
pub use origin::{IDLE_TIMEOUT, MAX_IDLE, Origin, OriginError, PooledBody};
