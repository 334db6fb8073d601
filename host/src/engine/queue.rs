//! The per-kind work queue: which object runs next, and when.
//!
//! One slot per object: a wake for an object already queued collapses into
//! it, and an object is never handed to two workers at once (a wake while it
//! runs is remembered and served when the pass ends). Each object has a
//! re-enqueue floor: an ordinary wake within the floor of its last dispatch
//! waits for the floor. A failed pass arms a backoff alarm (1 s doubling up to
//! the cap) that absorbs ordinary wakes; an immediate wake (a push at commit,
//! a requeue) cancels any alarm and bypasses the floor. A successful pass
//! clears the backoff.
//!
//! The queue holds at most [`QueueConfig::capacity`] objects. Past it, wakes
//! for work the store records as owed (pushes at commit, the owed scan) are
//! dropped, since an owed scan finds that work again; once the work in it
//! has drained to half, it asks its kind for that scan
//! ([`WorkQueue::refill_wanted`]). Other wakes (requeues, full passes) are
//! never dropped. Settled objects waiting out their floor make way for new
//! work rather than count against it.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use crate::memory;
use crate::metrics::{QueueMetrics, seconds};
use crate::sync::lock;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::object::ObjectId;

/// How a wake treats alarms and the floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Wake {
    /// A scan found work: respects the floor, absorbed by a backoff alarm.
    Ordinary,
    /// A push at commit or a requeue: cancels any alarm, bypasses the floor.
    Immediate,
}

/// How a pass ended, as far as scheduling is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The pass succeeded; run again after `requeue`, if given.
    Succeeded { requeue: Option<Duration> },
    /// The pass failed: take the next step of the backoff ladder.
    Failed,
    /// The object no longer exists: forget it.
    Gone,
}

/// The queue's timing rules.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QueueConfig {
    /// The per-object re-enqueue floor.
    pub(crate) floor: Duration,
    /// The first backoff step.
    pub(crate) base_backoff: Duration,
    /// The backoff cap.
    pub(crate) max_backoff: Duration,
    /// The most objects the queue tracks before it drops owed wakes.
    pub(crate) capacity: usize,
}

/// How many objects a kind's queue tracks at most ([`QueueConfig::capacity`]):
/// about 10 MiB of entries. Converging a million owed objects once held an
/// entry for each, and the host peaked near 200 MiB.
pub(crate) const CAPACITY: usize = 65_536;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Ready,
    Running,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Alarm {
    due: Instant,
    backoff: bool,
}

#[derive(Debug)]
struct Entry {
    phase: Phase,
    alarm: Option<Alarm>,
    /// The last backoff step taken; `None` when not backing off.
    backoff: Option<Duration>,
    last_dispatch: Option<Instant>,
    /// When it last became ready: its wait in the queue starts there.
    ready_since: Option<Instant>,
    /// The strongest wake that arrived while the object was running.
    rerun: Option<Wake>,
    /// The generation whose documents did not decode, while the object is
    /// quarantined: it counts as failing, and the quarantine is logged
    /// once per generation.
    quarantined: Option<i64>,
}

impl Entry {
    /// Idle, with nothing pending, and past its floor: what the queue no
    /// longer needs to remember.
    fn is_forgettable(&self, now: Instant, floor: Duration) -> bool {
        self.is_settled() && self.last_dispatch.is_none_or(|at| at + floor <= now)
    }

    /// Idle, with nothing pending: only its floor keeps it.
    fn is_settled(&self) -> bool {
        self.phase == Phase::Idle
            && self.alarm.is_none()
            && self.backoff.is_none()
            && self.quarantined.is_none()
    }

    fn new() -> Self {
        Entry {
            phase: Phase::Idle,
            alarm: None,
            backoff: None,
            last_dispatch: None,
            ready_since: None,
            rerun: None,
            quarantined: None,
        }
    }
}

#[derive(Default)]
struct State {
    entries: HashMap<ObjectId, Entry>,
    ready: VecDeque<ObjectId>,
    alarms: BTreeSet<(Instant, ObjectId)>,
    /// Objects whose pass settled with nothing to follow, and when their
    /// floor passes: then the entry is only memory. Nearly in time order
    /// (the floor is one value for the kind; passes end out of order), so
    /// an entry may wait a little behind a later one.
    settled: VecDeque<(Instant, ObjectId)>,
    closed: bool,
    /// Owed wakes were dropped at capacity: an owed scan is due once the
    /// queue has room.
    overflowed: bool,
    /// Objects made ready since the metrics last heard.
    added: u64,
    /// When the latest pass of each object whose latest pass failed ended:
    /// kept beside the entries, as few objects fail at once.
    failed_at: HashMap<ObjectId, SystemTime>,
}

