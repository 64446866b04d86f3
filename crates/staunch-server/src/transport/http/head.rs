//! The request headers the MCP endpoint decides on, read in one pass.
//!
//! Every POST asks the same questions of its headers — is the Host allowed, and the Origin;
//! is each sent once; is the body JSON; what does the client accept; which session, which
//! protocol version. Asked one by one, each was a hash lookup (and `Accept` three passes), a
//! few thousand instructions per request in all. [`Head::read`] walks the headers once and
//! keeps the answers; the values are cheap clones of the bytes hyper already holds.

use axum::http::{HeaderMap, HeaderValue};

/// The address a request's connection came from (set by the acceptor on every request, for
/// the per-peer limits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerAddr(pub(crate) std::net::SocketAddr);

pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
pub(crate) const VERSION_HEADER: &str = "mcp-protocol-version";
pub(crate) const LAST_EVENT_ID: &str = "last-event-id";

/// What the client's `Accept` headers allow.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Accepted {
    pub(crate) json: bool,
    pub(crate) sse: bool,
    /// No `Accept` header at all.
    pub(crate) absent: bool,
}

/// The endpoint's view of one request's headers.
#[derive(Debug, Default)]
pub(crate) struct Head {
    pub(crate) host: Option<HeaderValue>,
    pub(crate) hosts: usize,
    pub(crate) origin: Option<HeaderValue>,
    pub(crate) origins: usize,
    pub(crate) accept: Accepted,
    /// `Content-Type` is `application/json` (parameters aside).
    pub(crate) json_body: bool,
    session_id: Option<HeaderValue>,
    protocol_version: Option<HeaderValue>,
    last_event_id: Option<HeaderValue>,
}

impl Head {
    pub(crate) fn read(headers: &HeaderMap) -> Self {
        let mut head = Head {
            accept: Accepted {
                absent: true,
                ..Accepted::default()
            },
            ..Head::default()
        };
        for (name, value) in headers {
            // One match on the (already lower-case) name: a comparison per header, not one
            // per header and question.
            match name.as_str() {
                "host" => {
                    head.hosts += 1;
                    head.host.get_or_insert_with(|| value.clone());
                }
                "origin" => {
                    head.origins += 1;
                    head.origin.get_or_insert_with(|| value.clone());
                }
                "accept" => {
                    head.accept.absent = false;
                    accept(&mut head.accept, value);
                }
                "content-type" => head.json_body = head.json_body || is_json(value),
                SESSION_HEADER => {
                    head.session_id.get_or_insert_with(|| value.clone());
                }
                VERSION_HEADER => {
                    head.protocol_version.get_or_insert_with(|| value.clone());
                }
                LAST_EVENT_ID => {
                    head.last_event_id.get_or_insert_with(|| value.clone());
                }
                _ => {}
            }
        }
        head
    }

    /// `Mcp-Session-Id` (the first one), when it is visible ASCII.
    pub(crate) fn session_id(&self) -> Option<&str> {
        text(self.session_id.as_ref())
    }

    /// Whether an `Mcp-Session-Id` header was sent at all.
    pub(crate) fn has_session_id(&self) -> bool {
        self.session_id.is_some()
    }

    /// `MCP-Protocol-Version`, when it is visible ASCII.
    pub(crate) fn protocol_version(&self) -> Option<&str> {
        text(self.protocol_version.as_ref())
    }

    /// `Last-Event-ID`, when it is visible ASCII.
    pub(crate) fn last_event_id(&self) -> Option<&str> {
        text(self.last_event_id.as_ref())
    }
}

fn text(v: Option<&HeaderValue>) -> Option<&str> {
    v.and_then(|v| v.to_str().ok())
}

fn accept(a: &mut Accepted, value: &HeaderValue) {
    let Ok(value) = value.to_str() else { return };
    for part in value.split(',') {
        match part.split(';').next().unwrap_or("").trim() {
            "*/*" => (a.json, a.sse) = (true, true),
            "application/json" => a.json = true,
            "text/event-stream" => a.sse = true,
            _ => {}
        }
    }
}

fn is_json(value: &HeaderValue) -> bool {
    value.to_str().is_ok_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn one_pass_reads_what_the_endpoint_asks() {
        let h = Head::read(&headers(&[
            ("Host", "127.0.0.1:1"),
            ("accept", "application/json"),
            ("Accept", "text/event-stream;q=0.5"),
            ("content-type", "Application/JSON; charset=utf-8"),
            ("Mcp-Session-Id", "abc"),
            ("mcp-session-id", "second"),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("last-event-id", "s:3"),
        ]));
        assert_eq!((h.hosts, h.origins), (1, 0));
        assert_eq!(h.host.as_ref().unwrap(), "127.0.0.1:1");
        assert!(h.accept.json && h.accept.sse && !h.accept.absent);
        assert!(h.json_body);
        assert_eq!(h.session_id(), Some("abc"));
        assert_eq!(h.protocol_version(), Some("2025-11-25"));
        assert_eq!(h.last_event_id(), Some("s:3"));
        assert!(!super::super::stateless::is_client(&h));
    }

    #[test]
    fn repeats_are_counted_and_absent_headers_are_told_apart() {
        let h = Head::read(&headers(&[
            ("host", "a"),
            ("host", "b"),
            ("origin", "http://x"),
            ("origin", "http://y"),
            ("content-type", "text/plain"),
            ("mcp-protocol-version", "2026-07-28"),
        ]));
        assert_eq!((h.hosts, h.origins), (2, 2));
        assert_eq!(h.origin.as_ref().unwrap(), "http://x");
        assert!(h.accept.absent && !h.accept.json && !h.accept.sse);
        assert!(!h.json_body);
        assert!(super::super::stateless::is_client(&h));
        let any = Head::read(&headers(&[("accept", "*/*")]));
        assert!(any.accept.json && any.accept.sse);
        assert!(
            !super::super::stateless::is_client(&any),
            "no version header: session traffic"
        );
    }
}
