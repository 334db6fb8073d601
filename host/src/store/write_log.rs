//! Reading the write log for watches: where it ends, where retention cut
//! it, which objects moved above a position, and a collected object's final
//! state.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Result;
use crate::object::{GroupKind, ObjectDocument, ObjectId, RawObject};

/// The newest committed position, as this read sees the store.
pub(crate) fn store_head(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row(
        "SELECT MAX(COALESCE((SELECT MAX(resource_version) FROM object_writes), 0), \
                    COALESCE((SELECT MAX(resource_version) FROM objects), 0), \
                    COALESCE((SELECT MAX(resource_version) FROM events), 0))",
        [],
        |row| row.get(0),
    )?)
}

/// The newest position a stream of `group_kind` can be complete as of.
pub(crate) fn kind_head(conn: &Connection, group_kind: &GroupKind) -> Result<i64> {
    Ok(conn.query_row(
        "SELECT MAX(COALESCE((SELECT MAX(resource_version) FROM object_writes), 0), \
                    COALESCE((SELECT MAX(resource_version) FROM objects), 0), \
                    COALESCE((SELECT resource_version FROM write_log_horizons \
                              WHERE grp = ?1 AND kind = ?2), 0))",
        params![group_kind.group, group_kind.kind],
        |row| row.get(0),
    )?)
}

/// The position below which retention removed `group_kind`'s log entries
/// (0 when it removed none).
pub(crate) fn kind_horizon(conn: &Connection, group_kind: &GroupKind) -> Result<i64> {
    Ok(conn
        .prepare_cached(
            "SELECT resource_version FROM write_log_horizons WHERE grp = ?1 AND kind = ?2",
        )?
        .query_row(params![group_kind.group, group_kind.kind], |row| row.get(0))
        .optional()?
        .unwrap_or(0))
}

/// The position below which retention removed object `id`'s event runs.
pub(crate) fn event_horizon(conn: &Connection, id: ObjectId) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT resource_version FROM event_horizons WHERE object_id = ?1")?
        .query_row([id], |row| row.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Up to `limit` of `group_kind`'s log entries above `cursor` (only
/// object `only`'s, if given), oldest first, as (position, object id).
pub(crate) fn entries_above(
    conn: &Connection,
    group_kind: &GroupKind,
    cursor: i64,
    only: Option<ObjectId>,
    limit: usize,
) -> Result<Vec<(i64, ObjectId)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT resource_version, object_id FROM object_writes \
         WHERE resource_version > ?1 AND grp = ?2 AND kind = ?3 \
           AND (?4 IS NULL OR object_id = ?4) \
         ORDER BY resource_version LIMIT ?5",
    )?;
    let entries = stmt
        .query_map(
            params![
                cursor,
                group_kind.group,
                group_kind.kind,
                only,
                limit as i64
            ],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?
        .collect::<rusqlite::Result<_>>()?;
    Ok(entries)
}

/// The state object `id` was collected in, as its delete entry logged it.
pub(crate) fn collected_image(conn: &Connection, id: ObjectId) -> Result<Option<RawObject>> {
    let image: Option<Option<String>> = conn
        .prepare_cached(
            "SELECT row_image FROM object_writes WHERE object_id = ?1 AND op = 'delete' \
             ORDER BY resource_version DESC LIMIT 1",
        )?
        .query_row([id], |row| row.get(0))
        .optional()?;
    Ok(image
        .flatten()
        .and_then(|text| serde_json::from_str::<ObjectDocument>(&text).ok())
        .map(ObjectDocument::into_raw))
}