impl State {
    /// Drops the entries of settled objects whose floor has passed and that
    /// nothing has touched since, so a converged kind holds no memory per
    /// object; each settled pass is forgotten once, here. True when the
    /// object map shrank: a burst has ended.
    fn forget_settled(&mut self, now: Instant, floor: Duration) -> bool {
        while let Some(&(due, id)) = self.settled.front() {
            if due > now {
                break;
            }
            self.settled.pop_front();
            if self
                .entries
                .get(&id)
                .is_some_and(|e| e.is_forgettable(now, floor))
            {
                self.entries.remove(&id);
            }
        }
        self.shrink()
    }

    /// Forgets the oldest settled object before its floor passes, to make
    /// room at capacity: an ordinary wake within its floor then runs at
    /// once, as the floor is there to space out, not to hold work back.
    /// True when one was forgotten.
    fn evict_settled(&mut self) -> bool {
        while let Some((_, id)) = self.settled.pop_front() {
            if self.entries.get(&id).is_some_and(Entry::is_settled) {
                self.entries.remove(&id);
                return true;
            }
        }
        false
    }

    /// The objects tracked for work still to do: all but the settled ones
    /// only their floor keeps (nearly: the settled list may name an object
    /// woken since, which makes this a slight undercount).
    fn unsettled(&self) -> usize {
        self.entries.len().saturating_sub(self.settled.len())
    }

    /// Gives back what a burst of work left allocated: the maps keep their
    /// largest size otherwise, a million objects' worth after a big apply.
    /// True when the object map shrank.
    fn shrink(&mut self) -> bool {
        const SMALLEST: usize = 1024;
        let burst_ended =
            self.entries.capacity() > SMALLEST && self.entries.len() < self.entries.capacity() / 4;
        if burst_ended {
            self.entries.shrink_to(self.entries.len() * 2);
        }
        if self.ready.capacity() > SMALLEST && self.ready.len() < self.ready.capacity() / 4 {
            self.ready.shrink_to(self.ready.len() * 2);
        }
        if self.settled.capacity() > SMALLEST && self.settled.len() < self.settled.capacity() / 4 {
            self.settled.shrink_to(self.settled.len() * 2);
        }
        burst_ended
    }

    /// Puts idle `id` in line; it must have an entry.
    fn make_ready(&mut self, id: ObjectId, now: Instant) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.phase = Phase::Ready;
            entry.ready_since = Some(now);
        }
        self.ready.push_back(id);
        self.added += 1;
    }
}

/// When an object is next due, as far as the queue knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Due {
    /// Nothing is scheduled.
    Nothing,
    /// Queued or running.
    Now,
    /// An alarm: a requeue delay, a backoff step, a wake held by the floor.
    At(Instant),
}

/// The work queue of one kind.
pub(crate) struct WorkQueue {
    state: Mutex<State>,
    changed: Notify,
    /// Rung when dropped owed work may now fit.
    refill: Notify,
    config: Mutex<QueueConfig>,
    /// Bumped whenever the state may have changed while someone watches a
    /// schedule: rescheduling moves no version, so watches of the store
    /// cannot see it.
    schedule: watch::Sender<u64>,
    metrics: QueueMetrics,
}

/// The state, locked for a change; schedule watchers and the metrics hear
/// of it when the lock is released.
struct Edit<'a> {
    state: MutexGuard<'a, State>,
    schedule: &'a watch::Sender<u64>,
    metrics: &'a QueueMetrics,
}

