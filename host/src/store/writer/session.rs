//! Sessions: a transaction held across calls, for `within` and for the
//! begin/commit/rollback stack a plugin drives.
//!
//! A session leases the whole writer: every job queued before it commits
//! first, and jobs queued during it wait. Its operations run on the caller's
//! thread against the write connection, each inside a SAVEPOINT so a failed
//! operation undoes only itself; nested frames are further savepoints. Pushes
//! and after-commit hooks wait for the outermost COMMIT and are dropped with
//! the frame that made them. A session held past its hold limit is rolled
//! back by a watchdog and the writer passed on; its next call fails.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};
use crate::object::Timestamp;
use crate::store::backend::Savepoint;
use crate::store::backend::sequences::Sequences;
use crate::store::rows::Reader;
use crate::store::writer::group_commit::{Writer, run_hooks};
use crate::store::writer::write_tx::{Committed, Hook, Push, WriteTx, announce};
use crate::sync::lock;

/// A transaction held across calls. See the module docs.
pub(crate) struct Session {
    writer: Arc<Writer>,
    inner: Mutex<Inner>,
    /// Cancelled when the session ends, which ends its watchdog with it.
    ended: CancellationToken,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Ended,
    Expired,
}

struct Inner {
    state: State,
    /// The counters as the transaction found them.
    begun: Sequences,
    sequences: Sequences,
    hooks: Vec<Hook>,
    pushes: Vec<Push>,
    save_sequences: bool,
    /// One mark per nested frame: what to restore when it rolls back.
    frames: Vec<Mark>,
}

#[derive(Clone, Copy)]
struct Mark {
    hooks: usize,
    pushes: usize,
    sequences: Sequences,
}

impl Inner {
    fn check_open(&self) -> Result<()> {
        match self.state {
            State::Open => Ok(()),
            State::Expired => Err(Error::TransactionTimedOut),
            State::Ended => Err(Error::NoTransaction),
        }
    }

    fn mark(&self) -> Mark {
        Mark {
            hooks: self.hooks.len(),
            pushes: self.pushes.len(),
            sequences: self.sequences,
        }
    }

    fn restore(&mut self, mark: Mark) {
        self.hooks.truncate(mark.hooks);
        self.pushes.truncate(mark.pushes);
        self.sequences = mark.sequences;
    }
}

impl Session {
    /// Leases the writer and opens a transaction, rolled back after `hold_limit`
    /// unless it ends first; the watchdog that rolls it back runs on `tasks`
    /// and ends when the session does. Must be called inside a tokio runtime.
    pub(crate) async fn begin(
        writer: &Arc<Writer>,
        hold_limit: Duration,
        tasks: &TaskTracker,
    ) -> Result<Arc<Session>> {
        writer.lease().await;
        let sequences = {
            let mut conn = lock(&writer.conn);
            let begun = conn.heal().and_then(|()| conn.conn.conn().begin_write());
            match begun {
                Ok(committed) => committed.unwrap_or(conn.sequences),
                Err(error) => {
                    drop(conn);
                    writer.hand_off();
                    return Err(error);
                }
            }
        };
        let session = Arc::new(Session {
            writer: writer.clone(),
            inner: Mutex::new(Inner {
                state: State::Open,
                begun: sequences,
                sequences,
                hooks: Vec::new(),
                pushes: Vec::new(),
                save_sequences: false,
                frames: Vec::new(),
            }),
            ended: CancellationToken::new(),
        });
        let watched: Weak<Session> = Arc::downgrade(&session);
        let ended = session.ended.clone();
        tasks.spawn(async move {
            tokio::select! {
                _ = ended.cancelled() => {}
                _ = tokio::time::sleep(hold_limit) => {
                    if let Some(session) = watched.upgrade() {
                        session.expire();
                    }
                }
            }
        });
        Ok(session)
    }

    /// How many frames are open: 1 for the transaction itself, plus savepoints.
    pub(crate) fn depth(&self) -> usize {
        let inner = lock(&self.inner);
        match inner.state {
            State::Open => inner.frames.len() + 1,
            State::Ended | State::Expired => 0,
        }
    }

