//! Writes the statuses that passes still hold once [`STATUS_GRACE`] is over.
//!
//! One task per kind does it, and only while some pass holds a status: it
//! sleeps until the oldest hold falls due, writes those whose pass is still
//! running (each on a task of its own: a rare, long pass), and ends when no
//! hold is left. A task per held status cost a spawn, a timer and, with the
//! other worker thread parked, a cross-thread wake-up on every pass that
//! reported a status, almost all of which return long before the grace.
//!
//! Holds fall due in the order they were made (each is its time plus the
//! same grace), so they queue in that order. At most as many wait as passes
//! report a changed status within one grace; each is a time and a weak
//! reference, freed as it falls due.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use tokio::time::Instant;

use super::{PassState, STATUS_GRACE};
use crate::store::ops;
use crate::sync::lock;

/// The held statuses of one kind's passes, and whether a task is writing
/// them.
#[derive(Default)]
pub(crate) struct GraceWriter {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    due: VecDeque<(Instant, Weak<PassState>)>,
    task_running: bool,
}

impl GraceWriter {
    /// A writer with nothing held.
    pub(crate) fn new() -> Arc<GraceWriter> {
        Arc::new(GraceWriter::default())
    }

    /// Writes `pass`'s held status once the grace is over, unless the pass
    /// has written it or returned by then.
    pub(super) fn hold(self: &Arc<Self>, pass: &Arc<PassState>) {
        let mut held = lock(&self.held);
        held.due
            .push_back((Instant::now() + STATUS_GRACE, Arc::downgrade(pass)));
        if !held.task_running {
            held.task_running = true;
            drop(held);
            let writer = self.clone();
            pass.store.spawn(async move { writer.run().await });
        }
    }

    async fn run(self: Arc<Self>) {
        loop {
            let next = {
                let mut held = lock(&self.held);
                let Some(&(due, _)) = held.due.front() else {
                    // Decided under the lock that `hold` takes: a hold made
                    // after this starts a task of its own.
                    held.task_running = false;
                    return;
                };
                if due > Instant::now() {
                    due
                } else {
                    let Some((_, pass)) = held.due.pop_front() else {
                        continue;
                    };
                    drop(held);
                    if let Some(pass) = pass.upgrade() {
                        write_if_still_held(pass);
                    }
                    continue;
                }
            };
            tokio::time::sleep_until(next).await;
        }
    }
}

/// Writes the status `pass` still holds, if the pass is still running.
fn write_if_still_held(pass: Arc<PassState>) {
    if pass.returned.load(Ordering::SeqCst) {
        return;
    }
    let answer = {
        let mut slot = lock(&pass.status);
        slot.flush_scheduled = false;
        let Some(status) = slot.pending.take() else {
            return;
        };
        let object = pass.object.clone();
        pass.store
            .submit(move |tx| ops::write_status(tx, &object, &status))
    };
    let id = pass.object.id;
    pass.store.spawn(async move {
        if let Err(error) = answer.await {
            tracing::warn!(object = id, %error, "a held status could not be written");
        }
    });
}
