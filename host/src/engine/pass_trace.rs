//! A pass's span, when the host traces: opened under the trace of the
//! write that caused the pass, linked to the dependency writes that woke
//! it, and ended with how the pass went.

use std::sync::Arc;

use crate::engine::controller::{Action, Verdict};
use crate::engine::queue::Outcome;
use crate::object::{ObjectId, RawObject};
use crate::store::Store;
use crate::trace::{Span, SpanKind, SpanStatus, TraceContext, Tracer};

/// The span of a pass over `object`: a child of the trace its latest spec
/// write carried, while that generation is not yet settled; else the root
/// of a trace of its own. A `dependent`'s is linked to the dependency
/// writes that may have woken it.
pub(crate) fn open_pass_span(
    tracer: &Tracer,
    store: &Store,
    kind: &Arc<str>,
    object: &RawObject,
    dependent: bool,
) -> Span {
    let meta = &object.meta;
    let unsettled_write = object
        .bookkeeping
        .trace
        .filter(|_| meta.observed_generation != Some(meta.generation));
    let span = tracer.open("reconcile", SpanKind::Internal, unsettled_write);
    span.set("beehive.kind", kind);
    span.set("beehive.object", meta.name.clone());
    span.set("beehive.object.id", meta.id);
    span.set("beehive.generation", meta.generation);
    if dependent {
        link_dependency_writes(store, &span, meta.id);
    }
    span
}

/// Links a dependent's pass to the traces of the dependency writes that
/// may have woken it. Best effort: a failed read costs the links only.
fn link_dependency_writes(store: &Store, span: &Span, id: ObjectId) {
    if !span.context().sampled {
        return;
    }
    match store.read(|r| r.dependency_traces(id)) {
        Ok(traces) => traces
            .iter()
            .filter_map(|text| TraceContext::parse(text).ok())
            .for_each(|context| span.link(context)),
        Err(error) => tracing::debug!(id, %error, "cannot read the dependency traces to link"),
    }
}

/// Records how the pass ended on its span: `settled`, `unsettled`,
/// `failed`, or `backing off` when it failed again.
pub(crate) fn note_result(span: &Span, result: &Action, was_failing: bool) {
    let said = match result.verdict() {
        Verdict::Settled => "settled",
        Verdict::Unsettled => "unsettled",
        Verdict::Failed(_) if was_failing => "backing off",
        Verdict::Failed(_) => "failed",
    };
    span.set("beehive.result", said);
}

/// Ends a pass's span with its outcome once the handshake is written.
pub(crate) fn end_pass_span(span: &Span, outcome: &Outcome, failure: Option<&str>) {
    let status = match (outcome, failure) {
        (Outcome::Failed, Some(why)) => SpanStatus::Error(why.to_string()),
        (Outcome::Failed, None) => SpanStatus::Error("the pass failed".to_string()),
        _ => SpanStatus::Unset,
    };
    span.end(status);
}
