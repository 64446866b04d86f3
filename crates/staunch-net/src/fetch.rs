//! One exchange with a deadline and a body limit, for callers that want the whole answer
//! (a JWKS document, an OTLP export's status) rather than a stream.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, Response, header};

use crate::{HttpClient, NetError, error_chain};

/// Sends `request` and reads the answer's body, up to `limit` bytes, all within `timeout`.
/// Any status is returned; the caller decides which it accepts.
pub async fn send(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    limit: usize,
    timeout: Duration,
) -> Result<Response<Bytes>, NetError> {
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| NetError::Request(error_chain(&e)))?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, limit).collect().await.map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                NetError::TooLarge(limit)
            } else {
                NetError::Request(error_chain(e.as_ref()))
            }
        })?;
        Ok(Response::from_parts(parts, body.to_bytes()))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| NetError::Timeout(timeout))?
}

/// GET `url` with `Accept: accept`; the body when the status is 200.
pub async fn get(
    client: &HttpClient,
    url: &str,
    accept: &str,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, NetError> {
    let uri = crate::check_url(url)?;
    let request = Request::get(uri)
        .header(header::ACCEPT, accept)
        .body(Full::new(Bytes::new()))
        .map_err(|e| NetError::Request(e.to_string()))?;
    let response = send(client, request, limit, timeout).await?;
    if response.status() != hyper::StatusCode::OK {
        return Err(NetError::Status(response.status().as_u16()));
    }
    Ok(response.into_body())
}
