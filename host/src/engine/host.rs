//! The host: registered kinds over a store, started once, stopped once.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::{Client, RawClient};
use crate::engine::controller::StoredController;
use crate::engine::controller::{Controller, ControllerOptions};
use crate::engine::kind::{self, Kind, Kinds};
use crate::engine::options::HostOptions;
use crate::engine::queue::Wake;
use crate::engine::schedule::{self, Schedule, ScheduleStream};
use crate::engine::{sweeper, waker};
use crate::error::{Error, Result};
use crate::object::{GroupKind, ObjectId, Timestamp};
use crate::store::ops;
use crate::store::{CommitListener, Committed, Store};
use crate::store::{RegisteredKind, Rollout, RolloutState};
use crate::sync::{lock, read, write};
use crate::validation::{KindRules, SpecSchema};

/// The control plane: controllers registered per kind over one [`Store`],
/// driven between [`Host::start`] and [`StopHandle::stop`].
///
/// Controllers can be registered before or after the start, replaced (the
/// kind keeps its queue and backoff; passes in flight finish on the old
/// controller) and unregistered (the kind's passes drain; its objects stay).
///
/// # Example
/// ```no_run
/// # async fn demo(controller: impl beehive::Controller) -> beehive::Result<()> {
/// use std::time::Duration;
/// use beehive::{ControllerOptions, GroupKind, Host, HostOptions, Store};
///
/// let store = Store::open("beehive.db")?;
/// let host = Host::new(&store, HostOptions::new())?;
/// host.register(GroupKind::new("acme.com", "Cluster"), controller, ControllerOptions::new()).await?;
/// let running = host.start().await?;
/// // ... the app runs ...
/// running.stop(Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
///
/// A `Host` is a handle: clones share one control plane.
#[derive(Clone)]
pub struct Host {
    shared: Arc<Shared>,
}

pub(super) struct Shared {
    pub(super) store: Store,
    pub(super) options: HostOptions,
    pub(super) kinds: Kinds,
    lifecycle: Mutex<Lifecycle>,
    /// Rung by every commit that grew the write log: the waker's only trigger.
    commits: Notify,
    /// Rung by a commit that touched an object of a kind with no controller:
    /// the sweeper collects such deletions at once, not at its next round.
    controllerless: Arc<Notify>,
    /// Cancelled when the host stops: ends the watches of its clients.
    stopped: CancellationToken,
    /// The write-log position the dependency waker has acted on.
    waker_seen: std::sync::atomic::AtomicI64,
}

enum Lifecycle {
    New,
    Running(Running),
    Stopped,
}

struct Running {
    cancel: CancellationToken,
    tracker: TaskTracker,
    _claim: Claim,
}

impl Host {
    /// A host over `store`. Nothing runs until [`Host::start`].
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a cadence that cannot be turned off set to zero.
    pub fn new(store: &Store, options: HostOptions) -> Result<Host> {
        options.validate()?;
        let shared = Arc::new(Shared {
            store: store.clone(),
            options,
            kinds: RwLock::new(HashMap::new()),
            lifecycle: Mutex::new(Lifecycle::New),
            commits: Notify::new(),
            controllerless: Arc::new(Notify::new()),
            stopped: CancellationToken::new(),
            waker_seen: std::sync::atomic::AtomicI64::new(0),
        });
        // Weak: the store (and its metrics) may outlive the host.
        let weak = Arc::downgrade(&shared);
        store.metrics().set_refresher(Some(Box::new(move |metrics| {
            if let Some(shared) = weak.upgrade() {
                sweeper::count_objects(&shared.store, &shared.kinds, metrics);
            }
        })));
        Ok(Host { shared })
    }

    /// Workers per kind for a controller that names no number of its own.
    pub fn default_concurrency(&self) -> usize {
        self.shared.options.concurrency.max(1)
    }

