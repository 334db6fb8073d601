//! Spans: the [`Tracer`] an embedder hands the host, the spans a pass opens
//! with it, and the [`FinishedSpan`] records its [`SpanSink`] receives.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::sync::lock;
use crate::trace::context::{SpanId, TraceContext, TraceId};
use crate::trace::sampler::Sampler;

/// What a span stands for, as OpenTelemetry's `SpanKind` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// Work inside the host: a pass, a store write.
    Internal,
    /// A request the host sends for a plugin.
    Client,
}

/// A span attribute's value. Text is shared, so a value every pass of a
/// kind repeats (the kind, the plugin, its version) is counted, not copied.
#[derive(Clone, Debug, PartialEq)]
pub enum AttributeValue {
    /// Text.
    Text(Arc<str>),
    /// Text fixed in the program: a result, a write's name.
    Static(&'static str),
    /// A whole number.
    Int(i64),
}

impl AttributeValue {
    /// The text, if the value is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            AttributeValue::Text(text) => Some(text),
            AttributeValue::Static(text) => Some(text),
            AttributeValue::Int(_) => None,
        }
    }
}

impl From<&'static str> for AttributeValue {
    fn from(text: &'static str) -> Self {
        AttributeValue::Static(text)
    }
}

impl From<String> for AttributeValue {
    fn from(text: String) -> Self {
        AttributeValue::Text(text.into())
    }
}

impl From<&Arc<str>> for AttributeValue {
    fn from(text: &Arc<str>) -> Self {
        AttributeValue::Text(text.clone())
    }
}

impl From<i64> for AttributeValue {
    fn from(number: i64) -> Self {
        AttributeValue::Int(number)
    }
}

/// How a span ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpanStatus {
    /// Nothing to say: it did its work.
    Unset,
    /// It failed, and why.
    Error(String),
}

/// A span that has ended, for a [`SpanSink`] to export.
#[derive(Clone, Debug)]
pub struct FinishedSpan {
    /// Its trace, its own id and the sampled flag (always set here: only
    /// sampled spans are finished into a sink).
    pub context: TraceContext,
    /// The span it was made under, if any.
    pub parent: Option<SpanId>,
    /// What it was: `reconcile`, `store.write`, `GET`.
    pub name: Cow<'static, str>,
    /// Internal work or an outbound request.
    pub kind: SpanKind,
    /// When it began.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// What it was about, by OpenTelemetry attribute name.
    pub attributes: Vec<(&'static str, AttributeValue)>,
    /// Spans in other traces it follows from (a write it was woken by).
    pub links: Vec<TraceContext>,
    /// Whether it failed.
    pub status: SpanStatus,
}

/// Where finished spans go. An implementation must not block: a pass
/// calls it on its way out, so a full queue drops the span (and should
/// count it) rather than wait.
pub trait SpanSink: Send + Sync + 'static {
    /// Takes one finished span, or drops it.
    fn offer(&self, span: FinishedSpan);
}

/// Makes the spans of a host's passes and hands them to a [`SpanSink`].
/// Given to [`HostOptions::tracer`](crate::HostOptions::tracer); with none,
/// a pass makes no span at all.
#[derive(Clone)]
pub struct Tracer {
    sink: Arc<dyn SpanSink>,
    sampler: Sampler,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("sampler", &self.sampler)
            .finish_non_exhaustive()
    }
}

impl Tracer {
    /// A tracer that samples with `sampler` and sends what it samples to
    /// `sink`.
    pub fn new(sink: Arc<dyn SpanSink>, sampler: Sampler) -> Tracer {
        Tracer { sink, sampler }
    }

    /// Opens a span: a child of `parent` when given (a write's stored
    /// context, a caller's `traceparent`), else the root of a new trace,
    /// sampled as the tracer's sampler decides.
    pub fn open(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        parent: Option<TraceContext>,
    ) -> Span {
        let trace_id = parent.map_or_else(TraceId::random, |p| p.trace_id);
        let sampled = self.sampler.samples(trace_id, parent.as_ref());
        Span {
            sink: self.sink.clone(),
            context: TraceContext {
                trace_id,
                span_id: SpanId::random(),
                sampled,
            },
            parent: parent.map(|p| p.span_id),
            name: name.into(),
            kind,
            start: SystemTime::now(),
            notes: Mutex::new(Some(Notes::new())),
        }
    }
}

