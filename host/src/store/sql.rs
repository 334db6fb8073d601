//! The query layer the store's compositions speak, whatever the backend.
//!
//! A [`Conn`] runs one statement with [`Param`]s and hands each result row
//! to a closure as a [`Row`]; the compositions in `objects`, `observed`,
//! `events`, … never name a database library. SQL is written once, with
//! `?N` placeholders, in the subset both SQLite and PostgreSQL accept; the
//! few statements that differ pick their text by [`Conn::dialect`].

use crate::error::{Error, Result};
use crate::store::postgres::PgConn;
use crate::store::write_tx::Sequences;

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
}

/// The savepoints the store opens: a batch's job, an open transaction's
/// call, and a nested frame inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Savepoint {
    Job,
    Op,
    Frame,
}

impl Savepoint {
    pub(crate) fn open_sql(self) -> &'static str {
        match self {
            Savepoint::Job => "SAVEPOINT job",
            Savepoint::Op => "SAVEPOINT op",
            Savepoint::Frame => "SAVEPOINT frame",
        }
    }

    pub(crate) fn release_sql(self) -> &'static str {
        match self {
            Savepoint::Job => "RELEASE job",
            Savepoint::Op => "RELEASE op",
            Savepoint::Frame => "RELEASE frame",
        }
    }

    pub(crate) fn rollback_sql(self) -> &'static str {
        match self {
            Savepoint::Job => "ROLLBACK TO job",
            Savepoint::Op => "ROLLBACK TO op",
            Savepoint::Frame => "ROLLBACK TO frame",
        }
    }
}

/// How many rows a statement changed, once it is known: at once in SQLite,
/// when its pipeline was answered in PostgreSQL. Shared with whoever waits
/// to read it.
#[derive(Clone, Debug)]
pub(crate) struct RowCount(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl RowCount {
    /// Not yet known.
    const UNKNOWN: u64 = u64::MAX;

    pub(crate) fn unknown() -> RowCount {
        RowCount(std::sync::Arc::new(std::sync::atomic::AtomicU64::new(
            Self::UNKNOWN,
        )))
    }

    pub(crate) fn known(rows: u64) -> RowCount {
        let count = RowCount::unknown();
        count.set(rows);
        count
    }

    pub(crate) fn set(&self, rows: u64) {
        self.0.store(rows, std::sync::atomic::Ordering::SeqCst);
    }

    /// The count, if the statement was answered.
    pub(crate) fn get(&self) -> Option<u64> {
        match self.0.load(std::sync::atomic::Ordering::SeqCst) {
            Self::UNKNOWN => None,
            rows => Some(rows),
        }
    }
}

/// One statement parameter. Borrowed, so binding allocates nothing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Param<'a> {
    Int(i64),
    Text(&'a str),
    Null,
    /// A list of object ids, for `id IN` questions about many objects.
    Ids(&'a [i64]),
    /// Bytes (a BLOB in SQLite, BYTEA in PostgreSQL).
    Bytes(&'a [u8]),
}

impl From<i64> for Param<'_> {
    fn from(value: i64) -> Self {
        Param::Int(value)
    }
}

impl From<bool> for Param<'_> {
    fn from(value: bool) -> Self {
        Param::Int(i64::from(value))
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(value: &'a str) -> Self {
        Param::Text(value)
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(value: &'a String) -> Self {
        Param::Text(value)
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(value: Option<i64>) -> Self {
        value.map_or(Param::Null, Param::Int)
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(value: Option<&'a str>) -> Self {
        value.map_or(Param::Null, Param::Text)
    }
}

impl<'a> From<&'a [u8]> for Param<'a> {
    fn from(value: &'a [u8]) -> Self {
        Param::Bytes(value)
    }
}

impl<'a> From<&'a [i64]> for Param<'a> {
    fn from(value: &'a [i64]) -> Self {
        Param::Ids(value)
    }
}

/// Builds a `&[Param]` from values that convert into one.
macro_rules! params {
    () => {
        &[] as &[$crate::store::sql::Param<'_>]
    };
    ($($value:expr),+ $(,)?) => {
        &[$($crate::store::sql::Param::from($value)),+]
    };
}
pub(crate) use params;

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value, ValueRef};
        Ok(match *self {
            Param::Int(value) => ToSqlOutput::Owned(Value::Integer(value)),
            Param::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Param::Null => ToSqlOutput::Owned(Value::Null),
            // SQLite reads a list through `json_each`.
            Param::Ids(ids) => ToSqlOutput::Owned(Value::Text(ids_json(ids))),
            Param::Bytes(bytes) => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
        })
    }
}

fn ids_json(ids: &[i64]) -> String {
    let mut text = String::with_capacity(ids.len() * 8 + 2);
    text.push('[');
    for (index, id) in ids.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push_str(&id.to_string());
    }
    text.push(']');
    text
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
    /// Every column, as text (`None` for NULL).
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
    /// by its own `map`: one round trip in PostgreSQL.
    pub(crate) fn query_two<A, B>(
        &self,
        first: (&str, &[Param<'_>]),
        second: (&str, &[Param<'_>]),
        mut map_first: impl FnMut(&Row<'_>) -> Result<A>,
        mut map_second: impl FnMut(&Row<'_>) -> Result<B>,
    ) -> Result<(Vec<A>, Vec<B>)> {
        match self {
            Conn::Sqlite(_) => Ok((
                self.query_all(first.0, first.1, map_first)?,
                self.query_all(second.0, second.1, map_second)?,
            )),
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
                    now.save(*self)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_list_is_json_for_sqlite() {
        assert_eq!(ids_json(&[]), "[]");
        assert_eq!(ids_json(&[3, 1, 2]), "[3,1,2]");
    }
}
