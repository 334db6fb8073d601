//! The columns of `objects` that controllers write about what they
//! observed: status, the settled generation, owed passes, the requeue time
//! and finalizers.

use crate::error::{Error, Result};
use crate::object::{GroupKind, ObjectId, Timestamp};
use crate::store::backend::{Conn, Param, params};

/// Moves object `id` to `resource_version` for a write that changed
/// something other than its spec.
pub(crate) fn touch(
    conn: Conn<'_>,
    id: ObjectId,
    resource_version: i64,
    now: Timestamp,
) -> Result<()> {
    conn.execute_later(
        "UPDATE objects SET resource_version = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, resource_version, now.as_millis()],
    )
}

/// A status write onto object `id`, if it is of kind `group_kind`.
pub(crate) struct StatusWrite<'a> {
    pub(crate) id: ObjectId,
    pub(crate) group_kind: &'a GroupKind,
    pub(crate) status: &'a str,
    pub(crate) status_version: i64,
    pub(crate) resource_version: i64,
    pub(crate) now: Timestamp,
}

/// Writes a status; returns whether a row changed. Nothing changes when the
/// object is gone, another kind's, already holds these bytes, or holds a
/// status of a newer version.
pub(crate) fn update_status(conn: Conn<'_>, write: &StatusWrite<'_>) -> Result<bool> {
    // One statement on the hot path; the kind is folded into the WHERE, and
    // only a miss pays for finding out why.
    let written = conn.execute(
        "UPDATE objects SET status = ?4, resource_version = ?5, updated_at = ?6, \
                status_version = ?7 \
         WHERE id = ?1 AND grp = ?2 AND kind = ?3 \
           AND status IS DISTINCT FROM ?4 AND status_version <= ?7",
        params![
            write.id,
            &write.group_kind.group,
            &write.group_kind.kind,
            write.status,
            write.resource_version,
            write.now.as_millis(),
            write.status_version
        ],
    )?;
    Ok(written > 0)
}

/// The stored status of object `id`, its version and the object's name.
pub(crate) fn stored_status(conn: Conn<'_>, id: ObjectId) -> Result<(Option<String>, i64, String)> {
    conn.query_one(
        "SELECT status, status_version, name FROM objects WHERE id = ?1",
        params![id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )
}

/// Records that a pass settled `generation` and takes away the owed passes
/// it serviced; returns whether the generation was new (nothing changes for
/// one already recorded).
pub(crate) fn stamp_observed(conn: Conn<'_>, stamp: &Stamp<'_>) -> Result<bool> {
    let stamped = conn.execute(
        "UPDATE objects SET observed_generation = ?2, observed_at = ?3, updated_at = ?3, \
                reconcile_owed = CASE WHEN reconcile_owed > ?4 THEN reconcile_owed - ?4 ELSE 0 END, \
                resource_version = ?5, last_pass_trace = COALESCE(?6, last_pass_trace) \
         WHERE id = ?1 AND (observed_generation IS NULL OR observed_generation < ?2)",
        params![
            stamp.id,
            stamp.generation,
            stamp.now.as_millis(),
            stamp.owed_serviced,
            stamp.resource_version,
            stamp.trace_id
        ],
    )?;
    Ok(stamped > 0)
}

/// What a settled pass with no status to report stamps on its object.
pub(crate) struct Stamp<'a> {
    pub(crate) id: ObjectId,
    pub(crate) generation: i64,
    pub(crate) owed_serviced: i64,
    pub(crate) resource_version: i64,
    pub(crate) now: Timestamp,
    /// The pass's trace, when it is traced (for `describe`).
    pub(crate) trace_id: Option<&'a str>,
}

/// A settled pass's status and generation, written in one statement.
pub(crate) struct Settle<'a> {
    pub(crate) status: StatusWrite<'a>,
    pub(crate) generation: i64,
    pub(crate) owed_serviced: i64,
    /// The pass's trace, when it is traced (for `describe`).
    pub(crate) trace_id: Option<&'a str>,
}

/// The settling update: the status, the settled generation (never moved
/// back) and the owed passes serviced, on object `?1` if it is of kind
/// `?2`/`?3`.
macro_rules! settle_update {
    () => {
        "UPDATE objects SET status = ?4, resource_version = ?5, updated_at = ?6, \
                status_version = ?9, last_pass_trace = COALESCE(?10, last_pass_trace), \
                reconcile_owed = CASE WHEN reconcile_owed > ?8 THEN reconcile_owed - ?8 ELSE 0 END, \
                observed_at = CASE WHEN observed_generation IS NULL OR observed_generation < ?7 \
                                   THEN ?6 ELSE observed_at END, \
                observed_generation = CASE WHEN observed_generation > ?7 \
                                           THEN observed_generation ELSE ?7 END \
         WHERE id = ?1 AND grp = ?2 AND kind = ?3"
    };
}

