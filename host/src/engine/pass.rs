//! One pass over one object: load it, collect it if it is being deleted,
//! call the controller, then record the handshake.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures_util::FutureExt;
use tracing::Instrument;

use crate::engine::controller::{Action, StoredController, Verdict};
use crate::engine::controller_client::ControllerClient;
use crate::engine::options::KindSettings;
use crate::engine::pass_trace::{end_pass_span, note_result, open_pass_span};
use crate::engine::queue::{Outcome, WorkQueue};
use crate::engine::status_grace::GraceWriter;
use crate::error::Result;
use crate::event::EventSpec;
use crate::json::Json;
use crate::metrics::KindMetrics;
use crate::object::{GroupKind, ObjectId, ObjectRef};
use crate::object::{RawObject, Timestamp};
use crate::store::{Collected, Store, WriteTx, ops};
use crate::sync::read;
use crate::trace::{Span, Tracer};

/// What a pass needs of its kind, lent by the kind's worker: the pass
/// reads the controller and settings as they are when it gets to them, so
/// a swap between passes takes effect at the next read.
pub(crate) struct KindView<'k> {
    pub(crate) group_kind: &'k GroupKind,
    pub(crate) controller: &'k RwLock<Arc<dyn StoredController>>,
    pub(crate) settings: &'k RwLock<KindSettings>,
    pub(crate) metrics: &'k KindMetrics,
    pub(crate) queue: &'k WorkQueue,
    pub(crate) grace: &'k Arc<GraceWriter>,
    pub(crate) tracer: Option<&'k Tracer>,
    /// The kind as text, made once for every pass's span.
    pub(crate) label: &'k Arc<str>,
}

impl KindView<'_> {
    fn controller(&self) -> Arc<dyn StoredController> {
        read(self.controller).clone()
    }

    fn settings(&self) -> KindSettings {
        *read(self.settings)
    }
}

/// How a pass ends: decided, or with the handshake still to write.
pub(crate) enum Finish {
    /// The pass is over.
    Done(Outcome),
    /// The controller has returned; recording the handshake is what remains.
    /// The object stays running until it is written.
    Handshake(Handshake),
}

/// The write that ends a pass, not yet handed to the writer, so a worker can
/// gather the ends of several quick passes and submit them together.
///
/// Nothing is queued at the writer until [`submit`](Self::submit): a queued
/// job whose caller is busy elsewhere may be the one whose turn it is to
/// lead the writer, and every other writer would wait for it.
pub(crate) struct Handshake(SubmitLater);

/// Queues a handshake's write: whether its caller leads, and the outcome.
type SubmitLater = Box<dyn FnOnce(&Store) -> (bool, Written) + Send>;

/// A submitted handshake: resolves to the pass's outcome once committed.
pub(crate) type Written = Pin<Box<dyn Future<Output = Outcome> + Send>>;

impl Handshake {
    /// The end that writes `job` and makes the pass's outcome of its result.
    fn new<R: Send + 'static>(
        job: impl FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        outcome: impl FnOnce(Result<R>) -> Outcome + Send + 'static,
    ) -> Self {
        Self(Box::new(move |store| {
            let (leads, written) = store.submit_telling_lead(job);
            let written: Written = Box::pin(async move { outcome(written.await) });
            (leads, written)
        }))
    }

    /// Queues the write at the writer: whether the caller leads the
    /// writer's next batch (and must then await at once), and the outcome.
    pub(crate) fn submit(self, store: &Store) -> (bool, Written) {
        (self.0)(store)
    }
}

/// Runs one pass of object `id` of `kind`, from what [`load_batch`] found
/// for it.
pub(crate) async fn run(store: &Store, kind: &KindView<'_>, id: i64, loaded: Load) -> Finish {
    match try_run(store, kind, id, loaded).await {
        Ok(finish) => finish,
        Err(error) => Finish::Done(store_failure(kind.group_kind, id, error)),
    }
}

