//! The `conditions` table, as writes see it (reads load conditions with
//! their objects, in `objects`).

use crate::error::Result;
use crate::object::{Condition, ObjectId};
use crate::store::backend::{Conn, params};

/// A condition as stored, for deciding whether a new one changes it.
pub(crate) struct StoredCondition {
    pub(crate) status: String,
    pub(crate) reason: String,
    pub(crate) message: String,
    pub(crate) liveness: bool,
    pub(crate) written_session: i64,
    pub(crate) transitioned_at: i64,
}

/// Object `id`'s stored condition of `type_`, if it has one.
pub(crate) fn stored(conn: Conn<'_>, id: ObjectId, type_: &str) -> Result<Option<StoredCondition>> {
    conn.query_opt(
        "SELECT status, reason, message, liveness, written_session, transitioned_at \
         FROM conditions WHERE object_id = ?1 AND type = ?2",
        params![id, type_],
        |row| {
            Ok(StoredCondition {
                status: row.get(0)?,
                reason: row.get(1)?,
                message: row.get(2)?,
                liveness: row.get(3)?,
                written_session: row.get(4)?,
                transitioned_at: row.get(5)?,
            })
        },
    )
}

/// Writes `condition` on object `id`, replacing the one of its type.
pub(crate) fn upsert(
    conn: Conn<'_>,
    id: ObjectId,
    condition: &Condition,
    session: i64,
    transitioned_at: i64,
    now: i64,
) -> Result<()> {
    conn.execute_later(
        "INSERT INTO conditions \
         (object_id, type, status, reason, message, liveness, written_session, \
          transitioned_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
         ON CONFLICT (object_id, type) DO UPDATE SET status = excluded.status, \
            reason = excluded.reason, message = excluded.message, \
            liveness = excluded.liveness, written_session = excluded.written_session, \
            transitioned_at = excluded.transitioned_at, updated_at = excluded.updated_at",
        params![
            id,
            &condition.type_,
            condition.status.as_str(),
            &condition.reason,
            &condition.message,
            condition.liveness,
            session,
            transitioned_at,
            now,
        ],
    )
}

/// Removes object `id`'s condition of `type_`; returns whether there was one.
pub(crate) fn delete(conn: Conn<'_>, id: ObjectId, type_: &str) -> Result<bool> {
    let deleted = conn.execute(
        "DELETE FROM conditions WHERE object_id = ?1 AND type = ?2",
        params![id, type_],
    )?;
    Ok(deleted > 0)
}
