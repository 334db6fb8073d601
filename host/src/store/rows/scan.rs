//! The scans behind the drivers: each reads an index of outstanding work, or
//! the kind, and returns ids to enqueue.

use crate::error::Result;
use crate::object::{GroupKind, ObjectId};
use crate::store::backend::{Conn, params};
use crate::store::rows::objects::group_kind_at;

/// Objects of `gk` that the store records as owing a pass: an unobserved
/// generation, owed dependency wakes, or a pending deletion. Reads the
/// partial index of outstanding work, never the whole kind.
pub(crate) fn owed(conn: Conn<'_>, gk: &GroupKind) -> Result<Vec<ObjectId>> {
    // The WHERE clause repeats the partial index's, so the planner can use it.
    conn.query_all(
        "SELECT id FROM objects \
         WHERE grp = ?1 AND kind = ?2 \
           AND (observed_generation IS NULL \
                OR observed_generation < generation \
                OR reconcile_owed > 0 \
                OR deletion_requested_at IS NOT NULL) \
         ORDER BY id",
        params![&gk.group, &gk.kind],
        |row| row.get(0),
    )
}

/// Every object of `gk`.
pub(crate) fn all_of_kind(conn: Conn<'_>, gk: &GroupKind) -> Result<Vec<ObjectId>> {
    conn.query_all(
        "SELECT id FROM objects WHERE grp = ?1 AND kind = ?2 ORDER BY id",
        params![&gk.group, &gk.kind],
        |row| row.get(0),
    )
}

/// Objects of `gk` whose last pass asked to run again, and when (milliseconds
/// since the epoch).
pub(crate) fn requeues(conn: Conn<'_>, gk: &GroupKind) -> Result<Vec<(ObjectId, i64)>> {
    conn.query_all(
        "SELECT id, requeue_at FROM objects \
         WHERE grp = ?1 AND kind = ?2 AND requeue_at IS NOT NULL ORDER BY id",
        params![&gk.group, &gk.kind],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

/// Every deletion-pending object, of every kind.
pub(crate) fn deleting(conn: Conn<'_>) -> Result<Vec<(ObjectId, GroupKind)>> {
    conn.query_all(
        "SELECT id, grp, kind FROM objects WHERE deletion_requested_at IS NOT NULL \
         ORDER BY deletion_requested_at, id",
        params![],
        |row| Ok((row.get(0)?, group_kind_at(row, 1)?)),
    )
}

/// Every kind with objects or a registration, sorted.
pub(crate) fn kinds(conn: Conn<'_>) -> Result<Vec<GroupKind>> {
    conn.query_all(
        "SELECT grp, kind FROM objects UNION SELECT grp, kind FROM registrations ORDER BY 2, 1",
        params![],
        |row| group_kind_at(row, 0),
    )
}

/// Per kind: its objects, and how many have a generation not yet observed.
pub(crate) fn counts_by_kind(conn: Conn<'_>) -> Result<Vec<(GroupKind, i64, i64)>> {
    conn.query_all(
        "SELECT grp, kind, COUNT(*), \
                COUNT(*) FILTER (WHERE observed_generation IS NULL \
                                    OR observed_generation < generation) \
         FROM objects GROUP BY grp, kind ORDER BY grp, kind",
        params![],
        |row| Ok((group_kind_at(row, 0)?, row.get(2)?, row.get(3)?)),
    )
}
