//! The shared hyper client and the URL check that goes with it.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Uri;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::NetError;

/// How long a TCP connect may take before the request fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(feature = "tls")]
pub(crate) type Connector = hyper_rustls::HttpsConnector<HttpConnector>;
#[cfg(not(feature = "tls"))]
pub(crate) type Connector = HttpConnector;

/// A pooled HTTP/1.1 client for `http://` and (with TLS built in) `https://` URLs.
pub type HttpClient = Client<Connector, Full<Bytes>>;

/// Whether this build can dial `https://`.
pub fn tls_built() -> bool {
    cfg!(feature = "tls")
}

/// A new client with its own connection pool.
pub fn client() -> HttpClient {
    build(true)
}

/// A new client for requests to `uri` only (its scheme decides): the system's root
/// certificates are loaded for an `https://` one alone, so a process that only speaks plain
/// HTTP (a proxy in front of a loopback upstream, `staunch call http://…`) never pays for them.
/// It never dials anything else: the client follows no redirects.
pub fn client_for(uri: &Uri) -> HttpClient {
    build(uri.scheme_str() == Some("https"))
}

fn build(https: bool) -> HttpClient {
    Client::builder(TokioExecutor::new()).build(connector(https))
}

/// How connections are made: TCP with `TCP_NODELAY` and a bounded connect, under TLS for
/// `https://` (with the system's roots only when `https` says they are needed).
#[cfg_attr(not(feature = "tls"), allow(unused_variables))]
pub(crate) fn connector(https: bool) -> Connector {
    let mut http = HttpConnector::new();
    // Without TCP_NODELAY small SSE writes and JSON-RPC bodies stall ~40 ms behind Nagle and
    // delayed ACKs.
    http.set_nodelay(true);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    #[cfg(feature = "tls")]
    let connector = {
        // The TLS layer sees https URIs first; the TCP connector must accept them too.
        http.enforce_http(false);
        let tls = if https {
            crate::tls::config().client.clone()
        } else {
            crate::tls::plain_config().clone()
        };
        hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http)
    };
    #[cfg(not(feature = "tls"))]
    let connector = http;
    connector
}

/// Parses `url` and says now whether [`client`] can dial it: `http://` always, `https://` when
/// TLS is built in and some root certificate was loaded. The URL must name a host.
pub fn check_url(url: &str) -> Result<Uri, NetError> {
    let bad = |why: &str| NetError::InvalidUrl {
        url: url.to_string(),
        why: why.to_string(),
    };
    let uri: Uri = url
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    match uri.scheme_str() {
        Some("http") => Ok(uri),
        Some("https") => https_ready().map(|()| uri).map_err(|why| bad(&why)),
        _ => Err(bad("expected an http:// or https:// URL")),
    }
}

#[cfg(feature = "tls")]
fn https_ready() -> Result<(), String> {
    match &crate::tls::config().roots_problem {
        None => Ok(()),
        Some(why) => Err(format!(
            "no trusted root certificates for https:// ({why}); install the system's CA bundle \
             or set SSL_CERT_FILE"
        )),
    }
}

#[cfg(not(feature = "tls"))]
fn https_ready() -> Result<(), String> {
    Err("https:// needs TLS, which this build leaves out (staunch-net's `tls` feature)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_pass_and_other_schemes_are_refused_with_the_url() {
        assert!(check_url("http://127.0.0.1:8080/mcp").is_ok());
        for (url, why) in [
            ("ftp://example.com/x", "expected an http:// or https:// URL"),
            ("/mcp", "no host"),
            ("not a url", "invalid"),
        ] {
            let e = check_url(url).unwrap_err().to_string();
            assert!(e.starts_with(url), "{e}");
            assert!(e.contains(why), "{url}: {e}");
        }
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn https_without_tls_built_in_says_so() {
        let e = check_url("https://example.com/mcp")
            .unwrap_err()
            .to_string();
        assert!(e.contains("https:// needs TLS"), "{e}");
    }
}
