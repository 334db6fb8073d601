//! The `edges` table (ownership and dependencies), the dependency
//! watermarks, and the dependency waker's cursor.

use crate::error::Result;
use crate::object::{GroupKind, ObjectId};
use crate::store::backend::{Conn, Dialect, params};
use crate::store::rows::objects::group_kind_at;

/// Records that `from` is owned by `owner`.
pub(crate) fn insert_owner_edge(conn: Conn<'_>, from: ObjectId, owner: ObjectId) -> Result<()> {
    conn.execute_later(
        "INSERT INTO edges (from_id, relation, to_id) VALUES (?1, 'owned_by', ?2)",
        params![from, owner],
    )?;
    Ok(())
}

/// Does anything with a live claim point at `id`: an owned child (deleting or
/// not, since it must go first), or a dependent not itself being deleted?
pub(crate) fn has_live_claims(conn: Conn<'_>, id: ObjectId) -> Result<bool> {
    conn.exists(
        "SELECT 1 FROM edges e JOIN objects o ON o.id = e.from_id \
         WHERE e.to_id = ?1 AND e.from_id <> ?1 \
           AND (e.relation = 'owned_by' OR o.deletion_requested_at IS NULL) \
         LIMIT 1",
        params![id],
    )
}

/// The owner of `id`, if it has one that is being deleted.
pub(crate) fn deleting_owner(
    conn: Conn<'_>,
    id: ObjectId,
) -> Result<Option<(ObjectId, GroupKind)>> {
    conn.query_opt(
        "SELECT o.id, o.grp, o.kind FROM edges e JOIN objects o ON o.id = e.to_id \
         WHERE e.from_id = ?1 AND e.relation = 'owned_by' \
           AND o.deletion_requested_at IS NOT NULL",
        params![id],
        |row| Ok((row.get(0)?, group_kind_at(row, 1)?)),
    )
}

/// The children `id` owns that are not being deleted yet.
pub(crate) fn live_children(conn: Conn<'_>, id: ObjectId) -> Result<Vec<(ObjectId, GroupKind)>> {
    conn.query_all(
        "SELECT o.id, o.grp, o.kind FROM edges e JOIN objects o ON o.id = e.from_id \
         WHERE e.to_id = ?1 AND e.relation = 'owned_by' AND o.deletion_requested_at IS NULL",
        params![id],
        |row| Ok((row.get(0)?, group_kind_at(row, 1)?)),
    )
}

/// Whether any dependency edge exists.
pub(crate) fn any_dependency(conn: Conn<'_>) -> Result<bool> {
    conn.exists(
        "SELECT 1 FROM edges WHERE relation = 'depends_on'",
        params![],
    )
}

/// Whether `from` already depends on `to`.
pub(crate) fn has_dependency(conn: Conn<'_>, from: ObjectId, to: ObjectId) -> Result<bool> {
    conn.exists(
        "SELECT 1 FROM edges WHERE from_id = ?1 AND relation = 'depends_on' AND to_id = ?2",
        params![from, to],
    )
}

/// The most dependency traces one pass is linked to.
pub(crate) const MAX_DEPENDENCY_TRACES: i64 = 8;

/// The trace contexts (as stored, `traceparent` text) of the latest spec
/// writes of what `from` depends on, for the dependencies that moved past
/// the watermark of `from`'s last pass: the writes that may have woken it.
/// At most [`MAX_DEPENDENCY_TRACES`].
pub(crate) fn dependency_traces(conn: Conn<'_>, from: ObjectId) -> Result<Vec<String>> {
    conn.query_all(
        "SELECT o.trace_parent FROM edges e \
         JOIN objects o ON o.id = e.to_id \
         LEFT JOIN dependency_watermarks w ON w.object_id = e.from_id \
         WHERE e.from_id = ?1 AND e.relation = 'depends_on' AND e.to_id <> e.from_id \
           AND o.trace_parent IS NOT NULL \
           AND (w.resource_version IS NULL OR o.resource_version > w.resource_version) \
         ORDER BY o.id LIMIT ?2",
        params![from, MAX_DEPENDENCY_TRACES],
        |row| row.get(0),
    )
}

/// Records that `from` depends on `to`.
pub(crate) fn insert_dependency(conn: Conn<'_>, from: ObjectId, to: ObjectId) -> Result<()> {
    conn.execute_later(
        "INSERT INTO edges (from_id, relation, to_id) VALUES (?1, 'depends_on', ?2)",
        params![from, to],
    )
}

/// Drops the edge `from` → `to`; returns whether there was one.
pub(crate) fn delete_dependency(conn: Conn<'_>, from: ObjectId, to: ObjectId) -> Result<bool> {
    let deleted = conn.execute(
        "DELETE FROM edges WHERE from_id = ?1 AND relation = 'depends_on' AND to_id = ?2",
        params![from, to],
    )?;
    Ok(deleted > 0)
}

/// The targets of `id`'s dependencies (other than itself) that are being
/// deleted.
pub(crate) fn deleting_targets(conn: Conn<'_>, id: ObjectId) -> Result<Vec<ObjectId>> {
    conn.query_all(
        "SELECT e.to_id FROM edges e JOIN objects t ON t.id = e.to_id \
         WHERE e.from_id = ?1 AND e.relation = 'depends_on' AND e.to_id <> ?1 \
           AND t.deletion_requested_at IS NOT NULL",
        params![id],
        |row| row.get(0),
    )
}

