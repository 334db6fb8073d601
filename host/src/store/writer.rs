//! The single writer, with group commit.
//!
//! Writes are jobs: closures that run against the write connection inside
//! their own SAVEPOINT. There is no writer thread. The first caller to find
//! the writer idle becomes the *leader*: it takes every job queued so far (up
//! to [`MAX_BATCH`]), runs them in one transaction, commits, answers each,
//! and hands the leadership to whoever queued next. A caller that finds a
//! leader at work waits for its answer, which arrives after the COMMIT that
//! included its job. One caller alone therefore pays no thread hop, and many
//! callers share commits.
//!
//! A job that fails rolls back its own savepoint only; the others in the batch
//! still commit. A COMMIT that fails fails every job in the batch.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use rusqlite::Connection;
use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::migration::{Migrations, SchemaVersions};
use crate::object::{GroupKind, ObjectId, Timestamp};
use crate::sync::{lock, read, write};

/// The most jobs one transaction carries; bounds how long any one caller leads.
const MAX_BATCH: usize = 64;

/// Work to run once the transaction that carried a job has committed.
pub(crate) type Hook = Box<dyn FnOnce() + Send>;

/// An object that owes a pass because of a committed write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Push {
    pub(crate) id: ObjectId,
    pub(crate) group_kind: GroupKind,
}

/// What a commit tells the host: the objects it left owing a pass, and
/// whether it moved the store-wide version (so the write log grew).
pub(crate) struct Committed {
    pub(crate) pushes: Vec<Push>,
    pub(crate) log_grew: bool,
}

/// Hears about each commit that pushed or logged something, on the
/// committing thread, after the COMMIT.
pub(crate) type CommitListener = Arc<dyn Fn(Committed) + Send + Sync>;

/// Hands `listener` what a commit did, if it did anything worth hearing.
pub(super) fn announce(
    listener: &RwLock<Option<CommitListener>>,
    committed: Committed,
) -> Option<Hook> {
    if committed.pushes.is_empty() && !committed.log_grew {
        return None;
    }
    let listener = read(listener).clone()?;
    Some(Box::new(move || listener(committed)))
}

/// What a job sees: the write connection inside an open transaction.
pub(crate) struct WriteTx<'c> {
    pub(super) conn: &'c Connection,
    pub(super) sequences: Sequences,
    pub(super) now: Timestamp,
    pub(super) session: i64,
    pub(super) hooks: Vec<Hook>,
    pub(super) pushes: Vec<Push>,
    pub(super) save_sequences: bool,
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) batch: u64,
    pub(super) migrations: &'c Migrations,
}

impl<'c> WriteTx<'c> {
    /// The schema versions writes of `group_kind` are stamped with.
    pub(crate) fn schema_versions(&self, group_kind: &GroupKind) -> SchemaVersions {
        self.migrations.versions(group_kind)
    }

    /// Which transaction this is, counted per writer: lets tests see sharing.
    #[cfg(test)]
    pub(crate) fn batch(&self) -> u64 {
        self.batch
    }

