//! Reading the write log for watches: where it ends, where retention cut
//! it, which objects moved above a position, and a collected object's final
//! state.

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::Result;
use crate::object::{GroupKind, ObjectDocument, ObjectId, ObjectRef, RawObject};
use crate::store::backend::{Conn, Row, params};

/// What a delete entry logs of the object it removed: its document and its
/// owner. The owner is kept because the edge goes with the row, and an
/// owner-scoped watch must still tell whose child was collected.
#[derive(Serialize, Deserialize)]
pub(crate) struct CollectedImage {
    #[serde(flatten)]
    document: ObjectDocument,
    /// `None` in images logged before owners were kept (unknown), `Some(None)`
    /// for an object that had no owner.
    #[serde(
        default,
        rename = "ownedBy",
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    owner: Option<Option<ObjectRef>>,
}

impl CollectedImage {
    /// The image of `object`, owned by `owner`.
    pub(crate) fn new(object: &RawObject, owner: Option<ObjectRef>) -> CollectedImage {
        CollectedImage {
            document: ObjectDocument::from(object),
            owner: Some(owner),
        }
    }

    /// The image as the log stores it.
    pub(crate) fn to_json(&self) -> String {
        // Plain fields and string-keyed JSON: nothing here can fail to print.
        serde_json::to_string(self).expect("an object document serializes")
    }

    fn into_raw(self) -> RawObject {
        let mut object = self.document.into_raw();
        object.relations.owner = self.owner;
        object
    }
}

/// A field that is present, even as `null`, is `Some`; `default` makes an
/// absent one `None`.
fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<Option<ObjectRef>>, D::Error> {
    Option::<ObjectRef>::deserialize(deserializer).map(Some)
}

/// The newest committed position, as this read sees the store: the newest
/// entry of the write log or the event log, or the counters' floor that a
/// transaction removing entries saved (so the head never moves back when
/// the newest entries are trimmed). Each is an index lookup: no cost here
/// grows with the store (the objects' own versions, read before, were a
/// scan of every object).
pub(crate) fn store_head(conn: Conn<'_>) -> Result<i64> {
    conn.query_one(STORE_HEAD, params![], greatest)
}

const STORE_HEAD: &str = "SELECT (SELECT MAX(resource_version) FROM object_writes), \
                                 (SELECT value FROM kv WHERE key = 'resource_version'), \
                                 (SELECT MAX(resource_version) FROM events)";

const KIND_HEAD: &str = "SELECT (SELECT MAX(resource_version) FROM object_writes), \
                                (SELECT value FROM kv WHERE key = 'resource_version'), \
                                (SELECT resource_version FROM write_log_horizons \
                                 WHERE grp = ?1 AND kind = ?2)";

/// The greatest of a row's nullable columns, 0 when all are NULL.
fn greatest(row: &Row<'_>) -> Result<i64> {
    let mut greatest = 0;
    for index in 0..3 {
        greatest = greatest.max(row.get::<Option<i64>>(index)?.unwrap_or(0));
    }
    Ok(greatest)
}

/// The newest position a stream of `group_kind` can be complete as of; as
/// [`store_head`], index lookups only.
pub(crate) fn kind_head(conn: Conn<'_>, group_kind: &GroupKind) -> Result<i64> {
    let kind = params![&group_kind.group, &group_kind.kind];
    conn.query_one(KIND_HEAD, kind, greatest)
}

/// The position below which retention removed `group_kind`'s log entries
/// (0 when it removed none).
pub(crate) fn kind_horizon(conn: Conn<'_>, group_kind: &GroupKind) -> Result<i64> {
    let trimmed = conn
        .query_opt(
            "SELECT resource_version FROM write_log_horizons WHERE grp = ?1 AND kind = ?2",
            params![&group_kind.group, &group_kind.kind],
            |row| row.get(0),
        )?
        .unwrap_or(0);
    Ok(trimmed.max(restore_horizon(conn)?))
}

/// The position every watch resumed from at or below is too old, in a store
/// restored from a backup (0 in one never restored): the positions between
/// the backup's and it may have been handed out by the store before the
/// restore, for writes the backup does not hold.
fn restore_horizon(conn: Conn<'_>) -> Result<i64> {
    Ok(conn
        .query_opt(
            "SELECT value FROM kv WHERE key = 'restore_horizon'",
            params![],
            |row| row.get(0),
        )?
        .unwrap_or(0))
}

/// The position below which retention removed runs of object `id`'s
/// `category` timeline (of any of its timelines when `None`).
pub(crate) fn event_horizon(conn: Conn<'_>, id: ObjectId, category: Option<&str>) -> Result<i64> {
    // `event_horizons` holds horizons from before they were kept per
    // timeline: each applies to every timeline of its object.
    let horizon: Option<i64> = conn.query_one(
        "SELECT MAX(resource_version) FROM ( \
             SELECT resource_version FROM event_timeline_horizons \
             WHERE object_id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR category = ?2) \
             UNION ALL \
             SELECT resource_version FROM event_horizons WHERE object_id = ?1) AS horizons",
        params![id, category],
        |row| row.get(0),
    )?;
    Ok(horizon.unwrap_or(0).max(restore_horizon(conn)?))
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

/// The state object `id` was collected in, as its delete entry logged it,
/// with its owner loaded when the entry recorded it.
pub(crate) fn collected_image(conn: Conn<'_>, id: ObjectId) -> Result<Option<RawObject>> {
    let image: Option<Option<String>> = conn.query_opt(
        "SELECT row_image FROM object_writes WHERE object_id = ?1 AND op = 'delete' \
         ORDER BY resource_version DESC LIMIT 1",
        params![id],
        |row| row.get(0),
    )?;
    Ok(image
        .flatten()
        .and_then(|text| serde_json::from_str::<CollectedImage>(&text).ok())
        .map(CollectedImage::into_raw))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heads_look_up_indexes_and_scan_no_table() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::store::schema::sqlite::migrate(&mut conn).unwrap();
        let kind: [&dyn rusqlite::ToSql; 2] = [&"g", &"K"];
        for (sql, params) in [(STORE_HEAD, &kind[..0]), (KIND_HEAD, &kind[..])] {
            let mut plan = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let steps: Vec<String> = plan
                .query_map(params, |row| row.get(3))
                .unwrap()
                .map(|step| step.unwrap())
                .collect();
            // Before: `SCAN objects`, every object read to find a maximum.
            let scans = steps
                .iter()
                .filter(|step| step.starts_with("SCAN") && *step != "SCAN CONSTANT ROW");
            assert_eq!(scans.count(), 0, "{sql}: {steps:?}");
        }
        let head = store_head(Conn::Sqlite(&conn)).unwrap();
        assert_eq!(head, 0, "a new store's head");
    }
}
