//! The raw layer of Streamable HTTP: one endpoint URL with a connection pool, requests with
//! exact headers, and bodies read as text or as SSE events. The transport builds on it; so
//! does `staunch probe`, which needs to send what a well-behaved client never would.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};
use staunch_net::{NetError, Origin, PooledBody, error_chain};

use super::POST_ACCEPT;
use crate::ClientError;
use crate::sse::{SseEvent, SseParser};

/// One MCP endpoint URL and a connection pool to it.
#[derive(Clone, Debug)]
pub struct HttpEndpoint {
    uri: Uri,
    /// The URL's path and query: what a request line names.
    path: Uri,
    /// The `Host` header of every request, made once.
    host: HeaderValue,
    origin: Origin,
    extra: Arc<Vec<(HeaderName, HeaderValue)>>,
}

impl HttpEndpoint {
    /// An endpoint for an `http://` URL, or an `https://` one when TLS is built in (the `tls`
    /// feature, on by default; roots from the system or `SSL_CERT_FILE`).
    pub fn new(url: &str) -> Result<Self, ClientError> {
        Self::with_headers(url, &[])
    }

    /// Same, with headers added to every request.
    pub fn with_headers(url: &str, headers: &[(String, String)]) -> Result<Self, ClientError> {
        let bad = |why: &str| ClientError::InvalidUrl {
            url: url.to_string(),
            why: why.to_string(),
        };
        let uri: Uri = staunch_net::check_url(url).map_err(|e| match e {
            NetError::InvalidUrl { why, .. } => bad(&why),
            other => bad(&other.to_string()),
        })?;
        let extra = headers
            .iter()
            .map(|(k, v)| {
                let name = HeaderName::try_from(k.as_str()).map_err(|e| bad(&e.to_string()))?;
                let value = HeaderValue::try_from(v.as_str()).map_err(|e| bad(&e.to_string()))?;
                Ok((name, value))
            })
            .collect::<Result<Vec<_>, ClientError>>()?;
        let host = host_header(&uri).map_err(|e| bad(&e.to_string()))?;
        let path = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        let origin = Origin::new(&uri);
        Ok(Self {
            uri,
            path,
            host,
            origin,
            extra: Arc::new(extra),
        })
    }

    /// The URL.
    pub fn url(&self) -> String {
        self.uri.to_string()
    }

    /// `scheme://host:port`, e.g. for an `Origin` header that matches the server.
    pub fn origin(&self) -> String {
        let scheme = self.uri.scheme_str().unwrap_or("http");
        let auth = self.uri.authority().map(|a| a.as_str()).unwrap_or("");
        format!("{scheme}://{auth}")
    }

