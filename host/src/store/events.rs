//! The event log: appending with run aggregation, and reading timelines.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Result;
use crate::event::{Event, EventFilter, EventSpec, EventType};
use crate::json::Json;
use crate::object::{GroupKind, ObjectId, Timestamp};
use crate::store::WriteTx;

/// Records `event` on object `id`: extends the latest run of its timeline when
/// (type, reason) match, starts a new run otherwise. Moves no object version,
/// so an object watch stays quiet through a controller that records events.
pub(crate) fn add_event(
    tx: &mut WriteTx<'_>,
    gk: &GroupKind,
    id: ObjectId,
    event: &EventSpec,
) -> Result<()> {
    event.validate()?;
    crate::store::observed::require_own(tx, gk, id)?;
    if let Some(detail) = &event.detail {
        detail.check_size()?;
    }
    let now = tx.now().as_millis();
    let latest = tx
        .conn()
        .prepare_cached(
            "SELECT id, type, reason FROM events WHERE object_id = ?1 AND category = ?2 \
             ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![id, event.category], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ))
        })
        .optional()?;
    let resource_version = tx.next_resource_version();
    let detail = event.detail.as_ref().map(Json::as_str);
    match latest {
        Some((run, type_, reason)) if type_ == event.type_.as_str() && reason == event.reason => {
            tx.conn()
                .prepare_cached(
                    "UPDATE events SET count = count + 1, last_at = ?2, message = ?3, detail = ?4, \
                                       resource_version = ?5 \
                     WHERE id = ?1",
                )?
                .execute(params![run, now, event.message, detail, resource_version])?;
        }
        _ => {
            tx.conn()
                .prepare_cached(
                    "INSERT INTO events (object_id, category, type, reason, message, detail, count, \
                                         first_at, last_at, resource_version) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?7, ?8)",
                )?
                .execute(params![
                    id,
                    event.category,
                    event.type_.as_str(),
                    event.reason,
                    event.message,
                    detail,
                    now,
                    resource_version
                ])?;
        }
    }
    Ok(())
}

/// Object `id`'s runs matching `filter`, newest first.
pub(crate) fn list_events(
    conn: &Connection,
    id: ObjectId,
    filter: &EventFilter,
) -> Result<Vec<Event>> {
    let limit = filter.limit.map_or(-1, |l| l as i64);
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM events \
         WHERE object_id = ?1 \
           AND (?2 IS NULL OR category = ?2) \
           AND (?3 IS NULL OR type = ?3) \
           AND (?4 IS NULL OR reason = ?4) \
           AND (?5 IS NULL OR last_at >= ?5) \
         ORDER BY last_at DESC, id DESC \
         LIMIT ?6"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![
            id,
            filter.category,
            filter.type_.map(EventType::as_str),
            filter.reason,
            filter.since.map(Timestamp::as_millis),
            limit
        ],
        event_from_row,
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

const EVENT_COLUMNS: &str = "id, object_id, category, type, reason, message, detail, count, \
     first_at, last_at, resource_version";

fn event_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        id: row.get(0)?,
        object_id: row.get(1)?,
        category: row.get(2)?,
        type_: EventType::from_stored(&row.get::<_, String>(3)?),
        reason: row.get(4)?,
        message: row.get(5)?,
        detail: row.get::<_, Option<String>>(6)?.map(Json::from_stored),
        count: row.get(7)?,
        first_at: Timestamp::from_millis(row.get(8)?),
        last_at: Timestamp::from_millis(row.get(9)?),
        resource_version: row.get(10)?,
    })
}

/// Object `id`'s runs (in `category`, if given) written above `cursor`, in
/// the order they were written: new runs and runs an occurrence extended.
pub(crate) fn events_above(
    conn: &Connection,
    id: ObjectId,
    category: Option<&str>,
    cursor: i64,
    limit: usize,
) -> Result<Vec<Event>> {
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM events \
         WHERE object_id = ?1 AND resource_version > ?2 AND (?3 IS NULL OR category = ?3) \
         ORDER BY resource_version LIMIT ?4"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![id, cursor, category, limit as i64], event_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
