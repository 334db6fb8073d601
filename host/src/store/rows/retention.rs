//! Trimming the write log and the event log, and the horizons a trim
//! raises so a watch resumed below them knows it cannot be truthful.

use crate::error::Result;
use crate::store::backend::{Conn, params};

/// What one trim removes; `None` leaves a bound off.
pub(crate) struct Trim {
    /// Log entries written before this time (ms since the epoch).
    pub(crate) log_cutoff: Option<i64>,
    /// Log entries beyond the newest this many of each kind.
    pub(crate) log_per_kind: Option<i64>,
    /// Event runs last seen before this time.
    pub(crate) event_cutoff: Option<i64>,
    /// Event runs beyond the newest this many of each timeline.
    pub(crate) event_runs_per_timeline: Option<i64>,
}

/// Whether the write log holds an entry older than `cutoff`. The log is
/// appended in time order, so its oldest entry (first by key) says: one row
/// read, where a search by `written_at` would scan the whole log on every
/// sweep of an idle host.
pub(crate) fn log_older_than(conn: Conn<'_>, cutoff: i64) -> bool {
    exists(
        conn,
        "SELECT written_at < ?1 FROM object_writes ORDER BY resource_version LIMIT 1",
        cutoff,
    )
}

/// Whether any event run was last seen before `cutoff`.
pub(crate) fn events_older_than(conn: Conn<'_>, cutoff: i64) -> bool {
    exists(
        conn,
        "SELECT EXISTS(SELECT 1 FROM events WHERE last_at < ?1)",
        cutoff,
    )
}

fn exists(conn: Conn<'_>, sql: &str, cutoff: i64) -> bool {
    conn.query_opt(sql, params![cutoff], |row| row.get::<bool>(0))
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// Records, per kind, the newest log entry the trim matching `condition`
/// is about to remove: watches below it can no longer continue truthfully.
fn raise_horizons(conn: Conn<'_>, condition: &str, parameter: i64) -> Result<()> {
    conn.execute(
        &format!(
            "INSERT INTO write_log_horizons (grp, kind, resource_version) \
             SELECT grp, kind, MAX(resource_version) FROM object_writes WHERE {condition} \
             GROUP BY grp, kind \
             ON CONFLICT (grp, kind) DO UPDATE \
             SET resource_version = {}",
            raised("write_log_horizons")
        ),
        params![parameter],
    )?;
    Ok(())
}

/// Records, per timeline (object and category), the newest event run the
/// trim matching `condition` is about to remove: event watches of that
/// timeline resumed below it cannot be truthful.
fn raise_event_horizons(conn: Conn<'_>, condition: &str, parameter: i64) -> Result<()> {
    conn.execute(
        &format!(
            "INSERT INTO event_timeline_horizons (object_id, category, resource_version) \
             SELECT object_id, category, MAX(resource_version) FROM events WHERE {condition} \
             GROUP BY object_id, category \
             ON CONFLICT (object_id, category) DO UPDATE \
             SET resource_version = {}",
            raised("event_timeline_horizons")
        ),
        params![parameter],
    )?;
    Ok(())
}

/// The greater of a horizon's stored and proposed positions: a horizon
/// never moves back.
fn raised(table: &str) -> String {
    format!(
        "CASE WHEN {table}.resource_version > excluded.resource_version \
         THEN {table}.resource_version ELSE excluded.resource_version END"
    )
}

/// A condition on `key` that holds for the rows of `table` beyond the
/// newest `?1` of each `partition`.
fn beyond_cap(table: &str, key: &str, partition: &str) -> String {
    format!(
        "{key} IN ( \
             SELECT {key} FROM ( \
                 SELECT {key}, ROW_NUMBER() OVER ( \
                     PARTITION BY {partition} ORDER BY {key} DESC) AS newest \
                 FROM {table}) AS ranked \
             WHERE newest > ?1)"
    )
}

/// Raises the horizons of what a removal from one table takes away.
type RaiseHorizons = fn(Conn<'_>, &str, i64) -> Result<()>;

/// Removes what `trim` bounds, raising the horizons first; the rows removed.
pub(crate) fn trim(conn: Conn<'_>, trim: &Trim) -> Result<usize> {
    // (table, the rows to remove, their `?1`, the horizons they raise);
    // a step without a parameter is off.
    let steps: [(&str, String, Option<i64>, RaiseHorizons); 4] = [
        (
            "object_writes",
            "written_at < ?1".into(),
            trim.log_cutoff,
            raise_horizons,
        ),
        (
            "object_writes",
            beyond_cap("object_writes", "resource_version", "grp, kind"),
            trim.log_per_kind,
            raise_horizons,
        ),
        (
            "events",
            "last_at < ?1".into(),
            trim.event_cutoff,
            raise_event_horizons,
        ),
        (
            "events",
            beyond_cap("events", "id", "object_id, category"),
            trim.event_runs_per_timeline,
            raise_event_horizons,
        ),
    ];
    let mut removed = 0;
    for (table, condition, parameter, raise) in steps {
        let Some(parameter) = parameter else {
            continue;
        };
        raise(conn, &condition, parameter)?;
        let delete = format!("DELETE FROM {table} WHERE {condition}");
        removed += conn.execute(&delete, params![parameter])?;
    }
    Ok(removed)
}
