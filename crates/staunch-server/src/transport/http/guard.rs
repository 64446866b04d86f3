//! DNS-rebinding protection: the `Host` of every request and the `Origin` of browser requests
//! must name an allowed host (any port).
//!
//! A page on `evil.example` that resolves its name to 127.0.0.1 sends `Host: evil.example` and
//! `Origin: http://evil.example`; both are refused with 403. Non-browser clients send no
//! `Origin`, which is fine.

/// The allowed host names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allow {
    hosts: Vec<String>,
}

impl Allow {
    /// localhost, 127.0.0.1 and [::1].
    pub fn loopback() -> Self {
        Self {
            hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
        }
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
    pub fn host_headers_ok(&self, headers: &axum::http::HeaderMap) -> bool {
        let mut hosts = headers.get_all(axum::http::header::HOST).iter();
        match (hosts.next(), hosts.next()) {
            (Some(h), None) => h.to_str().is_ok_and(|h| self.host_ok(h)),
            _ => false,
        }
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
