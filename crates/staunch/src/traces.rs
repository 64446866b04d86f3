//! `staunch serve --otlp-endpoint URL`: OpenTelemetry traces (a span per request and per job
//! attempt, `staunch-otel`), off unless an endpoint is configured. The endpoint comes from the
//! flag (`STAUNCH_OTLP_ENDPOINT`) or else the standard `OTEL_EXPORTER_OTLP_ENDPOINT`; the
//! service name from `OTEL_SERVICE_NAME` (default `staunch`).
//!
//! Built without the `otel` cargo feature, the binary has no exporter: asking for one is an
//! error at start-up rather than traces silently missing.

use staunch_server::Traces;

/// The standard OpenTelemetry variables this honours.
const OTEL_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const OTEL_SERVICE_VAR: &str = "OTEL_SERVICE_NAME";

/// The running exporter (or nothing); [`TraceExport::finish`] sends what is still queued.
pub struct TraceExport {
    #[cfg(feature = "otel")]
    otel: Option<std::sync::Arc<staunch_otel::Otel>>,
    traces: Traces,
}

/// The endpoint asked for: the flag, else `OTEL_EXPORTER_OTLP_ENDPOINT` (empty means unset).
fn endpoint(flag: Option<&str>) -> Option<String> {
    flag.map(str::to_string)
        .or_else(|| std::env::var(OTEL_ENDPOINT_VAR).ok())
        .filter(|e| !e.trim().is_empty())
}

impl TraceExport {
    /// Starts the exporter when an endpoint is configured.
    pub fn start(flag: Option<&str>) -> anyhow::Result<TraceExport> {
        let Some(endpoint) = endpoint(flag) else {
            return Ok(TraceExport::off());
        };
        Self::start_at(endpoint)
    }

    fn off() -> TraceExport {
        TraceExport {
            #[cfg(feature = "otel")]
            otel: None,
            traces: Traces::disabled(),
        }
    }

    #[cfg(feature = "otel")]
    fn start_at(endpoint: String) -> anyhow::Result<TraceExport> {
        let service_name = std::env::var(OTEL_SERVICE_VAR)
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| staunch_otel::DEFAULT_SERVICE_NAME.to_string());
        let config = staunch_otel::OtelConfig {
            endpoint,
            service_name,
        };
        let otel = staunch_otel::Otel::start(&config, tokio::runtime::Handle::current())?;
        tracing::info!(endpoint = %config.endpoint, service = %config.service_name, "traces: exporting spans over OTLP/HTTP");
        Ok(TraceExport {
            traces: otel.traces(),
            otel: Some(std::sync::Arc::new(otel)),
        })
    }

    #[cfg(not(feature = "otel"))]
    fn start_at(endpoint: String) -> anyhow::Result<TraceExport> {
        let _ = OTEL_SERVICE_VAR;
        anyhow::bail!(
            "traces were asked for ({endpoint}) but this staunch was built without the `otel` \
             feature; rebuild with default features, or unset --otlp-endpoint / \
             STAUNCH_OTLP_ENDPOINT / {OTEL_ENDPOINT_VAR}"
        )
    }

    /// The handle for the server and the job runtime.
    pub fn traces(&self) -> Traces {
        self.traces.clone()
    }

    /// Exports the spans still queued (at most the SDK's export timeout) and stops.
    pub async fn finish(self) {
        #[cfg(feature = "otel")]
        if let Some(otel) = self.otel {
            // The SDK blocks until its export thread is done, and the export itself runs on
            // this runtime: block a blocking-pool thread, not a worker.
            let _ = tokio::task::spawn_blocking(move || otel.shutdown()).await;
        }
    }
}
