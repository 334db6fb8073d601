//! The query layer the store's compositions speak, whatever the backend.
//!
//! A [`Conn`] runs one statement with [`Param`]s and hands each result row
//! to a closure as a [`Row`]; the compositions in `objects`, `observed`,
//! `events`, … never name a database library. SQL is written once, with
//! `?N` placeholders, in the subset both SQLite and PostgreSQL accept; the
//! few statements that differ pick their text by [`Conn::dialect`].

use crate::error::{Error, Result};

/// Which SQL a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
}

/// A connection to run statements on: the writer's inside a job, or a
/// pooled reader. Cheap to copy.
#[derive(Clone, Copy)]
pub(crate) enum Conn<'c> {
    Sqlite(&'c rusqlite::Connection),
}

/// An open connection, owned: the writer's, or one in the reader pool.
pub(crate) enum Connection {
    Sqlite(rusqlite::Connection),
}

impl Connection {
    /// Borrows it to run statements on.
    pub(crate) fn conn(&self) -> Conn<'_> {
        match self {
            Connection::Sqlite(conn) => Conn::Sqlite(conn),
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
}

impl Row<'_> {
    /// Column `index`, as `T`.
    pub(crate) fn get<T: Column>(&self, index: usize) -> Result<T> {
        match self {
            Row::Sqlite(row) => Ok(T::from_sqlite(row, index)?),
        }
    }
}

/// A Rust type a column can be read as.
pub(crate) trait Column: Sized {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self>;
}

macro_rules! column_via_rusqlite {
    ($($t:ty),*) => {$(
        impl Column for $t {
            fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
                row.get(index)
            }
        }
    )*};
}
column_via_rusqlite!(i64, Option<i64>, String, Option<String>, bool);

impl<'c> Conn<'c> {
    /// The SQL this connection speaks.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Runs one statement and returns how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[Param<'_>]) -> Result<usize> {
        match self {
            Conn::Sqlite(conn) => Ok(conn
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(params))?),
        }
    }

    /// Runs one INSERT; `false` if it would have broken a unique constraint
    /// (and so inserted nothing).
    pub(crate) fn insert_unique(&self, sql: &str, params: &[Param<'_>]) -> Result<bool> {
        match self {
            Conn::Sqlite(conn) => match conn
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(params))
            {
                Ok(_) => Ok(true),
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
                {
                    Ok(false)
                }
                Err(e) => Err(e.into()),
            },
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

    /// Runs statements that take no parameters and return nothing:
    /// transaction control, maintenance.
    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
        }
    }

    /// Runs one statement that takes no parameters and returns nothing:
    /// transaction control (`SAVEPOINT job`, `COMMIT`), the same text in both
    /// dialects.
    pub(crate) fn control(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(conn) => {
                conn.prepare_cached(sql)?.execute([])?;
                Ok(())
            }
        }
    }

    /// Opens the write transaction: in SQLite it takes the database's write
    /// lock at once, so no statement inside can fail for want of it.
    pub(crate) fn begin_write(&self) -> Result<()> {
        match self {
            Conn::Sqlite(_) => self.control("BEGIN IMMEDIATE"),
        }
    }

    /// Ends whatever transaction is open, discarding it; a connection with
    /// none open is left as it is.
    pub(crate) fn rollback(&self) {
        // The transaction may already be gone; a failed ROLLBACK changes nothing.
        let _ = self.batch("ROLLBACK");
    }

    /// Pages the database holds but no longer uses.
    pub(crate) fn free_pages(&self) -> Result<i64> {
        match self {
            Conn::Sqlite(conn) => {
                Ok(conn.pragma_query_value(None, "freelist_count", |row| row.get(0))?)
            }
        }
    }

    /// Gives free pages back to the file system.
    pub(crate) fn release_free_pages(&self) -> Result<()> {
        match self {
            Conn::Sqlite(conn) => Ok(conn.execute_batch("PRAGMA incremental_vacuum")?),
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
        }
    }

    fn error(&self, message: &str) -> Error {
        Error::Database {
            backend: match self.dialect() {
                Dialect::Sqlite => "sqlite",
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
