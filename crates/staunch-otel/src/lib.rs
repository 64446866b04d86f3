//! OpenTelemetry traces for staunch (`staunch serve --otlp-endpoint URL`): a span per request
//! and per job attempt, exported over OTLP/HTTP (protobuf) in batches.
//!
//! The server and job runtime call their trace hooks (`staunch_server::trace`); this crate is
//! the one place that knows OpenTelemetry. [`Otel::start`] builds the exporter and hands back
//! the [`Traces`] handle to give the server builder and the job configuration;
//! [`Otel::shutdown`] sends what is still queued before the process exits.
//!
//! - [`spans`]: the spans, their names and attributes, trace context from `_meta`.
//! - `http`: the exporter's HTTP client on the server's tokio runtime.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod http;
pub mod spans;

use std::sync::Arc;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use staunch_server::Traces;

/// Where OTLP traces go by default under the OTLP/HTTP spec: `{endpoint}/v1/traces`.
const TRACES_PATH: &str = "/v1/traces";
/// The service name when `OTEL_SERVICE_NAME` does not say.
pub const DEFAULT_SERVICE_NAME: &str = "staunch";

/// Why traces could not be started.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The endpoint is not a URL traces can be sent to.
    #[error("invalid OTLP endpoint {endpoint:?}: {why}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        why: String,
    },
    /// The OpenTelemetry SDK refused to build the exporter.
    #[error("the OTLP exporter could not be built: {0}")]
    Exporter(String),
}

/// How to export.
#[derive(Debug, Clone)]
pub struct OtelConfig {
    /// The collector's base URL (`http://127.0.0.1:4318`), as `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// means it: spans go to `{endpoint}/v1/traces`. A URL that already ends in `/v1/traces`
    /// is used as it is.
    pub endpoint: String,
    /// `service.name` of the resource.
    pub service_name: String,
}

/// The running exporter.
pub struct Otel {
    provider: SdkTracerProvider,
    traces: Traces,
}

impl std::fmt::Debug for Otel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Otel").finish_non_exhaustive()
    }
}

impl Otel {
    /// Starts the exporter; its requests run on `runtime`. Batching follows the SDK's
    /// `OTEL_BSP_*` variables (a batch every 5 s by default).
    pub fn start(config: &OtelConfig, runtime: tokio::runtime::Handle) -> Result<Otel, OtelError> {
        let url = traces_url(&config.endpoint)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(http::RuntimeClient::new(runtime))
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .build()
            .map_err(|e| OtelError::Exporter(e.to_string()))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder_empty()
                    .with_service_name(config.service_name.clone())
                    .build(),
            )
            .build();
        let tracer = spans::OtelTracer {
            tracer: provider.tracer("staunch"),
            propagator: TraceContextPropagator::new(),
        };
        Ok(Otel {
            traces: Traces::new(Arc::new(tracer)),
            provider,
        })
    }

    /// The handle for the server builder and the job configuration.
    pub fn traces(&self) -> Traces {
        self.traces.clone()
    }

    /// Exports what is queued and stops. Blocks (the SDK waits for its export thread): call
    /// it from a blocking context, not a runtime worker, or the export cannot run.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "traces: the last batch may not have been exported");
        }
    }
}

/// `{endpoint}/v1/traces`, checked: `http://`, or `https://` when TLS is built in, with a host.
pub fn traces_url(endpoint: &str) -> Result<String, OtelError> {
    staunch_net::check_url(endpoint).map_err(|e| match e {
        staunch_net::NetError::InvalidUrl { why, .. } => OtelError::Endpoint {
            endpoint: endpoint.to_string(),
            why,
        },
        other => OtelError::Endpoint {
            endpoint: endpoint.to_string(),
            why: other.to_string(),
        },
    })?;
    let trimmed = endpoint.trim_end_matches('/');
    Ok(if trimmed.ends_with(TRACES_PATH) {
        trimmed.to_string()
    } else {
        format!("{trimmed}{TRACES_PATH}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_once() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://c:4318/v1/traces").unwrap(),
            "http://c:4318/v1/traces"
        );
        assert!(traces_url("c:4318").is_err());
        assert!(traces_url("not a url").is_err());
    }
}