fn store_failure(kind: &crate::object::GroupKind, id: i64, error: crate::Error) -> Outcome {
    tracing::warn!(%kind, id, %error, "pass failed in the store");
    Outcome::Failed
}

/// How each pass of a batch whose load failed ends.
pub(crate) fn load_failed(
    kind: &crate::object::GroupKind,
    ids: &[i64],
    error: &crate::Error,
) -> Outcome {
    tracing::warn!(%kind, ?ids, %error, "passes failed in the store: could not load their objects");
    Outcome::Failed
}

fn after_collect(collected: Collected) -> Outcome {
    match collected {
        Collected::Removed => Outcome::Gone,
        // The release of its last claim pushes it again.
        Collected::Claimed | Collected::Live | Collected::AwaitingFinalizers => {
            Outcome::Succeeded { requeue: None }
        }
    }
}

async fn try_run(store: &Store, kind: &KindView<'_>, id: i64, loaded: Load) -> Result<Finish> {
    let loaded = match loaded {
        Ok(Some(loaded)) => loaded,
        Ok(None) => return Ok(Finish::Done(Outcome::Gone)),
        // Quarantined: the same bytes would fail the same way under backoff
        // forever. The owed pass comes back each interval, so the warning
        // repeats until someone rewrites the spec.
        Err(error @ crate::Error::Migration { .. }) => {
            tracing::warn!(kind = %kind.group_kind, id, %error, "cannot reconcile an object this build cannot read");
            return Ok(Finish::Done(Outcome::Succeeded { requeue: None }));
        }
        Err(error) => return Err(error),
    };
    let object = &loaded.object;
    if object.meta.deletion_requested_at.is_some() {
        if object.meta.finalizers.is_empty() {
            // Nothing for the controller to do: collecting is the whole pass,
            // and like a handshake it need not hold up the worker.
            let group_kind = kind.group_kind.clone();
            return Ok(Finish::Handshake(Handshake::new(
                move |tx| ops::collect(tx, id),
                move |collected| match collected {
                    Ok(collected) => after_collect(collected),
                    Err(error) => store_failure(&group_kind, id, error),
                },
            )));
        }
        let collected = store.write(move |tx| ops::collect(tx, id)).await?;
        if collected != Collected::AwaitingFinalizers {
            return Ok(Finish::Done(after_collect(collected)));
        }
    }
    reconcile(store, kind, loaded).await
}

/// What a pass starts from.
pub(crate) struct Loaded {
    object: RawObject,
    /// The store-wide write cursor sampled before the read: every write at or
    /// below it is in what the pass saw. A successful pass of a dependent
    /// records it as its watermark.
    cursor: i64,
    /// What the object depended on as the pass loaded it.
    dependencies: Vec<ObjectId>,
}

/// What one pass starts from: the object if it still exists and is of the
/// kind, or why it cannot be shown to the controller.
pub(crate) type Load = Result<Option<Loaded>>;

/// Loads the objects of the passes of `ids` in one read, one [`Load`] per
/// id, in order. A worker with a line of work takes several objects at once:
/// one read of many rows costs little more than a read of one. An object
/// written after this read is woken while running, so its pass runs again.
pub(crate) fn load_batch(store: &Store, kind: &KindView<'_>, ids: &[i64]) -> Result<Vec<Load>> {
    let cursor = store.resource_version();
    let mut found: HashMap<i64, (RawObject, Vec<ObjectId>)> = store
        .read(|r| r.objects_for_passes(ids))?
        .into_iter()
        .map(|(object, dependencies)| (object.meta.id, (object, dependencies)))
        .collect();
    let loads = ids.iter().map(|id| match found.remove(id) {
        Some((object, _)) if object.meta.group_kind != *kind.group_kind => Ok(None),
        Some((object, dependencies)) => prepare(store, object, dependencies, cursor).map(Some),
        None => Ok(None),
    });
    Ok(loads.collect())
}