    /// The store this host drives.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// The tracer the host makes its passes' spans with, if it was given
    /// one ([`HostOptions::tracer`]): a caller writing on a pass's behalf
    /// (an apply) can open its own span in the same traces.
    pub fn tracer(&self) -> Option<&crate::trace::Tracer> {
        self.shared.options.tracer.as_ref()
    }

    /// An untyped client for `group_kind`. Its watches end with
    /// [`Error::Stopped`] when this host stops.
    pub fn client(&self, group_kind: GroupKind) -> RawClient {
        RawClient::new(&self.shared.store, group_kind).bounded_by(self.shared.stopped.clone())
    }

    /// A typed client for `group_kind`. Its watches end with
    /// [`Error::Stopped`] when this host stops.
    pub fn typed_client<Spec, Status>(&self, group_kind: GroupKind) -> Client<Spec, Status>
    where
        Spec: Serialize + DeserializeOwned + 'static,
        Status: Serialize + DeserializeOwned + 'static,
    {
        Client::from_raw(self.client(group_kind))
    }

    /// Registers `controller` for `group_kind`, or replaces the one it has.
    /// The registration is recorded in the store.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for an invalid option; a store error if the
    /// registration cannot be recorded (nothing is registered then).
    pub async fn register(
        &self,
        group_kind: GroupKind,
        controller: impl Controller,
        options: ControllerOptions,
    ) -> Result<()> {
        let controller: Arc<dyn StoredController> = Arc::new(controller);
        if let Some(problem) = crate::naming::kind_problem(&group_kind.group, &group_kind.kind) {
            return Err(Error::InvalidName(problem));
        }
        let settings = self.shared.options.resolve(&options)?;
        let rules = validation_rules(&options)?;
        let (source, content_hash) = options
            .source
            .clone()
            .unwrap_or_else(|| ("native".to_string(), None));
        let versions = options.migrator.as_ref().map_or((0, 0), |m| {
            (i64::from(m.spec_version()), i64::from(m.status_version()))
        });
        let existing = read(&self.shared.kinds).get(&group_kind).cloned();
        let rollout = self.plan_rollout(&group_kind, &source, &content_hash, existing.is_some())?;
        let registration = RegisteredKind {
            group_kind: group_kind.clone(),
            finalizers: options.finalizers.clone(),
            spec_version: versions.0,
            status_version: versions.1,
            source,
            content_hash,
            registered_at: Timestamp::now(),
            spec_schema: options.schemas.spec.clone(),
            status_schema: options.schemas.status.clone(),
            validates: options.validator.is_some(),
        };
        let started = match &rollout {
            RolloutPlan::Start(record) => Some(record.clone()),
            _ => None,
        };
        self.shared
            .store
            .write(move |tx| {
                ops::record_registration(tx, &registration)?;
                match &started {
                    Some(record) => ops::start_rollout(tx, record),
                    None => Ok(()),
                }
            })
            .await?;
        self.shared
            .store
            .migrations()
            .set(&group_kind, options.migrator.clone());
        self.shared.store.validations().set(&group_kind, rules);
        let feeds: Vec<_> = options
            .feeds
            .iter()
            .filter_map(|slot| slot.take())
            .collect();
        let tracker = self.running_tracker();
        let kind = match existing {
            Some(kind) => {
                kind.replace(controller, settings);
                kind.add_feeds(feeds);
                if let Some(tracker) = &tracker {
                    kind.spawn_workers(&self.shared.store, tracker);
                    kind.spawn_feeds(&self.shared.store, tracker);
                }
                kind
            }
            None => {
                let metrics = self.shared.store.metrics().kind(&group_kind.to_string());
                let kind = Arc::new(Kind::new(
                    group_kind.clone(),
                    controller,
                    settings,
                    self.shared.options.requeue_floor,
                    self.shared.options.queue_capacity,
                    metrics,
                    self.shared.options.tracer.clone(),
                ));
                kind.add_feeds(feeds);
                write(&self.shared.kinds).insert(group_kind.clone(), kind.clone());
                if let Some(tracker) = &tracker {
                    kind.spawn(&self.shared.store, tracker);
                    kind.wake_stale_dependents(&self.shared.store);
                }
                kind
            }
        };
        match rollout {
            RolloutPlan::Start(record) | RolloutPlan::Resume(record)
                if record.state == RolloutState::Rolling =>
            {
                kind.begin_rollout(record, &self.shared.store, tracker.as_ref());
            }
            _ => {}
        }
        Ok(())
    }

