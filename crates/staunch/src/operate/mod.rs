//! What `staunch serve` offers the people who run it, beside the MCP endpoint: Prometheus
//! metrics on their own address (`--metrics`), OpenTelemetry traces (`--otlp-endpoint`) and the
//! live page (`--live-page`).

pub mod live_page;
mod live_render;
pub mod metrics;
pub mod traces;
