//! The exporter's HTTP client: one HTTP/1.1 POST per batch on staunch-net's pooled client
//! (https:// too when TLS is built in), run on the server's tokio runtime.
//!
//! The SDK's batch processor exports from a thread of its own, outside any tokio reactor, so a
//! hyper connection cannot be driven there. The export is spawned onto the runtime whose
//! [`Handle`] was saved at start-up, and the processor thread waits for the task's result (a
//! plain future, which needs no reactor).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use tokio::runtime::Handle;

/// The longest one export may take (connect, send, read the answer).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// A collector's answer is a small status message; anything bigger is not read.
const MAX_RESPONSE_BYTES: usize = 64 << 10;

/// Sends the exporter's requests on a tokio runtime.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeClient {
    handle: Handle,
    client: staunch_net::HttpClient,
}

impl RuntimeClient {
    pub(crate) fn new(handle: Handle) -> Self {
        Self {
            handle,
            client: staunch_net::client(),
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for RuntimeClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let task = self.handle.spawn(async move {
            let (parts, body) = request.into_parts();
            let request = hyper::Request::from_parts(parts, Full::new(body));
            staunch_net::send(&client, request, MAX_RESPONSE_BYTES, EXPORT_TIMEOUT)
                .await
                .map_err(|e| -> HttpError { e.into() })
        });
        task.await
            .map_err(|e| -> HttpError { format!("export task failed: {e}").into() })?
    }
}
