//! The exporter's HTTP client: one HTTP/1.1 POST per batch, run on the server's tokio runtime.
//!
//! The SDK's batch processor exports from a thread of its own, outside any tokio reactor, so a
//! hyper connection cannot be driven there. The export is spawned onto the runtime whose
//! [`Handle`] was saved at start-up, and the processor thread waits for the task's result (a
//! plain future, which needs no reactor). Plain `http://` only: a collector on loopback or a
//! sidecar is the common case, and this keeps a second TLS stack out of the build.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use tokio::net::TcpStream;
use tokio::runtime::Handle;

/// The longest one export may take (connect, send, read the answer).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// A collector's answer is a small status message; anything bigger is not read.
const MAX_RESPONSE_BYTES: usize = 64 << 10;

/// Sends the exporter's requests on a tokio runtime.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeClient {
    pub(crate) handle: Handle,
}

#[async_trait::async_trait]
impl HttpClient for RuntimeClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let task = self.handle.spawn(async move {
            match tokio::time::timeout(EXPORT_TIMEOUT, post(request)).await {
                Ok(r) => r,
                Err(_) => Err(format!("no answer within {EXPORT_TIMEOUT:?}").into()),
            }
        });
        task.await
            .map_err(|e| -> HttpError { format!("export task failed: {e}").into() })?
    }
}

async fn post(request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    let uri = request.uri().clone();
    if uri.scheme_str() != Some("http") {
        return Err(format!("{uri}: only http:// collectors are supported").into());
    }
    let host = uri.host().ok_or("the endpoint has no host")?;
    let port = uri.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host.trim_matches(['[', ']']), port)).await?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The connection is driven beside the request and ends with it (one request each: a batch
    // every few seconds does not need a pool).
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let (mut parts, body) = request.into_parts();
    if !parts.headers.contains_key(hyper::header::HOST) {
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
        parts
            .headers
            .insert(hyper::header::HOST, authority.parse()?);
    }
    let response = sender
        .send_request(hyper::Request::from_parts(parts, Full::new(body)))
        .await?;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, MAX_RESPONSE_BYTES)
        .collect()
        .await?
        .to_bytes();
    Ok(Response::from_parts(parts, body))
}
