//! Dependency edges (`depends_on`): declaring and dropping them, the owed
//! pass an edge's creation records, cycle refusal, and the reads behind the
//! dependency waker and the stale-dependents pass.

use crate::error::{Error, Result};
use crate::object::{GroupKind, ObjectId, ObjectRef};
use crate::store::collect::has_live_claims;
use crate::store::observed::require_own;
use crate::store::rows::group_kind_at;
use crate::store::sql::{Conn, Dialect, params};
use crate::store::{Push, WriteTx, rows};

/// Records that `from` (of kind `gk`) depends on `to`; returns whether the
/// edge is new. Creating it also records, in the same transaction, one owed
/// pass on `from` and pushes it, so a change to `to` that landed between the
/// caller's read and this commit is still seen. Re-asserting an edge writes
/// nothing. A self edge is accepted and never wakes its object.
///
/// # Errors
/// [`Error::NotFound`] when either end is missing; [`Error::WrongKind`] when
/// `from` is another kind's; [`Error::DependencyCycle`] when the edge would
/// close a cycle (nothing is written).
pub(crate) fn add_dependency(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    to: ObjectId,
) -> Result<bool> {
    require_own(tx, object)?;
    let from = object.id;
    if rows::select_kind_and_deletion(tx.conn(), to)?.is_none() {
        return Err(Error::not_found(format!("dependency target {to}")));
    }
    let exists = tx.conn().exists(
        "SELECT 1 FROM edges WHERE from_id = ?1 AND relation = 'depends_on' AND to_id = ?2",
        params![from, to],
    )?;
    if exists {
        return Ok(false);
    }
    if from != to
        && let Some(cycle) = find_cycle(tx.conn(), from, to)?
    {
        return Err(Error::DependencyCycle { cycle });
    }
    tx.conn().execute_later(
        "INSERT INTO edges (from_id, relation, to_id) VALUES (?1, 'depends_on', ?2)",
        params![from, to],
    )?;
    if from == to {
        // The pass asserting it is the pass that reads the target: no
        // change can slip between, so no owed pass is due.
        return Ok(true);
    }
    tx.conn().execute_later(
        "UPDATE objects SET reconcile_owed = reconcile_owed + 1 WHERE id = ?1",
        params![from],
    )?;
    // The owed pass just recorded will read everything written so far, so
    // the waker need not wake `from` for any of it.
    let seen = tx.current_resource_version();
    record_watermark(tx, from, seen)?;
    tx.push(Push {
        id: from,
        group_kind: object.group_kind.clone(),
    });
    Ok(true)
}

/// Drops the edge `from` → `to`; returns whether there was one. A deleting
/// target whose last live claim this was is pushed, so it is collected now.
pub(crate) fn delete_dependency(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    to: ObjectId,
) -> Result<bool> {
    require_own(tx, object)?;
    let deleted = tx.conn().execute(
        "DELETE FROM edges WHERE from_id = ?1 AND relation = 'depends_on' AND to_id = ?2",
        params![object.id, to],
    )?;
    if deleted > 0 {
        push_if_unblocked(tx, to)?;
    }
    Ok(deleted > 0)
}

/// Pushes every deleting target of `id`'s dependencies that no longer has a
/// live claim: `id` itself was just marked for deletion, so it holds none.
pub(crate) fn push_unblocked_targets(tx: &mut WriteTx<'_>, id: ObjectId) -> Result<()> {
    let targets: Vec<ObjectId> = tx.conn().query_all(
        "SELECT e.to_id FROM edges e JOIN objects t ON t.id = e.to_id \
         WHERE e.from_id = ?1 AND e.relation = 'depends_on' AND e.to_id <> ?1 \
           AND t.deletion_requested_at IS NOT NULL",
        params![id],
        |row| row.get(0),
    )?;
    for target in targets {
        push_if_unblocked(tx, target)?;
    }
    Ok(())
}

fn push_if_unblocked(tx: &mut WriteTx<'_>, target: ObjectId) -> Result<()> {
    let Some((group_kind, deleting)) = rows::select_kind_and_deletion(tx.conn(), target)? else {
        return Ok(());
    };
    if deleting && !has_live_claims(tx.conn(), target)? {
        tx.push(Push {
            id: target,
            group_kind,
        });
    }
    Ok(())
}

/// The cycle that an edge `from` → `to` would close, as `Kind/name` labels
/// starting and ending at `from`, if `from` is reachable from `to`.
fn find_cycle(conn: Conn<'_>, from: ObjectId, to: ObjectId) -> Result<Option<Vec<String>>> {
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
    let Some(path) = path else {
        return Ok(None);
    };
    let mut ids = vec![from];
    ids.extend(path.split(',').filter_map(|id| id.parse::<ObjectId>().ok()));
    let mut labels = Vec::with_capacity(ids.len());
    for id in ids {
        let label = match rows::select_by_id(conn, id)? {
            Some(object) => object.meta.label(),
            None => format!("object {id}"),
        };
        labels.push(label);
    }
    Ok(Some(labels))
}

/// Up to `limit` write-log entries above `cursor`: (position, object id).
pub(crate) fn log_above(conn: Conn<'_>, cursor: i64, limit: usize) -> Result<Vec<(i64, ObjectId)>> {
    conn.query_all(
        "SELECT resource_version, object_id FROM object_writes \
         WHERE resource_version > ?1 ORDER BY resource_version LIMIT ?2",
        params![cursor, limit as i64],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

/// The dependents (other than themselves) of the `moved` targets that have
/// not yet seen the move: each `(target, position)` pair wakes the dependents
/// whose watermark is below `position` (or that have none). A dependent whose
/// last pass loaded after the write has nothing to catch up on.
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
        "WITH moved(id, position) AS ({moved_rows}) \
         SELECT DISTINCT e.from_id, o.grp, o.kind \
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

/// Records the write cursor a successful pass of `id` observed at its load.
pub(crate) fn record_watermark(tx: &mut WriteTx<'_>, id: ObjectId, cursor: i64) -> Result<()> {
    tx.conn().execute_later(
        "INSERT INTO dependency_watermarks (object_id, resource_version) \
         SELECT id, CAST(?2 AS BIGINT) FROM objects WHERE id = ?1 \
         ON CONFLICT (object_id) DO UPDATE \
         SET resource_version = CASE \
             WHEN dependency_watermarks.resource_version > excluded.resource_version \
             THEN dependency_watermarks.resource_version ELSE excluded.resource_version END",
        params![id, cursor],
    )?;
    Ok(())
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
pub(crate) fn save_waker_cursor(tx: &mut WriteTx<'_>, cursor: i64) -> Result<()> {
    tx.conn().execute_later(
        "INSERT INTO kv (key, value) VALUES ('waker_cursor', ?1) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![cursor],
    )?;
    Ok(())
}
