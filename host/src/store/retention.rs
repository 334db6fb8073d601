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

fn trim(
    tx: &mut WriteTx<'_>,
    retention: Retention,
    log_cutoff: Option<i64>,
    event_cutoff: Option<i64>,
) -> Result<()> {
    let conn = tx.conn();
    let mut removed = 0;
    if let Some(cutoff) = log_cutoff {
        raise_horizons(conn, "written_at < ?1", cutoff)?;
        removed += conn.execute(
            "DELETE FROM object_writes WHERE written_at < ?1",
            params![cutoff],
        )?;
    }
    if retention.write_log_per_kind > 0 {
        let beyond_cap = "resource_version IN ( \
                SELECT resource_version FROM ( \
                    SELECT resource_version, ROW_NUMBER() OVER ( \
                        PARTITION BY grp, kind ORDER BY resource_version DESC) AS newest \
                    FROM object_writes) AS ranked \
                WHERE newest > ?1)";
        let cap = retention.write_log_per_kind as i64;
        raise_horizons(conn, beyond_cap, cap)?;
        removed += conn.execute(
            &format!("DELETE FROM object_writes WHERE {beyond_cap}"),
            params![cap],
        )?;
    }
    if let Some(cutoff) = event_cutoff {
        raise_event_horizons(conn, "last_at < ?1", cutoff)?;
        removed += conn.execute("DELETE FROM events WHERE last_at < ?1", params![cutoff])?;
    }
    if retention.event_runs_per_timeline > 0 {
        let beyond_cap = "id IN ( \
                SELECT id FROM ( \
                    SELECT id, ROW_NUMBER() OVER ( \
                        PARTITION BY object_id, category ORDER BY id DESC) AS newest \
                    FROM events) AS ranked \
                WHERE newest > ?1)";
        let cap = retention.event_runs_per_timeline as i64;
        raise_event_horizons(conn, beyond_cap, cap)?;
        removed += conn.execute(
            &format!("DELETE FROM events WHERE {beyond_cap}"),
            params![cap],
        )?;
    }
    if removed > 0 {
        // The newest log entry or event may be gone: keep the counters.
        tx.save_sequences();
    }
    Ok(())
}
