//! Checkpoints of a SQLite store's write-ahead log, off the writer's path.
//!
//! SQLite copies the log back into the database file (a checkpoint) on the
//! connection whose commit took the log past its threshold: the writer, whose
//! queued callers then wait for the copy and its two fsyncs. Here a thread of
//! the store's own does it, on a connection of its own, once the log passes
//! [`Thresholds::background`] pages; a checkpoint never blocks a writer, so
//! commits go on meanwhile. The writer checkpoints itself only when the log
//! reaches [`Thresholds::writer`] pages, which only a thread far behind a
//! long burst lets happen: that bounds the log.
//!
//! SQLite restarts the log from its start only at a write that finds all of
//! it copied, which under steady commits never happens: the writer appends
//! while the thread copies. So once the thread is done, the writer copies the
//! few frames it appended meanwhile itself, after its next commit, and the
//! write after that restarts the log. Without that the log grew to the
//! writer's bound and every commit appended to a file SQLite then had to
//! grow, instead of overwriting pages the kernel already holds (7 % of a
//! create, measured).
//!
//! The adversary is the thread itself falling behind or failing: a failed
//! checkpoint is logged and tried again at the next request, and the
//! writer's own bound still holds the log's size.

use std::ffi::c_int;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::hooks::Wal;

use crate::error::Result;
use crate::sync::lock;

/// When the log's length, in pages, calls for a checkpoint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Thresholds {
    /// The background thread checkpoints from here (16 MiB of 4 KiB pages).
    pub(crate) background: c_int,
    /// The writer checkpoints itself from here (128 MiB).
    pub(crate) writer: c_int,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            background: 4_000,
            writer: 32_000,
        }
    }
}

#[derive(Default)]
struct State {
    requested: bool,
    closed: bool,
    /// Checkpoints the thread has run, for tests to wait on.
    done: u64,
}

#[derive(Default)]
struct Signal {
    state: Mutex<State>,
    wake: Condvar,
    /// Set by the thread after each checkpoint; the writer finishes its copy.
    copied: AtomicBool,
}

impl Signal {
    fn request(&self) {
        let mut state = lock(&self.state);
        if !state.requested {
            state.requested = true;
            self.wake.notify_one();
        }
    }
}

/// The checkpointing thread; dropping this stops it and closes its
/// connection (before the writer's, so the writer closes last and removes
/// the log).
pub(crate) struct Checkpointer {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread on a connection of its own to the database at
    /// `path`, set up by `configure`, and hands the writer's commits to it.
    ///
    /// # Errors
    /// When the connection cannot be opened or the thread not started.
    pub(crate) fn start(
        path: &Path,
        writer: &mut rusqlite::Connection,
        thresholds: Thresholds,
        configure: impl Fn(&rusqlite::Connection) -> Result<()>,
    ) -> Result<Checkpointer> {
        let conn = rusqlite::Connection::open(path)?;
        configure(&conn)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let signal = Arc::new(Signal::default());
        let thread = std::thread::Builder::new()
            .name("beehive-checkpoint".into())
            .spawn({
                let signal = signal.clone();
                move || checkpoint_on_request(&conn, &signal)
            })?;
        let mut requests = Requests {
            signal: signal.clone(),
            asked_at: 0,
            finishing: 0,
        };
        writer.wal_hook(Some(move |wal: &mut Wal, pages: c_int| {
            requests.after_commit(wal, pages, thresholds);
            // An error here would fail the COMMIT that already happened.
            Ok(())
        }))?;
        Ok(Checkpointer {
            signal,
            thread: Some(thread),
        })
    }

    /// How many checkpoints the thread has run.
    #[cfg(test)]
    pub(crate) fn checkpoints(&self) -> u64 {
        lock(&self.signal.state).done
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        lock(&self.signal.state).closed = true;
        self.signal.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            // A passive checkpoint waits for no lock, so this ends soon.
            let _ = thread.join();
        }
    }
}

/// The writer's side: what it asks of the thread after each commit.
struct Requests {
    signal: Arc<Signal>,
    /// The log's length at the last request. The log stays long until a
    /// write restarts it, and a checkpoint asked for at every commit of a
    /// burst would copy a few pages and fsync twice each time.
    asked_at: c_int,
    /// Commits left in which to finish the thread's copy; a reader's
    /// snapshot can hold it back, and each try that copies anything
    /// syncs twice on the writer's path.
    finishing: u8,
}

/// How many commits after the thread's checkpoint the writer tries to copy
/// the rest of the log.
const FINISHING_TRIES: u8 = 4;

