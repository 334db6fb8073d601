//! The single writer, with group commit.
//!
//! Writes are jobs: closures that run against the write connection inside
//! their own savepoint (on PostgreSQL, only if they send anything). On
//! SQLite there is no writer thread: the first caller to find the writer
//! idle becomes the *leader*: it takes every job queued so far (up to
//! [`MAX_BATCH`]), runs them in one transaction, commits, answers each, and
//! hands the leadership to whoever queued next. A caller that finds a leader
//! at work waits for its answer, which arrives after the COMMIT that
//! included its job. One caller alone therefore pays no thread hop, and many
//! callers share commits. On PostgreSQL, whose round trips must not hold up
//! the callers' threads, a thread of the store's own leads every batch
//! ([`Leader::Thread`]); it waits briefly for the callers it just answered
//! ([`GATHER`]), adds jobs queued while a batch runs to that batch, and
//! opens the next transaction with each COMMIT.
//!
//! A job that fails rolls back its own savepoint only; the others in the batch
//! still commit. A COMMIT that fails fails every job in the batch. A job may
//! leave its answer to a row count read after the COMMIT (a [`Verdict`]):
//! PostgreSQL then sends its statement with the COMMIT instead of waiting
//! for it.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::object::Timestamp;
use crate::store::backend::Savepoint;
use crate::store::backend::sequences::Sequences;
use crate::store::writer::slot::{Slot, SlotState, Wake};
use crate::store::writer::write_tx::{
    CommitListener, Committed, Hook, Verdict, WriteTx, WriterConn, announce,
};
use crate::sync::{lock, write};

/// The most jobs one transaction carries; bounds how long any one caller leads.
const MAX_BATCH: usize = 64;

/// The most times a new leader yields for answered callers to queue again:
/// one yield gathered about five of eight callers, four nearly all.
const MAX_GATHER_YIELDS: usize = 4;

/// Why a batch did not commit, as each of its callers is told.
#[derive(Debug)]
enum BatchFailure {
    /// The database refused the transaction.
    Refused(String),
    /// The database was out of reach: the same write may succeed later.
    Unavailable(String),
    /// The fence check refused the commit of a host whose lease ended.
    LeaseLost(String),
}

impl BatchFailure {
    fn error(&self) -> Error {
        match self {
            BatchFailure::Refused(message) => Error::CommitFailed(message.clone()),
            BatchFailure::Unavailable(message) => Error::Unavailable {
                backend: "postgres",
                message: message.clone(),
            },
            BatchFailure::LeaseLost(message) => Error::LeaseLost(message.clone()),
        }
    }
}

impl From<&Error> for BatchFailure {
    fn from(error: &Error) -> BatchFailure {
        match error {
            Error::Unavailable { message, .. } => BatchFailure::Unavailable(message.clone()),
            Error::LeaseLost(message) => BatchFailure::LeaseLost(message.clone()),
            other => BatchFailure::Refused(other.to_string()),
        }
    }
}

