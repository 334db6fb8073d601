//! The query interface every layer above speaks, whatever the backend.
//!
//! A [`Conn`] runs one statement with [`Param`]s and hands each result row
//! to a closure as a [`Row`]; `rows`, `ops` and the writer never name a
//! database library. SQL is written once, with
//! `?N` placeholders, in the subset both SQLite and PostgreSQL accept; the
//! few statements that differ pick their text by [`Conn::dialect`].

use crate::error::{Error, Result};
use crate::store::backend::params::{Param, RowCount, Savepoint, params};
use crate::store::backend::postgres::PgConn;
use crate::store::backend::sequences::Sequences;

/// Which SQL a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A connection to run statements on: the writer's inside a job, or a
/// pooled reader. Cheap to copy.
#[derive(Clone, Copy)]
pub(crate) enum Conn<'c> {
    Sqlite(&'c rusqlite::Connection),
    Postgres(&'c PgConn),
}

/// An open connection, owned: the writer's, or one in the reader pool.
pub(crate) enum Connection {
    Sqlite(rusqlite::Connection),
    Postgres(Box<PgConn>),
}

impl Connection {
    /// Borrows it to run statements on.
    pub(crate) fn conn(&self) -> Conn<'_> {
        match self {
            Connection::Sqlite(conn) => Conn::Sqlite(conn),
            Connection::Postgres(conn) => Conn::Postgres(conn),
        }
    }

    /// Whether a statement could still run on it: a SQLite file stays
    /// open; a PostgreSQL connection is lost when the server restarts,
    /// terminates its backend or the network fails.
    pub(crate) fn is_alive(&self) -> bool {
        match self {
            Connection::Sqlite(_) => true,
            Connection::Postgres(conn) => conn.is_alive(),
        }
    }
}

/// One result row. Columns are read by position.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r tokio_postgres::Row),
}

impl Row<'_> {
    /// Column `index`, as `T`.
    pub(crate) fn get<T: Column>(&self, index: usize) -> Result<T> {
        match self {
            Row::Sqlite(row) => Ok(T::from_sqlite(row, index)?),
            Row::Postgres(row) => T::from_postgres(row, index).map_err(|e| Error::Database {
                backend: "postgres",
                message: format!("column {index}: {e}"),
            }),
        }
    }
}

impl Row<'_> {
    /// Every column, as text (`None` for NULL): for `Store::inspect`.
    #[cfg(feature = "testing")]
    pub(crate) fn texts(&self) -> Result<Vec<Option<String>>> {
        match self {
            Row::Sqlite(row) => {
                let count = row.as_ref().column_count();
                (0..count)
                    .map(|index| {
                        use rusqlite::types::ValueRef;
                        Ok(match row.get_ref(index)? {
                            ValueRef::Null => None,
                            ValueRef::Integer(value) => Some(value.to_string()),
                            ValueRef::Real(value) => Some(value.to_string()),
                            ValueRef::Text(text) | ValueRef::Blob(text) => {
                                Some(String::from_utf8_lossy(text).into_owned())
                            }
                        })
                    })
                    .collect()
            }
            Row::Postgres(row) => (0..row.len())
                .map(|index| match *row.columns()[index].type_() {
                    tokio_postgres::types::Type::TEXT => self.get::<Option<String>>(index),
                    _ => Ok(self.get::<Option<i64>>(index)?.map(|v| v.to_string())),
                })
                .collect(),
        }
    }
}

type PgResult<T> = std::result::Result<T, tokio_postgres::Error>;

/// A Rust type a column can be read as.
pub(crate) trait Column: Sized {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self>;
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> PgResult<Self>;
}

/// An integer column; PostgreSQL types a literal as `INT4`, every stored
/// integer as `BIGINT`.
fn pg_int(row: &tokio_postgres::Row, index: usize) -> PgResult<Option<i64>> {
    use tokio_postgres::types::Type;
    match *row.columns()[index].type_() {
        Type::INT4 => Ok(row.try_get::<_, Option<i32>>(index)?.map(i64::from)),
        Type::BOOL => Ok(row.try_get::<_, Option<bool>>(index)?.map(i64::from)),
        _ => row.try_get(index),
    }
}