/// What is added to an open span before it ends; taken when it does.
struct Notes {
    attributes: Vec<(&'static str, AttributeValue)>,
    links: Vec<TraceContext>,
}

/// A span in progress, from [`Tracer::open`]. It ends once, by
/// [`Span::end`] or, unended, when dropped (a cancelled pass); a sampled
/// span is then handed to the tracer's sink.
pub struct Span {
    sink: Arc<dyn SpanSink>,
    context: TraceContext,
    parent: Option<SpanId>,
    name: Cow<'static, str>,
    kind: SpanKind,
    start: SystemTime,
    /// `None` once ended.
    notes: Mutex<Option<Notes>>,
}

impl Notes {
    /// Room for a pass span's attributes in one allocation.
    fn new() -> Notes {
        Notes {
            attributes: Vec::with_capacity(8),
            links: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Span")
            .field("name", &self.name)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl Span {
    /// Its context: the parent of its children and of the requests it sends.
    pub fn context(&self) -> TraceContext {
        self.context
    }

    /// Adds an attribute (kept only if the span is sampled).
    pub fn set(&self, key: &'static str, value: impl Into<AttributeValue>) {
        if !self.context.sampled {
            return;
        }
        if let Some(notes) = lock(&self.notes).as_mut() {
            notes.attributes.push((key, value.into()));
        }
    }

    /// Links the span to `other`, a context in another trace.
    pub fn link(&self, other: TraceContext) {
        if !self.context.sampled || other.trace_id == self.context.trace_id {
            return;
        }
        if let Some(notes) = lock(&self.notes).as_mut() {
            notes.links.push(other);
        }
    }

    /// A span under this one, in its trace, sampled as it is.
    pub fn child(&self, name: impl Into<Cow<'static, str>>, kind: SpanKind) -> Span {
        Span {
            sink: self.sink.clone(),
            context: TraceContext {
                span_id: SpanId::random(),
                ..self.context
            },
            parent: Some(self.context.span_id),
            name: name.into(),
            kind,
            start: SystemTime::now(),
            notes: Mutex::new(Some(Notes::new())),
        }
    }

    /// A child span for one store write of a pass: `what` names it
    /// (`handshake`, `set_conditions`).
    pub(crate) fn store_write(&self, what: &'static str) -> Span {
        let span = self.child("store.write", SpanKind::Internal);
        span.set("beehive.write", what);
        span
    }

    /// Ends the span with `status`; later calls do nothing.
    pub fn end(&self, status: SpanStatus) {
        let Some(notes) = lock(&self.notes).take() else {
            return;
        };
        if !self.context.sampled {
            return;
        }
        self.sink.offer(FinishedSpan {
            context: self.context,
            parent: self.parent,
            name: self.name.clone(),
            kind: self.kind,
            start: self.start,
            end: SystemTime::now(),
            attributes: notes.attributes,
            links: notes.links,
            status,
        });
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.end(SpanStatus::Unset);
    }
}

/// A span's status from a result: the error's text, if any.
pub(crate) fn status_of<T, E: std::fmt::Display>(result: &Result<T, E>) -> SpanStatus {
    match result {
        Ok(_) => SpanStatus::Unset,
        Err(error) => SpanStatus::Error(error.to_string()),
    }
}

/// A sink that keeps what it is offered, for tests.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Kept(pub(crate) Mutex<Vec<FinishedSpan>>);

#[cfg(test)]
impl SpanSink for Kept {
    fn offer(&self, span: FinishedSpan) {
        lock(&self.0).push(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_share_the_trace_and_name_their_parent() {
        let kept = Arc::new(Kept::default());
        let tracer = Tracer::new(kept.clone(), Sampler::default());
        let pass = tracer.open("reconcile", SpanKind::Internal, None);
        pass.set("beehive.kind", "Service.example.dev");
        let write = pass.child("store.write", SpanKind::Internal);
        write.end(SpanStatus::Unset);
        pass.end(SpanStatus::Error("boom".into()));
        pass.end(SpanStatus::Unset);
        let spans = lock(&kept.0);
        assert_eq!(spans.len(), 2, "each span ends once");
        let (write, pass) = (&spans[0], &spans[1]);
        assert_eq!(write.context.trace_id, pass.context.trace_id);
        assert_eq!(write.parent, Some(pass.context.span_id));
        assert_eq!(pass.parent, None);
        assert_eq!(pass.status, SpanStatus::Error("boom".into()));
        assert_eq!(pass.attributes.len(), 1);
    }

    #[test]
    fn a_span_under_a_remote_parent_joins_its_trace_and_an_unsampled_one_is_not_exported() {
        let kept = Arc::new(Kept::default());
        let tracer = Tracer::new(kept.clone(), Sampler::default());
        let remote = TraceContext::new_root(true);
        let pass = tracer.open("reconcile", SpanKind::Internal, Some(remote));
        assert_eq!(pass.context().trace_id, remote.trace_id);
        drop(pass);
        let unsampled = tracer.open(
            "reconcile",
            SpanKind::Internal,
            Some(TraceContext::new_root(false)),
        );
        assert!(!unsampled.context().sampled);
        unsampled
            .child("store.write", SpanKind::Internal)
            .end(SpanStatus::Unset);
        drop(unsampled);
        let spans = lock(&kept.0);
        assert_eq!(
            spans.len(),
            1,
            "a dropped span ends; unsampled ones are not exported"
        );
        assert_eq!(spans[0].parent, Some(remote.span_id));
    }
}
