//! What a write job sees while it runs (the open transaction, the store's
//! counters, the clock) and what a commit leaves behind: the objects it
//! pushed and the hooks it scheduled.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::migration::{Migrations, SchemaVersions};
use crate::object::{GroupKind, ObjectId, Timestamp};
use crate::store::backend::{Conn, Connection, RowCount, Sequences};
use crate::sync::read;

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
    /// Another process committed (heard through the database): its writes
    /// pushed nothing here, so what they left owing must be looked for.
    pub(crate) foreign: bool,
}

/// Hears about each commit that pushed or logged something, on the
/// committing thread, after the COMMIT.
pub(crate) type CommitListener = Arc<dyn Fn(Committed) + Send + Sync>;

/// Hands `listener` what a commit did, if it did anything worth hearing.
pub(super) fn announce(
    listener: &RwLock<Option<CommitListener>>,
    committed: Committed,
) -> Option<Hook> {
    if committed.pushes.is_empty() && !committed.log_grew && !committed.foreign {
        return None;
    }
    let listener = read(listener).clone()?;
    Some(Box::new(move || listener(committed)))
}

/// A job's outcome that waits on a deferred statement: the job failed with
/// `failure` if the statement changed no row.
pub(crate) struct Verdict {
    rows: RowCount,
    failure: Error,
}

impl Verdict {
    /// The job's failure, if the statement changed nothing. Read after the
    /// commit, which sent every deferred statement.
    pub(crate) fn failure(self) -> Option<Error> {
        match self.rows.get() {
            Some(0) => Some(self.failure),
            Some(_) => None,
            None => Some(Error::Internal(
                "a deferred write was never answered".into(),
            )),
        }
    }
}

/// What a job sees: the write connection inside an open transaction.
pub(crate) struct WriteTx<'c> {
    pub(super) conn: Conn<'c>,
    /// The id and version counters, handed out in commit order.
    pub(super) sequences: Sequences,
    /// One clock reading for every write in the transaction.
    pub(super) now: Timestamp,
    /// The store session, stamped on liveness conditions.
    pub(super) session: i64,
    /// What runs once the transaction commits, and only then.
    pub(super) hooks: Vec<Hook>,
    /// The objects that owe a pass because of these writes.
    pub(super) pushes: Vec<Push>,
    /// Whether a job removed rows, so the counters are saved with the
    /// commit (see [`WriteTx::save_sequences`]).
    pub(super) save_sequences: bool,
    #[cfg(test)]
    pub(super) batch: u64,
    pub(super) migrations: &'c Migrations,
    /// Outcomes settled only after the commit; `None` where a write must be
    /// answered at once (a transaction held across calls).
    pub(super) verdicts: Option<Vec<Verdict>>,
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
    pub(crate) fn conn(&self) -> Conn<'c> {
        self.conn
    }

    /// Whether a write may leave its outcome to a row count read after the
    /// commit ([`WriteTx::fail_if_nothing_written`]).
    pub(crate) fn defers_verdicts(&self) -> bool {
        self.verdicts.is_some()
    }

    /// Makes the job fail with `failure` if the statement counting `rows`
    /// changed nothing. Only where [`WriteTx::defers_verdicts`], and only
    /// for a statement that leaves nothing behind when it changes nothing.
    pub(crate) fn fail_if_nothing_written(
        &mut self,
        rows: RowCount,
        failure: Error,
    ) -> crate::error::Result<()> {
        match &mut self.verdicts {
            Some(verdicts) => {
                verdicts.push(Verdict { rows, failure });
                Ok(())
            }
            None => Err(Error::Internal(
                "a write left its outcome to the commit where it must answer at once".into(),
            )),
        }
    }

    /// The verdicts the job that just ran left.
    pub(super) fn take_verdicts(&mut self) -> Vec<Verdict> {
        self.verdicts
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
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

    /// Reads inside this transaction, seeing its writes.
    pub(crate) fn reader(&self) -> crate::store::rows::Reader<'c> {
        crate::store::rows::Reader::new(self.conn, self.session)
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

/// The connection the leader writes through, and the counters it owns.
pub(crate) struct WriterConn {
    pub(crate) conn: Connection,
    /// The counters as the last commit left them.
    pub(crate) sequences: Sequences,
    /// This open of the store, stamped on liveness conditions.
    pub(crate) session: i64,
    /// Batches begun; tests read the count to tell batches apart.
    pub(crate) batches: u64,
    /// The kinds' schema versions, which writes are stamped with.
    pub(crate) migrations: Arc<Migrations>,
    pub(crate) metrics: crate::metrics::StoreMetrics,
    /// A write transaction opened early, with the previous commit, for a
    /// batch that was already waiting; its counters as it found them.
    pub(crate) opened: Option<Sequences>,
    /// How to replace the connection once it is lost (PostgreSQL); `None`
    /// for a SQLite file, which cannot go away under it.
    pub(crate) reopen: Option<Reopen>,
}

/// How long a lost writer connection waits between attempts to reopen it:
/// writes meanwhile fail at once with the last attempt's error.
const REOPEN_BACKOFF: Duration = Duration::from_millis(250);

/// Opens a replacement for the writer's connection, set up as the first.
pub(crate) type Open = Box<dyn Fn() -> crate::Result<Connection> + Send>;

/// The writer's way back after losing its connection.
pub(crate) struct Reopen {
    open: Open,
    /// When the last attempt failed, and why.
    failed: Option<(Instant, String)>,
}

impl Reopen {
    pub(crate) fn new(open: Open) -> Reopen {
        Reopen { open, failed: None }
    }
}

impl WriterConn {
    /// Why the connection cannot run a statement, if it is lost: the last
    /// attempt to reopen it, or that none was made yet.
    pub(crate) fn outage(&self) -> Option<String> {
        let reopen = self.reopen.as_ref()?;
        if let Some((_, why)) = &reopen.failed {
            return Some(lost(why).to_string());
        }
        (!self.conn.is_alive()).then(|| "the store's writer connection is lost".to_string())
    }

    /// Makes sure the connection can run a statement: a lost PostgreSQL
    /// connection is replaced (its fencing token carried over, the
    /// transaction open on it forgotten), at most every [`REOPEN_BACKOFF`].
    ///
    /// # Errors
    /// [`Error::Unavailable`] while the server cannot be reached.
    pub(crate) fn heal(&mut self) -> crate::Result<()> {
        let Some(reopen) = &mut self.reopen else {
            return Ok(());
        };
        if self.conn.is_alive() {
            return Ok(());
        }
        if let Some((at, why)) = &reopen.failed
            && at.elapsed() < REOPEN_BACKOFF
        {
            return Err(lost(why));
        }
        match (reopen.open)() {
            Ok(fresh) => {
                if let (Connection::Postgres(old), Connection::Postgres(new)) = (&self.conn, &fresh)
                {
                    new.set_fence(old.fence());
                }
                self.conn = fresh;
                self.opened = None;
                if reopen.failed.take().is_some() {
                    tracing::info!("the store's writer connection is back");
                } else {
                    tracing::info!("reopened the store's lost writer connection");
                }
                Ok(())
            }
            Err(error) => {
                if reopen.failed.is_none() {
                    tracing::warn!(%error, "the store's writer connection is lost; retrying every {REOPEN_BACKOFF:?}");
                }
                let why = error.to_string();
                reopen.failed = Some((Instant::now(), why.clone()));
                Err(lost(&why))
            }
        }
    }
}

fn lost(why: &str) -> Error {
    Error::Unavailable {
        backend: "postgres",
        message: format!("the writer's connection is lost and cannot be reopened yet: {why}"),
    }
}