/// A loaded object made ready for its pass: upgraded to the current
/// version, unless it is only to be collected.
fn prepare(
    store: &Store,
    object: RawObject,
    dependencies: Vec<ObjectId>,
    cursor: i64,
) -> Result<Loaded> {
    if object.meta.deletion_requested_at.is_some() && object.meta.finalizers.is_empty() {
        // Only collected, never shown to the controller.
        return Ok(Loaded {
            object,
            cursor,
            dependencies: Vec::new(),
        });
    }
    let object = store.migrations().upgrade(object)?;
    Ok(Loaded {
        object,
        cursor,
        dependencies,
    })
}

async fn reconcile(store: &Store, kind: &KindView<'_>, loaded: Loaded) -> Result<Finish> {
    let Loaded {
        object,
        cursor,
        dependencies,
    } = loaded;
    let watermark = (!dependencies.is_empty()).then_some(cursor);
    let id = object.meta.id;
    let controller = kind.controller();
    let pass_span = kind.tracer.map(|tracer| {
        let dependent = !dependencies.is_empty();
        Arc::new(open_pass_span(
            tracer, store, kind.label, &object, dependent,
        ))
    });
    let client = ControllerClient::new(
        store.clone(),
        ObjectRef {
            id,
            group_kind: kind.group_kind.clone(),
        },
        object.status.clone(),
        dependencies,
        kind.settings().transaction_hold_limit,
        kind.grace.clone(),
        pass_span.clone(),
    );
    // Everything the pass logs, a plugin's lines included, carries these.
    let span = tracing::info_span!(
        "pass",
        kind = %kind.group_kind,
        id,
        object = %object.meta.name,
        generation = object.meta.generation,
        version = tracing::field::Empty,
    );
    let started = std::time::Instant::now();
    let called = AssertUnwindSafe(controller.start_pass(&client, &object))
        .catch_unwind()
        .instrument(span)
        .await;
    let took = started.elapsed();
    let decode_failure = client.decode_failure();
    let (held_status, left_open) = client.end();
    let quarantined = decode_failure.as_ref().map(|_| object.meta.generation);
    if kind.queue.note_quarantine(id, quarantined)
        && let Some(why) = decode_failure
    {
        tracing::warn!(object = %object.meta.label(), error = %why, "quarantined: the object does not decode");
    }
    let result = match called {
        Ok(_) if left_open => {
            Action::backoff("the pass returned with a transaction open; it was rolled back")
        }
        Ok(action) => action,
        Err(_) => Action::backoff("the controller panicked"),
    };
    record(kind.metrics, &result, took);
    if let Some(pass_span) = &pass_span {
        note_result(pass_span, &result, kind.queue.failed_at(id).is_some());
    }
    Ok(handshake(
        kind,
        &object,
        held_status,
        watermark,
        result,
        pass_span,
    ))
}

/// Counts the pass as controller-runtime does: `error` for a failure,
/// `requeue_after` for a pass that asked for a delay, `requeue` for one
/// that did not settle, `success` otherwise.
fn record(metrics: &crate::metrics::KindMetrics, result: &Action, took: Duration) {
    metrics
        .reconcile_time
        .observe(crate::metrics::seconds(took));
    match (result.verdict(), result.requeue_delay()) {
        (Verdict::Failed(_), _) => {
            metrics.error.inc();
            metrics.errors.inc();
        }
        (_, Some(_)) => {
            metrics.requeue_after.inc();
        }
        (Verdict::Unsettled, None) => {
            metrics.requeue.inc();
        }
        (Verdict::Settled, None) => {
            metrics.success.inc();
        }
    }
}