const SETTLE: &str = settle_update!();

/// [`SETTLE`] and its log entry in one statement (PostgreSQL).
const SETTLE_AND_LOG: &str = concat!(
    "WITH settled AS (",
    settle_update!(),
    " RETURNING id, grp, kind) \
     INSERT INTO object_writes (resource_version, object_id, grp, kind, op, written_at) \
     SELECT ?5, id, grp, kind, 'update', ?6 FROM settled"
);

/// The parameters of [`SETTLE`] and [`SETTLE_AND_LOG`].
fn settle_params<'p>(settle: &'p Settle<'_>) -> [Param<'p>; 10] {
    let write = &settle.status;
    [
        Param::Int(write.id),
        Param::Text(&write.group_kind.group),
        Param::Text(&write.group_kind.kind),
        Param::Text(write.status),
        Param::Int(write.resource_version),
        Param::Int(write.now.as_millis()),
        Param::Int(settle.generation),
        Param::Int(settle.owed_serviced),
        Param::Int(write.status_version),
        Param::from(settle.trace_id),
    ]
}

/// Settles; returns whether the object was there, of its kind, to settle.
pub(crate) fn settle(conn: Conn<'_>, settle: &Settle<'_>) -> Result<bool> {
    Ok(conn.execute(SETTLE, &settle_params(settle))? > 0)
}

/// Settles and appends the update to the write log if it landed, without
/// waiting for an answer: the handshake of every settled pass on PostgreSQL.
pub(crate) fn settle_and_log_later(conn: Conn<'_>, settle: &Settle<'_>) -> Result<()> {
    conn.execute_later(SETTLE_AND_LOG, &settle_params(settle))
}

/// Records when object `id` asked to run again (`None`: it did not), in
/// milliseconds since the epoch.
pub(crate) fn set_requeue_at(conn: Conn<'_>, id: ObjectId, due: Option<i64>) -> Result<()> {
    conn.execute_later(
        "UPDATE objects SET requeue_at = ?2 WHERE id = ?1",
        params![id, due],
    )
}

/// Records the trace id of object `id`'s latest traced pass.
pub(crate) fn set_last_pass_trace(conn: Conn<'_>, id: ObjectId, trace_id: &str) -> Result<()> {
    conn.execute_later(
        "UPDATE objects SET last_pass_trace = ?2 WHERE id = ?1",
        params![id, trace_id],
    )
}

/// The trace id of object `id`'s latest traced pass, if it had one.
pub(crate) fn last_pass_trace(conn: Conn<'_>, id: ObjectId) -> Result<Option<String>> {
    Ok(conn
        .query_opt(
            "SELECT last_pass_trace FROM objects WHERE id = ?1",
            params![id],
            |row| row.get::<Option<String>>(0),
        )?
        .flatten())
}

/// Records one more owed pass on object `id`.
pub(crate) fn add_owed(conn: Conn<'_>, id: ObjectId) -> Result<()> {
    conn.execute_later(
        "UPDATE objects SET reconcile_owed = reconcile_owed + 1 WHERE id = ?1",
        params![id],
    )
}

/// Takes `serviced` owed passes from object `id`, down to none.
pub(crate) fn subtract_owed(conn: Conn<'_>, id: ObjectId, serviced: i64) -> Result<()> {
    conn.execute_later(
        "UPDATE objects \
         SET reconcile_owed = CASE WHEN reconcile_owed > ?2 THEN reconcile_owed - ?2 ELSE 0 END \
         WHERE id = ?1",
        params![id, serviced],
    )
}

/// Object `id`'s finalizers.
pub(crate) fn finalizers(conn: Conn<'_>, id: ObjectId) -> Result<Vec<String>> {
    let stored: String = conn.query_one(
        "SELECT finalizers FROM objects WHERE id = ?1",
        params![id],
        |row| row.get(0),
    )?;
    serde_json::from_str(&stored)
        .map_err(|e| Error::Internal(format!("stored finalizers do not parse: {e}")))
}

/// Replaces object `id`'s finalizers.
pub(crate) fn set_finalizers(conn: Conn<'_>, id: ObjectId, finalizers: &[String]) -> Result<()> {
    let text = serde_json::to_string(finalizers)
        .map_err(|e| Error::Internal(format!("finalizers do not serialise: {e}")))?;
    conn.execute_later(
        "UPDATE objects SET finalizers = ?2 WHERE id = ?1",
        params![id, &text],
    )
}
