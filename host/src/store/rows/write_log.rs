//! Reading the write log for watches: where it ends, where retention cut
//! it, which objects moved above a position, and a collected object's final
//! state.

use crate::error::Result;
use crate::object::{GroupKind, ObjectDocument, ObjectId, RawObject};
use crate::store::backend::{Conn, Row, params};

/// The newest committed position, as this read sees the store.
pub(crate) fn store_head(conn: Conn<'_>) -> Result<i64> {
    conn.query_one(
        "SELECT (SELECT MAX(resource_version) FROM object_writes), \
                (SELECT MAX(resource_version) FROM objects), \
                (SELECT MAX(resource_version) FROM events)",
        params![],
        greatest,
    )
}

/// The greatest of a row's nullable columns, 0 when all are NULL.
fn greatest(row: &Row<'_>) -> Result<i64> {
    let mut greatest = 0;
    for index in 0..3 {
        greatest = greatest.max(row.get::<Option<i64>>(index)?.unwrap_or(0));
    }
    Ok(greatest)
}

/// The newest position a stream of `group_kind` can be complete as of.
pub(crate) fn kind_head(conn: Conn<'_>, group_kind: &GroupKind) -> Result<i64> {
    conn.query_one(
        "SELECT (SELECT MAX(resource_version) FROM object_writes), \
                (SELECT MAX(resource_version) FROM objects), \
                (SELECT resource_version FROM write_log_horizons WHERE grp = ?1 AND kind = ?2)",
        params![&group_kind.group, &group_kind.kind],
        greatest,
    )
}

/// The position below which retention removed `group_kind`'s log entries
/// (0 when it removed none).
pub(crate) fn kind_horizon(conn: Conn<'_>, group_kind: &GroupKind) -> Result<i64> {
    Ok(conn
        .query_opt(
            "SELECT resource_version FROM write_log_horizons WHERE grp = ?1 AND kind = ?2",
            params![&group_kind.group, &group_kind.kind],
            |row| row.get(0),
        )?
        .unwrap_or(0))
}

/// The position below which retention removed object `id`'s event runs.
pub(crate) fn event_horizon(conn: Conn<'_>, id: ObjectId) -> Result<i64> {
    Ok(conn
        .query_opt(
            "SELECT resource_version FROM event_horizons WHERE object_id = ?1",
            params![id],
            |row| row.get(0),
        )?
        .unwrap_or(0))
}

/// Up to `limit` of `group_kind`'s log entries above `cursor` (only
/// object `only`'s, if given), oldest first, as (position, object id).
pub(crate) fn entries_above(
    conn: Conn<'_>,
    group_kind: &GroupKind,
    cursor: i64,
    only: Option<ObjectId>,
    limit: usize,
) -> Result<Vec<(i64, ObjectId)>> {
    conn.query_all(
        "SELECT resource_version, object_id FROM object_writes \
         WHERE resource_version > ?1 AND grp = ?2 AND kind = ?3 \
           AND (CAST(?4 AS BIGINT) IS NULL OR object_id = ?4) \
         ORDER BY resource_version LIMIT ?5",
        params![
            cursor,
            &group_kind.group,
            &group_kind.kind,
            only,
            limit as i64
        ],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

/// The state object `id` was collected in, as its delete entry logged it.
pub(crate) fn collected_image(conn: Conn<'_>, id: ObjectId) -> Result<Option<RawObject>> {
    let image: Option<Option<String>> = conn.query_opt(
        "SELECT row_image FROM object_writes WHERE object_id = ?1 AND op = 'delete' \
         ORDER BY resource_version DESC LIMIT 1",
        params![id],
        |row| row.get(0),
    )?;
    Ok(image
        .flatten()
        .and_then(|text| serde_json::from_str::<ObjectDocument>(&text).ok())
        .map(ObjectDocument::into_raw))
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
