//! A rollout: once a kind's controller is replaced by another version (a
//! plugin hot-swapped, or replaced while the host was stopped), every
//! object of the kind gets a pass on the new one.
//!
//! The objects are walked in id order and queued a window at a time, never
//! all at once: a kind of a million objects would otherwise hold a queue
//! entry for each. Progress is recorded in the store about once a second as
//! the id below which every object has had its pass, so a host stopped
//! mid-rollout resumes where it was, and `beehive rollout status` can tell
//! how far it has gone. A pass counts for the rollout only if it began on
//! the new version: one already running when the swap came does not.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::engine::queue::{Outcome, Wake};
use crate::object::{ObjectId, Timestamp};
use crate::store::{Rollout as Record, RolloutState, Store, ops};
use crate::sync::lock;

/// The most objects a rollout has queued whose pass on the new version has
/// not ended yet.
pub(crate) const WINDOW: usize = 1024;

/// How often progress is recorded in the store while a rollout runs.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// How long a rollout waits for progress before it looks again at the
/// objects it is waiting on: some may have been deleted (a delete without
/// finalizers takes no pass), or dropped by a full queue.
const RECHECK_EVERY: Duration = Duration::from_secs(2);

/// One kind's rollout in progress.
pub(crate) struct Rollout {
    /// The kind's controller serial: a pass counts only if it ran on it.
    serial: u64,
    state: Mutex<State>,
    moved: Notify,
    driving: AtomicBool,
}

struct State {
    /// What the store holds, with `passed`, `failed` and `through_id` for
    /// the objects at or below the lowest one still outstanding.
    record: Record,
    /// The highest id queued so far.
    walked_to: ObjectId,
    /// Every object of the kind has been queued.
    walked: bool,
    /// Queued, and their first pass on the new version not ended.
    outstanding: BTreeSet<ObjectId>,
    /// Ended (whether the pass succeeded), above the lowest outstanding id:
    /// folded into the record as that id moves past them, so the record's
    /// counts always describe exactly the objects at or below `through_id`.
    ended_ahead: BTreeMap<ObjectId, bool>,
}

impl State {
    fn fold(&mut self) {
        let lowest = self.outstanding.first().copied();
        while let Some((&id, &succeeded)) = self.ended_ahead.first_key_value() {
            if lowest.is_some_and(|lowest| id > lowest) {
                break;
            }
            self.ended_ahead.remove(&id);
            match succeeded {
                true => self.record.passed += 1,
                false => self.record.failed += 1,
            }
        }
        self.record.through_id = match lowest {
            Some(lowest) => lowest - 1,
            None => self.walked_to,
        };
    }

    /// The record with what has ended above `through_id` counted too.
    fn live(&self) -> Record {
        let mut record = self.record.clone();
        for succeeded in self.ended_ahead.values() {
            match succeeded {
                true => record.passed += 1,
                false => record.failed += 1,
            }
        }
        record
    }
}

impl Rollout {
    /// Tracks `record`, a revision still rolling, for passes that run on
    /// controller `serial`; it resumes past `record.through_id`.
    pub(crate) fn new(record: Record, serial: u64) -> Self {
        let walked_to = record.through_id;
        Rollout {
            serial,
            state: Mutex::new(State {
                record,
                walked_to,
                walked: false,
                outstanding: BTreeSet::new(),
                ended_ahead: BTreeMap::new(),
            }),
            moved: Notify::new(),
            driving: AtomicBool::new(false),
        }
    }

    /// The rollout as it stands now.
    pub(crate) fn live(&self) -> Record {
        lock(&self.state).live()
    }

    /// Whether this call is the first to ask: only one driver runs.
    pub(crate) fn claim_driver(&self) -> bool {
        !self.driving.swap(true, Ordering::SeqCst)
    }