/// A queued write, with its answer slot erased to a common shape.
trait Job: Send {
    /// Runs the job inside its savepoint; `false` means it failed and its
    /// savepoint must be rolled back.
    fn run(&mut self, tx: &mut WriteTx<'_>) -> bool;
    /// Answers the caller once the batch's fate is known.
    fn finish(self: Box<Self>, commit: &Result<(), BatchFailure>);
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

/// A request for the whole writer, queued like a job and never run as one.
struct LeaseJob {
    slot: Arc<Slot<()>>,
}

impl Job for LeaseJob {
    fn run(&mut self, _tx: &mut WriteTx<'_>) -> bool {
        false
    }

    fn finish(self: Box<Self>, _commit: &Result<(), BatchFailure>) {}

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

impl<R> Submitted<R> {
    /// Whether the job found the writer idle: its caller leads the batch.
    pub(crate) fn must_lead(&self) -> bool {
        self.must_lead
    }
}

struct TypedJob<F, R> {
    work: Option<F>,
    outcome: Option<Result<R>>,
    /// What decides the outcome once the commit has answered.
    verdicts: Vec<Verdict>,
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
        self.verdicts = tx.take_verdicts();
        ok
    }

    fn finish(self: Box<Self>, commit: &Result<(), BatchFailure>) {
        let outcome = match (self.outcome, commit) {
            (Some(Ok(_)) | None, Err(failure)) => Err(failure.error()),
            (Some(outcome), _) => outcome,
            (None, Ok(())) => Err(Error::Internal("a write job never ran".into())),
        };
        let outcome = match self.verdicts.into_iter().find_map(Verdict::failure) {
            Some(failure) if outcome.is_ok() => Err(failure),
            _ => outcome,
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

/// Who runs the batches.
pub(crate) enum Leader {
    /// The first caller to find the writer idle leads, on its own thread:
    /// for SQLite, where a batch takes microseconds.
    Callers,
    /// A thread of the store's own leads every batch, woken by this when
    /// work is queued or the writer freed: for PostgreSQL, whose round
    /// trips must not hold up the callers' threads (tokio workers, often).
    Thread(Condvar),
}

/// How long the leading thread sleeps between looks at whether its store
/// is still open.
const IDLE_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// How long the leading thread waits for the callers it just answered to
/// queue their next writes before it starts a batch without them: about
/// what a caller takes to wake and queue again on a busy machine, and
/// little next to the WAL flush every batch waits for.
const GATHER: std::time::Duration = std::time::Duration::from_micros(150);

/// How long a transaction opened early waits for a job before the leading
/// thread rolls it back: longer than a worker takes between two writes of
/// consecutive passes, short enough that other processes' writers, which
/// queue behind its lock on the counters, barely notice.
const OPENED_LINGER: std::time::Duration = std::time::Duration::from_millis(2);

/// The write side of the store.
pub(crate) struct Writer {
    queue: Mutex<Queue>,
    pub(crate) conn: Mutex<WriterConn>,
    pub(super) listener: RwLock<Option<CommitListener>>,
    /// The last committed `resource_version`, readable without the lock.
    committed_version: std::sync::atomic::AtomicI64,
    /// The same, for watches to await: sent after every commit.
    commits: tokio::sync::watch::Sender<i64>,
    /// Commits made through this writer plus those heard of from other
    /// processes: moves after each is visible to readers.
    commit_count: std::sync::atomic::AtomicU64,
    /// `beehive_store_writes_waiting`: the queue's length, set under its lock
    /// after every change.
    waiting: prometheus_client::metrics::gauge::Gauge,
    leader: Leader,
    /// Whether the last batch answered more callers than its leader's: they
    /// are about to queue their next writes.
    pub(crate) answered_others: AtomicBool,
}

impl Writer {
    pub(crate) fn new(conn: WriterConn, leader: Leader) -> Self {
        Writer {
            leader,
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                leader_active: false,
            }),
            waiting: conn.metrics.writes_waiting.clone(),
            committed_version: std::sync::atomic::AtomicI64::new(conn.sequences.resource_version),
            commits: tokio::sync::watch::Sender::new(conn.sequences.resource_version),
            commit_count: std::sync::atomic::AtomicU64::new(0),
            conn: Mutex::new(conn),
            listener: RwLock::new(None),
            answered_others: AtomicBool::new(false),
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

    /// How many commits were made through this writer or heard of from
    /// other processes.
    pub(crate) fn commit_count(&self) -> u64 {
        self.commit_count.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Publishes what a commit made the sequences.
    pub(super) fn committed(&self, sequences: Sequences) {
        self.committed_version.store(
            sequences.resource_version,
            std::sync::atomic::Ordering::SeqCst,
        );
        self.commit_count
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // Without watchers this is one uncontended lock and no wake-up.
        self.commits.send_if_modified(|version| {
            let moved = *version != sequences.resource_version;
            *version = sequences.resource_version;
            moved
        });
    }

    /// Another process committed up to `resource_version` (0 when unknown):
    /// wakes what a local commit that grew the log would.
    pub(crate) fn heard_commit(&self, resource_version: i64) {
        let moved_to = self
            .committed_version
            .fetch_max(resource_version, std::sync::atomic::Ordering::SeqCst)
            .max(resource_version);
        self.commit_count
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.commits.send_modify(|version| *version = moved_to);
        let foreign = Committed {
            pushes: Vec::new(),
            log_grew: true,
            foreign: true,
        };
        if let Some(announcement) = announce(&self.listener, foreign) {
            announcement();
        }
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
        let (slot, must_lead) = self.enqueue(work);
        Submitted { slot, must_lead }
    }

    /// Waits for a submitted job's outcome, leading a batch if it is this
    /// caller's turn. Cancel safe as [`Writer::write`].
    pub(crate) async fn answer<R>(&self, submitted: Submitted<R>) -> Result<R> {
        let Submitted {
            slot,
            mut must_lead,
        } = submitted;
        if must_lead && self.answered_others.swap(false, Ordering::Relaxed) {
            self.let_answered_callers_queue(&slot).await;
        }
        loop {
            if !must_lead {
                let mut guard = WithdrawOnDrop {
                    writer: self,
                    slot: &slot,
                    leading: false,
                    armed: true,
                };
                let wake = slot.wait().await;
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

    /// Yields before a caller that just found the writer idle leads, when
    /// the last batch answered other callers: woken by that batch's COMMIT,
    /// they queue their next writes meanwhile and share this batch's instead
    /// of each waiting for a COMMIT of their own. Without it, the leader's
    /// own next write always went alone. It yields again while the queue
    /// still grows, up to [`MAX_GATHER_YIELDS`] times; a lone caller never
    /// yields.
    async fn let_answered_callers_queue<R>(&self, slot: &Arc<Slot<R>>) {
        let mut guard = WithdrawOnDrop {
            writer: self,
            slot,
            leading: true,
            armed: true,
        };
        let mut queued = lock(&self.queue).jobs.len();
        for _ in 0..MAX_GATHER_YIELDS {
            tokio::task::yield_now().await;
            let now = lock(&self.queue).jobs.len();
            if now <= queued {
                break;
            }
            queued = now;
        }
        guard.armed = false;
    }

    /// Waits until the whole writer is this caller's: every job queued before
    /// has committed, and jobs queued after wait until [`Writer::hand_off`].
    ///
    /// # Cancel safety
    /// Dropping the future withdraws the request, passing the writer on if it
    /// had already been granted.
    pub(super) async fn lease(&self) {
        let slot = Arc::new(Slot::<()>::new());
        let must_lead = {
            let mut queue = lock(&self.queue);
            queue
                .jobs
                .push_back(Box::new(LeaseJob { slot: slot.clone() }));
            self.publish_depth(&queue);
            self.claim(&mut queue)
        };
        if !must_lead {
            let mut guard = WithdrawOnDrop {
                writer: self,
                slot: &slot,
                leading: false,
                armed: true,
            };
            slot.wait().await;
            guard.armed = false;
        }
        // The lease is at the front: leave the queue and hold the writer.
        let mut queue = lock(&self.queue);
        if let Some(position) = queue.jobs.iter().position(|j| j.slot_addr() == slot.addr()) {
            queue.jobs.remove(position);
        }
        self.publish_depth(&queue);
    }

    fn publish_depth(&self, queue: &Queue) {
        self.waiting.set(queue.jobs.len() as i64);
    }

    fn enqueue<F, R>(&self, work: F) -> (Arc<Slot<R>>, bool)
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let slot = Arc::new(Slot::new());
        let job = Box::new(TypedJob {
            work: Some(work),
            outcome: None,
            verdicts: Vec::new(),
            slot: slot.clone(),
        });
        let mut queue = lock(&self.queue);
        queue.jobs.push_back(job);
        self.publish_depth(&queue);
        let must_lead = self.claim(&mut queue);
        (slot, must_lead)
    }

    /// Claims the writer for a caller that just queued: `true` when that
    /// caller must lead.
    fn claim(&self, queue: &mut Queue) -> bool {
        match &self.leader {
            Leader::Callers => {
                let must_lead = !queue.leader_active;
                queue.leader_active = true;
                must_lead
            }
            Leader::Thread(wake) => {
                wake.notify_one();
                false
            }
        }
    }

    /// Passes the writer on: to the caller or session at the front of the
    /// queue, or back to the leading thread.
    fn pass_on(&self, queue: &mut Queue) {
        match (&self.leader, queue.jobs.front()) {
            (Leader::Callers, Some(next)) => next.grant_lead(),
            (Leader::Callers, None) => queue.leader_active = false,
            (Leader::Thread(wake), _) => {
                queue.leader_active = false;
                wake.notify_one();
            }
        }
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
            self.run_batch(batch);
            if slot.is_done_or_taken() {
                self.hand_off();
                return Some(slot.take_answer());
            }
        }
    }

    /// The jobs at the front of the queue, up to [`MAX_BATCH`], stopping at a lease.
    fn take_batch(&self) -> Vec<Box<dyn Job>> {
        self.drain_batch(&mut lock(&self.queue), MAX_BATCH)
    }

    /// Up to `most` jobs from the front of the queue, stopping at a lease.
    fn drain_batch(&self, queue: &mut Queue, most: usize) -> Vec<Box<dyn Job>> {
        let take = queue
            .jobs
            .iter()
            .take(most)
            .take_while(|job| !job.is_lease())
            .count();
        let batch = queue.jobs.drain(..take).collect();
        self.publish_depth(queue);
        batch
    }

    /// Passes the writer to whatever is at the front of the queue: a job's
    /// caller, or a lease's session.
    pub(super) fn hand_off(&self) {
        self.pass_on(&mut lock(&self.queue));
    }

    /// Runs one transaction, then its after-commit hooks, then answers its
    /// jobs: a write's caller sees its hooks' effects.
    fn run_batch(&self, mut batch: Vec<Box<dyn Job>>) {
        self.answered_others
            .store(batch.len() > 1, Ordering::Relaxed);
        let (committed, hooks) = self.commit_batch(&mut batch);
        run_hooks(hooks);
        for job in batch {
            job.finish(&committed);
        }
    }

    /// Runs `batch` in one transaction; its outcome, and the hooks to run
    /// (none if it failed).
    fn commit_batch(&self, batch: &mut Vec<Box<dyn Job>>) -> (Result<(), BatchFailure>, Vec<Hook>) {
        let started = std::time::Instant::now();
        let mut writer = lock(&self.conn);
        let writer = &mut *writer;
        if let Err(error) = writer.heal() {
            return (Err(BatchFailure::from(&error)), Vec::new());
        }
        writer.batches += 1;
        let mut tx = WriteTx {
            #[cfg(test)]
            batch: writer.batches,
            conn: writer.conn.conn(),
            sequences: writer.sequences,
            now: Timestamp::now(),
            session: writer.session,
            hooks: Vec::new(),
            pushes: Vec::new(),
            save_sequences: false,
            migrations: &writer.migrations,
            verdicts: Some(Vec::new()),
        };
        let mut begun = writer.sequences;
        let opened = writer.opened.take();
        let begin_next = || self.open_next();
        let absorb = |room: usize| self.absorb(room);
        let committed = match run_jobs(&mut tx, batch, &mut begun, opened, &begin_next, &absorb) {
            Ok(next) => {
                writer.opened = next;
                Ok(())
            }
            Err(error) => Err(BatchFailure::from(&error)),
        };
        let log_grew = tx.sequences.resource_version > begun.resource_version;
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
            Err(why) if !writer.conn.is_alive() => {
                // The COMMIT may have reached the server before the
                // connection went: say so, and never retry it.
                let unknown = BatchFailure::Unavailable(format!(
                    "the connection to the database was lost during this write, \
                     which may or may not have committed (read it back to know): {}",
                    why.error()
                ));
                return (Err(unknown), Vec::new());
            }
            Err(_) => {
                writer.conn.conn().rollback();
                return (committed, Vec::new());
            }
        }
        if let Some(announcement) = announce(
            &self.listener,
            Committed {
                pushes,
                log_grew,
                foreign: false,
            },
        ) {
            hooks.insert(0, announcement);
        }
        (committed, hooks)
    }

    /// Whether the leading thread should open the next transaction with
    /// this one's COMMIT: it leads (PostgreSQL), and no session is next (a
    /// session opens its own). It opens one even with nothing queued: a
    /// lone caller writing again and again (a worker's passes) then finds
    /// a transaction open, and [`lead_on_thread`] rolls it back once the
    /// writer has stayed idle for [`OPENED_LINGER`].
    fn open_next(&self) -> bool {
        matches!(self.leader, Leader::Thread(_))
            && !lock(&self.queue)
                .jobs
                .front()
                .is_some_and(|job| job.is_lease())
    }

    /// Jobs queued while a batch ran, for the leading thread to add to it
    /// before its COMMIT (up to `room`): a job that just missed a batch
    /// would otherwise wait for that batch's commit and then its own.
    fn absorb(&self, room: usize) -> Vec<Box<dyn Job>> {
        if !matches!(self.leader, Leader::Thread(_)) || room == 0 {
            return Vec::new();
        }
        self.drain_batch(&mut lock(&self.queue), room)
    }

    /// Whether a transaction opened early waits for a batch.
    fn has_opened(&self) -> bool {
        lock(&self.conn).opened.is_some()
    }

    /// Rolls back a transaction opened early, if one is open; whether one was.
    ///
    /// Only the leading thread nests the queue's lock and the connection's
    /// (either way round); no other thread holds one while taking the
    /// other, so the nesting cannot deadlock.
    fn discard_opened(&self) -> bool {
        let mut writer = lock(&self.conn);
        match writer.opened.take() {
            Some(_) => {
                writer.conn.conn().rollback();
                true
            }
            None => false,
        }
    }

    /// Withdraws a job whose caller stopped waiting, or passes on the
    /// leadership it was granted.
    fn withdraw<R>(&self, slot: &Arc<Slot<R>>, leading: bool) {
        let mut queue = lock(&self.queue);
        // Read under the queue lock: leadership is only ever granted under it.
        let was_lead = leading || slot.is_lead();
        let slot_addr = Arc::as_ptr(slot) as *const () as usize;
        if let Some(position) = queue.jobs.iter().position(|j| j.slot_addr() == slot_addr) {
            queue.jobs.remove(position);
        }
        self.publish_depth(&queue);
        if was_lead {
            self.pass_on(&mut queue);
        }
    }
}

/// Runs `batch` in one transaction and commits it; `begun` becomes the
/// counters as the transaction found them.
///
/// `opened` is a transaction already open, with its counters; with
/// `begin_next` saying a batch is waiting, the COMMIT's round trip also
/// opens the next transaction, returned for that batch.
fn run_jobs(
    tx: &mut WriteTx<'_>,
    batch: &mut Vec<Box<dyn Job>>,
    begun: &mut Sequences,
    opened: Option<Sequences>,
    begin_next: &dyn Fn() -> bool,
    absorb: &dyn Fn(usize) -> Vec<Box<dyn Job>>,
) -> Result<Option<Sequences>> {
    let committed = match opened {
        Some(counters) => Some(counters),
        None => tx.conn.begin_write()?,
    };
    if let Some(committed) = committed {
        tx.sequences = committed;
    }
    *begun = tx.sequences;
    // A lone job needs no savepoint: if it fails, the whole transaction
    // goes, which saves two statements.
    let alone = batch.len() == 1;
    let mut next = 0;
    loop {
        if next == batch.len() {
            let more = absorb(MAX_BATCH.saturating_sub(batch.len()));
            if more.is_empty() {
                break;
            }
            batch.extend(more);
        }
        let lone = alone && next == 0;
        let job = &mut batch[next];
        next += 1;
        if !lone {
            tx.conn.open_savepoint(Savepoint::Job)?;
        }
        let hooks_before = tx.hooks.len();
        let pushes_before = tx.pushes.len();
        let sequences_before = tx.sequences;
        let save_before = tx.save_sequences;
        let succeeded = job.run(tx);
        if !succeeded {
            // Nothing the job wrote survives, so what it took can be handed out again.
            tx.hooks.truncate(hooks_before);
            tx.pushes.truncate(pushes_before);
            tx.sequences = sequences_before;
            tx.save_sequences = save_before;
        }
        if !lone {
            tx.conn.close_savepoint(Savepoint::Job, succeeded)?;
        } else if !succeeded {
            tx.conn.rollback();
            return Ok(None);
        }
    }
    tx.conn.commit_write(
        *begun,
        tx.sequences,
        tx.save_sequences,
        tx.session,
        begin_next(),
    )
}

/// Leads every batch of a writer led by [`Leader::Thread`], on the calling
/// thread, until no one else holds the writer (its store is gone).
pub(crate) fn lead_on_thread(writer: Arc<Writer>) {
    let Leader::Thread(wake) = &writer.leader else {
        return;
    };
    let mut last_answered = 0;
    loop {
        let batch = {
            let mut queue = lock(&writer.queue);
            loop {
                if Arc::strong_count(&writer) == 1 {
                    return;
                }
                let job_first = queue.jobs.front().is_some_and(|job| !job.is_lease());
                if !queue.leader_active && job_first {
                    break;
                }
                let session_next = !queue.jobs.is_empty() && !job_first;
                if session_next && writer.discard_opened() {
                    // The session opens its own transaction.
                    continue;
                }
                if !queue.leader_active && !queue.jobs.is_empty() {
                    break;
                }
                if queue.jobs.is_empty() && writer.has_opened() {
                    let (woken, waited) = wake
                        .wait_timeout(queue, OPENED_LINGER)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    queue = woken;
                    if waited.timed_out() && queue.jobs.is_empty() {
                        writer.discard_opened();
                    }
                    continue;
                }
                queue = wake
                    .wait_timeout(queue, IDLE_CHECK)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            if queue.jobs.front().is_some_and(|job| !job.is_lease()) {
                queue = gather(wake, queue, last_answered);
            }
            queue.leader_active = true;
            if let Some(lease) = queue.jobs.front().filter(|job| job.is_lease()) {
                // The session leads until it ends, then hands the writer back.
                lease.grant_lead();
                continue;
            }
            writer.drain_batch(&mut queue, MAX_BATCH)
        };
        last_answered = batch.len();
        writer.run_batch(batch);
        lock(&writer.queue).leader_active = false;
    }
}

/// Waits, for at most [`GATHER`], until as many jobs are queued as the last
/// batch answered: its callers, answered a moment ago, are about to queue
/// their next writes, and one COMMIT (one WAL flush) can carry them all.
fn gather<'q>(
    wake: &Condvar,
    mut queue: std::sync::MutexGuard<'q, Queue>,
    last_answered: usize,
) -> std::sync::MutexGuard<'q, Queue> {
    let deadline = std::time::Instant::now() + GATHER;
    while queue.jobs.len() < last_answered {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        queue = wake
            .wait_timeout(queue, left)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
    queue
}

pub(crate) fn run_hooks(hooks: Vec<Hook>) {
    for hook in hooks {
        if catch_unwind(AssertUnwindSafe(hook)).is_err() {
            tracing::error!("an after-commit hook panicked");
        }
    }
}

/// Withdraws an async caller's job if its future is dropped while it
/// waits; a caller `leading` (it holds the lead but has not started its
/// batch) passes the writer on too.
struct WithdrawOnDrop<'a, R> {
    writer: &'a Writer,
    slot: &'a Arc<Slot<R>>,
    leading: bool,
    armed: bool,
}

impl<R> Drop for WithdrawOnDrop<'_, R> {
    fn drop(&mut self) {
        if self.armed {
            self.writer.withdraw(self.slot, self.leading);
        }
    }
}