    /// The connection, inside the job's savepoint.
    pub(crate) fn conn(&self) -> &'c Connection {
        self.conn
    }

    /// Takes the next value of the store-wide `resource_version` sequence.
    /// Values taken by a job that rolls back are given back: nothing carrying
    /// them was committed.
    pub(crate) fn next_resource_version(&mut self) -> i64 {
        self.sequences.resource_version += 1;
        self.sequences.resource_version
    }

    /// The last `resource_version` taken: every write at or below it is
    /// committed or inside this transaction.
    pub(crate) fn current_resource_version(&self) -> i64 {
        self.sequences.resource_version
    }

    /// Returns `resource_version`, the last value taken, unused: the write
    /// that took it turned out to have nothing to write.
    pub(crate) fn give_back_resource_version(&mut self, resource_version: i64) {
        if self.sequences.resource_version == resource_version {
            self.sequences.resource_version -= 1;
        }
    }

    /// Takes the next object id. Ids come from a counter of our own rather than
    /// AUTOINCREMENT, which would write `sqlite_sequence` on every insert; like
    /// resource versions, ids taken by a job that rolls back are given back.
    pub(crate) fn next_object_id(&mut self) -> i64 {
        self.sequences.object_id += 1;
        self.sequences.object_id
    }

    /// The transaction's clock: one reading per batch.
    pub(crate) fn now(&self) -> Timestamp {
        self.now
    }

    /// This store session's id, stamped on what only this session may vouch for.
    pub(crate) fn session(&self) -> i64 {
        self.session
    }

    /// Persists the counters in `kv` with this transaction.
    ///
    /// # Caveat
    /// Every job that removes rows from `objects`, `object_writes` or `events` must call
    /// this: the counters are otherwise re-derived at open from the highest id
    /// and log position still stored, and removing the newest row would let
    /// its id or version be handed out again.
    pub(crate) fn save_sequences(&mut self) {
        self.save_sequences = true;
    }

    /// Announces, once this transaction commits, that `object` owes a pass.
    /// Dropped if the job rolls back.
    pub(crate) fn push(&mut self, object: Push) {
        self.pushes.push(object);
    }

    /// Runs `hook` after the outermost commit, and never if the job rolls back.
    pub(crate) fn after_commit(&mut self, hook: Hook) {
        self.hooks.push(hook);
    }
}

/// The store-wide counters the writer owns.
///
/// They are not written on every commit: every write that takes a version
/// appends it to the write log or the event log, and every create stores its
/// id, so at open the highest stored id and versions recover them. `kv` holds a floor under
/// both, written by the transactions that remove rows (see
/// [`WriteTx::save_sequences`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sequences {
    /// The last `resource_version` handed out.
    pub(crate) resource_version: i64,
    /// The last object id handed out.
    pub(crate) object_id: i64,
}

impl Sequences {
    pub(crate) fn load(conn: &Connection) -> rusqlite::Result<Sequences> {
        let read = |sql: &str| conn.query_row(sql, [], |row| row.get::<_, Option<i64>>(0));
        let floor = |key: &str| {
            conn.query_row("SELECT value FROM kv WHERE key = ?1", [key], |row| {
                row.get::<_, i64>(0)
            })
        };
        // Every maximum here is an index lookup, so opening stays O(1).
        let logged = read("SELECT MAX(resource_version) FROM object_writes")?.unwrap_or(0);
        let evented = read("SELECT MAX(resource_version) FROM events")?.unwrap_or(0);
        let stored = read("SELECT MAX(id) FROM objects")?.unwrap_or(0);
        Ok(Sequences {
            resource_version: floor("resource_version")?.max(logged).max(evented),
            object_id: floor("object_id")?.max(stored),
        })
    }

    pub(super) fn save(self, conn: &Connection) -> rusqlite::Result<()> {
        let mut update = conn.prepare_cached("UPDATE kv SET value = ?2 WHERE key = ?1")?;
        update.execute(rusqlite::params!["resource_version", self.resource_version])?;
        update.execute(rusqlite::params!["object_id", self.object_id])?;
        Ok(())
    }
}

/// The connection the leader writes through, and the counters it owns.
pub(crate) struct WriterConn {
    pub(crate) conn: Connection,
    pub(crate) sequences: Sequences,
    pub(crate) session: i64,
    pub(crate) batches: u64,
    /// The kinds' schema versions, which writes are stamped with.
    pub(crate) migrations: Arc<Migrations>,
    pub(crate) metrics: crate::metrics::StoreMetrics,
}

