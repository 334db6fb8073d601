//! The durable store: a SQLite file (rusqlite), or a PostgreSQL database.
//!
//! One writer connection, written through by group commit (see `writer`),
//! and a pool of read connections used on the calling thread (in SQLite's
//! WAL mode they never wait for the writer). The store keeps objects, edges,
//! conditions, events and the write log, and, for the hosts built on it,
//! kind registrations, the host lease and the plugin set.
//!
//! It is built in layers whose imports only run down
//! (`docs/adr/2026-12-03-store-layers.md`; checked by `layering.rs`):
//! `backend` (one statement on either database), `schema` (migrations),
//! `rows` (the SQL of each table, and `Reader`), `writer` (group commit,
//! `WriteTx`, `Session`), `ops` (the write compositions), and this face.
//!
//! Its whole interface to the rest of the crate: [`Store`] (open, read,
//! write, begin a held transaction), `Reader` (every query), `ops`
//! (every write composition, run inside a job on a `WriteTx`),
//! `Session` (a transaction held across a pass), and the types they
//! speak ([`RegisteredKind`], [`LeaseHolder`], [`PushedPlugin`], `Collected`,
//! `Create`, `Direction`, `Retention`, `Committed` and
//! `CommitListener`). SQL and the database libraries stay inside.

mod backend;
pub mod backup;
mod lease;
pub(crate) mod ops;
mod plugin_sets;
mod retention;
mod rows;
mod schema;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::OpenFlags;

use crate::error::Result;
use crate::object::GroupKind;
use crate::sync::lock;

use backend::checkpoint::{Checkpointer, Thresholds};
use backend::{Conn, Connection, postgres, wal_writes};
pub(crate) use ops::collect::Collected;
pub(crate) use ops::objects::Create;
pub(crate) use ops::observed::validate_conditions;
pub(crate) use retention::Retention;
pub(crate) use rows::Reader;
pub use rows::lease::LeaseHolder;
pub(crate) use rows::objects::{Direction, SpecChange};
pub use rows::plugin_sets::PushedPlugin;
pub use rows::registrations::RegisteredKind;
pub use rows::rollouts::{REVISIONS_KEPT, Rollout, RolloutState};
pub(crate) use writer::{CommitListener, Committed, Session, WriteTx};
use writer::{Writer, WriterConn};

/// How long a connection waits on SQLite's own lock before giving up. Only the
/// writer takes it, so this covers a checkpoint racing a read, nothing more.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a PostgreSQL writer connection may sit idle inside a
/// transaction before the server ends it: longer than a held transaction
/// waits between statements (`transaction_hold_limit`, 1 s by default),
/// shorter than the default host lease (4 s), so a standby's takeover never
/// waits on a paused holder's lock past the lease's own lapse.
const WRITER_IDLE_LIMIT: Duration = Duration::from_secs(3);

/// Read connections kept open between reads; more are opened while more
/// reads run at once, and closed when they finish.
const MAX_IDLE_READERS: usize = 8;

/// Prepared statements kept per connection: more than the store's distinct
/// statements, so none is parsed twice.
const STATEMENT_CACHE: usize = 128;

/// How many of the newest event runs [`Store::recent_warnings`] looks
/// through for Warnings.
pub const RECENT_WARNINGS_SCAN: usize = 10_000;

/// An open Beehive database. Cheap to clone; every clone is the same store.
///
/// # Example
/// ```no_run
/// let store = beehive::Store::open("beehive.db")?;
/// # Ok::<(), beehive::Error>(())
/// ```
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    backend: Backend,
    // Declared (and so dropped) before the writer: SQLite checkpoints the
    // write-ahead log and removes it only when the last connection to
    // close can write. Were a read-only one last, every later open would
    // first rebuild the index of a log that grows to the checkpoint size.
    readers: Mutex<Vec<Connection>>,
    // A SQLite store's log checkpoints, held for its thread; also dropped
    // before the writer.
    _checkpointer: Option<Checkpointer>,
    writer: Arc<Writer>,
    /// Whether any `depends_on` edge may exist: false only while none has
    /// ever been created in this file, which lets the dependency waker skip
    /// the log. Set (conservatively, before commit) by every edge creation.
    dependency_edges: std::sync::atomic::AtomicBool,
    /// The migrators of kinds registered in this process, shared with the
    /// writer, which stamps writes with their versions.
    migrations: Arc<crate::migration::Migrations>,
    /// What each kind's spec writes are checked against.
    validations: crate::validation::Validations,
    session: i64,
    /// What this store and everything built on it measure.
    metrics: Arc<crate::metrics::Metrics>,
    /// The tasks started on the store's behalf: session watchdogs, held
    /// status flushes and watch tails. Each ends on its own (with its
    /// session, its pass or its stream); counted here so none is loose.
    tasks: tokio_util::task::TaskTracker,
    // Held so a temporary store lives exactly as long as the store; last, so
    // the connections above close first.
    _temporary: Option<Temporary>,
}

/// Where the store's data lives, and how a new reader connects to it.
enum Backend {
    Sqlite,
    Postgres {
        target: Box<postgres::Target>,
        channel: String,
    },
}

