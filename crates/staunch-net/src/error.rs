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

/// An error in words a user can act on when it is a common one (nothing listening, a name that
/// does not resolve, a TLS handshake that failed and why, with what to do), else the error and
/// its sources, `: `-separated (hyper's own message is often just "client error").
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    if let Some(words) = explain(e) {
        return words;
    }
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Every error in the chain, including the ones an `io::Error` wraps (its `source()` skips
/// the error it carries, which is where rustls puts its own — sometimes two `io::Error`s deep).
fn causes<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut out = Vec::new();
    let mut cur = Some(e);
    while let Some(c) = cur {
        out.push(c);
        cur = match c.downcast_ref::<std::io::Error>() {
            Some(io) => match io.get_ref() {
                Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                None => c.source(),
            },
            None => c.source(),
        };
    }
    out
}

fn explain(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let chain = causes(e);
    #[cfg(feature = "tls")]
    if let Some(tls) = chain.iter().find_map(|c| c.downcast_ref::<rustls::Error>()) {
        return Some(tls_words(tls));
    }
    for c in &chain {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    return Some(
                        "connection refused: nothing is listening at that address and port".into(),
                    );
                }
                std::io::ErrorKind::TimedOut => {
                    return Some("the connection timed out (no answer from that address)".into());
                }
                _ => {}
            }
        }
    }
    let text = chain
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ");
    if text.contains("dns error") || text.contains("failed to lookup address") {
        return Some("the host name does not resolve (DNS lookup failed)".into());
    }
    None
}

/// A failed TLS handshake, said as what happened and what to do about it.
#[cfg(feature = "tls")]
fn tls_words(e: &rustls::Error) -> String {
    use rustls::{CertificateError, Error, InvalidMessage};
    let cert = |why: &str, todo: &str| format!("TLS: the server's certificate {why}; {todo}");
    match e {
        Error::InvalidMessage(InvalidMessage::InvalidContentType) => {
            "TLS: the server did not answer in TLS — is it a plain http:// endpoint? \
             Try the URL with http://"
                .into()
        }
        Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => cert(
                "is not signed by an authority this machine trusts",
                "if the server uses a private CA, point SSL_CERT_FILE at that CA's \
                 certificate (PEM)",
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                cert(
                    "does not name the host in the URL",
                    "use a host name the certificate lists, or fix the certificate",
                )
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                cert("has expired", "the server needs a renewed certificate")
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => cert(
                "is not valid yet",
                "check this machine's clock and the server's",
            ),
            CertificateError::Revoked => cert("was revoked", "the server needs a new certificate"),
            CertificateError::BadSignature | CertificateError::BadEncoding => cert(
                "is damaged (bad signature or encoding)",
                "the server's certificate file needs replacing",
            ),
            CertificateError::Other(other)
                if format!("{other:?}").contains("CaUsedAsEndEntity") =>
            {
                cert(
                    "is a CA certificate",
                    "the server must present a server certificate signed by that CA, not the CA \
                     itself (trust the CA on this side with SSL_CERT_FILE)",
                )
            }
            other => cert(
                &format!("was refused ({other:?})"),
                "check the server's certificate chain",
            ),
        },
        Error::AlertReceived(alert) => format!(
            "TLS: the server ended the handshake ({alert:?}); it may need a client certificate \
             or a newer TLS version"
        ),
        Error::NoCertificatesPresented => "TLS: the server presented no certificate".into(),
        other => format!("TLS handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connection_is_said_in_words() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            error_chain(&io),
            "connection refused: nothing is listening at that address and port"
        );
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_errors_wrapped_in_io_errors_are_said_in_words() {
        let wrap = |e: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        // As hyper-rustls hands it over: an io::Error inside an io::Error.
        let plain = std::io::Error::other(wrap(rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType,
        )));
        assert!(error_chain(&plain).contains("plain http:// endpoint"));
        let unknown = wrap(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        assert!(error_chain(&unknown).contains("SSL_CERT_FILE"));
        let name = wrap(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName,
        ));
        assert!(error_chain(&name).contains("does not name the host"));
    }

    #[test]
    fn an_error_it_does_not_know_keeps_its_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(error_chain(&e), "outer: inner");
    }
}