    /// Notes that a pass of `id` on controller `serial` ended with `outcome`.
    pub(crate) fn note(&self, id: ObjectId, serial: u64, outcome: Outcome) {
        if serial != self.serial {
            return;
        }
        let mut state = lock(&self.state);
        if !state.outstanding.remove(&id) {
            return;
        }
        match outcome {
            Outcome::Succeeded { .. } => _ = state.ended_ahead.insert(id, true),
            Outcome::Failed => _ = state.ended_ahead.insert(id, false),
            Outcome::Gone => {}
        }
        state.fold();
        drop(state);
        self.moved.notify_one();
    }

    /// Up to how many more objects to queue, past which id; `None` once
    /// every object has been queued.
    fn room(&self) -> Option<(ObjectId, usize)> {
        let state = lock(&self.state);
        (!state.walked).then(|| (state.walked_to, WINDOW - state.outstanding.len()))
    }

    /// Records `ids` (the next in id order) as queued, or, for none, that
    /// the walk is over.
    fn queued(&self, ids: &[ObjectId]) {
        let mut state = lock(&self.state);
        match ids.last() {
            Some(&last) => {
                state.outstanding.extend(ids.iter().copied());
                state.walked_to = last;
            }
            None => state.walked = true,
        }
        state.fold();
    }

    fn outstanding(&self) -> Vec<ObjectId> {
        lock(&self.state).outstanding.iter().copied().collect()
    }

    /// Forgets the outstanding objects that no longer exist.
    fn keep_only(&self, existing: &BTreeSet<ObjectId>) {
        let mut state = lock(&self.state);
        state.outstanding.retain(|id| existing.contains(id));
        state.fold();
    }

    fn is_done(&self) -> bool {
        let state = lock(&self.state);
        state.walked && state.outstanding.is_empty()
    }

    fn finish(&self) -> Record {
        let mut state = lock(&self.state);
        state.fold();
        state.record.state = RolloutState::Complete;
        state.record.finished_at = Some(Timestamp::now());
        state.record.clone()
    }

    fn checkpoint(&self) -> Record {
        lock(&self.state).record.clone()
    }
}

/// What a rollout's driver needs of its kind.
pub(crate) trait RolloutKind {
    /// How many more objects the kind's queue can take now.
    fn queue_room(&self) -> usize;
    /// Queues `ids` for a pass.
    fn queue(&self, ids: Vec<ObjectId>, wake: Wake);
    /// Queues those of `ids` the queue has no pass pending for.
    fn queue_unless_pending(&self, ids: &[ObjectId]);
    /// The kind.
    fn group_kind(&self) -> &crate::object::GroupKind;
}

/// Walks the kind's objects and waits for their passes, recording progress,
/// until every object has had one or `cancelled` resolves (a stopping host
/// or kind: the store keeps the rollout rolling, to resume at next start).
pub(crate) async fn drive(
    rollout: &Rollout,
    kind: &impl RolloutKind,
    store: &Store,
    cancelled: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(cancelled);
    let mut recorded_at = Instant::now();
    while !rollout.is_done() {
        let queued_more = match rollout.room() {
            Some((after, room)) => queue_more(rollout, kind, store, after, room),
            None => false,
        };
        if !queued_more {
            tokio::select! {
                _ = &mut cancelled => break,
                _ = rollout.moved.notified() => {}
                _ = tokio::time::sleep(RECHECK_EVERY) => recheck(rollout, kind, store),
            }
        }
        if recorded_at.elapsed() >= CHECKPOINT_EVERY {
            record(store, rollout.checkpoint()).await;
            recorded_at = Instant::now();
        }
    }
    if rollout.is_done() {
        let record = rollout.finish();
        tracing::info!(
            kind = %record.group_kind,
            revision = record.revision,
            passed = record.passed,
            failed = record.failed,
            "rollout complete"
        );
        self::record(store, record).await;
    } else {
        record(store, rollout.checkpoint()).await;
    }
}

/// Queues the next objects, as many as both the window and the queue have
/// room for; whether it queued any (or found the walk over).
fn queue_more(
    rollout: &Rollout,
    kind: &impl RolloutKind,
    store: &Store,
    after: ObjectId,
    room: usize,
) -> bool {
    let want = room.min(kind.queue_room());
    if want == 0 {
        return false;
    }
    match store.read(|r| r.ids_after(kind.group_kind(), after, want)) {
        Ok(ids) => {
            rollout.queued(&ids);
            if !ids.is_empty() {
                kind.queue(ids, Wake::Ordinary);
            }
            true
        }
        Err(error) => {
            tracing::warn!(kind = %kind.group_kind(), %error, "rollout: reading the next objects failed");
            false
        }
    }
}