/// What the pass leaves to write: any status it still holds, then the
/// handshake for its verdict, all in one job. A settled pass records the
/// generation it was handed (never a fresh read) and takes away the owed
/// passes it saw at load; that costs nothing when the generation is already
/// recorded, nothing was owed and no status is held.
fn handshake(
    kind: &KindView<'_>,
    object: &RawObject,
    held_status: Option<Json>,
    watermark: Option<i64>,
    result: Action,
    span: Option<Arc<Span>>,
) -> Finish {
    let meta = &object.meta;
    let (id, generation, owed) = (meta.id, meta.generation, object.bookkeeping.reconcile_owed);
    let label = meta.label();
    let object_ref = meta.to_ref();
    let settings = kind.settings();
    let (verdict, requeue) = result.into_parts();
    let failure = match &verdict {
        Verdict::Failed(message) => Some(failure_parts(message).0.to_string()),
        _ => None,
    };
    let trace_id = span
        .as_ref()
        .map(|span| span.context())
        .filter(|context| context.sampled)
        .map(|context| context.trace_id.to_hex());
    let event_trace = trace_id.clone();
    // Whether the handshake's own statement records the pass's trace.
    let mut trace_recorded = false;
    let (outcome, job): (Outcome, Option<Job>) = match verdict {
        Verdict::Settled => {
            let cadence = settings.cadence.individual_pass_interval.map(jittered);
            let outcome = Outcome::Succeeded {
                requeue: requeue.or(cadence),
            };
            let recorded = meta.observed_generation == Some(generation) && owed == 0;
            let trace = trace_id.clone();
            let job: Option<Job> = match held_status {
                Some(status) => Some(Box::new(move |tx| {
                    let settled = settled(generation, owed, trace.as_deref());
                    ops::settle_with_status(tx, &object_ref, &status, settled)
                })),
                None if recorded => None,
                None => Some(Box::new(move |tx| {
                    let settled = settled(generation, owed, trace.as_deref());
                    ops::stamp_observed(tx, &object_ref, settled)
                })),
            };
            trace_recorded = job.is_some();
            (outcome, job)
        }
        Verdict::Unsettled => {
            let outcome = Outcome::Succeeded {
                requeue: Some(requeue.unwrap_or(settings.cadence.owed_pass_interval)),
            };
            let job: Option<Job> = (held_status.is_some() || owed > 0).then(|| {
                Box::new(move |tx: &mut WriteTx<'_>| {
                    if let Some(status) = held_status {
                        ops::write_status(tx, &object_ref, &status)?;
                    }
                    ops::subtract_owed(tx, id, owed)
                }) as Job
            });
            (outcome, job)
        }
        Verdict::Failed(message) => {
            let (headline, trace) = failure_parts(&message);
            tracing::warn!(object = %label, error = %headline, "reconcile failed");
            let mut event = EventSpec::warning("ReconcileFailed")
                .category("reconcile")
                .message(crate::naming::clip(
                    headline,
                    crate::naming::MAX_MESSAGE_BYTES,
                ));
            if let Some(trace) = trace {
                let trace = crate::naming::clip(trace, crate::naming::MAX_MESSAGE_BYTES);
                event = event.detail(serde_json::json!({ "trace": trace }));
            }
            let job: Job = Box::new(move |tx| {
                if let Some(status) = held_status {
                    ops::write_status(tx, &object_ref, &status)?;
                }
                ops::add_event(tx, &object_ref, &event, event_trace.as_deref())
            });
            (Outcome::Failed, Some(job))
        }
    };
    let succeeded = matches!(outcome, Outcome::Succeeded { .. });
    let job = match watermark {
        Some(cursor) if succeeded => Some(with_watermark(job, id, cursor)),
        _ => job,
    };
    let next_pass = match &outcome {
        Outcome::Succeeded { requeue } => *requeue,
        Outcome::Failed => Some(kind.queue.next_backoff(id)),
        Outcome::Gone => None,
    };
    let job = with_requeue(job, id, object.bookkeeping.requeue_at, next_pass);
    let job = match trace_recorded {
        true => job,
        false => with_pass_trace(job, id, trace_id),
    };
    let Some(job) = job else {
        if let Some(span) = &span {
            end_pass_span(span, &outcome, failure.as_deref());
        }
        return Finish::Done(outcome);
    };
    let write_span = span.as_ref().map(|span| span.store_write("handshake"));
    Finish::Handshake(Handshake::new(job, move |written| {
        if let Some(write_span) = write_span {
            write_span.end(crate::trace::status_of(&written));
        }
        let outcome = match written {
            Ok(()) => outcome,
            Err(crate::Error::NotFound { .. }) => Outcome::Gone,
            Err(error) => {
                tracing::warn!(object = %label, %error, "could not record the end of the pass");
                Outcome::Failed
            }
        };
        if let Some(span) = span {
            end_pass_span(&span, &outcome, failure.as_deref());
        }
        outcome
    }))
}

