//! One registered kind at run time: its controller, settings, queue, workers
//! and per-kind drivers (the owed pass, the full pass, the startup passes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::engine::controller::Feed;
use crate::engine::controller::StoredController;
use crate::engine::controller_client::STATUS_GRACE;
use crate::engine::grid;
use crate::engine::options::KindSettings;
use crate::engine::pace::{self, Pace};
use crate::engine::pass::{self, Finish, Handshake};
use crate::engine::queue::{Outcome, QueueConfig, Wake, WorkQueue};
use crate::engine::quiet::QuietGate;
use crate::engine::rollout::{self, Rollout, RolloutKind};
use crate::engine::status_grace::GraceWriter;
use crate::engine::trigger;
use crate::metrics::KindMetrics;
use crate::object::{GroupKind, ObjectId, Timestamp};
use crate::store::{Reader, Store};
use crate::sync::{lock, read, write};
use crate::trace::Tracer;

/// The most objects a worker takes, and loads in one read, at a time.
const BATCH: usize = 32;

/// The most ends of passes of a kind left to other writers' commits (see
/// [`Kind::write_ends`]). Workers outrun the writer during a burst; past
/// this many they wait, where the backlog of written-but-uncommitted passes
/// grew without bound (half a gigabyte while a million objects converged).
/// Sixteen of the writer's largest batches, so the writer never starves.
const HANDSHAKES_IN_FLIGHT: u32 = 1024;

/// The registered kinds of a host, by name.
pub(crate) type Kinds = RwLock<HashMap<GroupKind, Arc<Kind>>>;

/// Queues each object in the queue of its kind, if it has a controller.
/// Every caller wakes for work the store records as owed (a push at commit,
/// a write to a dependency), which a full queue may drop for its owed scan.
/// Objects of one kind that come one after another share one visit to its
/// queue: a thousand dependents of one target take its lock once.
///
/// Returns whether some of them are of a kind with no controller: only the
/// garbage collector acts on those (a deletion it may now finish).
pub(crate) fn wake(kinds: &Kinds, objects: Vec<(ObjectId, GroupKind)>, wake: Wake) -> bool {
    let kinds = read(kinds);
    let mut objects = objects.into_iter().peekable();
    let mut controllerless = false;
    while let Some((id, group_kind)) = objects.next() {
        let mut run = vec![id];
        while let Some((next, _)) = objects.next_if(|(_, next_kind)| *next_kind == group_kind) {
            run.push(next);
        }
        match kinds.get(&group_kind) {
            Some(kind) => kind.queue.wake_owed(run, wake),
            None => controllerless = true,
        }
    }
    controllerless
}

/// A registered kind.
pub(crate) struct Kind {
    pub(crate) group_kind: GroupKind,
    controller: RwLock<Arc<dyn StoredController>>,
    /// Counts the controllers this kind has had: a pass reads it before it
    /// starts, so a rollout can tell the passes that ran on its version.
    serial: AtomicU64,
    /// The rollout of the current controller to every object, while one
    /// runs.
    rollout: Mutex<Option<Arc<Rollout>>>,
    settings: RwLock<KindSettings>,
    pub(crate) queue: WorkQueue,
    /// Ends this kind's workers and drivers (unregister, stop).
    pub(crate) cancel: CancellationToken,
    /// This kind's tasks, so unregistering can wait for its passes.
    pub(crate) tracker: TaskTracker,
    settings_changed: Notify,
    /// Asks the drivers for an owed pass now: another process committed,
    /// and what it wrote was pushed to no one here.
    owed_now: Notify,
    workers: AtomicUsize,
    /// Where the next owed scan starts: past the last id the previous one
    /// read when it stopped at the queue's room, else the start.
    owed_cursor: Mutex<ObjectId>,
    /// How long this kind's passes take, so quick ones go in bigger batches.
    pace: Pace,
    /// Permits for ends of passes left to other writers' commits
    /// ([`HANDSHAKES_IN_FLIGHT`]).
    handshakes: Arc<Semaphore>,
    /// Trigger feeds not yet receiving: they start with the kind's tasks.
    feeds: Mutex<Vec<Feed>>,
    /// Writes the statuses this kind's long passes hold past the grace.
    grace: Arc<GraceWriter>,
    pub(crate) metrics: KindMetrics,
    /// Makes each pass's span, when the host traces.
    tracer: Option<Tracer>,
    /// The kind as text, for those spans.
    label: Arc<str>,
}

