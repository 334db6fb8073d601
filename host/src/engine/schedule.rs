//! When objects are next due: a point read and a live gauge of one object's
//! schedule, both from the kind's work queue.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use futures_util::Stream;

use crate::engine::kind::Kind;
use crate::engine::queue::Due;
use crate::object::ObjectId;

/// When an object is next due to reconcile, as far as per-object timers know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// A pending backoff retry, a requeue delay, a wake held by the floor, or
    /// now for an object already queued; `None` when nothing is scheduled.
    /// Drivers that scan (the owed pass, the full pass) are not timers, so a
    /// pass can come sooner.
    pub next_requeue_at: Option<SystemTime>,
}

impl Schedule {
    pub(crate) fn of(due: Due) -> Schedule {
        let next_requeue_at = match due {
            Due::Nothing => None,
            Due::Now => Some(SystemTime::now()),
            Due::At(at) => {
                let from_now = at.saturating_duration_since(tokio::time::Instant::now());
                Some(SystemTime::now() + from_now)
            }
        };
        Schedule { next_requeue_at }
    }
}

/// One object's [`Schedule`] as a gauge: the current value, then a new one
/// whenever it changes (a requeue delay, a backoff step, a wake, a dispatch,
/// a requeue). Rescheduling moves no version, so object watches never show
/// it; this does. It converges on the current value and may skip values in
/// between. It ends when the kind's controller is unregistered or the host
/// stops.
pub struct ScheduleStream {
    inner: Pin<Box<dyn Stream<Item = Schedule> + Send>>,
}

impl std::fmt::Debug for ScheduleStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduleStream").finish_non_exhaustive()
    }
}

impl Stream for ScheduleStream {
    type Item = Schedule;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Schedule>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// Follows object `id`'s schedule in `kind`'s queue.
pub(crate) fn watch(kind: Arc<Kind>, id: ObjectId) -> ScheduleStream {
    let changes = kind.queue.schedule_changes();
    let start = (kind, changes, None::<Due>);
    let stream = futures_util::stream::unfold(start, move |(kind, mut changes, last)| async move {
        loop {
            let due = kind.queue.due_of(id);
            if last != Some(due) {
                return Some((Schedule::of(due), (kind, changes, Some(due))));
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                _ = kind.cancel.cancelled() => return None,
            }
        }
    });
    ScheduleStream {
        inner: Box::pin(stream),
    }
}