/// A queued write, with its answer slot erased to a common shape.
trait Job: Send {
    /// Runs the job inside its savepoint; `false` means it failed and its
    /// savepoint must be rolled back.
    fn run(&mut self, tx: &mut WriteTx<'_>) -> bool;
    /// Answers the caller once the batch's fate is known.
    fn finish(self: Box<Self>, commit: &Result<(), String>);
    /// Makes the job's caller the next leader.
    fn grant_lead(&self);
    /// Identifies the job's slot, so a caller that gives up can find its job.
    fn slot_addr(&self) -> usize;
    /// A lease is never run in a batch: it hands the whole writer to a
    /// session (a transaction held across calls) when it reaches the front.
    fn is_lease(&self) -> bool {
        false
    }
}

enum SlotState<R> {
    Queued,
    Lead,
    Done(Result<R>),
    Taken,
}

/// Where a caller waits for its answer: on a condvar if it blocks, on a
/// `Notify` if it awaits. Only the one it waits on is signalled, since waking
/// a condvar costs a system call even when nobody waits on it.
struct Slot<R> {
    state: Mutex<SlotState<R>>,
    waiter: Waiter,
}

enum Waiter {
    Blocking(Condvar),
    Async(Notify),
}

enum Wake<R> {
    Done(Result<R>),
    Lead,
}

impl<R> Slot<R> {
    fn new(waiter: Waiter) -> Self {
        Slot {
            state: Mutex::new(SlotState::Queued),
            waiter,
        }
    }

    fn set(&self, state: SlotState<R>) {
        *lock(&self.state) = state;
        match &self.waiter {
            Waiter::Blocking(condvar) => condvar.notify_one(),
            // notify_one stores a permit when nobody waits yet, so a waiter
            // that checks the state and then awaits cannot miss this.
            Waiter::Async(notify) => notify.notify_one(),
        }
    }

    /// Takes a wake if one is there, leaving `Queued` untouched.
    fn take_wake(state: &mut SlotState<R>) -> Option<Wake<R>> {
        match std::mem::replace(state, SlotState::Taken) {
            SlotState::Done(result) => Some(Wake::Done(result)),
            SlotState::Lead => Some(Wake::Lead),
            other => {
                *state = other;
                None
            }
        }
    }

    fn wait_blocking(&self) -> Wake<R> {
        let mut state = lock(&self.state);
        loop {
            if let Some(wake) = Self::take_wake(&mut state) {
                return wake;
            }
            state = match &self.waiter {
                Waiter::Blocking(condvar) => condvar
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
                // A leader takes its own answer this way, which is there by then.
                Waiter::Async(_) => {
                    return Wake::Done(Err(Error::Internal(
                        "an async write was waited on by blocking".into(),
                    )));
                }
            };
        }
    }

    async fn wait_async(&self) -> Wake<R> {
        loop {
            if let Some(wake) = Self::take_wake(&mut lock(&self.state)) {
                return wake;
            }
            match &self.waiter {
                Waiter::Async(notify) => notify.notified().await,
                Waiter::Blocking(_) => {
                    return Wake::Done(Err(Error::Internal("a blocking write was awaited".into())));
                }
            }
        }
    }

    /// Back to waiting, after a lead that found a lease ahead of its job.
    fn requeue(&self) {
        let mut state = lock(&self.state);
        if matches!(*state, SlotState::Taken) {
            *state = SlotState::Queued;
        }
    }

    fn addr(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as *const () as usize
    }

    fn is_done_or_taken(&self) -> bool {
        matches!(*lock(&self.state), SlotState::Done(_) | SlotState::Taken)
    }
}

/// A request for the whole writer, queued like a job and never run as one.
struct LeaseJob {
    slot: Arc<Slot<()>>,
}

impl Job for LeaseJob {
    fn run(&mut self, _tx: &mut WriteTx<'_>) -> bool {
        false
    }

    fn finish(self: Box<Self>, _commit: &Result<(), String>) {}

    fn grant_lead(&self) {
        self.slot.set(SlotState::Lead);
    }

    fn slot_addr(&self) -> usize {
        self.slot.addr()
    }

    fn is_lease(&self) -> bool {
        true
    }
}

/// A job queued by [`Writer::submit`], not yet answered.
pub(crate) struct Submitted<R> {
    slot: Arc<Slot<R>>,
    must_lead: bool,
}

struct TypedJob<F, R> {
    work: Option<F>,
    outcome: Option<Result<R>>,
    slot: Arc<Slot<R>>,
}

impl<F, R> Job for TypedJob<F, R>
where
    F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send,
    R: Send,
{
    fn run(&mut self, tx: &mut WriteTx<'_>) -> bool {
        let Some(work) = self.work.take() else {
            return false;
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| work(tx)))
            .unwrap_or_else(|_| Err(Error::Internal("a write job panicked".into())));
        let ok = outcome.is_ok();
        self.outcome = Some(outcome);
        ok
    }

