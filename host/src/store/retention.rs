//! What the sweeper trims: old write-log entries, old event runs, and the free
//! pages they leave. Each step reads first and takes the writer only when
//! there is something to remove, so an idle host writes nothing.

use crate::error::Result;
use crate::object::Timestamp;
use crate::store::Store;
use crate::store::rows::retention::{self as retention_rows, Trim};
use crate::store::writer::WriteTx;

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
        Ok(
            log_cutoff.is_some_and(|c| retention_rows::log_older_than(conn, c))
                || event_cutoff.is_some_and(|c| retention_rows::events_older_than(conn, c))
                || retention.write_log_per_kind > 0
                || retention.event_runs_per_timeline > 0,
        )
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

fn trim(
    tx: &mut WriteTx<'_>,
    retention: Retention,
    log_cutoff: Option<i64>,
    event_cutoff: Option<i64>,
) -> Result<()> {
    let cap = |n: usize| (n > 0).then_some(n as i64);
    let trim = Trim {
        log_cutoff,
        log_per_kind: cap(retention.write_log_per_kind),
        event_cutoff,
        event_runs_per_timeline: cap(retention.event_runs_per_timeline),
    };
    if retention_rows::trim(tx.conn(), &trim)? > 0 {
        // The newest log entry or event may be gone: keep the counters.
        tx.save_sequences();
    }
    Ok(())
}