impl std::ops::Deref for Edit<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for Edit<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for Edit<'_> {
    fn drop(&mut self) {
        let added = std::mem::take(&mut self.state.added);
        if added > 0 {
            self.metrics.adds.inc_by(added);
        }
        self.metrics
            .depth
            .set(i64::try_from(self.state.ready.len()).unwrap_or(i64::MAX));
        if self.schedule.receiver_count() > 0 {
            self.schedule.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

impl WorkQueue {
    /// A queue whose metrics go to a registry nobody reads.
    #[cfg(test)]
    pub(crate) fn new(config: QueueConfig) -> Self {
        let unexported = crate::metrics::Metrics::new(std::path::PathBuf::new());
        Self::with_metrics(config, unexported.kind("test").queue)
    }

    /// A queue that records its depth, adds, retries and durations in
    /// `metrics`.
    pub(crate) fn with_metrics(config: QueueConfig, metrics: QueueMetrics) -> Self {
        WorkQueue {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            refill: Notify::new(),
            config: Mutex::new(config),
            schedule: watch::Sender::new(0),
            metrics,
        }
    }

    fn edit(&self) -> Edit<'_> {
        Edit {
            state: lock(&self.state),
            schedule: &self.schedule,
            metrics: &self.metrics,
        }
    }

    /// A receiver that sees a new value whenever the schedule may have
    /// changed.
    pub(crate) fn schedule_changes(&self) -> watch::Receiver<u64> {
        self.schedule.subscribe()
    }

    /// How many objects are due and waiting for a worker.
    pub(crate) fn due(&self) -> usize {
        lock(&self.state).ready.len()
    }

    fn config(&self) -> QueueConfig {
        *lock(&self.config)
    }

    /// Changes the backoff cap (a replaced controller's setting).
    pub(crate) fn set_max_backoff(&self, max_backoff: Duration) {
        lock(&self.config).max_backoff = max_backoff;
    }

    /// Asks for a pass of `id`.
    pub(crate) fn wake(&self, id: ObjectId, wake: Wake) {
        let mut state = self.edit();
        if state.closed {
            return;
        }
        self.wake_locked(&mut state, id, wake, Instant::now());
    }

    /// Asks for a pass of each id.
    pub(crate) fn wake_all(&self, ids: impl IntoIterator<Item = ObjectId>, wake: Wake) {
        let mut state = self.edit();
        if state.closed {
            return;
        }
        let now = Instant::now();
        for id in ids {
            self.wake_locked(&mut state, id, wake, now);
        }
    }

    /// Asks for a pass of each id, for work the store records as owed: an id
    /// the queue does not track is dropped while the queue is at capacity,
    /// for the owed scan that follows [`refill_wanted`](Self::refill_wanted)
    /// to find again.
    pub(crate) fn wake_owed(&self, ids: impl IntoIterator<Item = ObjectId>, wake: Wake) {
        let mut state = self.edit();
        if state.closed {
            return;
        }
        let now = Instant::now();
        let capacity = self.config().capacity;
        for id in ids {
            if state.entries.len() >= capacity
                && !state.entries.contains_key(&id)
                && !state.evict_settled()
            {
                state.overflowed = true;
                continue;
            }
            self.wake_locked(&mut state, id, wake, now);
        }
    }

    /// Asks for a pass of each of `ids` that has none pending: neither ready,
    /// running, nor waiting for an alarm or a backoff step.
    pub(crate) fn wake_unless_pending(&self, ids: &[ObjectId]) {
        let unpending: Vec<ObjectId> = {
            let state = self.edit();
            ids.iter()
                .copied()
                .filter(|id| state.entries.get(id).is_none_or(Entry::is_settled))
                .collect()
        };
        self.wake_owed(unpending, Wake::Ordinary);
    }

    /// How many more objects the queue can track before it drops owed wakes.
    /// None left marks owed work as dropped: the caller cannot scan it in.
    pub(crate) fn room(&self) -> usize {
        let mut state = self.edit();
        let room = self.config().capacity.saturating_sub(state.unsettled());
        if room == 0 {
            state.overflowed = true;
        }
        room
    }

    /// Records that owed work was left out (a scan stopped at the room the
    /// queue had), so an owed scan follows once there is room.
    pub(crate) fn owed_left_out(&self) {
        self.edit().overflowed = true;
    }

    /// Completes once owed wakes were dropped and the queue has drained to
    /// half its capacity: then the kind should scan for owed work.
    pub(crate) async fn refill_wanted(&self) {
        self.refill.notified().await;
    }

    /// Rings [`refill_wanted`](Self::refill_wanted) if work was dropped and
    /// half the capacity is free.
    fn ask_for_refill(&self, state: &mut State) {
        if state.overflowed && state.unsettled() <= self.config().capacity / 2 {
            state.overflowed = false;
            self.refill.notify_one();
        }
    }

    /// Schedules a pass of `id` at `due` if the queue knows nothing of it
    /// yet: for appointments recorded before a restart, which anything this
    /// process already decided about the object supersedes.
    pub(crate) fn wake_at_if_new(&self, id: ObjectId, due: Instant) {
        let mut state = self.edit();
        if state.closed || state.entries.contains_key(&id) {
            return;
        }
        state.entries.insert(id, Entry::new());
        self.arm(&mut state, id, due, false);
    }

    /// Requeues `id` now, clearing its backoff if asked.
    pub(crate) fn requeue(&self, id: ObjectId, reset_backoff: bool) {
        let mut state = self.edit();
        if state.closed {
            return;
        }
        if reset_backoff && let Some(entry) = state.entries.get_mut(&id) {
            entry.backoff = None;
        }
        self.wake_locked(&mut state, id, Wake::Immediate, Instant::now());
    }

    fn wake_locked(&self, state: &mut State, id: ObjectId, wake: Wake, now: Instant) {
        let floor = self.config().floor;
        let entry = state.entries.entry(id).or_insert_with(Entry::new);
        match entry.phase {
            Phase::Ready => {}
            Phase::Running => entry.rerun = entry.rerun.max(Some(wake)),
            Phase::Idle => match wake {
                Wake::Immediate => {
                    let cancelled = entry.alarm.take();
                    if let Some(alarm) = cancelled {
                        state.alarms.remove(&(alarm.due, id));
                    }
                    state.make_ready(id, now);
                    self.changed.notify_one();
                }
                Wake::Ordinary => {
                    if entry.alarm.is_some_and(|a| a.backoff) {
                        return;
                    }
                    let earliest = entry.last_dispatch.map_or(now, |at| at + floor);
                    if earliest <= now {
                        let cancelled = entry.alarm.take();
                        if let Some(alarm) = cancelled {
                            state.alarms.remove(&(alarm.due, id));
                        }
                        state.make_ready(id, now);
                        self.changed.notify_one();
                    } else {
                        self.arm(state, id, earliest, false);
                    }
                }
            },
        }
    }

    /// Sets an alarm for `id` at `due`, keeping an earlier non-backoff one.
    fn arm(&self, state: &mut State, id: ObjectId, due: Instant, backoff: bool) {
        let Some(entry) = state.entries.get_mut(&id) else {
            return;
        };
        if let Some(existing) = entry.alarm {
            if !backoff && !existing.backoff && existing.due <= due {
                return;
            }
            state.alarms.remove(&(existing.due, id));
        }
        entry.alarm = Some(Alarm { due, backoff });
        state.alarms.insert((due, id));
        self.changed.notify_one();
    }

    /// Waits for the next object to run and marks it running. `None` once the
    /// queue is closed.
    ///
    /// # Cancel safety
    /// Cancel safe: an object is only taken when this returns it.
    pub(crate) async fn next(&self) -> Option<ObjectId> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the state is read, so a change made after the
            // read still wakes this waiter.
            changed.as_mut().enable();
            let (wake_at, burst_ended) = {
                let mut state = self.edit();
                if state.closed {
                    return None;
                }
                let now = Instant::now();
                fire_due_alarms(&mut state, now);
                // A burst's last passes are forgotten when their floor
                // passes, not at the next owed scan: an idle host then holds
                // and does nothing for them.
                let burst_ended = state.forget_settled(now, self.config().floor);
                self.ask_for_refill(&mut state);
                if let Some(id) = state.ready.pop_front() {
                    self.dispatch(&mut state, id, now);
                    if !state.ready.is_empty() {
                        // Another worker may be waiting for the rest.
                        self.changed.notify_one();
                    }
                    return Some(id);
                }
                let alarm = state.alarms.first().map(|(due, _)| *due);
                let forget = state.settled.front().map(|(due, _)| *due);
                (alarm.into_iter().chain(forget).min(), burst_ended)
            };
            if burst_ended {
                memory::give_back_freed();
            }
            match wake_at {
                Some(due) => {
                    tokio::select! {
                        _ = &mut changed => {}
                        _ = tokio::time::sleep_until(due) => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    /// Takes more objects that are ready now, without waiting, for a worker
    /// that has just taken one from [`next`](Self::next): at most `max`, and
    /// no more than a fair share of the line among `workers` workers, so a
    /// short line still spreads across them, or `quick` if that is more
    /// (passes so quick that spreading them gains nothing). Each is running
    /// until [`done`](Self::done) or [`give_back`](Self::give_back).
    pub(crate) fn take_more(&self, max: usize, workers: usize, quick: usize) -> Vec<ObjectId> {
        let mut state = self.edit();
        if state.closed {
            return Vec::new();
        }
        let share = (state.ready.len() / workers.max(1)).max(quick);
        let now = Instant::now();
        let mut taken = Vec::with_capacity(max.min(share));
        while taken.len() < max.min(share) {
            let Some(id) = state.ready.pop_front() else {
                break;
            };
            self.dispatch(&mut state, id, now);
            taken.push(id);
        }
        taken
    }

    /// Puts objects taken but never run back at the head of the line, as if
    /// they had not been taken (a worker stopped before their passes).
    pub(crate) fn give_back(&self, ids: &[ObjectId]) {
        let mut state = self.edit();
        for &id in ids.iter().rev() {
            let Some(entry) = state.entries.get_mut(&id) else {
                continue;
            };
            entry.phase = Phase::Ready;
            entry.rerun = None;
            state.ready.push_front(id);
        }
        self.changed.notify_one();
    }

    /// Marks ready `id`, just taken off the line, running.
    fn dispatch(&self, state: &mut State, id: ObjectId, now: Instant) {
        if let Some(entry) = state.entries.get_mut(&id) {
            entry.phase = Phase::Running;
            entry.last_dispatch = Some(now);
            if let Some(since) = entry.ready_since.take() {
                self.metrics.queue_seconds.observe(seconds(now - since));
            }
        }
    }

    /// Records how the pass of `id` ended and schedules what follows.
    pub(crate) fn done(&self, id: ObjectId, outcome: Outcome) {
        let mut state = self.edit();
        let now = Instant::now();
        let floor = self.config().floor;
        match outcome {
            Outcome::Failed => state.failed_at.insert(id, SystemTime::now()),
            Outcome::Succeeded { .. } | Outcome::Gone => state.failed_at.remove(&id),
        };
        if outcome == Outcome::Gone {
            if let Some(entry) = state.entries.remove(&id)
                && let Some(alarm) = entry.alarm
            {
                state.alarms.remove(&(alarm.due, id));
            }
            self.ask_for_refill(&mut state);
            return;
        }
        let Some(entry) = state.entries.get_mut(&id) else {
            return;
        };
        entry.phase = Phase::Idle;
        if let Some(dispatched) = entry.last_dispatch {
            self.metrics.work_seconds.observe(seconds(now - dispatched));
        }
        let rerun = entry.rerun.take();
        match outcome {
            Outcome::Succeeded { requeue } => {
                entry.backoff = None;
                let floor_at = entry.last_dispatch.map_or(now, |at| at + floor);
                match requeue {
                    Some(delay) => self.arm(&mut state, id, (now + delay).max(floor_at), false),
                    None if rerun.is_none() => {
                        if state.settled.is_empty() {
                            // A worker that began waiting before any pass
                            // settled has no time to wake for forgetting it.
                            self.changed.notify_one();
                        }
                        state.settled.push_back((floor_at, id));
                    }
                    None => {}
                }
            }
            Outcome::Failed => {
                self.metrics.retries.inc();
                let step = backoff_step(entry.backoff, &self.config());
                entry.backoff = Some(step);
                self.arm(&mut state, id, now + step, true);
            }
            Outcome::Gone => {}
        }
        if let Some(wake) = rerun
            && !state.closed
        {
            self.wake_locked(&mut state, id, wake, now);
        }
        let burst_ended = state.forget_settled(now, floor);
        self.ask_for_refill(&mut state);
        if burst_ended {
            drop(state);
            memory::give_back_freed();
        }
    }

    /// The backoff step a failure of `id` would take now.
    pub(crate) fn next_backoff(&self, id: ObjectId) -> Duration {
        let last = lock(&self.state).entries.get(&id).and_then(|e| e.backoff);
        backoff_step(last, &self.config())
    }

    /// When `id` is next due: now if it is queued or running, its alarm if it
    /// has one, nothing otherwise. The value changes only when the schedule
    /// does.
    pub(crate) fn due_of(&self, id: ObjectId) -> Due {
        let state = lock(&self.state);
        let Some(entry) = state.entries.get(&id) else {
            return Due::Nothing;
        };
        match (entry.phase, entry.alarm) {
            (Phase::Ready | Phase::Running, _) => Due::Now,
            (Phase::Idle, Some(alarm)) => Due::At(alarm.due),
            (Phase::Idle, None) => Due::Nothing,
        }
    }

    /// When the latest pass of `id` ended, if it failed.
    pub(crate) fn failed_at(&self, id: ObjectId) -> Option<SystemTime> {
        lock(&self.state).failed_at.get(&id).copied()
    }

    /// The objects whose latest pass failed, the most recent failure
    /// first, at most `limit`.
    pub(crate) fn failed(&self, limit: usize) -> Vec<(ObjectId, SystemTime)> {
        let state = lock(&self.state);
        let mut failed: Vec<(ObjectId, SystemTime)> =
            state.failed_at.iter().map(|(id, at)| (*id, *at)).collect();
        drop(state);
        failed.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        failed.truncate(limit);
        failed
    }

    /// Whether nothing is queued, running or scheduled.
    pub(crate) fn is_idle(&self) -> bool {
        let state = lock(&self.state);
        state.ready.is_empty()
            && state.alarms.is_empty()
            && state.entries.values().all(|e| e.phase == Phase::Idle)
    }

    /// How many objects are failing: on the backoff ladder (their last
    /// pass failed) or quarantined (their documents do not decode).
    pub(crate) fn failing(&self) -> usize {
        lock(&self.state)
            .entries
            .values()
            .filter(|e| e.backoff.is_some() || e.quarantined.is_some())
            .count()
    }

    /// Records whether the pass of `id` just ended found its documents
    /// undecodable (`Some(generation)`) or not (`None`). True when that is
    /// news worth a log line: the first quarantine of this generation.
    pub(crate) fn note_quarantine(&self, id: ObjectId, generation: Option<i64>) -> bool {
        let mut state = lock(&self.state);
        let Some(entry) = state.entries.get_mut(&id) else {
            return generation.is_some();
        };
        let before = std::mem::replace(&mut entry.quarantined, generation);
        generation.is_some() && before != generation
    }

    /// Forgets idle objects with nothing pending whose floor has passed, so
    /// the queue holds only what it needs.
    pub(crate) fn prune(&self) {
        let mut state = self.edit();
        let now = Instant::now();
        let floor = self.config().floor;
        state.entries.retain(|_, e| !e.is_forgettable(now, floor));
        state.settled.clear();
        self.ask_for_refill(&mut state);
        if state.shrink() {
            drop(state);
            memory::give_back_freed();
        }
    }

    /// Stops handing out work; waiting workers get `None`.
    pub(crate) fn close(&self) {
        self.edit().closed = true;
        self.changed.notify_waiters();
        // notify_waiters wakes only those waiting now; a permit catches the rest.
        self.changed.notify_one();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.state).entries.len()
    }
}

/// The backoff step after `last` (none: the first failure).
fn backoff_step(last: Option<Duration>, config: &QueueConfig) -> Duration {
    match last {
        Some(last) => (last * 2).min(config.max_backoff),
        None => config.base_backoff.min(config.max_backoff),
    }
}

fn fire_due_alarms(state: &mut State, now: Instant) {
    while let Some(&(due, id)) = state.alarms.first() {
        if due > now {
            break;
        }
        state.alarms.pop_first();
        if let Some(entry) = state.entries.get_mut(&id) {
            entry.alarm = None;
            if entry.phase == Phase::Idle {
                state.make_ready(id, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> WorkQueue {
        queue_of(CAPACITY)
    }

    fn queue_of(capacity: usize) -> WorkQueue {
        WorkQueue::new(QueueConfig {
            floor: Duration::from_secs(1),
            base_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            capacity,
        })
    }

    /// Whether the queue asks for a refill within a minute of paused time.
    async fn asks_for_refill(queue: &WorkQueue) -> bool {
        tokio::time::timeout(Duration::from_secs(60), queue.refill_wanted())
            .await
            .is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn owed_wakes_past_capacity_wait_for_the_queue_to_drain_to_half() {
        let q = queue_of(4);
        q.wake_owed(1..=6, Wake::Immediate);
        assert_eq!(q.len(), 4, "5 and 6 were dropped");
        assert_eq!(q.room(), 0);
        // A tracked object still takes wakes.
        q.wake_owed([1], Wake::Immediate);
        for id in 1..=2 {
            pass(&q, id, Outcome::Gone).await;
        }
        assert_eq!(q.len(), 2);
        assert!(asks_for_refill(&q).await, "half is free");
        assert_eq!(q.room(), 2);
        assert!(!asks_for_refill(&q).await, "asked once per overflow");
    }

    #[tokio::test(start_paused = true)]
    async fn settled_objects_make_way_for_owed_work_before_their_floor() {
        let q = queue_of(2);
        q.wake_owed(1..=2, Wake::Immediate);
        for id in 1..=2 {
            pass(&q, id, Outcome::Succeeded { requeue: None }).await;
        }
        assert_eq!(q.room(), 2, "both only wait out their floor");
        q.wake_owed([3], Wake::Immediate);
        assert_eq!(next_within(&q, Duration::ZERO).await, Some(3));
        assert_eq!(q.len(), 2, "the oldest settled one made way");
        assert!(!asks_for_refill(&q).await, "nothing was dropped");
    }

    #[tokio::test(start_paused = true)]
    async fn requeues_and_full_passes_are_never_dropped() {
        let q = queue_of(2);
        q.wake_owed(1..=2, Wake::Immediate);
        q.wake_all([3], Wake::Ordinary);
        q.requeue(4, false);
        assert_eq!(q.len(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_queue_with_room_asks_for_no_refill() {
        let q = queue_of(4);
        q.wake_owed(1..=3, Wake::Immediate);
        for id in 1..=3 {
            pass(&q, id, Outcome::Gone).await;
        }
        assert!(!asks_for_refill(&q).await);
    }

    /// How long until the queue hands out its next object.
    async fn seconds_to_next(queue: &WorkQueue) -> f64 {
        let start = Instant::now();
        queue.next().await;
        start.elapsed().as_secs_f64()
    }

    /// A successful pass that asks to run again in `seconds`.
    fn requeue_after(seconds: u64) -> Outcome {
        Outcome::Succeeded {
            requeue: Some(Duration::from_secs(seconds)),
        }
    }

    /// Wakes `id` at once, takes it and finishes its pass with `outcome`.
    async fn pass(queue: &WorkQueue, id: ObjectId, outcome: Outcome) {
        queue.wake(id, Wake::Immediate);
        assert_eq!(queue.next().await, Some(id));
        queue.done(id, outcome);
    }

    /// The next object, or `None` if nothing is due within `within`.
    async fn next_within(queue: &WorkQueue, within: Duration) -> Option<ObjectId> {
        tokio::time::timeout(within, queue.next())
            .await
            .ok()
            .flatten()
    }

    #[tokio::test(start_paused = true)]
    async fn a_recorded_appointment_never_overrides_what_this_process_decided() {
        let q = queue();
        pass(&q, 1, Outcome::Failed).await;
        // Read back from the store after this process's own failure: ignored,
        // so the backoff alarm keeps absorbing ordinary wakes.
        q.wake_at_if_new(1, Instant::now());
        q.wake(1, Wake::Ordinary);
        assert_eq!(next_within(&q, Duration::from_millis(900)).await, None);
        assert_eq!(next_within(&q, Duration::from_millis(200)).await, Some(1));

        let start = Instant::now();
        q.wake_at_if_new(2, start + Duration::from_secs(5));
        assert_eq!(q.next().await, Some(2));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quarantine_is_news_once_per_generation_and_counts_as_failing() {
        let q = queue();
        let quarantined_pass = |generation: Option<i64>| {
            let q = &q;
            async move {
                q.wake(1, Wake::Immediate);
                assert_eq!(q.next().await, Some(1));
                let news = q.note_quarantine(1, generation);
                q.done(1, requeue_after(30));
                news
            }
        };
        assert!(quarantined_pass(Some(1)).await, "the first quarantine");
        assert!(
            !quarantined_pass(Some(1)).await,
            "the same generation again"
        );
        assert_eq!(q.failing(), 1);
        assert!(quarantined_pass(Some(2)).await, "a new generation");
        assert!(!quarantined_pass(None).await, "healed");
        assert_eq!(q.failing(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn wakes_for_a_queued_object_collapse_into_one_slot() {
        let q = queue();
        q.wake(1, Wake::Immediate);
        q.wake(1, Wake::Immediate);
        q.wake(1, Wake::Ordinary);
        assert_eq!(next_within(&q, Duration::ZERO).await, Some(1));
        assert_eq!(next_within(&q, Duration::from_secs(60)).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_running_object_is_not_handed_out_again_until_it_is_done() {
        let q = queue();
        q.wake(1, Wake::Immediate);
        assert_eq!(q.next().await, Some(1));
        q.wake(1, Wake::Immediate);
        assert_eq!(next_within(&q, Duration::from_secs(60)).await, None);
        q.done(1, Outcome::Succeeded { requeue: None });
        assert_eq!(
            next_within(&q, Duration::ZERO).await,
            Some(1),
            "the wake was kept"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_takes_more_only_up_to_its_share_of_the_line() {
        let q = queue();
        q.wake_all(1..=10, Wake::Immediate);
        assert_eq!(q.next().await, Some(1));
        // Nine wait: two workers get four each at most, and never past `max`.
        assert_eq!(q.take_more(3, 2, 0), vec![2, 3, 4]);
        assert_eq!(q.take_more(31, 2, 0), vec![5, 6, 7]);
        assert_eq!(
            q.take_more(31, 4, 0),
            Vec::<ObjectId>::new(),
            "3 / 4 is none"
        );
        assert_eq!(q.take_more(31, 1, 0), vec![8, 9, 10]);
        // Taken means running: a wake is kept for after the pass.
        q.wake(6, Wake::Immediate);
        assert_eq!(next_within(&q, Duration::from_secs(60)).await, None);
        q.done(6, Outcome::Succeeded { requeue: None });
        assert_eq!(next_within(&q, Duration::ZERO).await, Some(6));
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_takes_quick_passes_past_its_share_up_to_max() {
        let q = queue();
        q.wake_all(1..=8, Wake::Immediate);
        assert_eq!(q.next().await, Some(1));
        // Seven wait; a fourth of them is one, but ten quick passes fit.
        assert_eq!(q.take_more(5, 4, 10), vec![2, 3, 4, 5, 6]);
        assert_eq!(q.take_more(31, 4, 10), vec![7, 8]);
    }

    #[tokio::test(start_paused = true)]
    async fn objects_given_back_are_next_in_line_in_their_order() {
        let q = queue();
        q.wake_all(1..=4, Wake::Immediate);
        assert_eq!(q.next().await, Some(1));
        assert_eq!(q.take_more(2, 1, 0), vec![2, 3]);
        q.give_back(&[2, 3]);
        assert_eq!(next_within(&q, Duration::ZERO).await, Some(2));
        assert_eq!(next_within(&q, Duration::ZERO).await, Some(3));
        assert_eq!(next_within(&q, Duration::ZERO).await, Some(4));
    }

    #[tokio::test(start_paused = true)]
    async fn an_ordinary_wake_waits_for_the_floor_and_an_immediate_one_does_not() {
        let q = queue();
        pass(&q, 1, Outcome::Succeeded { requeue: None }).await;

        let start = Instant::now();
        q.wake(1, Wake::Ordinary);
        assert_eq!(q.next().await, Some(1));
        assert_eq!(start.elapsed(), Duration::from_secs(1), "held to the floor");
        q.done(1, Outcome::Succeeded { requeue: None });

        let start = Instant::now();
        q.wake(1, Wake::Immediate);
        assert_eq!(q.next().await, Some(1));
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_doubling_to_the_cap_and_success_resets() {
        let q = WorkQueue::new(QueueConfig {
            floor: Duration::from_secs(1),
            base_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(8),
            capacity: CAPACITY,
        });
        q.wake(1, Wake::Immediate);
        q.next().await;
        let mut gaps = Vec::new();
        for _ in 0..6 {
            q.done(1, Outcome::Failed);
            let start = Instant::now();
            assert_eq!(q.next().await, Some(1));
            gaps.push(start.elapsed().as_secs());
        }
        assert_eq!(gaps, [1, 2, 4, 8, 8, 8]);

        q.done(1, Outcome::Succeeded { requeue: None });
        pass(&q, 1, Outcome::Failed).await;
        assert_eq!(seconds_to_next(&q).await, 1.0, "the ladder starts over");
    }

    #[tokio::test(start_paused = true)]
    async fn a_backoff_alarm_absorbs_ordinary_wakes_but_not_immediate_ones() {
        let q = queue();
        pass(&q, 1, Outcome::Failed).await;
        tokio::time::advance(Duration::from_secs(2)).await;
        // The alarm fired at 1 s; take the retry and fail again: now 2 s.
        assert_eq!(q.next().await, Some(1));
        q.done(1, Outcome::Failed);
        q.wake(1, Wake::Ordinary);
        let start = Instant::now();
        assert_eq!(q.next().await, Some(1));
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(2),
            "absorbed by the alarm"
        );

        q.done(1, Outcome::Failed);
        let start = Instant::now();
        q.wake(1, Wake::Immediate);
        assert_eq!(q.next().await, Some(1));
        assert_eq!(start.elapsed(), Duration::ZERO, "cancelled the alarm");
        // The ladder was kept: the next failure steps from 4 s to 8 s.
        q.done(1, Outcome::Failed);
        assert_eq!(seconds_to_next(&q).await, 8.0);
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_keeps_the_backoff_unless_asked_to_reset_it() {
        let q = queue();
        pass(&q, 1, Outcome::Failed).await; // 1 s
        q.requeue(1, false);
        q.next().await;
        q.done(1, Outcome::Failed);
        assert_eq!(seconds_to_next(&q).await, 2.0, "ladder kept");

        q.done(1, Outcome::Failed); // 4 s
        q.requeue(1, true);
        q.next().await;
        q.done(1, Outcome::Failed);
        assert_eq!(seconds_to_next(&q).await, 1.0, "ladder reset");
    }

    #[tokio::test(start_paused = true)]
    async fn a_requeue_delay_schedules_the_next_pass_and_zero_means_the_floor() {
        let q = queue();
        pass(&q, 1, requeue_after(5)).await;
        assert_ne!(q.due_of(1), Due::Nothing);
        assert_eq!(seconds_to_next(&q).await, 5.0);

        q.done(1, requeue_after(0));
        assert_eq!(seconds_to_next(&q).await, 1.0, "held to the floor");
    }

    #[tokio::test(start_paused = true)]
    async fn an_ordinary_wake_overrides_a_later_requeue_alarm() {
        let q = queue();
        pass(&q, 1, requeue_after(30)).await;
        q.wake(1, Wake::Ordinary);
        assert_eq!(seconds_to_next(&q).await, 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn gone_objects_are_forgotten_and_idle_ones_pruned() {
        let q = queue();
        q.wake_all([1, 2], Wake::Immediate);
        let a = q.next().await.unwrap();
        let b = q.next().await.unwrap();
        q.done(a, Outcome::Gone);
        q.done(b, Outcome::Succeeded { requeue: None });
        assert_eq!(q.len(), 1);
        tokio::time::advance(Duration::from_secs(2)).await;
        q.prune();
        assert_eq!(q.len(), 0);
        assert_eq!(q.due_of(b), Due::Nothing);
    }

    #[tokio::test(start_paused = true)]
    async fn settled_objects_are_forgotten_as_passes_end_once_their_floor_passes() {
        let q = queue();
        q.wake_all([1, 2, 3], Wake::Immediate);
        let first = q.next().await.unwrap();
        q.done(first, Outcome::Succeeded { requeue: None });
        // Still inside its floor: remembered, so a wake now waits for it.
        assert_eq!(q.len(), 3);
        tokio::time::advance(Duration::from_secs(2)).await;
        let second = q.next().await.unwrap();
        q.done(second, Outcome::Succeeded { requeue: None });
        // The first is forgotten without a prune; the second is in its floor.
        assert_eq!(q.len(), 2);
        assert_eq!(q.due_of(first), Due::Nothing);
        let third = q.next().await.unwrap();
        q.done(third, Outcome::Failed);
        tokio::time::advance(Duration::from_secs(2)).await;
        q.prune();
        // A failing object keeps its backoff; the settled one goes.
        assert_eq!(q.len(), 1);
        assert_ne!(q.due_of(third), Due::Nothing);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_worker_forgets_the_last_settled_pass_when_its_floor_passes() {
        let q = std::sync::Arc::new(queue());
        q.wake_all([1], Wake::Immediate);
        let id = q.next().await.unwrap();
        q.done(id, Outcome::Succeeded { requeue: None });
        assert_eq!(q.len(), 1, "inside its floor");
        // No further pass ends and no prune runs: the idle worker does it.
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(q.len(), 0);
        q.close();
        assert_eq!(waiting.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn closing_releases_waiting_workers() {
        let q = std::sync::Arc::new(queue());
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::task::yield_now().await;
        q.close();
        assert_eq!(waiter.await.unwrap(), None);
    }
}