    /// What registering a controller from `source` (`content_hash`) does to
    /// `group_kind`'s revisions: a new one when it replaces a controller
    /// this host serves, or one another version served before (a plugin
    /// replaced while the host was stopped), rolled out to every object; a
    /// first, complete one for a kind that never had any; the newest one
    /// resumed if this same version's rollout was cut short.
    fn plan_rollout(
        &self,
        group_kind: &GroupKind,
        source: &str,
        content_hash: &Option<String>,
        replacing: bool,
    ) -> Result<RolloutPlan> {
        let (latest, recorded_hash) = self
            .shared
            .store
            .read(|r| Ok((r.latest_rollout(group_kind)?, r.recorded_hash(group_kind)?)))?;
        // Counted only for a new revision: a count reads every row of the
        // kind (80 ms for a million), and a restart on the same version
        // needs none.
        let objects = || self.shared.store.read(|r| r.count_of_kind(group_kind));
        let new_version = match &latest {
            _ if replacing => true,
            Some(latest) => latest.content_hash != *content_hash,
            None => recorded_hash.is_some() && recorded_hash != *content_hash,
        };
        if !new_version {
            return Ok(match latest {
                Some(latest) if latest.state == RolloutState::Rolling => {
                    RolloutPlan::Resume(latest)
                }
                Some(_) => RolloutPlan::Unchanged,
                None => {
                    let first = revision(group_kind, 1, source, content_hash, objects()?, false);
                    RolloutPlan::Start(first)
                }
            });
        }
        let number = latest.map_or(1, |latest| latest.revision + 1);
        Ok(RolloutPlan::Start(revision(
            group_kind,
            number,
            source,
            content_hash,
            objects()?,
            true,
        )))
    }

    /// The live rollout of `group_kind`'s current version while one runs in
    /// this host, else its newest recorded revision; `None` for a kind never
    /// served.
    ///
    /// # Errors
    /// A store error if the record cannot be read.
    pub fn rollout(&self, group_kind: &GroupKind) -> Result<Option<Rollout>> {
        let kind = read(&self.shared.kinds).get(group_kind).cloned();
        if let Some(live) = kind.and_then(|kind| kind.rollout()) {
            return Ok(Some(live));
        }
        self.shared.store.read(|r| r.latest_rollout(group_kind))
    }

    /// Removes the controller of `group_kind`: its queued work is dropped,
    /// passes in flight finish, its objects stay in the store.
    ///
    /// # Errors
    /// [`Error::NoController`] when the kind has none.
    pub async fn unregister(&self, group_kind: &GroupKind) -> Result<()> {
        let kind = write(&self.shared.kinds)
            .remove(group_kind)
            .ok_or_else(|| Error::NoController(group_kind.to_string()))?;
        self.shared.store.migrations().set(group_kind, None);
        self.shared
            .store
            .validations()
            .set(group_kind, KindRules::default());
        kind.shut_down();
        kind.tracker.wait().await;
        let group_kind = group_kind.clone();
        self.shared
            .store
            .write(move |tx| ops::remove_registration(tx, &group_kind))
            .await
    }