/// What a settled pass records, its trace included when it is traced.
fn settled(generation: i64, owed_serviced: i64, trace_id: Option<&str>) -> ops::Settled<'_> {
    ops::Settled {
        generation,
        owed_serviced,
        trace_id,
    }
}

/// A write left for the end of a pass.
type Job = Box<dyn FnOnce(&mut WriteTx<'_>) -> Result<()> + Send>;

/// `job`, then the dependent's watermark: a successful pass saw every write up
/// to `cursor`, so the stale-dependents pass need not wake it for those.
fn with_watermark(job: Option<Job>, id: i64, cursor: i64) -> Job {
    Box::new(move |tx| {
        if let Some(job) = job {
            job(tx)?;
        }
        ops::record_watermark(tx, id, cursor)
    })
}

/// `job`, then the time the pass asked to run again (or none), so a
/// restart keeps the appointment. Bookkeeping only: no version moves. A pass
/// that asks for nothing, where nothing was asked before, writes nothing.
fn with_requeue(
    job: Option<Job>,
    id: i64,
    stored: Option<Timestamp>,
    next_pass: Option<Duration>,
) -> Option<Job> {
    if stored.is_none() && next_pass.is_none() {
        return job;
    }
    let due = next_pass.map(|delay| {
        let delay = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
        Timestamp::now().as_millis().saturating_add(delay)
    });
    Some(Box::new(move |tx| {
        if let Some(job) = job {
            job(tx)?;
        }
        ops::set_requeue_at(tx, id, due)
    }))
}

/// `job`, then the trace id of a traced pass, for `describe`, when the
/// handshake's statement did not record it. Bookkeeping only; written only
/// when the host traces.
fn with_pass_trace(job: Option<Job>, id: i64, trace_id: Option<String>) -> Option<Job> {
    let Some(trace_id) = trace_id else {
        return job;
    };
    Some(Box::new(move |tx| {
        if let Some(job) = job {
            job(tx)?;
        }
        ops::set_last_pass_trace(tx, id, &trace_id)
    }))
}

/// `interval` stretched by up to a tenth, so objects armed together drift apart.
pub(crate) fn jittered(interval: Duration) -> Duration {
    interval + random_below(interval / 10)
}

/// A random duration in `[0, bound)`, at millisecond grain.
pub(crate) fn random_below(bound: Duration) -> Duration {
    let millis = bound.as_millis() as u64;
    if millis == 0 {
        return Duration::ZERO;
    }
    let random = uuid::Uuid::new_v4().as_u128() as u64;
    Duration::from_millis(random % millis)
}

/// A failure's first line, and the lines after it (a Python traceback, a
/// JavaScript stack), which go to the event's detail rather than its
/// message: the message is what tables show.
fn failure_parts(message: &str) -> (&str, Option<&str>) {
    match message.split_once('\n') {
        Some((headline, rest)) if !rest.trim().is_empty() => (headline, Some(rest.trim_end())),
        Some((headline, _)) => (headline, None),
        None => (message, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_splits_into_its_headline_and_its_trace() {
        assert_eq!(failure_parts("boom"), ("boom", None));
        assert_eq!(failure_parts("boom\n"), ("boom", None));
        assert_eq!(
            failure_parts("ValueError: boom\nTraceback:\n  line 3\n"),
            ("ValueError: boom", Some("Traceback:\n  line 3"))
        );
    }
}
