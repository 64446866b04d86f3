//! What can go wrong dialling out, each with the URL or limit it concerns.

use std::time::Duration;

/// An outbound request that could not be made or answered.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The URL cannot be dialled: not http/https, no host, unparsable, or https:// without
    /// TLS built in or without a trusted root certificate.
    #[error("{url}: {why}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it is refused.
        why: String,
    },
    /// Connecting, the TLS handshake, or the exchange failed.
    #[error("{0}")]
    Request(String),
    /// The peer answered with a status the caller does not accept.
    #[error("status {0}")]
    Status(u16),
    /// The answer's body is larger than the caller reads.
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    /// No complete answer within the caller's time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// An error and its sources, `: `-separated (hyper's own message is often just "client error").
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
