//! Traces of what the host does: a span per pass, with children for the
//! pass's store writes and each HTTP request a plugin sends, joined to the
//! trace of the write that caused the pass.
//!
//! The library only makes spans and hands finished ones to the
//! [`SpanSink`] of the [`Tracer`] an embedder gives
//! [`HostOptions::tracer`](crate::HostOptions::tracer); it installs no
//! subscriber and exports nothing itself. The `beehive` binary's sink
//! exports over OTLP. Contexts cross processes as W3C `traceparent` text.

mod context;
mod sampler;
mod span;

pub use context::{SpanId, TraceContext, TraceId, TraceparentError};
pub use sampler::{Sampler, SamplerError};
pub(crate) use span::status_of;
pub use span::{AttributeValue, FinishedSpan, Span, SpanKind, SpanSink, SpanStatus, Tracer};
