//! `beehive run --otlp-endpoint URL`: the host's pass spans exported over
//! OTLP/HTTP (protobuf) to a collector. The library makes the spans
//! (`beehive::trace`); this module is the sink that sends them, and it
//! exists only when an endpoint is named.

mod config;
mod exporter;
mod protobuf;

pub use config::OtlpConfig;
pub use exporter::start;
