//! The vocabulary every statement is written in: its parameters, the
//! savepoints the store opens, and a row count that may arrive later.
//! Nothing here runs a statement.

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
        &[] as &[$crate::store::backend::params::Param<'_>]
    };
    ($($value:expr),+ $(,)?) => {
        &[$($crate::store::backend::params::Param::from($value)),+]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_list_is_json_for_sqlite() {
        assert_eq!(ids_json(&[]), "[]");
        assert_eq!(ids_json(&[3, 1, 2]), "[3,1,2]");
    }
}
