//! The backend layer: one statement on either database. [`Conn`] runs a
//! statement written once with `?N` placeholders, on SQLite (rusqlite) or
//! PostgreSQL (`postgres`, our own driver over tokio-postgres); `params`
//! is the vocabulary statements are written in; `sequences` the counters
//! the writer hands out; `checkpoint` copies a SQLite log back into its
//! database off the writer's path; `wal_writes` gathers the writer's log
//! writes into one system call per commit.
//!
//! Nothing here knows a table's meaning: that is `rows`, above.

pub(crate) mod checkpoint;
pub(crate) mod params;
pub(crate) mod postgres;
pub(crate) mod sequences;
pub(crate) mod sql;
pub(crate) mod wal_writes;

pub(crate) use params::{Param, RowCount, Savepoint, params};
pub(crate) use sequences::Sequences;
pub(crate) use sql::{Conn, Connection, Dialect, Row};
