//! The scans behind the drivers: each reads an index of outstanding work, or
//! the kind, and returns ids to enqueue.

use rusqlite::Connection;

use crate::error::Result;
use crate::object::{GroupKind, ObjectId};

/// Objects of `gk` that the store records as owing a pass: an unobserved
/// generation, owed dependency wakes, or a pending deletion. Reads the
/// partial index of outstanding work, never the whole kind.
pub(crate) fn owed(conn: &Connection, gk: &GroupKind) -> Result<Vec<ObjectId>> {
    // The WHERE clause repeats the partial index's, so SQLite can use it.
    let mut stmt = conn.prepare_cached(
        "SELECT id FROM objects \
         WHERE grp = ?1 AND kind = ?2 \
           AND (observed_generation IS NULL \
                OR observed_generation < generation \
                OR reconcile_owed > 0 \
                OR deletion_requested_at IS NOT NULL) \
         ORDER BY id",
    )?;
    let ids = stmt.query_map([&gk.group, &gk.kind], |row| row.get(0))?;
    Ok(ids.collect::<rusqlite::Result<_>>()?)
}

/// Every object of `gk`.
pub(crate) fn all_of_kind(conn: &Connection, gk: &GroupKind) -> Result<Vec<ObjectId>> {
    let mut stmt =
        conn.prepare_cached("SELECT id FROM objects WHERE grp = ?1 AND kind = ?2 ORDER BY id")?;
    let ids = stmt.query_map([&gk.group, &gk.kind], |row| row.get(0))?;
    Ok(ids.collect::<rusqlite::Result<_>>()?)
}

/// Objects of `gk` whose last pass asked to run again, and when (milliseconds
/// since the epoch).
pub(crate) fn requeues(conn: &Connection, gk: &GroupKind) -> Result<Vec<(ObjectId, i64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, requeue_at FROM objects \
         WHERE grp = ?1 AND kind = ?2 AND requeue_at IS NOT NULL ORDER BY id",
    )?;
    let rows = stmt.query_map([&gk.group, &gk.kind], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Every deletion-pending object, of every kind.
pub(crate) fn deleting(conn: &Connection) -> Result<Vec<(ObjectId, GroupKind)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, grp, kind FROM objects WHERE deletion_requested_at IS NOT NULL \
         ORDER BY deletion_requested_at, id",
    )?;
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get(0)?,
            GroupKind::new(row.get::<_, String>(1)?, row.get::<_, String>(2)?),
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Every kind with objects or a registration, sorted.
pub(crate) fn kinds(conn: &Connection) -> Result<Vec<GroupKind>> {
    let mut stmt = conn.prepare_cached(
        "SELECT grp, kind FROM objects UNION SELECT grp, kind FROM registrations ORDER BY 2, 1",
    )?;
    let kinds = stmt.query_map([], |row| {
        Ok(GroupKind::new(
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
        ))
    })?;
    Ok(kinds.collect::<rusqlite::Result<_>>()?)
}

/// Per kind: its objects, and how many have a generation not yet observed.
pub(crate) fn counts_by_kind(conn: &Connection) -> Result<Vec<(GroupKind, i64, i64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT grp, kind, COUNT(*), \
                SUM(observed_generation IS NULL OR observed_generation < generation) \
         FROM objects GROUP BY grp, kind ORDER BY grp, kind",
    )?;
    let rows = stmt.query_map([], |row| {
        Ok((
            GroupKind::new(row.get::<_, String>(0)?, row.get::<_, String>(1)?),
            row.get(2)?,
            row.get(3)?,
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