/// What a throwaway store removes when it goes.
enum Temporary {
    Directory(#[allow(dead_code)] tempfile::TempDir),
    Schema(#[allow(dead_code)] Box<postgres::TempSchema>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl Store {
    /// Opens (creating if needed) the store at `location` and brings its
    /// schema up to date: a SQLite database file, or a PostgreSQL
    /// connection string (`postgres://user@host/db`, or
    /// `postgres://user@/db?host=/socket/dir` for a Unix socket; the
    /// store's tables go in the connection's current schema).
    ///
    /// # Errors
    /// [`Error::SchemaTooNew`](crate::Error::SchemaTooNew) for a database written by a newer build;
    /// [`Error::Database`](crate::Error::Database) when it cannot be opened or reached;
    /// [`Error::InvalidOption`](crate::Error::InvalidOption) for a malformed connection string.
    pub fn open(location: impl AsRef<Path>) -> Result<Store> {
        let location = location.as_ref();
        match location.to_str().filter(|l| postgres::is_postgres_url(l)) {
            Some(url) => Self::open_postgres(postgres::Target::parse(url)?, None),
            None => Self::open_in(location.to_path_buf(), None),
        }
    }

    /// Opens a throwaway store in a fresh temporary directory, removed when the
    /// last clone is dropped. A file, not `:memory:`: in-memory SQLite cannot
    /// run WAL, and its readers would block on the writer.
    ///
    /// # Errors
    /// As [`Store::open`], plus [`Error::Io`](crate::Error::Io) when no temporary directory can
    /// be made.
    pub fn temporary() -> Result<Store> {
        let dir = tempfile::Builder::new().prefix("beehive-").tempdir()?;
        let path = dir.path().join("beehive.db");
        Self::open_in(path, Some(Temporary::Directory(dir)))
    }

    /// Opens a throwaway store in a fresh schema of the PostgreSQL database
    /// at `url`, dropped (with everything in it) when the last clone is
    /// dropped. For tests that run against a real server.
    ///
    /// # Errors
    /// As [`Store::open`], plus [`Error::Database`](crate::Error::Database) when the schema
    /// cannot be created.
    pub fn temporary_postgres(url: &str) -> Result<Store> {
        let base = postgres::Target::parse(url)?;
        let schema = postgres::TempSchema::create(&base)?;
        let target = base.in_schema(schema.name());
        Self::open_postgres(target, Some(Temporary::Schema(Box::new(schema))))
    }

    fn open_in(path: PathBuf, temporary: Option<Temporary>) -> Result<Store> {
        create_owner_only(&path)?;
        wal_writes::register().map_err(|code| crate::Error::Database {
            backend: "sqlite",
            message: format!("cannot register the log-writing VFS (SQLite code {code})"),
        })?;
        let mut conn = rusqlite::Connection::open_with_flags_and_vfs(
            &path,
            rusqlite::OpenFlags::default(),
            wal_writes::VFS_NAME,
        )?;
        configure_sqlite(&conn)?;
        // WAL first: migrations then run in it, and it persists in the file.
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::sqlite::migrate(&mut conn)?;
        let checkpointer =
            Checkpointer::start(&path, &mut conn, Thresholds::default(), configure_sqlite)?;
        Self::assemble(
            path,
            Backend::Sqlite,
            Connection::Sqlite(conn),
            Some(checkpointer),
            None,
            temporary,
        )
    }

    fn open_postgres(target: postgres::Target, temporary: Option<Temporary>) -> Result<Store> {
        let conn = postgres::PgConn::connect(&target, "")?;
        schema::postgres::migrate(&conn)?;
        set_up_writer(&conn)?;
        let channel = postgres::commit_channel(&conn)?;
        let conn = conn.with_channel(&channel);
        let path = PathBuf::from(&target.display);
        let backend = Backend::Postgres {
            target: Box::new(target.clone()),
            channel: channel.clone(),
        };
        let (again, on) = (target.clone(), channel.clone());
        let reopen = writer::Reopen::new(Box::new(move || {
            let conn = postgres::PgConn::connect(&again, "")?;
            set_up_writer(&conn)?;
            Ok(Connection::Postgres(Box::new(conn.with_channel(&on))))
        }));
        let store = Self::assemble(
            path,
            backend,
            Connection::Postgres(Box::new(conn)),
            None,
            Some(reopen),
            temporary,
        )?;
        let writer = store.inner.writer.clone();
        std::thread::Builder::new()
            .name("beehive-pg-writer".into())
            .spawn(move || writer::group_commit::lead_on_thread(writer))?;
        writer::listen::spawn(
            target,
            channel,
            store.inner.session,
            Arc::downgrade(&store.inner.writer),
        )?;
        Ok(store)
    }

    /// Builds the store around its open, migrated writer connection.
    fn assemble(
        path: PathBuf,
        backend: Backend,
        conn: Connection,
        checkpointer: Option<Checkpointer>,
        reopen: Option<writer::Reopen>,
        temporary: Option<Temporary>,
    ) -> Result<Store> {
        let leader = match backend {
            Backend::Sqlite => writer::Leader::Callers,
            Backend::Postgres { .. } => writer::Leader::Thread(std::sync::Condvar::new()),
        };
        let sequences = conn.conn().load_sequences()?;
        let dependency_edges = rows::edges::any_dependency(conn.conn())?;
        let session = new_session_id();
        let migrations = Arc::new(crate::migration::Migrations::default());
        let metrics = crate::metrics::Metrics::new(path.clone());
        let writer = Arc::new(Writer::new(
            WriterConn {
                conn,
                sequences,
                session,
                batches: 0,
                migrations: migrations.clone(),
                metrics: metrics.store.clone(),
                opened: None,
                reopen,
            },
            leader,
        ));
        Ok(Store {
            inner: Arc::new(Inner {
                path,
                backend,
                readers: Mutex::new(Vec::new()),
                _checkpointer: checkpointer,
                writer,
                dependency_edges: std::sync::atomic::AtomicBool::new(dependency_edges),
                migrations,
                validations: crate::validation::Validations::default(),
                session,
                metrics,
                tasks: tokio_util::task::TaskTracker::new(),
                _temporary: temporary,
            }),
        })
    }

    /// Opens another handle on the same database, as a second process
    /// would: a writer connection and a session of its own.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn reopen(&self) -> Result<Store> {
        match &self.inner.backend {
            Backend::Sqlite => Self::open_in(self.inner.path.clone(), None),
            Backend::Postgres { target, .. } => Self::open_postgres((**target).clone(), None),
        }
    }

    /// Runs a read-only query with integer parameters (`?1`, `?2`, …) and
    /// returns its first row as text, `None` for NULL columns: for tests
    /// that look at the tables directly, whatever the backend. Only with
    /// the `testing` feature.
    ///
    /// # Errors
    /// [`Error::Database`](crate::Error::Database) when the query fails.
    #[cfg(feature = "testing")]
    pub fn inspect(&self, sql: &str, params: &[i64]) -> Result<Option<Vec<Option<String>>>> {
        let params: Vec<backend::Param<'_>> =
            params.iter().map(|p| backend::Param::Int(*p)).collect();
        self.read_conn(|conn| conn.query_opt(sql, &params, |row| row.texts()))
    }

    /// The database file; for PostgreSQL, the connection string without
    /// its password.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether the store lives in PostgreSQL (rather than a SQLite file).
    pub fn is_postgres(&self) -> bool {
        matches!(self.inner.backend, Backend::Postgres { .. })
    }

    /// The version of the store's schema: the newest this build knows for
    /// its backend, as opening a store migrates it there (and refuses one a
    /// newer build wrote).
    pub fn schema_version(&self) -> i64 {
        match self.is_postgres() {
            true => schema::postgres::latest_version(),
            false => schema::sqlite::latest_version(),
        }
    }

    /// The metrics of this store and of the hosts and plugin runtimes built
    /// on it.
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.inner.metrics
    }

