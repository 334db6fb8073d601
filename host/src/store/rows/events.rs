//! The `events` table: an object's timeline of runs, read newest first or
//! above a cursor.

use crate::error::Result;
use crate::event::{Event, EventFilter, EventSpec, EventType};
use crate::json::Json;
use crate::object::{GroupKind, ObjectId, Timestamp};
use crate::store::backend::{Conn, Row, params};

/// The latest run of a timeline: what a new event of the same type and
/// reason extends.
pub(crate) struct LatestRun {
    pub(crate) id: i64,
    pub(crate) type_: String,
    pub(crate) reason: String,
}

/// The latest run of object `id`'s timeline in `category`, if it has one.
pub(crate) fn latest_run(
    conn: Conn<'_>,
    id: ObjectId,
    category: &str,
) -> Result<Option<LatestRun>> {
    conn.query_opt(
        "SELECT id, type, reason FROM events WHERE object_id = ?1 AND category = ?2 \
         ORDER BY id DESC LIMIT 1",
        params![id, category],
        |row| {
            Ok(LatestRun {
                id: row.get(0)?,
                type_: row.get(1)?,
                reason: row.get(2)?,
            })
        },
    )
}

/// Counts `event` into run `run`, which takes its message and detail.
pub(crate) fn extend_run(
    conn: Conn<'_>,
    run: i64,
    event: &EventSpec,
    written: Written<'_>,
) -> Result<()> {
    conn.execute_later(
        "UPDATE events SET count = count + 1, last_at = ?2, message = ?3, detail = ?4, \
                           resource_version = ?5, trace_id = ?6 \
         WHERE id = ?1",
        params![
            run,
            written.now.as_millis(),
            &event.message,
            written.detail,
            written.resource_version,
            written.trace_id
        ],
    )
}

/// How an occurrence is written: its detail as stored, when, at which
/// position, and the trace of the pass that wrote it.
pub(crate) struct Written<'a> {
    pub(crate) detail: Option<&'a str>,
    pub(crate) now: Timestamp,
    pub(crate) resource_version: i64,
    pub(crate) trace_id: Option<&'a str>,
}

/// Starts a new run of object `id`'s timeline with `event`.
pub(crate) fn insert_run(
    conn: Conn<'_>,
    id: ObjectId,
    event: &EventSpec,
    written: Written<'_>,
) -> Result<()> {
    conn.execute_later(
        "INSERT INTO events (object_id, category, type, reason, message, detail, count, \
                             first_at, last_at, resource_version, trace_id) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?7, ?8, ?9)",
        params![
            id,
            &event.category,
            event.type_.as_str(),
            &event.reason,
            &event.message,
            written.detail,
            written.now.as_millis(),
            written.resource_version,
            written.trace_id
        ],
    )
}
/// Object `id`'s runs matching `filter`, newest first.
pub(crate) fn list_events(
    conn: Conn<'_>,
    id: ObjectId,
    filter: &EventFilter,
) -> Result<Vec<Event>> {
    // No limit is the largest one: both dialects take a number here.
    let limit = filter.limit.map_or(i64::MAX, |l| l as i64);
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM events \
         WHERE object_id = ?1 \
           AND (CAST(?2 AS TEXT) IS NULL OR category = ?2) \
           AND (CAST(?3 AS TEXT) IS NULL OR type = ?3) \
           AND (CAST(?4 AS TEXT) IS NULL OR reason = ?4) \
           AND (CAST(?5 AS BIGINT) IS NULL OR last_at >= ?5) \
         ORDER BY last_at DESC, id DESC \
         LIMIT ?6"
    );
    conn.query_all(
        &sql,
        params![
            id,
            filter.category.as_deref(),
            filter.type_.map(EventType::as_str),
            filter.reason.as_deref(),
            filter.since.map(Timestamp::as_millis),
            limit
        ],
        event_from_row,
    )
}

const EVENT_COLUMNS: &str = "id, object_id, category, type, reason, message, detail, count, \
     first_at, last_at, resource_version, trace_id";

fn event_type(stored: &str) -> EventType {
    match stored {
        "Warning" => EventType::Warning,
        // The schema's CHECK admits nothing else.
        _ => EventType::Normal,
    }
}

fn event_from_row(row: &Row<'_>) -> Result<Event> {
    Ok(Event {
        id: row.get(0)?,
        object_id: row.get(1)?,
        category: row.get(2)?,
        // The schema's CHECK admits only the two spellings.
        type_: event_type(&row.get::<String>(3)?),
        reason: row.get(4)?,
        message: row.get(5)?,
        detail: row.get::<Option<String>>(6)?.map(Json::from_stored),
        count: row.get(7)?,
        first_at: Timestamp::from_millis(row.get(8)?),
        last_at: Timestamp::from_millis(row.get(9)?),
        resource_version: row.get(10)?,
        trace_id: row.get(11)?,
    })
}

/// The Warning runs most recently written or extended, newest first, at
/// most `limit`, among the `scan` runs written last, each with its
/// object's kind and name (the write sequence's index reads them
/// backwards, so a log of Normal runs costs `scan` rows, never the whole
/// table).
pub(crate) fn recent_warnings(
    conn: Conn<'_>,
    limit: usize,
    scan: usize,
) -> Result<Vec<(GroupKind, String, Event)>> {
    let outer: Vec<String> = EVENT_COLUMNS
        .split(", ")
        .map(|column| format!("newest.{}", column.trim()))
        .collect();
    let sql = format!(
        "SELECT {outer}, o.grp, o.kind, o.name FROM (\
           SELECT {EVENT_COLUMNS} FROM events ORDER BY resource_version DESC LIMIT ?2\
         ) AS newest JOIN objects o ON o.id = newest.object_id \
         WHERE newest.type = 'Warning' ORDER BY newest.resource_version DESC LIMIT ?1",
        outer = outer.join(", ")
    );
    conn.query_all(&sql, params![limit as i64, scan as i64], |row| {
        let group_kind = GroupKind::new(row.get::<String>(12)?, row.get::<String>(13)?);
        Ok((group_kind, row.get(14)?, event_from_row(row)?))
    })
}

/// Object `id`'s runs (in `category`, if given) written above `cursor`, in
/// the order they were written: new runs and runs an occurrence extended.
pub(crate) fn events_above(
    conn: Conn<'_>,
    id: ObjectId,
    category: Option<&str>,
    cursor: i64,
    limit: usize,
) -> Result<Vec<Event>> {
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM events \
         WHERE object_id = ?1 AND resource_version > ?2 \
           AND (CAST(?3 AS TEXT) IS NULL OR category = ?3) \
         ORDER BY resource_version LIMIT ?4"
    );
    conn.query_all(
        &sql,
        params![id, cursor, category, limit as i64],
        event_from_row,
    )
}