/// The ids on a dependency path from `to` back to `from`, if there is one:
/// the cycle an edge `from` → `to` would close, without `from` itself.
pub(crate) fn dependency_path(
    conn: Conn<'_>,
    from: ObjectId,
    to: ObjectId,
) -> Result<Option<Vec<ObjectId>>> {
    let path: Option<String> = conn.query_opt(
        "WITH RECURSIVE reach(id, path) AS ( \
             SELECT CAST(?2 AS BIGINT), CAST(CAST(?2 AS BIGINT) AS TEXT) \
             UNION \
             SELECT e.to_id, reach.path || ',' || CAST(e.to_id AS TEXT) \
             FROM edges e JOIN reach ON e.from_id = reach.id \
             WHERE e.relation = 'depends_on' AND e.to_id <> e.from_id \
               AND ',' || reach.path || ',' NOT LIKE '%,' || CAST(e.to_id AS TEXT) || ',%' \
         ) \
         SELECT path FROM reach WHERE id = ?1 LIMIT 1",
        params![from, to],
        |row| row.get(0),
    )?;
    Ok(path.map(|path| {
        path.split(',')
            .filter_map(|id| id.parse::<ObjectId>().ok())
            .collect()
    }))
}

/// The dependents (other than themselves) of the `moved` targets that have
/// not yet seen the move: each `(target, position)` pair wakes the dependents
/// whose watermark is below `position` (or that have none). A dependent whose
/// last pass loaded after the write has nothing to catch up on. A dependent
/// of several moved targets comes once per target: its queue keeps one slot
/// per object, so sorting them out here would only cost.
///
/// `moved` is materialized: inlined, SQLite walked the second list once
/// for every edge, which made a thousand dependents cost twice as much.
pub(crate) fn dependents_of(
    conn: Conn<'_>,
    moved: &[(ObjectId, i64)],
) -> Result<Vec<(ObjectId, GroupKind)>> {
    let ids: Vec<ObjectId> = moved.iter().map(|(id, _)| *id).collect();
    let positions: Vec<i64> = moved.iter().map(|(_, position)| *position).collect();
    // Two lists side by side, joined by their index.
    let moved_rows = match conn.dialect() {
        Dialect::Sqlite => {
            "SELECT i.value, p.value FROM json_each(?1) i JOIN json_each(?2) p ON p.key = i.key"
        }
        Dialect::Postgres => "SELECT * FROM unnest(CAST(?1 AS BIGINT[]), CAST(?2 AS BIGINT[]))",
    };
    let sql = format!(
        "WITH moved(id, position) AS MATERIALIZED ({moved_rows}) \
         SELECT e.from_id, o.grp, o.kind \
         FROM moved m \
         JOIN edges e ON e.to_id = m.id AND e.relation = 'depends_on' AND e.from_id <> e.to_id \
         JOIN objects o ON o.id = e.from_id \
         LEFT JOIN dependency_watermarks w ON w.object_id = e.from_id \
         WHERE w.resource_version IS NULL OR w.resource_version < m.position"
    );
    conn.query_all(&sql, params![ids.as_slice(), positions.as_slice()], |row| {
        Ok((row.get(0)?, group_kind_at(row, 1)?))
    })
}

/// Dependents one of whose targets moved past the watermark their last
/// successful pass recorded (or that never recorded one).
pub(crate) fn stale_dependents(conn: Conn<'_>) -> Result<Vec<(ObjectId, GroupKind)>> {
    conn.query_all(
        "SELECT DISTINCT e.from_id, o.grp, o.kind \
         FROM edges e \
         JOIN objects t ON t.id = e.to_id \
         JOIN objects o ON o.id = e.from_id \
         LEFT JOIN dependency_watermarks w ON w.object_id = e.from_id \
         WHERE e.relation = 'depends_on' AND e.from_id <> e.to_id \
           AND (w.resource_version IS NULL OR t.resource_version > w.resource_version)",
        params![],
        |row| Ok((row.get(0)?, group_kind_at(row, 1)?)),
    )
}

/// Raises object `id`'s dependency watermark to `cursor` (never lowers it).
pub(crate) fn raise_watermark(conn: Conn<'_>, id: ObjectId, cursor: i64) -> Result<()> {
    conn.execute_later(
        "INSERT INTO dependency_watermarks (object_id, resource_version) \
         SELECT id, CAST(?2 AS BIGINT) FROM objects WHERE id = ?1 \
         ON CONFLICT (object_id) DO UPDATE \
         SET resource_version = CASE \
             WHEN dependency_watermarks.resource_version > excluded.resource_version \
             THEN dependency_watermarks.resource_version ELSE excluded.resource_version END",
        params![id, cursor],
    )
}

/// The waker's persisted cursor, if it has one.
pub(crate) fn load_waker_cursor(conn: Conn<'_>) -> Result<Option<i64>> {
    conn.query_opt(
        "SELECT value FROM kv WHERE key = 'waker_cursor'",
        params![],
        |row| row.get(0),
    )
}

/// Persists the waker's cursor.
pub(crate) fn save_waker_cursor(conn: Conn<'_>, cursor: i64) -> Result<()> {
    conn.execute_later(
        "INSERT INTO kv (key, value) VALUES ('waker_cursor', ?1) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![cursor],
    )
}