/// Forgets outstanding objects that are gone, and queues again those whose
/// wake a full queue dropped.
fn recheck(rollout: &Rollout, kind: &impl RolloutKind, store: &Store) {
    let outstanding = rollout.outstanding();
    let (Some(&first), Some(&last)) = (outstanding.first(), outstanding.last()) else {
        return;
    };
    match store.read(|r| r.ids_between(kind.group_kind(), first, last)) {
        Ok(existing) => rollout.keep_only(&existing.into_iter().collect()),
        Err(error) => {
            tracing::warn!(kind = %kind.group_kind(), %error, "rollout: rechecking objects failed");
            return;
        }
    }
    kind.queue_unless_pending(&rollout.outstanding());
}

async fn record(store: &Store, record: Record) {
    let written = store
        .write(move |tx| ops::record_rollout_progress(tx, &record))
        .await;
    if let Err(error) = written {
        // Progress is recorded again within a second; a host stopped before
        // then repeats some passes on resuming, which costs only time.
        tracing::warn!(%error, "rollout: recording progress failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::GroupKind;

    fn record() -> Record {
        Record {
            group_kind: GroupKind::new("g", "K"),
            revision: 2,
            source: "k.wasm".into(),
            content_hash: Some("ab".into()),
            state: RolloutState::Rolling,
            started_at: Timestamp::from_millis(0),
            finished_at: None,
            objects: 4,
            passed: 0,
            failed: 0,
            through_id: 0,
        }
    }

    const DONE: Outcome = Outcome::Succeeded { requeue: None };

    #[test]
    fn counts_and_the_checkpoint_cover_exactly_the_objects_below_the_lowest_outstanding() {
        let rollout = Rollout::new(record(), 7);
        rollout.queued(&[1, 2, 3, 4]);
        rollout.note(3, 7, DONE);
        rollout.note(4, 7, Outcome::Failed);
        let stored = rollout.checkpoint();
        assert_eq!((stored.passed, stored.failed, stored.through_id), (0, 0, 0));
        let live = rollout.live();
        assert_eq!((live.passed, live.failed), (1, 1));
        rollout.note(1, 7, DONE);
        assert_eq!(rollout.checkpoint().through_id, 1);
        rollout.note(2, 7, DONE);
        let stored = rollout.checkpoint();
        assert_eq!((stored.passed, stored.failed, stored.through_id), (3, 1, 4));
    }

    #[test]
    fn a_pass_on_the_old_version_does_not_count() {
        let rollout = Rollout::new(record(), 7);
        rollout.queued(&[1]);
        rollout.note(1, 6, DONE);
        assert_eq!(rollout.outstanding(), vec![1]);
        rollout.note(1, 7, DONE);
        assert!(rollout.outstanding().is_empty());
        rollout.queued(&[]);
        assert!(rollout.is_done());
        assert_eq!(rollout.finish().state, RolloutState::Complete);
    }

    #[test]
    fn a_deleted_object_is_no_longer_waited_for_nor_counted() {
        let rollout = Rollout::new(record(), 1);
        rollout.queued(&[5, 6]);
        rollout.keep_only(&[6].into_iter().collect());
        rollout.note(6, 1, DONE);
        rollout.queued(&[]);
        assert!(rollout.is_done());
        let done = rollout.finish();
        assert_eq!((done.passed, done.failed, done.through_id), (1, 0, 6));
    }

    #[test]
    fn a_resumed_rollout_walks_on_past_its_checkpoint() {
        let mut resumed = record();
        resumed.through_id = 40;
        resumed.passed = 3;
        let rollout = Rollout::new(resumed, 1);
        assert_eq!(rollout.room(), Some((40, WINDOW)));
    }
}
