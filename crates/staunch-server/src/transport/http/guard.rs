//! DNS-rebinding protection: the `Host` of every request and the `Origin` of browser requests
//! must name an allowed host (any port).
//!
//! A page on `evil.example` that resolves its name to 127.0.0.1 sends `Host: evil.example` and
//! `Origin: http://evil.example`; both are refused with 403. Non-browser clients send no
//! `Origin`, which is fine.
//!
//! [`Allow::judge`] is the one decision: the MCP endpoint calls it with the head it has already
//! read, and [`guarded`] puts it in front of every other listener's router (the metrics
//! listener), so each answers a foreign or doubled `Host` as the endpoint does.

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The allowed host names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allow {
    hosts: Vec<String>,
}

impl Allow {
    /// localhost, 127.0.0.1 and `[::1]`.
    pub fn loopback() -> Self {
        Self {
            hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
        }
    }

    /// The hosts a request to a listener bound to `addr` may name: loopback, `extra`, and
    /// `addr`'s own IP when it is a specific one (a client on another machine names it; an
    /// address literal cannot be rebound by DNS).
    pub fn for_listener(addr: std::net::SocketAddr, extra: &[String]) -> Self {
        let mut allow = extra
            .iter()
            .fold(Self::loopback(), |a, h| a.with_host(h.clone()));
        let ip = addr.ip();
        if !ip.is_unspecified() && !ip.is_loopback() {
            allow = match ip {
                std::net::IpAddr::V4(v4) => allow.with_host(v4.to_string()),
                std::net::IpAddr::V6(v6) => allow.with_host(format!("[{v6}]")),
            };
        }
        allow
    }

    /// Adds a host name (e.g. the public name a reverse proxy forwards).
    pub fn with_host(mut self, host: impl Into<String>) -> Self {
        let h = host.into().to_ascii_lowercase();
        if !self.hosts.contains(&h) {
            self.hosts.push(h);
        }
        self
    }

    fn allows_host_name(&self, name: &str) -> bool {
        // The allowed names are kept lower-case; compared in place (no copy per request).
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
    }

    /// Checks a `Host` header value (`name[:port]`).
    pub fn host_ok(&self, host: &str) -> bool {
        strip_port(host).is_some_and(|n| self.allows_host_name(n))
    }

    /// Checks a request's `Host` headers as the MCP endpoint does: exactly one, and allowed (a
    /// second `Host` is how a request smuggles a name past a check that reads only the first).
    pub fn host_headers_ok(&self, headers: &HeaderMap) -> bool {
        let hosts = headers.get_all(header::HOST).iter().count();
        self.judge(hosts, headers.get(header::HOST), 0, None)
            .is_ok()
    }

    /// Checks an `Origin` header value (`scheme://name[:port]`, or `null`).
    pub fn origin_ok(&self, origin: &str) -> bool {
        let Some(rest) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            return false;
        };
        !rest.contains('/') && strip_port(rest).is_some_and(|n| self.allows_host_name(n))
    }

    /// The decision on a request's `Host` and `Origin`, given how many of each it carried and
    /// the first of each: two values of either leave it open which one a proxy, a browser and
    /// this check each looked at, so they are refused rather than picked from.
    pub(crate) fn judge(
        &self,
        hosts: usize,
        host: Option<&HeaderValue>,
        origins: usize,
        origin: Option<&HeaderValue>,
    ) -> Result<(), HeaderRefusal> {
        if hosts > 1 {
            return Err(HeaderRefusal::Twice(header::HOST));
        }
        if origins > 1 {
            return Err(HeaderRefusal::Twice(header::ORIGIN));
        }
        if !host
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| self.host_ok(h))
        {
            return Err(HeaderRefusal::Host);
        }
        match origin {
            Some(o) if !o.to_str().is_ok_and(|o| self.origin_ok(o)) => Err(HeaderRefusal::Origin),
            _ => Ok(()),
        }
    }

    /// [`Allow::judge`] on a header map.
    pub(crate) fn judge_headers(&self, headers: &HeaderMap) -> Result<(), HeaderRefusal> {
        let hosts = headers.get_all(header::HOST).iter().count();
        let origins = headers.get_all(header::ORIGIN).iter().count();
        self.judge(
            hosts,
            headers.get(header::HOST),
            origins,
            headers.get(header::ORIGIN),
        )
    }
}

/// Why a request's `Host` or `Origin` was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HeaderRefusal {
    /// The header came more than once.
    Twice(HeaderName),
    /// No `Host`, or one not on the allow-list.
    Host,
    /// An `Origin` not on the allow-list.
    Origin,
}

