//! Writes the statuses that passes still hold once their grace is over.
//!
//! One task per kind does it, and only while some pass holds a status: it
//! sleeps until the oldest hold falls due, has each pass still running
//! write what it holds, and ends when no hold is left. A task per held
//! status cost a spawn, a timer and, with the other worker thread parked, a
//! cross-thread wake-up on every pass that reported a status, almost all of
//! which return long before the grace.
//!
//! Holds fall due in the order they were made (each is its time plus the
//! same grace), so they queue in that order. At most as many wait as passes
//! report a changed status within one grace; each is a time and a weak
//! reference, freed as it falls due.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::store::Store;
use crate::sync::lock;

/// A pass that holds a status until its next write, its end or its grace.
pub(crate) trait HeldStatus: Send + Sync + 'static {
    /// Writes the status still held, if the pass is still running.
    fn write_if_still_held(&self);
}

/// The held statuses of one kind's passes, and whether a task is writing
/// them.
pub(crate) struct GraceWriter {
    grace: Duration,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    due: VecDeque<(Instant, Weak<dyn HeldStatus>)>,
    task_running: bool,
}

impl GraceWriter {
    /// A writer with nothing held, whose holds fall due after `grace`.
    pub(crate) fn new(grace: Duration) -> Arc<GraceWriter> {
        Arc::new(GraceWriter {
            grace,
            held: Mutex::new(Held::default()),
        })
    }

    /// Has `pass` write what it holds once the grace is over, unless it has
    /// written it or returned by then; `store` runs the writer's task.
    pub(crate) fn hold(self: &Arc<Self>, pass: Weak<dyn HeldStatus>, store: &Store) {
        let mut held = lock(&self.held);
        held.due.push_back((Instant::now() + self.grace, pass));
        if !held.task_running {
            held.task_running = true;
            drop(held);
            let writer = self.clone();
            store.spawn(async move { writer.run().await });
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
                if due <= Instant::now() {
                    let pass = held.due.pop_front().and_then(|(_, pass)| pass.upgrade());
                    drop(held);
                    if let Some(pass) = pass {
                        pass.write_if_still_held();
                    }
                    continue;
                }
                due
            };
            tokio::time::sleep_until(next).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl HeldStatus for Counting {
        fn write_if_still_held(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_hold_is_written_once_after_its_grace_and_the_task_ends() {
        let store = Store::temporary().unwrap();
        let writer = GraceWriter::new(Duration::from_millis(50));
        let passes: Vec<Arc<Counting>> = (0..3).map(|_| Arc::default()).collect();
        for pass in &passes {
            let held: Arc<dyn HeldStatus> = pass.clone();
            writer.hold(Arc::downgrade(&held), &store);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            passes[0].0.load(Ordering::SeqCst),
            0,
            "not before its grace"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        for pass in &passes {
            assert_eq!(pass.0.load(Ordering::SeqCst), 1);
        }
        assert!(!lock(&writer.held).task_running, "no hold left, no task");

        let dropped: Arc<dyn HeldStatus> = Arc::new(Counting::default());
        writer.hold(Arc::downgrade(&dropped), &store);
        drop(dropped);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(lock(&writer.held).due.is_empty(), "a gone pass is let go");
    }
}