    /// Runs `work` inside the transaction, undoing only it if it fails.
    pub(crate) fn run<R>(&self, work: impl FnOnce(&mut WriteTx<'_>) -> Result<R>) -> Result<R> {
        let mut inner = lock(&self.inner);
        inner.check_open()?;
        let writer_conn = lock(&self.writer.conn);
        let conn = writer_conn.conn.conn();
        let mark = inner.mark();
        let mut tx = WriteTx {
            conn,
            sequences: inner.sequences,
            now: Timestamp::now(),
            session: writer_conn.session,
            hooks: std::mem::take(&mut inner.hooks),
            pushes: std::mem::take(&mut inner.pushes),
            save_sequences: inner.save_sequences,
            #[cfg(test)]
            batch: 0,
            migrations: &writer_conn.migrations,
            verdicts: None,
        };
        conn.open_savepoint(Savepoint::Op)?;
        let result = catch_unwind(AssertUnwindSafe(|| work(&mut tx)))
            .unwrap_or_else(|_| Err(Error::Internal("a write in a transaction panicked".into())));
        inner.sequences = tx.sequences;
        inner.hooks = tx.hooks;
        inner.pushes = tx.pushes;
        inner.save_sequences = tx.save_sequences;
        conn.close_savepoint(Savepoint::Op, result.is_ok())?;
        if result.is_err() {
            inner.restore(mark);
        }
        result
    }

    /// Reads through the transaction, seeing its own uncommitted writes.
    pub(crate) fn read<R>(&self, work: impl FnOnce(&Reader<'_>) -> Result<R>) -> Result<R> {
        let inner = lock(&self.inner);
        inner.check_open()?;
        let writer_conn = lock(&self.writer.conn);
        work(&Reader::new(writer_conn.conn.conn(), writer_conn.session))
    }

    /// Opens a nested frame.
    pub(crate) fn push_frame(&self) -> Result<()> {
        let mut inner = lock(&self.inner);
        inner.check_open()?;
        lock(&self.writer.conn)
            .conn
            .conn()
            .open_savepoint(Savepoint::Frame)?;
        let mark = inner.mark();
        inner.frames.push(mark);
        Ok(())
    }

    /// Closes the innermost nested frame, keeping or undoing what it wrote.
    pub(crate) fn pop_frame(&self, keep: bool) -> Result<()> {
        let mut inner = lock(&self.inner);
        inner.check_open()?;
        let mark = inner.frames.pop().ok_or(Error::NoTransaction)?;
        let writer_conn = lock(&self.writer.conn);
        let conn = writer_conn.conn.conn();
        conn.close_savepoint(Savepoint::Frame, keep)?;
        if !keep {
            inner.restore(mark);
        }
        Ok(())
    }

    /// Commits everything and passes the writer on; then delivers the pushes
    /// and runs the hooks.
    pub(crate) fn commit(&self) -> Result<()> {
        let (hooks, pushes, log_grew, committed) = {
            let mut inner = lock(&self.inner);
            inner.check_open()?;
            inner.state = State::Ended;
            self.ended.cancel();
            let mut writer_conn = lock(&self.writer.conn);
            let log_grew = inner.sequences.resource_version > inner.begun.resource_version;
            let committed = writer_conn.conn.conn().commit_write(
                inner.begun,
                inner.sequences,
                inner.save_sequences,
                writer_conn.session,
                false,
            );
            let committed = committed.map(|_| ());
            match &committed {
                Ok(()) => {
                    writer_conn.sequences = inner.sequences;
                    self.writer.committed(inner.sequences);
                }
                Err(_) => writer_conn.conn.conn().rollback(),
            }
            (
                std::mem::take(&mut inner.hooks),
                std::mem::take(&mut inner.pushes),
                log_grew,
                committed,
            )
        };
        self.writer.hand_off();
        committed?;
        if let Some(announcement) = announce(
            &self.writer.listener,
            Committed {
                pushes,
                log_grew,
                foreign: false,
            },
        ) {
            announcement();
        }
        run_hooks(hooks);
        Ok(())
    }

    /// Undoes everything and passes the writer on.
    pub(crate) fn rollback(&self) -> Result<()> {
        self.end(State::Ended)
    }

    /// The watchdog's end: undoes everything; later calls say why.
    fn expire(&self) {
        if self.end(State::Expired).is_ok() {
            tracing::warn!("a transaction outlived its hold limit and was rolled back");
        }
    }

    fn end(&self, state: State) -> Result<()> {
        {
            let mut inner = lock(&self.inner);
            inner.check_open()?;
            inner.state = state;
            self.ended.cancel();
            inner.hooks.clear();
            inner.pushes.clear();
            lock(&self.writer.conn).conn.conn().rollback();
        }
        self.writer.hand_off();
        Ok(())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A session nobody ended must not keep the writer.
        let _ = self.end(State::Ended);
    }
}