    /// Whether the host has nothing to do: no pass running or queued, none
    /// scheduled (no requeue, backoff or floor-held wake pending), and every
    /// committed write already seen by the dependency waker. A running host
    /// that is idle passes nothing until a new write, a cadence or a
    /// restart gives it work, which makes this the condition to wait on
    /// before asserting that something did *not* happen. Always false
    /// before the start.
    pub fn is_idle(&self) -> bool {
        if !matches!(*lock(&self.shared.lifecycle), Lifecycle::Running(_)) {
            return false;
        }
        let head = self.shared.store.resource_version();
        let seen = self
            .shared
            .waker_seen
            .load(std::sync::atomic::Ordering::SeqCst);
        seen >= head && read(&self.shared.kinds).values().all(|k| k.queue.is_idle())
    }

    /// The kinds with a controller in this host.
    pub fn kinds(&self) -> Vec<GroupKind> {
        let mut kinds: Vec<_> = read(&self.shared.kinds).keys().cloned().collect();
        kinds.sort();
        kinds
    }

    /// Queues object `id` of `group_kind` for a pass now, bypassing the
    /// re-enqueue floor. Keeps the object's backoff unless `reset_backoff`.
    /// A latency hint: it returns once the object is queued.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing id or one of another kind;
    /// [`Error::NoController`] for a kind with no controller.
    pub fn requeue(&self, group_kind: &GroupKind, id: ObjectId, reset_backoff: bool) -> Result<()> {
        let found = self.shared.store.read(|r| r.kind_and_deletion(id))?;
        if found.map(|(gk, _)| gk).as_ref() != Some(group_kind) {
            return Err(Error::not_found(format!("{group_kind} {id}")));
        }
        let kind = read(&self.shared.kinds)
            .get(group_kind)
            .cloned()
            .ok_or_else(|| Error::NoController(group_kind.to_string()))?;
        kind.queue.requeue(id, reset_backoff);
        Ok(())
    }

    /// When object `id` of `group_kind` is next due, from in-memory timers.
    /// A missing id, another kind's id and a kind with no controller all read
    /// as nothing scheduled.
    pub fn schedule(&self, group_kind: &GroupKind, id: ObjectId) -> Schedule {
        match read(&self.shared.kinds).get(group_kind) {
            Some(kind) => Schedule::of(kind.queue.due_of(id)),
            None => Schedule::default(),
        }
    }

    /// When the latest pass of object `id` ended, if it failed (its passes
    /// back off until one succeeds); `None` once one succeeds, and for an
    /// object no pass of this host has run. A condition the object shows
    /// may be older than that failure.
    pub fn last_failed_pass(&self, group_kind: &GroupKind, id: ObjectId) -> Option<SystemTime> {
        read(&self.shared.kinds)
            .get(group_kind)
            .and_then(|kind| kind.queue.failed_at(id))
    }

    /// The objects of `group_kind` whose latest pass failed (failing, or
    /// backing off), the most recent failure first, at most `limit`, with
    /// when that pass ended. Empty for a kind this host does not serve.
    pub fn failing_objects(
        &self,
        group_kind: &GroupKind,
        limit: usize,
    ) -> Vec<(ObjectId, SystemTime)> {
        read(&self.shared.kinds)
            .get(group_kind)
            .map(|kind| kind.queue.failed(limit))
            .unwrap_or_default()
    }

    /// Object `id`'s schedule as a live gauge: the current value, then each
    /// change. The id need not hold anything yet.
    ///
    /// # Errors
    /// [`Error::NoController`] for a kind with no controller: a stream that
    /// could never move says so instead of hanging.
    pub fn watch_schedule(&self, group_kind: &GroupKind, id: ObjectId) -> Result<ScheduleStream> {
        let kind = read(&self.shared.kinds)
            .get(group_kind)
            .cloned()
            .ok_or_else(|| Error::NoController(group_kind.to_string()))?;
        Ok(schedule::watch(kind, id))
    }

    /// How many objects of `group_kind` are due and waiting for a worker: a
    /// gauge of work that is late because every worker is busy. Zero for a
    /// kind with no controller.
    pub fn due_now(&self, group_kind: &GroupKind) -> usize {
        read(&self.shared.kinds)
            .get(group_kind)
            .map_or(0, |kind| kind.queue.due())
    }