impl Column for i64 {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> PgResult<Self> {
        match pg_int(row, index)? {
            Some(value) => Ok(value),
            // Let the library say what a NULL in a non-null read is.
            None => row.try_get(index),
        }
    }
}

impl Column for Option<i64> {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> PgResult<Self> {
        pg_int(row, index)
    }
}

impl Column for bool {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> PgResult<Self> {
        Ok(i64::from_postgres(row, index)? != 0)
    }
}

impl Column for String {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> PgResult<Self> {
        row.try_get(index)
    }
}

impl Column for Vec<u8> {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> PgResult<Self> {
        row.try_get(index)
    }
}

impl Column for Option<String> {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> PgResult<Self> {
        row.try_get(index)
    }
}

impl<'c> Conn<'c> {
    /// The SQL this connection speaks.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs one statement and returns how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[Param<'_>]) -> Result<usize> {
        match self {
            Conn::Sqlite(conn) => Ok(conn
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(params))?),
            Conn::Postgres(conn) => Ok(conn.execute(sql, params)? as usize),
        }
    }

    /// Runs one statement whose answer nobody reads: at once in SQLite; in
    /// PostgreSQL with the next round trip (see `postgres`), so it must be
    /// one that fails only when something is broken, never on bad input.
    pub(crate) fn execute_later(&self, sql: &str, params: &[Param<'_>]) -> Result<()> {
        match self {
            Conn::Sqlite(_) => self.execute(sql, params).map(|_| ()),
            Conn::Postgres(conn) => conn.execute_later(sql, params),
        }
    }

    /// Runs one statement whose row count is read later: SQLite runs it now;
    /// PostgreSQL defers it (as [`Conn::execute_later`]), and the count is
    /// known once the statement was sent, at the latest with the COMMIT.
    pub(crate) fn execute_counted(&self, sql: &str, params: &[Param<'_>]) -> Result<RowCount> {
        match self {
            Conn::Sqlite(_) => Ok(RowCount::known(self.execute(sql, params)? as u64)),
            Conn::Postgres(conn) => conn.execute_counted_later(sql, params),
        }
    }

    /// Every row of one query, each read by `map`.
    pub(crate) fn query_all<T>(
        &self,
        sql: &str,
        params: &[Param<'_>],
        mut map: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        match self {
            Conn::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(map(&Row::Sqlite(row))?);
                }
                Ok(out)
            }
            Conn::Postgres(conn) => conn
                .query(sql, params)?
                .iter()
                .map(|row| map(&Row::Postgres(row)))
                .collect(),
        }
    }

    /// The rows of two queries that do not depend on each other, each read
    /// by its own `map`, from one snapshot: one round trip in PostgreSQL.
    pub(crate) fn query_two<A, B>(
        &self,
        first: (&str, &[Param<'_>]),
        second: (&str, &[Param<'_>]),
        mut map_first: impl FnMut(&Row<'_>) -> Result<A>,
        mut map_second: impl FnMut(&Row<'_>) -> Result<B>,
    ) -> Result<(Vec<A>, Vec<B>)> {
        match self {
            Conn::Sqlite(conn) => {
                // Outside a transaction, each query would be a read
                // transaction of its own: two snapshots, and two rounds of
                // the locks and WAL check that open one.
                let own = conn.is_autocommit();
                if own {
                    conn.prepare_cached("BEGIN")?.execute([])?;
                }
                let both = self
                    .query_all(first.0, first.1, map_first)
                    .and_then(|a| Ok((a, self.query_all(second.0, second.1, map_second)?)));
                if own {
                    let end = if both.is_ok() { "COMMIT" } else { "ROLLBACK" };
                    conn.prepare_cached(end)?.execute([])?;
                }
                both
            }
            Conn::Postgres(conn) => {
                let (rows_first, rows_second) = conn.query_two(first, second)?;
                let first = rows_first
                    .iter()
                    .map(|row| map_first(&Row::Postgres(row)))
                    .collect::<Result<Vec<A>>>()?;
                let second = rows_second
                    .iter()
                    .map(|row| map_second(&Row::Postgres(row)))
                    .collect::<Result<Vec<B>>>()?;
                Ok((first, second))
            }
        }
    }

    /// The first row of one query, if any, read by `map`.
    pub(crate) fn query_opt<T>(
        &self,
        sql: &str,
        params: &[Param<'_>],
        map: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        match self {
            Conn::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
                match rows.next()? {
                    Some(row) => Ok(Some(map(&Row::Sqlite(row))?)),
                    None => Ok(None),
                }
            }
            Conn::Postgres(conn) => match conn.query(sql, params)?.first() {
                Some(row) => Ok(Some(map(&Row::Postgres(row))?)),
                None => Ok(None),
            },
        }
    }

    /// The first row of a query that always returns one (an aggregate, an
    /// `EXISTS`), read by `map`.
    pub(crate) fn query_one<T>(
        &self,
        sql: &str,
        params: &[Param<'_>],
        map: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, map)?
            .ok_or_else(|| self.error("a query that always answers returned no row"))
    }

    /// Whether one query returns any row.
    pub(crate) fn exists(&self, sql: &str, params: &[Param<'_>]) -> Result<bool> {
        Ok(self.query_opt(sql, params, |_| Ok(()))?.is_some())
    }

    /// Runs statements that take no parameters and return nothing.
    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Conn::Postgres(conn) => conn.simple(sql).map(|_| ()),
        }
    }

    /// Runs a savepoint statement (`SAVEPOINT job`, `RELEASE job`,
    /// `ROLLBACK TO job`), the same text in both dialects; in PostgreSQL it
    /// goes with the next round trip.
    pub(crate) fn control(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(conn) => {
                conn.prepare_cached(sql)?.execute([])?;
                Ok(())
            }
            Conn::Postgres(conn) => {
                conn.simple_later(sql);
                Ok(())
            }
        }
    }

    /// Opens `savepoint`; [`Conn::close_savepoint`] closes it. In
    /// PostgreSQL the `SAVEPOINT` is sent only if something written after it
    /// is sent before it closes (see `PgConn::open_savepoint`).
    pub(crate) fn open_savepoint(&self, savepoint: Savepoint) -> Result<()> {
        match self {
            Conn::Sqlite(_) => self.control(savepoint.open_sql()),
            Conn::Postgres(conn) => {
                conn.open_savepoint(savepoint);
                Ok(())
            }
        }
    }

    /// Closes the innermost savepoint, `savepoint`: `keep` keeps what was
    /// written since it opened, otherwise that is undone.
    pub(crate) fn close_savepoint(&self, savepoint: Savepoint, keep: bool) -> Result<()> {
        match self {
            Conn::Sqlite(_) if keep => self.control(savepoint.release_sql()),
            Conn::Sqlite(_) => {
                self.control(savepoint.rollback_sql())?;
                self.control(savepoint.release_sql())
            }
            Conn::Postgres(conn) => {
                conn.close_savepoint(keep);
                Ok(())
            }
        }
    }

    /// The store-wide counters as the database holds them.
    pub(crate) fn load_sequences(&self) -> Result<Sequences> {
        let read = |sql: &str| self.query_one(sql, params![], |row| row.get::<Option<i64>>(0));
        let floor = |key: &str| {
            self.query_one("SELECT value FROM kv WHERE key = ?1", params![key], |row| {
                row.get::<i64>(0)
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

    /// Stores `sequences` as the counters' floor.
    pub(crate) fn save_sequences(&self, sequences: Sequences) -> Result<()> {
        let update = "UPDATE kv SET value = ?2 WHERE key = ?1";
        self.execute(
            update,
            params!["resource_version", sequences.resource_version],
        )?;
        self.execute(update, params!["object_id", sequences.object_id])?;
        Ok(())
    }

    /// Opens the write transaction. SQLite takes the database's write lock
    /// at once, so no statement inside can fail for want of it; the
    /// counters are the writer's own. PostgreSQL locks the counters' rows,
    /// so writers in other processes queue behind this one, and returns
    /// them as committed.
    pub(crate) fn begin_write(&self) -> Result<Option<Sequences>> {
        match self {
            Conn::Sqlite(_) => self.control("BEGIN IMMEDIATE").map(|()| None),
            Conn::Postgres(conn) => conn.begin_write().map(Some),
        }
    }

    /// Commits the write transaction begun with `begun`, leaving the
    /// counters at `now`. SQLite stores them only when `save_requested`
    /// (see `WriteTx::save_sequences`); PostgreSQL stores them whenever they
    /// moved (other processes read them there) and announces the commit.
    /// With `begin_next`, PostgreSQL also opens the next write transaction
    /// in the same round trip and returns its counters.
    pub(crate) fn commit_write(
        &self,
        begun: Sequences,
        now: Sequences,
        save_requested: bool,
        session: i64,
        begin_next: bool,
    ) -> Result<Option<Sequences>> {
        match self {
            Conn::Sqlite(_) => {
                if save_requested {
                    self.save_sequences(now)?;
                }
                self.control("COMMIT").map(|()| None)
            }
            Conn::Postgres(conn) => conn.commit_write(begun, now, session, begin_next),
        }
    }

    /// Ends whatever transaction is open, discarding it; a connection with
    /// none open is left as it is.
    pub(crate) fn rollback(&self) {
        if let Conn::Postgres(conn) = self {
            conn.reset();
        }
        // The transaction may already be gone; a failed ROLLBACK changes nothing.
        let _ = self.batch("ROLLBACK");
    }

    /// Pages the database holds but no longer uses, that the store itself
    /// must give back (PostgreSQL's autovacuum does its own).
    pub(crate) fn free_pages(&self) -> Result<i64> {
        match self {
            Conn::Sqlite(conn) => {
                Ok(conn.pragma_query_value(None, "freelist_count", |row| row.get(0))?)
            }
            Conn::Postgres(_) => Ok(0),
        }
    }

    /// Gives free pages back to the file system.
    pub(crate) fn release_free_pages(&self) -> Result<()> {
        match self {
            Conn::Sqlite(conn) => Ok(conn.execute_batch("PRAGMA incremental_vacuum")?),
            Conn::Postgres(_) => Ok(()),
        }
    }

    /// Runs `work` inside one read transaction, so every answer it gets is
    /// as of the same moment.
    pub(crate) fn read_transaction<R>(
        &self,
        work: impl FnOnce(Conn<'_>) -> Result<R>,
    ) -> Result<R> {
        match self {
            Conn::Sqlite(conn) => {
                let tx = conn.unchecked_transaction()?;
                let answer = work(Conn::Sqlite(&tx))?;
                tx.commit()?;
                Ok(answer)
            }
            Conn::Postgres(conn) => {
                conn.simple("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
                let answer = work(*self);
                let end = if answer.is_ok() { "COMMIT" } else { "ROLLBACK" };
                conn.simple(end)?;
                answer
            }
        }
    }

    fn error(&self, message: &str) -> Error {
        Error::Database {
            backend: match self.dialect() {
                Dialect::Sqlite => "sqlite",
                Dialect::Postgres => "postgres",
            },
            message: message.to_string(),
        }
    }
}

/// SQLite's errors become [`Error::Database`](crate::Error::Database): the
/// database library stays out of the public error type.
impl From<rusqlite::Error> for crate::Error {
    fn from(error: rusqlite::Error) -> Self {
        crate::Error::Database {
            backend: "sqlite",
            message: error.to_string(),
        }
    }
}