    /// The last `resource_version` committed through this store.
    pub fn resource_version(&self) -> i64 {
        self.inner.writer.resource_version()
    }

    /// Each `resource_version` committed through this store, as it
    /// commits: a receiver that sees the latest (intermediate ones may be
    /// skipped), for a reader that only needs to know the store moved, at
    /// no cost while nothing commits.
    pub fn watch_commits(&self) -> tokio::sync::watch::Receiver<i64> {
        self.commits()
    }

    /// How many commits were made through this store, or heard of from
    /// other processes (on PostgreSQL), since it was opened: what a backstop
    /// scan compares to know nothing was committed since it last ran.
    pub(crate) fn commit_count(&self) -> u64 {
        self.inner.writer.commit_count()
    }

    /// Sets (or clears) the listener that hears, after each commit, which
    /// objects the committed writes left owing a pass.
    pub(crate) fn set_commit_listener(&self, listener: Option<CommitListener>) {
        self.inner.writer.set_listener(listener);
    }

    /// Whether any dependency edge may exist in this store.
    pub(crate) fn may_have_dependency_edges(&self) -> bool {
        self.inner
            .dependency_edges
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Notes that a dependency edge is being created.
    pub(crate) fn note_dependency_edge(&self) {
        self.inner
            .dependency_edges
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Every kind registration recorded in the database, by any process.
    ///
    /// # Errors
    /// [`crate::Error::Database`] when the read fails.
    pub fn registrations(&self) -> Result<Vec<RegisteredKind>> {
        self.read(|r| r.registrations())
    }

    /// Up to `limit` names of `group_kind`'s objects that start with
    /// `prefix`, in byte order: what a shell completes a name from.
    ///
    /// # Errors
    /// [`crate::Error::Database`] when the read fails.
    pub fn object_names(
        &self,
        group_kind: &GroupKind,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>> {
        self.read(|r| r.names_from(group_kind, prefix, limit))
    }

    /// The versions `group_kind` has been served by, oldest first, each with
    /// its rollout as last recorded: a running host records progress about
    /// once a second (ask [`Host::rollout`](crate::Host::rollout) for it
    /// live).
    ///
    /// # Errors
    /// [`crate::Error::Database`] when the read fails.
    pub fn rollouts(&self, group_kind: &GroupKind) -> Result<Vec<Rollout>> {
        self.read(|r| r.rollouts(group_kind))
    }

    /// The newest signing time of a build of plugin `name` that served
    /// here (Unix seconds), for the rollback rule of signed plugins.
    pub(crate) fn plugin_signed_at(&self, name: &str) -> Result<Option<u64>> {
        let at = self.read(|r| r.plugin_signed_at(name))?;
        Ok(at.and_then(|at| u64::try_from(at).ok()))
    }

    /// Records that a build of plugin `name` signed at `at` serves; the
    /// recorded time never moves back.
    pub(crate) async fn record_plugin_signed_at(&self, name: &str, at: u64) -> Result<()> {
        let (name, at) = (name.to_string(), i64::try_from(at).unwrap_or(i64::MAX));
        self.write(move |tx| ops::record_signed_at(tx, &name, at))
            .await
    }

    /// The kinds that exist: those with objects or a recorded registration.
    ///
    /// # Errors
    /// [`crate::Error::Database`] when the read fails.
    pub fn kinds(&self) -> Result<Vec<GroupKind>> {
        self.read(|r| r.kinds())
    }

    /// Per kind with objects: how many it holds, and how many of them have
    /// a generation not yet observed. One grouped count over the objects'
    /// index: it reads every row once (tens of milliseconds at a million).
    ///
    /// # Errors
    /// [`crate::Error::Database`] when the read fails.
    pub fn object_counts(&self) -> Result<Vec<(GroupKind, i64, i64)>> {
        self.read(|r| r.counts_by_kind())
    }

    /// The Warning event runs most recently written or extended, of any
    /// object, newest first, each with its object's kind and name: at most
    /// `limit`, found among the newest [`RECENT_WARNINGS_SCAN`] runs.
    ///
    /// # Errors
    /// [`crate::Error::Database`] when the read fails.
    pub fn recent_warnings(
        &self,
        limit: usize,
    ) -> Result<Vec<(GroupKind, String, crate::event::Event)>> {
        self.read(|r| r.recent_warnings(limit, RECENT_WARNINGS_SCAN))
    }

    /// Sees each committed `resource_version` of this process's writer.
    pub(crate) fn commits(&self) -> tokio::sync::watch::Receiver<i64> {
        self.inner.writer.subscribe()
    }

    /// The migrators of kinds registered in this process.
    pub(crate) fn migrations(&self) -> &crate::migration::Migrations {
        &self.inner.migrations
    }

    /// What each kind's spec writes are checked against.
    pub(crate) fn validations(&self) -> &crate::validation::Validations {
        &self.inner.validations
    }

    /// This open's session id: what liveness conditions are stamped with.
    pub(crate) fn session(&self) -> i64 {
        self.inner.session
    }

    /// Runs `work` inside the next group commit and returns its outcome once
    /// that transaction committed.
    pub(crate) async fn write<F, R>(&self, work: F) -> Result<R>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        self.inner.writer.write(work).await
    }

    /// Queues `work` at once, so its place among writes is fixed when this
    /// returns, and gives back a future of its outcome.
    pub(crate) fn submit<F, R>(
        &self,
        work: F,
    ) -> impl std::future::Future<Output = Result<R>> + Send + 'static
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        self.submit_telling_lead(work).1
    }

    /// As [`submit`](Self::submit), and whether `work` found the writer
    /// idle, so its caller leads the next batch: that caller must await the
    /// future at once, or every other write waits for it.
    pub(crate) fn submit_telling_lead<F, R>(
        &self,
        work: F,
    ) -> (
        bool,
        impl std::future::Future<Output = Result<R>> + Send + 'static,
    )
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let submitted = self.inner.writer.submit(work);
        let leads = submitted.must_lead();
        let store = self.clone();
        (
            leads,
            async move { store.inner.writer.answer(submitted).await },
        )
    }