    fn finish(self: Box<Self>, commit: &Result<(), String>) {
        let outcome = match (self.outcome, commit) {
            (Some(Ok(_)), Err(message)) => Err(Error::CommitFailed(message.clone())),
            (Some(outcome), _) => outcome,
            (None, Err(message)) => Err(Error::CommitFailed(message.clone())),
            (None, Ok(())) => Err(Error::Internal("a write job never ran".into())),
        };
        self.slot.set(SlotState::Done(outcome));
    }

    fn grant_lead(&self) {
        self.slot.set(SlotState::Lead);
    }

    fn slot_addr(&self) -> usize {
        self.slot.addr()
    }
}

struct Queue {
    jobs: VecDeque<Box<dyn Job>>,
    leader_active: bool,
}

/// The write side of the store.
pub(crate) struct Writer {
    queue: Mutex<Queue>,
    pub(super) conn: Mutex<WriterConn>,
    pub(super) listener: RwLock<Option<CommitListener>>,
    /// The last committed `resource_version`, readable without the lock.
    committed_version: std::sync::atomic::AtomicI64,
    /// The same, for watches to await: sent after every commit.
    commits: tokio::sync::watch::Sender<i64>,
}

impl Writer {
    pub(crate) fn new(conn: WriterConn) -> Self {
        Writer {
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                leader_active: false,
            }),
            committed_version: std::sync::atomic::AtomicI64::new(conn.sequences.resource_version),
            commits: tokio::sync::watch::Sender::new(conn.sequences.resource_version),
            conn: Mutex::new(conn),
            listener: RwLock::new(None),
        }
    }

    /// Sets (or clears) who hears about pushes.
    pub(crate) fn set_listener(&self, listener: Option<CommitListener>) {
        *write(&self.listener) = listener;
    }

    /// The last `resource_version` this writer committed.
    ///
    /// Lock-free: passes sample it with every load, and the connection's lock
    /// is held for whole batches.
    pub(crate) fn resource_version(&self) -> i64 {
        self.committed_version
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Publishes what a commit made the sequences.
    pub(super) fn committed(&self, sequences: Sequences) {
        self.committed_version.store(
            sequences.resource_version,
            std::sync::atomic::Ordering::SeqCst,
        );
        // Without watchers this is one uncontended lock and no wake-up.
        self.commits.send_if_modified(|version| {
            let moved = *version != sequences.resource_version;
            *version = sequences.resource_version;
            moved
        });
    }

    /// A receiver that sees each committed `resource_version`.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<i64> {
        self.commits.subscribe()
    }

    /// How many jobs wait for a leader.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        lock(&self.queue).jobs.len()
    }

    /// Queues `work` and returns its outcome once its transaction committed,
    /// blocking the calling thread.
    pub(crate) fn write_blocking<F, R>(&self, work: F) -> Result<R>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let (slot, mut must_lead) = self.enqueue(work, Waiter::Blocking(Condvar::new()));
        loop {
            if !must_lead {
                match slot.wait_blocking() {
                    Wake::Done(result) => return result,
                    Wake::Lead => {}
                }
            }
            match self.lead_until_done(&slot) {
                Some(result) => return result,
                None => {
                    slot.requeue();
                    must_lead = false;
                }
            }
        }
    }

    /// Queues `work` and resolves to its outcome once its transaction committed.
    ///
    /// # Cancel safety
    /// Dropping the future before its job ran withdraws the job: nothing is
    /// written. Dropping it after the job was taken into a batch lets the write
    /// land, unanswered.
    pub(crate) async fn write<F, R>(&self, work: F) -> Result<R>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        self.answer(self.submit(work)).await
    }

    /// Queues `work` now, fixing its place in the order of writes, and hands
    /// back what [`Writer::answer`] waits on.
    pub(crate) fn submit<F, R>(&self, work: F) -> Submitted<R>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let (slot, must_lead) = self.enqueue(work, Waiter::Async(Notify::new()));
        Submitted { slot, must_lead }
    }

    /// Waits for a submitted job's outcome, leading a batch if it is this
    /// caller's turn. Cancel safe as [`Writer::write`].
    pub(crate) async fn answer<R>(&self, submitted: Submitted<R>) -> Result<R> {
        let Submitted {
            slot,
            mut must_lead,
        } = submitted;
        loop {
            if !must_lead {
                let mut guard = WithdrawOnDrop {
                    writer: self,
                    slot: &slot,
                    armed: true,
                };
                let wake = slot.wait_async().await;
                guard.armed = false;
                match wake {
                    Wake::Done(result) => return result,
                    Wake::Lead => {}
                }
            }
            match self.lead_until_done(&slot) {
                Some(result) => return result,
                None => {
                    slot.requeue();
                    must_lead = false;
                }
            }
        }
    }

    /// Waits until the whole writer is this caller's: every job queued before
    /// has committed, and jobs queued after wait until [`Writer::hand_off`].
    ///
    /// # Cancel safety
    /// Dropping the future withdraws the request, passing the writer on if it
    /// had already been granted.
    pub(super) async fn lease(&self) {
        let slot = Arc::new(Slot::<()>::new(Waiter::Async(Notify::new())));
        let must_lead = {
            let mut queue = lock(&self.queue);
            queue
                .jobs
                .push_back(Box::new(LeaseJob { slot: slot.clone() }));
            let must_lead = !queue.leader_active;
            queue.leader_active = true;
            must_lead
        };
        if !must_lead {
            let mut guard = WithdrawOnDrop {
                writer: self,
                slot: &slot,
                armed: true,
            };
            slot.wait_async().await;
            guard.armed = false;
        }
        // The lease is at the front: leave the queue and hold the writer.
        let mut queue = lock(&self.queue);
        if let Some(position) = queue.jobs.iter().position(|j| j.slot_addr() == slot.addr()) {
            queue.jobs.remove(position);
        }
    }

    fn enqueue<F, R>(&self, work: F, waiter: Waiter) -> (Arc<Slot<R>>, bool)
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let slot = Arc::new(Slot::new(waiter));
        let job = Box::new(TypedJob {
            work: Some(work),
            outcome: None,
            slot: slot.clone(),
        });
        let mut queue = lock(&self.queue);
        queue.jobs.push_back(job);
        let must_lead = !queue.leader_active;
        queue.leader_active = true;
        (slot, must_lead)
    }

    /// Runs batches until the caller's own job is answered, then passes the
    /// leadership on.
    ///
    /// `None` when a lease stands ahead of the caller's job: the writer goes
    /// to the lease's session and the caller waits again.
    fn lead_until_done<R>(&self, slot: &Slot<R>) -> Option<Result<R>> {
        loop {
            let batch = self.take_batch();
            if batch.is_empty() {
                self.hand_off();
                return None;
            }
            let hooks = self.run_batch(batch);
            if slot.is_done_or_taken() {
                self.hand_off();
                run_hooks(hooks);
                return Some(match slot.wait_blocking() {
                    Wake::Done(result) => result,
                    Wake::Lead => Err(Error::Internal("leadership granted twice".into())),
                });
            }
            run_hooks(hooks);
        }
    }

    /// The jobs at the front of the queue, up to [`MAX_BATCH`], stopping at a lease.
    fn take_batch(&self) -> Vec<Box<dyn Job>> {
        let mut queue = lock(&self.queue);
        let take = queue
            .jobs
            .iter()
            .take(MAX_BATCH)
            .take_while(|job| !job.is_lease())
            .count();
        queue.jobs.drain(..take).collect()
    }

    /// Passes the writer to whatever is at the front of the queue: a job's
    /// caller, or a lease's session.
    pub(super) fn hand_off(&self) {
        let mut queue = lock(&self.queue);
        match queue.jobs.front() {
            Some(next) => next.grant_lead(),
            None => queue.leader_active = false,
        }
    }

    /// Runs one transaction; returns the hooks of the jobs that committed.
    fn run_batch(&self, mut batch: Vec<Box<dyn Job>>) -> Vec<Hook> {
        let started = std::time::Instant::now();
        let mut writer = lock(&self.conn);
        let writer = &mut *writer;
        writer.batches += 1;
        let mut tx = WriteTx {
            batch: writer.batches,
            conn: &writer.conn,
            sequences: writer.sequences,
            now: Timestamp::now(),
            session: writer.session,
            hooks: Vec::new(),
            pushes: Vec::new(),
            save_sequences: false,
            migrations: &writer.migrations,
        };
        let committed = run_jobs(&mut tx, &mut batch).map_err(|e| e.to_string());
        let log_grew = tx.sequences.resource_version > writer.sequences.resource_version;
        let (sequences, mut hooks, pushes) = (tx.sequences, tx.hooks, tx.pushes);
        match &committed {
            Ok(()) => {
                writer.sequences = sequences;
                self.committed(sequences);
                let metrics = &writer.metrics;
                metrics.commits.inc();
                metrics.batch_size.observe(batch.len() as f64);
                metrics
                    .write_seconds
                    .observe(crate::metrics::seconds(started.elapsed()));
            }
            Err(_) => {
                // The transaction may already be gone; a failed ROLLBACK changes nothing.
                let _ = writer.conn.execute_batch("ROLLBACK");
            }
        }
        for job in batch {
            job.finish(&committed);
        }
        if committed.is_err() {
            return Vec::new();
        }
        if let Some(announcement) = announce(&self.listener, Committed { pushes, log_grew }) {
            hooks.insert(0, announcement);
        }
        hooks
    }

    /// Withdraws a job whose caller stopped waiting, or passes on the
    /// leadership it was granted.
    fn withdraw<R>(&self, slot: &Arc<Slot<R>>) {
        let mut queue = lock(&self.queue);
        // Read under the queue lock: leadership is only ever granted under it.
        let was_lead = matches!(*lock(&slot.state), SlotState::Lead);
        let slot_addr = Arc::as_ptr(slot) as *const () as usize;
        if let Some(position) = queue.jobs.iter().position(|j| j.slot_addr() == slot_addr) {
            queue.jobs.remove(position);
        }
        if was_lead {
            match queue.jobs.front() {
                Some(next) => next.grant_lead(),
                None => queue.leader_active = false,
            }
        }
    }
}