    /// Starts every loop: the workers and drivers of each kind, the pushes at
    /// commit, and the garbage-collection sweeper. Must be called inside a
    /// tokio runtime. A host starts once.
    ///
    /// # Errors
    /// [`Error::StoreInUse`] when another host in this process runs over the
    /// same database; [`Error::AlreadyStarted`] on a second start.
    pub async fn start(&self) -> Result<StopHandle> {
        let mut lifecycle = lock(&self.shared.lifecycle);
        if !matches!(*lifecycle, Lifecycle::New) {
            return Err(Error::AlreadyStarted);
        }
        let claim = Claim::take(self.shared.store.path())?;
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        // Seeded and subscribed before start returns, so no write a caller
        // makes afterwards escapes the waker.
        let cursor = waker::seed(&self.shared.store)?;
        self.shared
            .store
            .set_commit_listener(Some(commit_listener(Arc::downgrade(&self.shared))));
        let shared = self.shared.clone();
        let waker_cancel = cancel.clone();
        tracker.spawn(async move {
            let wake = |dependents, wake| shared.wake(dependents, wake);
            let seen = &shared.waker_seen;
            waker::run(
                &shared.store,
                &shared.commits,
                &waker_cancel,
                cursor,
                seen,
                wake,
            )
            .await;
        });
        let shared = self.shared.clone();
        let stale_cancel = cancel.clone();
        tracker.spawn(async move {
            let (store, kinds, options) = (&shared.store, &shared.kinds, &shared.options);
            sweeper::stale_loop(store, kinds, options, &stale_cancel).await
        });
        for kind in read(&self.shared.kinds).values() {
            kind.spawn(&self.shared.store, &tracker);
            let owed = kind.settings().cadence.owed_pass_interval;
            if owed > Duration::from_secs(3600) {
                tracing::info!(
                    kind = %kind.group_kind,
                    ?owed,
                    "the owed pass runs rarely: lost pushes wait that long"
                );
            }
        }
        let shared = self.shared.clone();
        let sweeper_cancel = cancel.clone();
        tracker.spawn(async move {
            let (store, kinds, options) = (&shared.store, &shared.kinds, &shared.options);
            let wakes = &shared.controllerless;
            sweeper::sweep_loop(store, kinds, options, wakes, &sweeper_cancel).await
        });
        *lifecycle = Lifecycle::Running(Running {
            cancel,
            tracker,
            _claim: claim,
        });
        Ok(StopHandle {
            shared: self.shared.clone(),
        })
    }

    fn running_tracker(&self) -> Option<TaskTracker> {
        match &*lock(&self.shared.lifecycle) {
            Lifecycle::Running(running) => Some(running.tracker.clone()),
            _ => None,
        }
    }
}

/// What a registration does to its kind's revisions.
enum RolloutPlan {
    /// The same version as recorded, its rollout long over.
    Unchanged,
    /// A new revision, to record: rolling out unless it has no objects to
    /// pass, or replaced nothing.
    Start(Rollout),
    /// The recorded revision, still rolling when its host stopped.
    Resume(Rollout),
}

/// Revision `number` of `group_kind`, starting now with `objects` objects:
/// rolling out to them if it `rolls` and there are any, else complete.
fn revision(
    group_kind: &GroupKind,
    number: i64,
    source: &str,
    content_hash: &Option<String>,
    objects: i64,
    rolls: bool,
) -> Rollout {
    let now = Timestamp::now();
    let complete = !rolls || objects == 0;
    Rollout {
        group_kind: group_kind.clone(),
        revision: number,
        source: source.to_string(),
        content_hash: content_hash.clone(),
        state: match complete {
            true => RolloutState::Complete,
            false => RolloutState::Rolling,
        },
        started_at: now,
        finished_at: complete.then_some(now),
        objects,
        passed: 0,
        failed: 0,
        through_id: 0,
    }
}

