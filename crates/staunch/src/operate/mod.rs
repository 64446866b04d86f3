//! What `staunch serve` offers the people who run it, beside the MCP endpoint: Prometheus
//! metrics on their own address (`--metrics`) and OpenTelemetry traces (`--otlp-endpoint`).
//! The live page (`--live-page`) is the `staunch-live` crate.

pub mod metrics;
pub mod traces;