impl HeaderRefusal {
    /// Logs the refusal and answers it: 400 for a doubled header, 403 otherwise, with a
    /// JSON-RPC error body (id null) as every HTTP refusal has.
    pub(crate) fn answer(
        &self,
        host: Option<&HeaderValue>,
        origin: Option<&HeaderValue>,
    ) -> Response {
        let (status, message) = match self {
            HeaderRefusal::Twice(name) => {
                tracing::warn!(header = %name, "request refused: header sent twice");
                (
                    StatusCode::BAD_REQUEST,
                    format!("bad request: more than one {name} header"),
                )
            }
            HeaderRefusal::Host => {
                tracing::warn!(?host, "request refused: Host not allowed");
                (StatusCode::FORBIDDEN, "forbidden: Host not allowed".into())
            }
            HeaderRefusal::Origin => {
                tracing::warn!(?origin, "request refused: Origin not allowed");
                (
                    StatusCode::FORBIDDEN,
                    "forbidden: Origin not allowed".into(),
                )
            }
        };
        let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": staunch_protocol::codes::INVALID_REQUEST, "message": message}});
        (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

/// `router` with every request's `Host` and `Origin` judged by `allow` first: what a listener
/// other than the MCP endpoint puts in front of its routes.
pub(crate) fn guarded(router: axum::Router, allow: Allow) -> axum::Router {
    let allow = std::sync::Arc::new(allow);
    router.layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let allow = allow.clone();
            async move {
                let headers = req.headers();
                match allow.judge_headers(headers) {
                    Ok(()) => next.run(req).await,
                    Err(refusal) => {
                        refusal.answer(headers.get(header::HOST), headers.get(header::ORIGIN))
                    }
                }
            }
        },
    ))
}

/// `name:port` → `name`; `[v6]:port` → `[v6]`; `None` when malformed.
fn strip_port(hostport: &str) -> Option<&str> {
    if hostport.is_empty() {
        return None;
    }
    if hostport.starts_with('[') {
        let end = hostport.find(']')?;
        let (name, rest) = hostport.split_at(end + 1);
        return (rest.is_empty() || valid_port(rest.strip_prefix(':')?)).then_some(name);
    }
    match hostport.rsplit_once(':') {
        Some((name, port)) if valid_port(port) && !name.contains(':') => Some(name),
        Some(_) => None,
        None => Some(hostport),
    }
}

/// Digits only, and a TCP port: 0–65535 (`localhost:99999` is no address at all).
fn valid_port(p: &str) -> bool {
    !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_on_a_specific_address_accepts_it_and_the_names_given() {
        let a = Allow::for_listener("10.1.2.3:9464".parse().unwrap(), &["metrics.lan".into()]);
        assert!(a.host_ok("10.1.2.3:9464") && a.host_ok("metrics.lan") && a.host_ok("localhost"));
        assert!(!a.host_ok("10.1.2.4:9464"));
        let v6 = Allow::for_listener("[fd00::1]:9464".parse().unwrap(), &[]);
        assert!(v6.host_ok("[fd00::1]:9464"));
        // An unspecified address names no host of its own.
        let any = Allow::for_listener("0.0.0.0:9464".parse().unwrap(), &[]);
        assert!(!any.host_ok("0.0.0.0:9464"));
    }

    #[test]
    fn loopback_hosts_with_any_port_pass() {
        let a = Allow::loopback();
        for h in [
            "localhost",
            "localhost:3000",
            "127.0.0.1:8080",
            "localhost:65535",
            "[::1]:9",
            "LOCALHOST",
        ] {
            assert!(a.host_ok(h), "{h}");
        }
        for o in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:5",
        ] {
            assert!(a.origin_ok(o), "{o}");
        }
    }

    #[test]
    fn other_hosts_and_malformed_values_fail() {
        let a = Allow::loopback();
        for h in [
            "evil.example.com",
            "evil.example.com:80",
            "",
            "127.0.0.1:abc",
            "[::1",
            "a:b:c",
            "localhost:99999",
            "localhost:65536",
            "[::1]:70000",
            "127.0.0.1:+80",
        ] {
            assert!(!a.host_ok(h), "{h}");
        }
        for o in [
            "http://evil.example.com",
            "null",
            "file://",
            "http://localhost.evil.com",
            "http://localhost/x",
            "ftp://localhost",
            "http://localhost:99999",
        ] {
            assert!(!a.origin_ok(o), "{o}");
        }
    }

    #[test]
    fn extra_hosts_can_be_allowed() {
        let a = Allow::loopback().with_host("mcp.internal");
        assert!(a.host_ok("mcp.internal:443"));
        assert!(a.origin_ok("https://mcp.internal"));
    }
}