/// Stops a started host. Dropping it without calling [`StopHandle::stop`]
/// cancels every loop at once, without waiting.
#[must_use = "dropping the handle stops the host at once"]
pub struct StopHandle {
    shared: Arc<Shared>,
}

impl StopHandle {
    /// Cancels every loop, lets passes in flight finish, and waits for them up
    /// to `deadline`.
    ///
    /// # Errors
    /// [`Error::StopTimedOut`] when passes were still running at the deadline;
    /// they are cancelled and ending, and the store's claim is released.
    pub async fn stop(self, deadline: Duration) -> Result<()> {
        let Some(running) = self.shared.begin_stop() else {
            return Ok(());
        };
        let waited = tokio::time::timeout(deadline, running.tracker.wait()).await;
        drop(running);
        match waited {
            Ok(()) => Ok(()),
            Err(_) => Err(Error::StopTimedOut(deadline)),
        }
    }
}

impl Drop for StopHandle {
    fn drop(&mut self) {
        drop(self.shared.begin_stop());
    }
}

impl Shared {
    /// Cancels everything and hands back what is needed to wait for it.
    fn begin_stop(&self) -> Option<Running> {
        let running = {
            let mut lifecycle = lock(&self.lifecycle);
            match std::mem::replace(&mut *lifecycle, Lifecycle::Stopped) {
                Lifecycle::Running(running) => running,
                _ => return None,
            }
        };
        self.store.set_commit_listener(None);
        running.cancel.cancel();
        self.stopped.cancel();
        for kind in read(&self.kinds).values() {
            kind.shut_down();
        }
        running.tracker.close();
        Some(running)
    }
}

impl Shared {
    /// Queues each object in the queue of its kind, if it has a controller.
    pub(super) fn wake(&self, objects: Vec<(ObjectId, GroupKind)>, wake: Wake) {
        kind::wake(&self.kinds, objects, wake);
    }
}

/// Routes each push at commit to the queue of its kind, and rings the
/// dependency waker when the write log grew.
fn commit_listener(shared: Weak<Shared>) -> CommitListener {
    Arc::new(move |committed: Committed| {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if committed.log_grew {
            shared.commits.notify_one();
        }
        if committed.foreign {
            for kind in read(&shared.kinds).values() {
                kind.scan_owed_now();
            }
            // Another process's commit pushes nothing here: it may have
            // deleted a controller-less object all the same.
            shared.controllerless.notify_one();
        }
        let pushes = committed
            .pushes
            .into_iter()
            .map(|push| (push.id, push.group_kind))
            .collect();
        if kind::wake(&shared.kinds, pushes, Wake::Immediate) {
            shared.controllerless.notify_one();
        }
    })
}

/// This process's claim on a database: one running host per file.
struct Claim(PathBuf);

static CLAIMS: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

impl Claim {
    fn take(path: &std::path::Path) -> Result<Claim> {
        // Keyed on the file, so two opens of one path collide.
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut claims = lock(&CLAIMS);
        if !claims.insert(key.clone()) {
            return Err(Error::StoreInUse(key.display().to_string()));
        }
        Ok(Claim(key))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        lock(&CLAIMS).remove(&self.0);
    }
}

/// The rules `options` give a kind's spec writes.
///
/// # Errors
/// [`Error::InvalidOption`] for a spec schema that does not compile.
fn validation_rules(options: &ControllerOptions) -> Result<KindRules> {
    let schema = options
        .schemas
        .spec
        .as_deref()
        .map(SpecSchema::parse)
        .transpose()
        .map_err(|e| Error::InvalidOption(format!("the spec schema: {e}")))?;
    if let Some(status) = &options.schemas.status {
        SpecSchema::parse(status)
            .map_err(|e| Error::InvalidOption(format!("the status schema: {e}")))?;
    }
    Ok(KindRules {
        schema,
        validator: options.validator.clone(),
    })
}