impl Kind {
    pub(crate) fn new(
        group_kind: GroupKind,
        controller: Arc<dyn StoredController>,
        settings: KindSettings,
        floor: Duration,
        capacity: usize,
        metrics: KindMetrics,
        tracer: Option<Tracer>,
    ) -> Self {
        Kind {
            label: group_kind.to_string().into(),
            group_kind,
            controller: RwLock::new(controller),
            serial: AtomicU64::new(0),
            rollout: Mutex::new(None),
            queue: WorkQueue::with_metrics(
                QueueConfig {
                    floor,
                    base_backoff: Duration::from_secs(1),
                    max_backoff: settings.cadence.max_retry_interval,
                    capacity,
                },
                metrics.queue.clone(),
            ),
            settings: RwLock::new(settings),
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            settings_changed: Notify::new(),
            owed_now: Notify::new(),
            workers: AtomicUsize::new(0),
            owed_cursor: Mutex::new(0),
            pace: Pace::new(),
            handshakes: Arc::new(Semaphore::new(HANDSHAKES_IN_FLIGHT as usize)),
            feeds: Mutex::new(Vec::new()),
            grace: GraceWriter::new(STATUS_GRACE),
            metrics,
            tracer,
        }
    }

    /// What a pass of this kind reads of it.
    fn view(&self) -> pass::KindView<'_> {
        pass::KindView {
            group_kind: &self.group_kind,
            controller: &self.controller,
            settings: &self.settings,
            metrics: &self.metrics,
            queue: &self.queue,
            grace: &self.grace,
            tracer: self.tracer.as_ref(),
            label: &self.label,
        }
    }

    pub(crate) fn settings(&self) -> KindSettings {
        *read(&self.settings)
    }

    /// Swaps in a new controller and settings, keeping the queue and backoff.
    pub(crate) fn replace(&self, controller: Arc<dyn StoredController>, settings: KindSettings) {
        let mut current = write(&self.controller);
        *current = controller;
        self.serial.fetch_add(1, Ordering::SeqCst);
        drop(current);
        *write(&self.settings) = settings;
        self.queue
            .set_max_backoff(settings.cadence.max_retry_interval);
        self.settings_changed.notify_waiters();
    }

    /// Follows `record`, a revision still rolling, to every object on the
    /// current controller; its driver starts with the kind's tasks, or now
    /// if they run (`host`).
    pub(crate) fn begin_rollout(
        self: &Arc<Self>,
        record: crate::store::Rollout,
        store: &Store,
        host: Option<&TaskTracker>,
    ) {
        let serial = self.serial.load(Ordering::SeqCst);
        *lock(&self.rollout) = Some(Arc::new(Rollout::new(record, serial)));
        if let Some(host) = host {
            self.spawn_rollout(store, host);
        }
    }

    /// The rollout in progress, as it stands now.
    pub(crate) fn rollout(&self) -> Option<crate::store::Rollout> {
        lock(&self.rollout).as_ref().map(|rollout| rollout.live())
    }

    /// Starts the driver of the rollout in progress, if it has none.
    fn spawn_rollout(self: &Arc<Self>, store: &Store, host: &TaskTracker) {
        let Some(rollout) = lock(&self.rollout).clone() else {
            return;
        };
        if !rollout.claim_driver() {
            return;
        }
        let (kind, store) = (self.clone(), store.clone());
        host.spawn(self.tracker.track_future(async move {
            rollout::drive(&rollout, kind.as_ref(), &store, kind.cancel.cancelled()).await;
            let mut current = lock(&kind.rollout);
            if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &rollout)) {
                *current = None;
            }
        }));
    }

    /// A pass of `id` that began on controller `serial` ended with `outcome`.
    fn pass_ended(&self, id: ObjectId, serial: u64, outcome: Outcome) {
        self.queue.done(id, outcome);
        if let Some(rollout) = lock(&self.rollout).as_ref() {
            rollout.note(id, serial, outcome);
        }
    }

    /// Adds trigger feeds; they receive once the kind's tasks run.
    pub(crate) fn add_feeds(&self, feeds: impl IntoIterator<Item = Feed>) {
        lock(&self.feeds).extend(feeds);
    }

    /// Starts receiving on the feeds added since the last call.
    pub(crate) fn spawn_feeds(self: &Arc<Self>, store: &Store, host: &TaskTracker) {
        let feeds = std::mem::take(&mut *lock(&self.feeds));
        for feed in feeds {
            let kind = self.clone();
            let requeue = move |id| kind.queue.requeue(id, false);
            let task = trigger::run(
                feed,
                store.clone(),
                self.group_kind.clone(),
                self.cancel.clone(),
                requeue,
            );
            host.spawn(self.tracker.track_future(task));
        }
    }

    /// Queues the startup passes, then starts the workers and the drivers.
    ///
    /// The startup passes are queued before this returns, so a write made
    /// after the host has started cannot race the first owed scan into a
    /// second pass of the same generation.
    pub(crate) fn spawn(self: &Arc<Self>, store: &Store, host: &TaskTracker) {
        self.startup(store);
        self.spawn_workers(store, host);
        self.spawn_feeds(store, host);
        self.spawn_rollout(store, host);
        let kind = self.clone();
        let store_for_driver = store.clone();
        host.spawn(self.tracker.track_future(async move {
            kind.drive(&store_for_driver).await;
        }));
    }

    /// Brings the number of workers up to the configured concurrency.
    pub(crate) fn spawn_workers(self: &Arc<Self>, store: &Store, host: &TaskTracker) {
        let wanted = self.settings().concurrency;
        while self.workers.load(Ordering::SeqCst) < wanted {
            let index = self.workers.fetch_add(1, Ordering::SeqCst);
            let kind = self.clone();
            let store = store.clone();
            let tracker = host.clone();
            host.spawn(self.tracker.track_future(async move {
                kind.work(&store, &tracker, index).await;
            }));
        }
    }

    /// A worker: takes the next objects and runs their passes, until
    /// cancelled or no longer wanted. A pass in flight is finished, never
    /// abandoned; objects taken but not yet started go back in line.
    async fn work(self: &Arc<Self>, store: &Store, host: &TaskTracker, index: usize) {
        loop {
            let concurrency = self.settings().concurrency;
            if index >= concurrency {
                break;
            }
            let next = tokio::select! {
                _ = self.cancel.cancelled() => None,
                next = self.queue.next() => next,
            };
            let Some(first) = next else {
                break;
            };
            let mut batch = vec![first];
            let quick = self.pace.passes_per_slice();
            batch.extend(self.queue.take_more(BATCH - 1, concurrency, quick));
            self.run_batch(store, host, &batch).await;
        }
        self.workers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Runs the passes of `batch`, loaded together, one after another, and
    /// writes their ends.
    ///
    /// The ends of quick passes are gathered and submitted together: the
    /// oldest waits at most [`pace::SLICE`] (plus the pass running when it ran
    /// out), so a slow pass's end is written right after it.
    async fn run_batch(self: &Arc<Self>, store: &Store, host: &TaskTracker, batch: &[ObjectId]) {
        let view = self.view();
        let loads = match pass::load_batch(store, &view, batch) {
            Ok(loads) => loads,
            Err(error) => {
                let outcome = pass::load_failed(&self.group_kind, batch, &error);
                for &id in batch {
                    self.queue.done(id, outcome);
                }
                return;
            }
        };
        let mut unwritten = Vec::new();
        let mut oldest = Instant::now();
        for (position, (&id, loaded)) in batch.iter().zip(loads).enumerate() {
            if position > 0 && self.cancel.is_cancelled() {
                self.queue.give_back(&batch[position..]);
                break;
            }
            let started = Instant::now();
            let serial = self.serial.load(Ordering::SeqCst);
            let finish = pass::run(store, &view, id, loaded).await;
            self.pace.record(started.elapsed());
            match finish {
                Finish::Done(outcome) => self.pass_ended(id, serial, outcome),
                Finish::Handshake(handshake) => {
                    if unwritten.is_empty() {
                        oldest = started;
                    }
                    unwritten.push((id, serial, handshake));
                }
            }
            if !unwritten.is_empty() && oldest.elapsed() >= pace::SLICE {
                self.write_ends(store, host, std::mem::take(&mut unwritten))
                    .await;
            }
        }
        self.write_ends(store, host, unwritten).await;
    }

    /// Submits the ends of passes together. If they found the writer idle,
    /// this worker leads their commit itself before it takes more work: no
    /// task to spawn, no thread to wake (on a two-core machine the kernel
    /// put the woken thread on this one's core, and the two took turns).
    /// If another writer is leading, its commits carry them, and a task
    /// waits for them while this worker goes on with passes.
    async fn write_ends(
        self: &Arc<Self>,
        store: &Store,
        host: &TaskTracker,
        ends: Vec<(ObjectId, u64, Handshake)>,
    ) {
        if ends.is_empty() {
            return;
        }
        // Taken before submitting: a submitted write nobody awaits could be
        // the one whose turn it is to lead. Never closed, so the permits come.
        let count =
            u32::try_from(ends.len()).map_or(HANDSHAKES_IN_FLIGHT, |n| n.min(HANDSHAKES_IN_FLIGHT));
        let permits = self.handshakes.clone().acquire_many_owned(count).await.ok();
        let mut leads = false;
        let written: Vec<_> = ends
            .into_iter()
            .map(|(id, serial, handshake)| {
                let (lead, written) = handshake.submit(store);
                leads |= lead;
                (id, serial, written)
            })
            .collect();
        if leads {
            self.await_ends(written).await;
            return;
        }
        let kind = self.clone();
        host.spawn(self.tracker.track_future(async move {
            kind.await_ends(written).await;
            drop(permits);
        }));
    }

    async fn await_ends(&self, written: Vec<(ObjectId, u64, pass::Written)>) {
        for (id, serial, written) in written {
            self.pass_ended(id, serial, written.await);
        }
    }

    /// The per-kind drivers in one loop: the owed pass and the full pass,
    /// each on its own cadence, after the startup passes.
    async fn drive(&self, store: &Store) {
        let start = Instant::now();
        let mut owed_gate = QuietGate::new();
        // Set by a request for an owed pass now, which no quiet store skips.
        let mut owed_asked = false;
        let mut next_owed = grid::next_after(start, self.settings().cadence.owed_pass_interval);
        let mut next_full = self
            .settings()
            .cadence
            .full_pass_interval
            .map(|i| start + i);
        loop {
            let cadence = self.settings().cadence;
            let now = Instant::now();
            if now >= next_owed {
                let scan = if owed_asked {
                    Some(QuietGate::always(store))
                } else {
                    owed_gate.enter(store)
                };
                owed_asked = false;
                if let Some(scan) = scan {
                    owed_gate.scanned(scan, self.enqueue_owed(store));
                }
                self.queue.prune();
                next_owed = grid::next_after(now, cadence.owed_pass_interval);
            }
            if let (Some(interval), Some(due)) = (cadence.full_pass_interval, next_full)
                && now >= due
            {
                self.enqueue_scan(store, |r, gk| r.all_ids(gk));
                next_full = Some(now + interval);
            }
            let wake_at = next_full.map_or(next_owed, |full| next_owed.min(full));
            tokio::select! {
                _ = self.cancel.cancelled() => break,
                _ = self.settings_changed.notified() => {
                    let cadence = self.settings().cadence;
                    let on_grid = grid::next_after(Instant::now(), cadence.owed_pass_interval);
                    next_owed = next_owed.min(on_grid);
                    next_full = cadence.full_pass_interval.map(|i| Instant::now() + i);
                }
                _ = self.owed_now.notified() => {
                    next_owed = Instant::now();
                    owed_asked = true;
                }
                // Only the scan: a prune clears the settled list, and
                // entries it keeps are then forgotten only by the next one.
                _ = self.queue.refill_wanted() => {
                    _ = self.enqueue_owed(store);
                }
                _ = tokio::time::sleep_until(wake_at) => {}
            }
        }
    }

    /// Runs an owed pass soon (requests made meanwhile fold into one).
    pub(crate) fn scan_owed_now(&self) {
        self.owed_now.notify_one();
    }

    /// The once-per-start passes: what the store records as owed, every
    /// object if the kind asks for it, the requeues recorded before the
    /// restart, and the first arming of the individual cadence, spread across
    /// its interval.
    fn startup(&self, store: &Store) {
        let settings = self.settings();
        _ = self.enqueue_owed(store);
        if settings.cadence.startup_full_pass {
            self.enqueue_scan(store, |r, gk| r.all_ids(gk));
        }
        self.rearm_requeues(store);
        if let Some(interval) = settings.cadence.individual_pass_interval {
            match store.read(|r| r.all_ids(&self.group_kind)) {
                Ok(ids) => {
                    let now = Instant::now();
                    for id in ids {
                        self.queue
                            .wake_at_if_new(id, now + pass::random_below(interval));
                    }
                }
                Err(error) => {
                    tracing::warn!(kind = %self.group_kind, %error, "startup scan failed")
                }
            }
        }
    }

    /// Arms an alarm for every requeue a pass recorded, at its recorded time
    /// (at once for one already past). It runs as the kind's driver starts,
    /// which may be after this process's first passes: an object the queue
    /// already tracks keeps what they decided.
    fn rearm_requeues(&self, store: &Store) {
        match store.read(|r| r.requeues(&self.group_kind)) {
            Ok(requeues) => {
                let (now, now_ms) = (Instant::now(), Timestamp::now().as_millis());
                for (id, due_ms) in requeues {
                    let wait = u64::try_from(due_ms.saturating_sub(now_ms)).unwrap_or(0);
                    self.queue
                        .wake_at_if_new(id, now + Duration::from_millis(wait));
                }
            }
            Err(error) => {
                tracing::warn!(kind = %self.group_kind, %error, "cannot read recorded requeues")
            }
        }
    }

    /// Queues this kind's dependents whose targets were written after their
    /// last pass: for a kind registered on a running host, which the
    /// start's stale-dependents pass could not wake (a dependency wake for a
    /// kind with no controller is dropped).
    pub(crate) fn wake_stale_dependents(&self, store: &Store) {
        self.enqueue_scan(store, |r, gk| {
            let stale = r.stale_dependents()?;
            Ok(stale
                .into_iter()
                .filter(|(_, kind)| kind == gk)
                .map(|(id, _)| id)
                .collect())
        });
    }

    /// Queues what the store records as owed, as much as the queue has room
    /// for, from where the last scan that ran out of room stopped: a store
    /// owing a million passes is worked through in pages, never held whole.
    ///
    /// Returns whether anything is owed (a full queue counts), or `None`
    /// when the scan failed.
    fn enqueue_owed(&self, store: &Store) -> Option<bool> {
        let room = self.queue.room();
        if room == 0 {
            return Some(true);
        }
        store.metrics().owed_scanned();
        let mut cursor = lock(&self.owed_cursor);
        let scanned = store.read(|r| {
            let mut ids = r.owed_page(&self.group_kind, *cursor, room)?;
            if ids.len() < room && *cursor > 0 {
                // Past the end: go round to what lies before the cursor.
                ids.extend(r.owed_page(&self.group_kind, 0, room - ids.len())?);
            }
            Ok(ids)
        });
        match scanned {
            Ok(ids) => {
                if ids.len() == room {
                    *cursor = ids.last().copied().unwrap_or(0);
                    self.queue.owed_left_out();
                } else {
                    *cursor = 0;
                }
                drop(cursor);
                let found_work = !ids.is_empty();
                self.queue.wake_owed(ids, Wake::Ordinary);
                Some(found_work)
            }
            Err(error) => {
                tracing::warn!(kind = %self.group_kind, %error, "owed scan failed");
                None
            }
        }
    }

    fn enqueue_scan(
        &self,
        store: &Store,
        scan: fn(&Reader<'_>, &GroupKind) -> crate::Result<Vec<ObjectId>>,
    ) {
        match store.read(|r| scan(r, &self.group_kind)) {
            Ok(ids) => self.queue.wake_all(ids, Wake::Ordinary),
            Err(error) => tracing::warn!(kind = %self.group_kind, %error, "scan failed"),
        }
    }

    /// Stops handing out work and ends the drivers; passes in flight finish.
    pub(crate) fn shut_down(&self) {
        self.cancel.cancel();
        self.queue.close();
        self.tracker.close();
    }
}

impl RolloutKind for Kind {
    fn queue_room(&self) -> usize {
        self.queue.room()
    }

    fn queue(&self, ids: Vec<ObjectId>, wake: Wake) {
        self.queue.wake_owed(ids, wake);
    }

    fn queue_unless_pending(&self, ids: &[ObjectId]) {
        self.queue.wake_unless_pending(ids);
    }

    fn group_kind(&self) -> &GroupKind {
        &self.group_kind
    }
}