/// Runs one of the writer's fixed statements; cached, since every job runs several.
pub(super) fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

fn run_jobs(tx: &mut WriteTx<'_>, batch: &mut [Box<dyn Job>]) -> rusqlite::Result<()> {
    exec(tx.conn, "BEGIN IMMEDIATE")?;
    for job in batch.iter_mut() {
        exec(tx.conn, "SAVEPOINT job")?;
        let hooks_before = tx.hooks.len();
        let pushes_before = tx.pushes.len();
        let sequences_before = tx.sequences;
        if job.run(tx) {
            exec(tx.conn, "RELEASE job")?;
        } else {
            exec(tx.conn, "ROLLBACK TO job")?;
            exec(tx.conn, "RELEASE job")?;
            // Nothing the job wrote survives, so what it took can be handed out again.
            tx.hooks.truncate(hooks_before);
            tx.pushes.truncate(pushes_before);
            tx.sequences = sequences_before;
        }
    }
    if tx.save_sequences {
        tx.sequences.save(tx.conn)?;
    }
    exec(tx.conn, "COMMIT")
}

pub(super) fn run_hooks(hooks: Vec<Hook>) {
    for hook in hooks {
        if catch_unwind(AssertUnwindSafe(hook)).is_err() {
            tracing::error!("an after-commit hook panicked");
        }
    }
}

/// Withdraws a waiting async caller's job if its future is dropped.
struct WithdrawOnDrop<'a, R> {
    writer: &'a Writer,
    slot: &'a Arc<Slot<R>>,
    armed: bool,
}

impl<R> Drop for WithdrawOnDrop<'_, R> {
    fn drop(&mut self) {
        if self.armed {
            self.writer.withdraw(self.slot);
        }
    }
}