    /// POST a JSON body with `Content-Type: application/json` and the MCP `Accept`, plus
    /// `headers` (which override those two when they name them).
    pub async fn post(
        &self,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Result<RawResponse, ClientError> {
        self.post_with(body, &typed(headers)?).await
    }

    /// GET with `Accept: text/event-stream` plus `headers`.
    pub async fn get(&self, headers: &[(&str, &str)]) -> Result<RawResponse, ClientError> {
        self.get_with(&typed(headers)?).await
    }

    /// DELETE with `headers`.
    pub async fn delete(&self, headers: &[(&str, &str)]) -> Result<RawResponse, ClientError> {
        self.delete_with(&typed(headers)?).await
    }

    /// [`post`](Self::post) with headers built already.
    pub(super) async fn post_with(
        &self,
        body: Vec<u8>,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Result<RawResponse, ClientError> {
        let fixed = [
            (CONTENT_TYPE, JSON.clone()),
            (ACCEPT, POST_ACCEPT_VALUE.clone()),
        ];
        self.send(Method::POST, Bytes::from(body), &fixed, headers)
            .await
    }

    /// [`get`](Self::get) with headers built already.
    pub(super) async fn get_with(
        &self,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Result<RawResponse, ClientError> {
        let fixed = [(ACCEPT, EVENT_STREAM.clone())];
        self.send(Method::GET, Bytes::new(), &fixed, headers).await
    }

    /// [`delete`](Self::delete) with headers built already.
    pub(super) async fn delete_with(
        &self,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Result<RawResponse, ClientError> {
        self.send(Method::DELETE, Bytes::new(), &[], headers).await
    }

    /// Sends a request with the `fixed` headers of its method, then `headers` (which replace
    /// the fixed ones they name).
    async fn send(
        &self,
        method: Method,
        body: Bytes,
        fixed: &[(HeaderName, HeaderValue)],
        headers: &[(HeaderName, HeaderValue)],
    ) -> Result<RawResponse, ClientError> {
        let mut req = Request::builder()
            .method(method)
            .uri(self.path.clone())
            .body(Full::new(body))
            .map_err(|e| ClientError::Connect(e.to_string()))?;
        let h = req.headers_mut();
        h.reserve(2 + fixed.len() + self.extra.len() + headers.len());
        h.insert(HOST, self.host.clone());
        for (k, v) in self.extra.iter().chain(fixed).chain(headers) {
            h.insert(k.clone(), v.clone());
        }
        let resp = self
            .origin
            .send(req)
            .await
            .map_err(|e| ClientError::Connect(error_chain(&e)))?;
        let (parts, body) = resp.into_parts();
        Ok(RawResponse {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }
}

/// `Host` for `uri` as HTTP clients write it: the host, and the port unless it is the scheme's
/// own.
fn host_header(uri: &Uri) -> Result<HeaderValue, hyper::header::InvalidHeaderValue> {
    let host = uri.host().unwrap_or_default();
    let default_port = match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    match uri.port_u16().filter(|p| *p != default_port) {
        Some(port) => HeaderValue::try_from(format!("{host}:{port}")),
        None => HeaderValue::try_from(host),
    }
}

/// A request's own headers, built.
pub(super) type Headers = Vec<(HeaderName, HeaderValue)>;

/// Headers as strings, checked.
fn typed(headers: &[(&str, &str)]) -> Result<Headers, ClientError> {
    let bad = |e: &dyn std::fmt::Display| ClientError::Connect(e.to_string());
    headers
        .iter()
        .map(|(k, v)| {
            let name = match MCP_HEADERS.iter().find(|n| n.as_str() == *k) {
                Some(n) => n.clone(),
                None => HeaderName::try_from(*k).map_err(|e| bad(&e))?,
            };
            Ok((name, HeaderValue::try_from(*v).map_err(|e| bad(&e))?))
        })
        .collect()
}

/// One of the MCP headers by its name (`name` is one of them).
pub(super) fn mcp_header(name: &'static str) -> HeaderName {
    MCP_HEADERS
        .iter()
        .find(|n| n.as_str() == name)
        .cloned()
        .unwrap_or_else(|| HeaderName::from_static(name))
}

/// Header values every request of a method sends.
static JSON: HeaderValue = HeaderValue::from_static("application/json");
static POST_ACCEPT_VALUE: HeaderValue = HeaderValue::from_static(POST_ACCEPT);
static EVENT_STREAM: HeaderValue = HeaderValue::from_static("text/event-stream");

/// The MCP headers the transport sends on most requests, built once: parsing a name that is not
/// one of HTTP's standard headers checks and copies it on every request.
static MCP_HEADERS: [HeaderName; 5] = [
    HeaderName::from_static(super::SESSION_HEADER),
    HeaderName::from_static(super::VERSION_HEADER),
    HeaderName::from_static(super::METHOD_HEADER),
    HeaderName::from_static(super::NAME_HEADER),
    HeaderName::from_static(super::LAST_EVENT_ID),
];

/// A response whose body has not been read yet.
#[derive(Debug)]
pub struct RawResponse {
    status: u16,
    headers: HeaderMap,
    body: PooledBody,
}

impl RawResponse {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether the body is an SSE stream.
    pub fn is_sse(&self) -> bool {
        self.header(CONTENT_TYPE.as_str())
            .is_some_and(|c| c.trim_start().starts_with("text/event-stream"))
    }

    /// Reads the body as text, up to `limit` bytes (the rest is dropped).
    pub async fn text(self, limit: usize) -> Result<String, ClientError> {
        let mut body = self.body;
        let mut buf = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| ClientError::Connect(error_chain(&e)))?;
            if let Ok(data) = frame.into_data() {
                let room = limit.saturating_sub(buf.len());
                buf.extend_from_slice(&data[..data.len().min(room)]);
                if buf.len() >= limit {
                    break;
                }
            }
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// The body as a stream of SSE events.
    pub fn into_sse(self) -> SseStream {
        SseStream {
            body: Some(self.body),
            parser: SseParser::new(),
            queue: Default::default(),
        }
    }
}

/// An SSE body read event by event.
#[derive(Debug)]
pub struct SseStream {
    body: Option<PooledBody>,
    parser: SseParser,
    queue: std::collections::VecDeque<SseEvent>,
}

impl SseStream {
    /// The next event; `Ok(None)` when the server ended the stream, `Err` when the
    /// connection broke.
    pub async fn next_event(&mut self) -> Result<Option<SseEvent>, ClientError> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Ok(Some(ev));
            }
            let Some(body) = self.body.as_mut() else {
                return Ok(None);
            };
            match body.frame().await {
                None => {
                    self.body = None;
                    return Ok(None);
                }
                Some(Err(e)) => {
                    self.body = None;
                    return Err(ClientError::Connect(error_chain(&e)));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.parser
                            .feed_into(&data, &mut self.queue)
                            .map_err(|e| ClientError::Protocol(e.to_string()))?;
                    }
                }
            }
        }
    }

    /// The last event id seen on this stream (and the streams it was resumed into).
    pub fn last_event_id(&self) -> Option<&str> {
        self.parser.last_event_id()
    }

    /// The last `retry` the server sent.
    pub fn retry(&self) -> Option<Duration> {
        self.parser.retry()
    }

    /// Drops the connection (the way a flaky network would).
    pub fn drop_connection(&mut self) {
        self.body = None;
    }

    /// Continues with the body of a resumption GET, keeping the last id and `retry`.
    pub fn resume_with(&mut self, next: RawResponse) {
        self.body = Some(next.body);
        self.queue.clear();
        self.parser = std::mem::take(&mut self.parser).continue_after();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_header_names_a_port_only_when_it_is_not_the_schemes_own() {
        let host = |url: &str| host_header(&url.parse().unwrap()).unwrap();
        assert_eq!(host("http://127.0.0.1:8080/mcp"), "127.0.0.1:8080");
        assert_eq!(host("http://example.com:80/mcp"), "example.com");
        assert_eq!(host("https://example.com/mcp"), "example.com");
        assert_eq!(host("https://example.com:80/mcp"), "example.com:80");
        assert_eq!(host("https://[::1]:8443/mcp"), "[::1]:8443");
    }
}