    /// Opens a transaction held across calls; see `Session`.
    pub(crate) async fn begin_session(
        &self,
        hold_limit: std::time::Duration,
    ) -> Result<Arc<Session>> {
        Session::begin(&self.inner.writer, hold_limit, &self.inner.tasks).await
    }

    /// Runs `task` in the background, counted among the store's tasks.
    /// Must be called inside a tokio runtime.
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner.tasks.spawn(task);
    }

    /// How many of the store's background tasks are still running.
    #[cfg(test)]
    pub(crate) fn background_tasks(&self) -> usize {
        self.inner.tasks.len()
    }

    /// Answers `work`'s questions on a pooled read-only connection, on the
    /// calling thread.
    pub(crate) fn read<R>(&self, work: impl FnOnce(&Reader<'_>) -> Result<R>) -> Result<R> {
        let session = self.session();
        self.read_conn(|conn| work(&Reader::new(conn, session)))
    }

    /// Runs `work` on a pooled read-only connection: for the store's own
    /// modules.
    pub(super) fn read_conn<R>(&self, work: impl FnOnce(Conn<'_>) -> Result<R>) -> Result<R> {
        // A connection the server dropped while it sat in the pool (a
        // restart, a terminated backend) is replaced, not handed out.
        let pooled = lock(&self.inner.readers).pop().filter(Connection::is_alive);
        let conn = match pooled {
            Some(conn) => conn,
            None => self.open_reader()?,
        };
        let result = work(conn.conn());
        let mut idle = lock(&self.inner.readers);
        // A burst of concurrent reads opens a connection each; only so many
        // stay open after it (a PostgreSQL connection is a server process).
        if idle.len() < MAX_IDLE_READERS && conn.is_alive() {
            idle.push(conn);
        }
        result
    }

    fn open_reader(&self) -> Result<Connection> {
        if let Backend::Postgres { target, channel } = &self.inner.backend {
            let conn = postgres::PgConn::connect(target, "")?.with_channel(channel);
            return Ok(Connection::Postgres(Box::new(conn)));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = rusqlite::Connection::open_with_flags(&self.inner.path, flags)?;
        configure_sqlite(&conn)?;
        Ok(Connection::Sqlite(conn))
    }
}

/// What every SQLite connection of a store is set to, the writer's and the
/// readers'.
///
/// The query planner is told never to plan by the values bound to a
/// statement (the "query planner stability guarantee"): otherwise SQLite
/// marks a statement that joins on a bound id (the edge and owner queries)
/// as expired each time it is bound again, and prepares it anew on every
/// run, which took a fifth of a delete cascade. The store never runs
/// ANALYZE, so no plan had anything to gain from the values.
fn configure_sqlite(conn: &rusqlite::Connection) -> Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

impl Store {
    /// Refuses what only a PostgreSQL store has: a host lease and a plugin
    /// set. The lease and plugin-set methods of [`Store`](crate::store::Store)
    /// live in `lease.rs` and `plugin_sets.rs`.
    pub(crate) fn require_postgres(&self) -> Result<()> {
        match self.inner.backend {
            Backend::Postgres { .. } => Ok(()),
            Backend::Sqlite => Err(crate::Error::InvalidOption(
                "only a PostgreSQL store has a host lease and a plugin set \
                 (a SQLite host serves a plugin directory)"
                    .into(),
            )),
        }
    }
}

/// Sets up a PostgreSQL connection as the writer's.
fn set_up_writer(conn: &postgres::PgConn) -> Result<()> {
    // A writer paused inside a transaction (SIGSTOP, a hung VM) must not
    // hold its locks, the lease row's among them, for ever.
    conn.simple(&format!(
        "SET idle_in_transaction_session_timeout = {}",
        WRITER_IDLE_LIMIT.as_millis()
    ))?;
    Ok(())
}

/// Whether `location` names a PostgreSQL store (`postgres://…` or
/// `postgresql://…`) rather than a SQLite file.
pub fn is_postgres_location(location: &Path) -> bool {
    location.to_str().is_some_and(postgres::is_postgres_url)
}

/// `location` as shown to people: a PostgreSQL connection string never
/// shows its password.
pub fn shown_location(location: &Path) -> String {
    match location.to_str().filter(|l| postgres::is_postgres_url(l)) {
        Some(url) => postgres::redact(url),
        None => location.display().to_string(),
    }
}

/// A random id for this open of the store; collisions across opens only
/// matter for liveness conditions, and 63 random bits make them moot.
fn new_session_id() -> i64 {
    (uuid::Uuid::new_v4().as_u128() as i64) & i64::MAX
}

/// Creates the database file readable and writable by its owner only, if it
/// does not exist yet. SQLite gives the WAL and shared-memory files the
/// database's mode, so they follow.
fn create_owner_only(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::thread;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::error::Error;

    /// A throwaway store of each backend this run reaches: SQLite always,
    /// PostgreSQL too when `BEEHIVE_TEST_POSTGRES` names a server
    /// (`scripts/with-postgres` sets it).
    fn each_store() -> Vec<Store> {
        let mut stores = vec![Store::temporary().unwrap()];
        if let Some(url) = std::env::var("BEEHIVE_TEST_POSTGRES")
            .ok()
            .filter(|u| !u.is_empty())
        {
            stores.push(Store::temporary_postgres(&url).unwrap());
        }
        stores
    }

    /// Runs `write` to its answer on the calling thread, as a plain thread
    /// outside any runtime would.
    fn write_from_thread<R: Send + 'static>(
        store: &Store,
        work: impl FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(store.write(work))
    }

    /// Runs [`write_from_thread`] on a thread of its own.
    fn write_on_thread<R: Send + 'static>(
        store: &Store,
        work: impl FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
    ) -> thread::JoinHandle<Result<R>> {
        let store = store.clone();
        thread::spawn(move || write_from_thread(&store, work))
    }

    /// Writes a kv row named `key` and reports the transaction it ran in.
    fn put(key: &'static str) -> impl FnOnce(&mut WriteTx<'_>) -> Result<u64> + Send + 'static {
        move |tx| {
            tx.conn().execute(
                "INSERT INTO kv (key, value) VALUES (?1, 1)",
                backend::params![key],
            )?;
            Ok(tx.batch())
        }
    }

    fn has_key(store: &Store, key: &str) -> bool {
        store
            .read_conn(|conn| conn.exists("SELECT 1 FROM kv WHERE key = ?1", backend::params![key]))
            .unwrap()
    }

    /// Waits, a bounded time, until the store's background tasks have ended.
    async fn background_tasks_end(store: &Store) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while store.background_tasks() > 0 {
            assert!(
                Instant::now() < deadline,
                "{} background tasks still run",
                store.background_tasks()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[test]
    fn a_join_on_a_bound_id_is_prepared_once_however_often_it_is_bound_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
        configure_sqlite(&conn).unwrap();
        schema::sqlite::migrate(&mut conn).unwrap();
        let edge_query = "SELECT 1 FROM edges e JOIN objects o ON o.id = e.from_id \
                          WHERE e.to_id = ?1 AND o.deletion_requested_at IS NULL LIMIT 1";
        let reprepared = |id: i64| {
            let mut statement = conn.prepare_cached(edge_query).unwrap();
            statement.exists([id]).unwrap();
            statement.get_status(rusqlite::StatementStatus::RePrepare)
        };
        // The first run may read the schema the migration just changed.
        let settled = reprepared(1);
        for id in 2..=5 {
            assert_eq!(reprepared(id), settled, "prepared again for id {id}");
        }
    }

    #[tokio::test]
    async fn closing_a_store_checkpoints_and_removes_its_write_ahead_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("beehive.db");
        let store = Store::open(&path).unwrap();
        store.write(put("checkpointed")).await.unwrap();
        // A pooled read-only connection, open beside the writer.
        assert!(has_key(&store, "checkpointed"));
        assert!(dir.path().join("beehive.db-wal").exists());
        drop(store);
        assert!(
            !dir.path().join("beehive.db-wal").exists(),
            "the log outlived the store"
        );
        let reopened = Store::open(&path).unwrap();
        assert!(has_key(&reopened, "checkpointed"));
    }

    #[tokio::test]
    async fn a_plugins_signing_time_only_moves_forward_on_either_backend() {
        for store in each_store() {
            assert_eq!(store.plugin_signed_at("greeting").unwrap(), None);
            store
                .record_plugin_signed_at("greeting", 2000)
                .await
                .unwrap();
            store
                .record_plugin_signed_at("greeting", 1000)
                .await
                .unwrap();
            assert_eq!(store.plugin_signed_at("greeting").unwrap(), Some(2000));
            store
                .record_plugin_signed_at("greeting", 3000)
                .await
                .unwrap();
            assert_eq!(store.plugin_signed_at("greeting").unwrap(), Some(3000));
            assert_eq!(store.plugin_signed_at("cascade").unwrap(), None);
        }
    }

    #[tokio::test]
    async fn a_spec_write_keeps_the_trace_it_carried_until_an_untraced_one_clears_it() {
        use crate::trace::TraceContext;
        for store in each_store() {
            let client = crate::client::RawClient::new(&store, GroupKind::new("test.dev", "T"));
            let traced = TraceContext::new_root(true);
            let spec = |text: &str| crate::json::Json::parse(text).unwrap();
            let created = client
                .create("a", spec("{}"), crate::CreateOptions::new().trace(traced))
                .await
                .unwrap();
            let stored = |store: &Store| {
                let loaded = store
                    .read(|r| r.objects_for_passes(&[created.meta.id]))
                    .unwrap();
                loaded[0].0.bookkeeping.trace
            };
            assert_eq!(stored(&store), Some(traced));
            let again = TraceContext::new_root(false);
            let options = crate::CreateOptions::new().trace(again);
            client
                .create_or_update("a", spec(r#"{"n":1}"#), options)
                .await
                .unwrap();
            assert_eq!(stored(&store), Some(again), "a traced update replaces it");
            client
                .update(created.meta.id, spec(r#"{"n":2}"#))
                .await
                .unwrap();
            assert_eq!(stored(&store), None, "an untraced spec write clears it");
        }
    }

    #[tokio::test]
    async fn a_transactions_watchdog_ends_with_the_transaction() {
        for store in each_store() {
            // An hour's hold limit: a watchdog that slept it out would fail.
            let session = store
                .begin_session(Duration::from_secs(3600))
                .await
                .unwrap();
            assert_eq!(store.background_tasks(), 1);
            session.commit().unwrap();
            background_tasks_end(&store).await;
            let session = store
                .begin_session(Duration::from_secs(3600))
                .await
                .unwrap();
            session.rollback().unwrap();
            background_tasks_end(&store).await;
            drop(
                store
                    .begin_session(Duration::from_secs(3600))
                    .await
                    .unwrap(),
            );
            background_tasks_end(&store).await;
        }
    }

    #[tokio::test]
    async fn a_watch_tail_ends_when_its_stream_is_dropped() {
        let store = Store::temporary().unwrap();
        let client = crate::client::RawClient::new(&store, GroupKind::new("example.dev", "Thing"));
        let stream = client.watch_list(Default::default()).unwrap();
        assert_eq!(store.background_tasks(), 1);
        drop(stream);
        background_tasks_end(&store).await;
    }

    /// Starts what `spawn` starts (a write from another thread) and waits
    /// until it is queued behind the held writer: jobs queue in the order
    /// they are started.
    fn queue_behind<T>(
        store: &Store,
        spawn: impl FnOnce() -> thread::JoinHandle<T>,
    ) -> thread::JoinHandle<T> {
        let queued = store.inner.writer.queued() + 1;
        let handle = spawn();
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.inner.writer.queued() < queued {
            assert!(Instant::now() < deadline, "the job never queued");
            thread::sleep(Duration::from_millis(1));
        }
        handle
    }

    /// Starts a write that holds the writer until `release` is sent.
    fn hold_writer(store: &Store) -> (mpsc::Sender<()>, thread::JoinHandle<Result<u64>>) {
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = store.clone();
        let handle = thread::spawn(move || {
            write_from_thread(&holder, move |tx| {
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                put("holder")(tx)
            })
        });
        started_rx.recv().unwrap();
        (release_tx, handle)
    }

    #[test]
    fn queued_writes_share_one_transaction_and_a_failure_rolls_back_only_itself() {
        for store in each_store() {
            queued_writes_share_one_transaction(&store);
        }
    }

    fn queued_writes_share_one_transaction(store: &Store) {
        let store = store.clone();
        let (release, holder) = hold_writer(&store);

        let first = queue_behind(&store, || write_on_thread(&store, put("first")));
        let (failing_batch_tx, failing_batch_rx) = mpsc::channel();
        let failing = queue_behind(&store, || {
            write_on_thread(&store, move |tx| -> Result<u64> {
                put("failing")(tx)?;
                failing_batch_tx.send(tx.batch()).unwrap();
                Err(Error::Internal("this job fails".into()))
            })
        });
        let last = queue_behind(&store, || write_on_thread(&store, put("last")));

        release.send(()).unwrap();
        let holder_batch = holder.join().unwrap().unwrap();
        let first_batch = first.join().unwrap().unwrap();
        let last_batch = last.join().unwrap().unwrap();
        assert!(failing.join().unwrap().is_err());
        let failing_batch = failing_batch_rx.recv().unwrap();

        if !store.is_postgres() {
            // PostgreSQL's leading thread adds jobs queued while a batch
            // runs to that batch, so there they may share the holder's.
            assert_ne!(first_batch, holder_batch);
        }
        assert_eq!(first_batch, last_batch, "queued writes share a transaction");
        assert_eq!(first_batch, failing_batch);
        assert!(has_key(&store, "holder"));
        assert!(has_key(&store, "first"));
        assert!(has_key(&store, "last"));
        assert!(
            !has_key(&store, "failing"),
            "the failed job was rolled back"
        );
    }

    #[test]
    fn a_dropped_async_write_is_withdrawn_and_the_next_writer_still_leads() {
        for store in each_store() {
            a_dropped_write_is_withdrawn(&store);
        }
    }

    fn a_dropped_write_is_withdrawn(store: &Store) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let store = store.clone();
        let (release, holder) = hold_writer(&store);

        let abandoned = runtime.block_on(async {
            tokio::time::timeout(Duration::from_millis(20), store.write(put("abandoned"))).await
        });
        assert!(abandoned.is_err(), "timed out while queued");
        assert_eq!(store.inner.writer.queued(), 0, "withdrawn from the queue");

        let waiting = queue_behind(&store, || write_on_thread(&store, put("after")));
        release.send(()).unwrap();
        holder.join().unwrap().unwrap();
        waiting.join().unwrap().unwrap();
        assert!(!has_key(&store, "abandoned"));
        assert!(has_key(&store, "after"));
        runtime.block_on(store.write(put("later"))).unwrap();
    }

    #[test]
    fn a_write_given_up_while_its_caller_waits_to_lead_passes_the_writer_on() {
        let store = Store::temporary().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            // As after a batch that answered several callers: the next
            // caller to find the writer idle yields before it leads.
            store
                .inner
                .writer
                .answered_others
                .store(true, std::sync::atomic::Ordering::Relaxed);
            {
                let write = std::pin::pin!(store.write(put("abandoned")));
                let mut context = std::task::Context::from_waker(std::task::Waker::noop());
                assert!(write.poll(&mut context).is_pending(), "it yields first");
            }
            assert_eq!(store.inner.writer.queued(), 0, "withdrawn from the queue");
            let later = tokio::time::timeout(Duration::from_secs(30), store.write(put("later")));
            later.await.expect("the writer was passed on").unwrap();
        });
        assert!(!has_key(&store, "abandoned"));
        assert!(has_key(&store, "later"));
    }

    #[test]
    fn counters_survive_a_reopen_even_when_the_newest_rows_are_removed() {
        for keeper in each_store() {
            counters_survive_a_reopen(&keeper);
        }
    }

    /// `keeper` holds the database; the store under test opens it anew, twice.
    fn counters_survive_a_reopen(keeper: &Store) {
        let insert = |tx: &mut WriteTx<'_>| -> Result<(i64, i64)> {
            let id = tx.next_object_id();
            let version = tx.next_resource_version();
            tx.conn().execute(
                "INSERT INTO objects (id, grp, kind, name, spec, generation, resource_version, created_at, updated_at)
                 VALUES (?1, '', 'K', ?3, '{}', 1, ?2, 0, 0)",
                backend::params![id, version, format!("k{id}").as_str()],
            )?;
            tx.conn().execute(
                "INSERT INTO object_writes (resource_version, object_id, grp, kind, op, written_at)
                 VALUES (?1, ?2, '', 'K', 'create', 0)",
                backend::params![version, id],
            )?;
            Ok((id, version))
        };
        let (removed_id, removed_version) = {
            let store = keeper.reopen().unwrap();
            write_from_thread(&store, insert).unwrap();
            let (newest, version) = write_from_thread(&store, insert).unwrap();
            write_from_thread(&store, move |tx| {
                tx.conn().execute(
                    "DELETE FROM objects WHERE id = ?1",
                    backend::params![newest],
                )?;
                tx.conn()
                    .execute("DELETE FROM object_writes", backend::params![])?;
                tx.save_sequences();
                Ok(())
            })
            .unwrap();
            (newest, version)
        };
        let store = keeper.reopen().unwrap();
        assert_eq!(store.resource_version(), removed_version);
        let (id, version) = write_from_thread(&store, insert).unwrap();
        assert!(id > removed_id, "ids are never reused");
        assert!(version > removed_version);
    }

    /// A job whose unread statement fails never commits, even though (in
    /// PostgreSQL, where the statement goes later) the job itself saw no
    /// error, and even when a later job's rollback to its own savepoint
    /// makes the server forget the failure.
    #[test]
    fn a_failed_statement_nobody_read_fails_the_commit() {
        for store in each_store() {
            let (release, holder) = hold_writer(&store);
            let spawn = |key: &'static str, also_fail: bool| {
                write_on_thread(&store, move |tx| {
                    put(key)(tx)?;
                    // kv's value may not be NULL.
                    tx.conn().execute_later(
                        "INSERT INTO kv (key, value) VALUES ('broken', NULL)",
                        backend::params![],
                    )?;
                    if also_fail {
                        return Err(Error::Internal("fails on its own".into()));
                    }
                    Ok(())
                })
            };
            let quiet = queue_behind(&store, || spawn("quiet", false));
            let loud = queue_behind(&store, || spawn("loud", true));
            release.send(()).unwrap();
            // On PostgreSQL the queued jobs may join the holder's batch,
            // whose commit then fails with theirs.
            let _ = holder.join().unwrap();
            assert!(quiet.join().unwrap().is_err(), "{store:?}");
            assert!(loud.join().unwrap().is_err());
            assert!(!has_key(&store, "quiet"), "{store:?}: nothing of it landed");
            write_from_thread(&store, put("later")).unwrap();
            assert!(has_key(&store, "later"), "the writer goes on");
        }
    }

    #[test]
    fn a_failed_job_of_deferred_statements_leaves_nothing_and_its_batch_commits() {
        for store in each_store() {
            let (release, holder) = hold_writer(&store);
            let spawn = |key: &'static str, fail: bool| {
                write_on_thread(&store, move |tx| {
                    // Deferred on PostgreSQL: no savepoint is ever sent for
                    // this job, so failing must drop its statements.
                    tx.conn().execute_later(
                        "INSERT INTO kv (key, value) VALUES (?1, 1)",
                        backend::params![key],
                    )?;
                    if fail {
                        return Err(Error::Internal("fails after writing".into()));
                    }
                    Ok(())
                })
            };
            let kept = queue_behind(&store, || spawn("kept", false));
            let dropped = queue_behind(&store, || spawn("dropped", true));
            let also_kept = queue_behind(&store, || spawn("also kept", false));
            release.send(()).unwrap();
            holder.join().unwrap().unwrap();
            kept.join().unwrap().unwrap();
            assert!(dropped.join().unwrap().is_err());
            also_kept.join().unwrap().unwrap();
            assert!(has_key(&store, "kept"), "{store:?}");
            assert!(has_key(&store, "also kept"), "{store:?}");
            assert!(
                !has_key(&store, "dropped"),
                "{store:?}: the failed job left nothing"
            );
        }
    }

    #[test]
    fn two_creates_of_one_name_in_one_batch_answer_one_created_one_taken() {
        for store in each_store() {
            let (release, holder) = hold_writer(&store);
            let client = crate::client::RawClient::new(&store, GroupKind::new("test.dev", "W"));
            let spawn = || {
                let client = client.clone();
                thread::spawn(move || {
                    let spec = crate::Json::parse(r#"{"n":1}"#).unwrap();
                    tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap()
                        .block_on(client.create("same", spec, Default::default()))
                })
            };
            let first = queue_behind(&store, spawn);
            let second = queue_behind(&store, spawn);
            release.send(()).unwrap();
            holder.join().unwrap().unwrap();
            let first = first.join().unwrap();
            let second = second.join().unwrap();
            assert!(first.is_ok(), "{store:?}: {first:?}");
            assert!(
                matches!(second, Err(Error::NameTaken { .. })),
                "{store:?}: {second:?}"
            );
            let logged: i64 = store
                .read_conn(|conn| {
                    conn.query_one(
                        "SELECT COUNT(*) FROM object_writes WHERE op = 'create'",
                        backend::params![],
                        |row| row.get(0),
                    )
                })
                .unwrap();
            assert_eq!(logged, 1, "{store:?}: one creation logged");
        }
    }

    #[test]
    fn a_panicking_job_fails_alone() {
        for store in each_store() {
            let result = write_from_thread(&store, |_tx| -> Result<()> { panic!("job bug") });
            assert!(matches!(result, Err(Error::Internal(_))));
            write_from_thread(&store, put("fine")).unwrap();
            assert!(has_key(&store, "fine"));
        }
    }

    #[test]
    fn a_database_error_says_its_cause_once_in_a_chain() {
        let error = Error::from(rusqlite::Error::QueryReturnedNoRows);
        assert_eq!(error.to_string(), "sqlite: Query returned no rows");
        assert!(std::error::Error::source(&error).is_none());
    }
}
