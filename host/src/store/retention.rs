//! What the sweeper trims: old write-log entries, old event runs, and the free
//! pages they leave. Each step reads first and takes the writer only when
//! there is something to remove, so an idle host writes nothing.

use crate::error::Result;
use crate::object::Timestamp;
use crate::store::sql::{Conn, params};
use crate::store::{Store, WriteTx};

/// Bounds on the write log and the event log; zero leaves a bound off.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Retention {
    pub(crate) write_log_max_age_ms: i64,
    pub(crate) write_log_per_kind: usize,
    pub(crate) event_runs_per_timeline: usize,
    pub(crate) event_max_age_ms: i64,
}

impl Store {
    /// Applies `retention`, then releases free pages if there are any.
    pub(crate) async fn apply_retention(&self, retention: Retention) -> Result<()> {
        sweep(self, retention).await
    }
}

async fn sweep(store: &Store, retention: Retention) -> Result<()> {
    let now = Timestamp::now().as_millis();
    let log_cutoff =
        (retention.write_log_max_age_ms > 0).then(|| now - retention.write_log_max_age_ms);
    let event_cutoff = (retention.event_max_age_ms > 0).then(|| now - retention.event_max_age_ms);
    let work = store.read_conn(|conn| {
        // The log is appended in time order, so its oldest entry (first by
        // key) says whether anything is old enough: one row read, where a
        // search by `written_at` would scan the whole log on every sweep of
        // an idle host.
        Ok(log_cutoff.is_some_and(|c| {
            exists(
                conn,
                "SELECT written_at < ?1 FROM object_writes ORDER BY resource_version LIMIT 1",
                c,
            )
        }) || event_cutoff.is_some_and(|c| {
            exists(
                conn,
                "SELECT EXISTS(SELECT 1 FROM events WHERE last_at < ?1)",
                c,
            )
        }) || retention.write_log_per_kind > 0
            || retention.event_runs_per_timeline > 0)
    })?;
    if work {
        store
            .write(move |tx| trim(tx, retention, log_cutoff, event_cutoff))
            .await?;
    }
    if store.read_conn(|conn| conn.free_pages())? > 0 {
        store.write(|tx| tx.conn().release_free_pages()).await?;
    }
    Ok(())
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

/// Records, per object, the newest event run the trim matching `condition`
/// is about to remove: event watches resumed below it cannot be truthful.
fn raise_event_horizons(conn: Conn<'_>, condition: &str, parameter: i64) -> Result<()> {
    conn.execute(
        &format!(
            "INSERT INTO event_horizons (object_id, resource_version) \
             SELECT object_id, MAX(resource_version) FROM events WHERE {condition} \
             GROUP BY object_id \
             ON CONFLICT (object_id) DO UPDATE \
             SET resource_version = {}",
            raised("event_horizons")
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

fn trim(
    tx: &mut WriteTx<'_>,
    retention: Retention,
    log_cutoff: Option<i64>,
    event_cutoff: Option<i64>,
) -> Result<()> {
    let cap = |n: usize| (n > 0).then_some(n as i64);
    // (table, the rows to remove, their `?1`, the horizons they raise);
    // a step without a parameter is off.
    let steps: [(&str, String, Option<i64>, RaiseHorizons); 4] = [
        (
            "object_writes",
            "written_at < ?1".into(),
            log_cutoff,
            raise_horizons,
        ),
        (
            "object_writes",
            beyond_cap("object_writes", "resource_version", "grp, kind"),
            cap(retention.write_log_per_kind),
            raise_horizons,
        ),
        (
            "events",
            "last_at < ?1".into(),
            event_cutoff,
            raise_event_horizons,
        ),
        (
            "events",
            beyond_cap("events", "id", "object_id, category"),
            cap(retention.event_runs_per_timeline),
            raise_event_horizons,
        ),
    ];
    let conn = tx.conn();
    let mut removed = 0;
    for (table, condition, parameter, raise) in steps {
        let Some(parameter) = parameter else {
            continue;
        };
        raise(conn, &condition, parameter)?;
        let delete = format!("DELETE FROM {table} WHERE {condition}");
        removed += conn.execute(&delete, params![parameter])?;
    }
    if removed > 0 {
        // The newest log entry or event may be gone: keep the counters.
        tx.save_sequences();
    }
    Ok(())
}