impl Requests {
    /// After a commit that left the log `pages` long.
    fn after_commit(&mut self, wal: &mut Wal, pages: c_int, thresholds: Thresholds) {
        if pages < self.asked_at {
            // The log restarted.
            self.asked_at = 0;
        }
        if self.signal.copied.swap(false, Ordering::Relaxed) {
            self.finishing = FINISHING_TRIES;
        }
        if self.finishing > 0 || pages >= thresholds.writer {
            // Busy when the thread is checkpointing right now: it catches up.
            match wal.checkpoint_v2(rusqlite::wal::CheckpointMode::PASSIVE) {
                Ok((log, copied)) if log == copied => self.finishing = 0,
                Ok(_) => self.finishing = self.finishing.saturating_sub(1),
                Err(error) => {
                    self.finishing = self.finishing.saturating_sub(1);
                    tracing::debug!(%error, pages, "the writer's own checkpoint did not run");
                }
            }
        } else if pages >= self.asked_at + thresholds.background {
            self.asked_at = pages;
            self.signal.request();
        }
    }
}

fn checkpoint_on_request(conn: &rusqlite::Connection, signal: &Signal) {
    loop {
        {
            let mut state = lock(&signal.state);
            while !state.requested && !state.closed {
                state = signal
                    .wake
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            if state.closed {
                return;
            }
            state.requested = false;
        }
        let outcome = conn.wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::PASSIVE);
        if let Err(error) = outcome {
            tracing::warn!(%error, "a background checkpoint failed; the next commit asks again");
        }
        signal.copied.store(true, Ordering::Relaxed);
        lock(&signal.state).done += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configure(_: &rusqlite::Connection) -> Result<()> {
        Ok(())
    }

    fn wal_pages(dir: &Path) -> u64 {
        let bytes = std::fs::metadata(dir.join("t.db-wal")).map_or(0, |m| m.len());
        bytes / 4096
    }

    fn writer_in(dir: &Path) -> rusqlite::Connection {
        let writer = rusqlite::Connection::open(dir.join("t.db")).unwrap();
        writer
            .pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))
            .unwrap();
        writer.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        writer
    }

    fn start(
        dir: &Path,
        writer: &mut rusqlite::Connection,
        thresholds: Thresholds,
    ) -> Checkpointer {
        Checkpointer::start(&dir.join("t.db"), writer, thresholds, configure).unwrap()
    }

    fn wait_for_a_checkpoint(checkpointer: &Checkpointer) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while checkpointer.checkpoints() == 0 {
            assert!(std::time::Instant::now() < deadline, "no checkpoint ran");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    fn insert(writer: &rusqlite::Connection, rows: usize) {
        for _ in 0..rows {
            writer
                .execute("INSERT INTO t VALUES (zeroblob(8000))", [])
                .unwrap();
        }
    }

    #[test]
    fn past_the_background_threshold_the_thread_copies_the_log_into_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = writer_in(dir.path());
        let thresholds = Thresholds {
            background: 20,
            writer: 1_000_000,
        };
        let checkpointer = start(dir.path(), &mut writer, thresholds);
        let database_bytes = || std::fs::metadata(dir.path().join("t.db")).unwrap().len();
        let before = database_bytes();
        insert(&writer, 50);
        wait_for_a_checkpoint(&checkpointer);
        assert!(
            database_bytes() > before + 20 * 8_000,
            "the rows reached the database file"
        );
        drop(checkpointer);
        let count: i64 = writer
            .query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(count, 50);
    }

    #[test]
    fn after_the_threads_checkpoint_the_log_restarts_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = writer_in(dir.path());
        let thresholds = Thresholds {
            background: 300,
            writer: 1_000_000,
        };
        let checkpointer = start(dir.path(), &mut writer, thresholds);
        // Each row adds four pages. A reader's snapshot at row 50 stops the
        // thread's copy there, as commits made during a copy would.
        insert(&writer, 50);
        let reader = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0))
            .unwrap();
        // Row 75 takes the log past 300 pages: the thread is asked.
        insert(&writer, 25);
        wait_for_a_checkpoint(&checkpointer);
        reader.execute_batch("COMMIT").unwrap();
        // The first commit copies the rest; the next ones start the log over.
        let before = wal_pages(dir.path());
        insert(&writer, 20);
        let grown = wal_pages(dir.path()) - before;
        assert!(grown < 40, "the log grew by {grown} pages");
    }

    #[test]
    fn past_its_own_bound_the_writer_checkpoints_without_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = writer_in(dir.path());
        let thresholds = Thresholds {
            background: 1_000_000,
            writer: 20,
        };
        let checkpointer = start(dir.path(), &mut writer, thresholds);
        // Each row adds about four pages: 2,400 in all, were nothing copied back.
        insert(&writer, 600);
        assert_eq!(checkpointer.checkpoints(), 0, "the thread was never asked");
        assert!(
            wal_pages(dir.path()) < 100,
            "the log grew to {} pages",
            wal_pages(dir.path())
        );
    }
}
