//! What controllers write about an object: status, conditions, finalizers
//! and the observed-generation stamp. Each write folds the object's kind into
//! its lookup, so a wrong id fails instead of touching another kind's row.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::json::Json;
use crate::object::{Condition, ObjectId, ObjectRef};
use crate::policy::{label_problem, message_problem};
use crate::store::rows::{self, LogEntry, WriteOp};
use crate::store::sql::{Dialect, params};
use crate::store::{Push, WriteTx};

/// Whether `object` is being deleted; it must exist and be of its kind.
///
/// # Errors
/// [`Error::NotFound`] when it does not exist; [`Error::WrongKind`].
pub(crate) fn require_own(tx: &WriteTx<'_>, object: &ObjectRef) -> Result<bool> {
    let (gk, id) = (&object.group_kind, object.id);
    match rows::select_kind_and_deletion(tx.conn(), id)? {
        None => Err(Error::not_found(format!("{gk} {id}"))),
        Some((actual, _)) if &actual != gk => Err(Error::WrongKind {
            id,
            expected: gk.to_string(),
            actual: actual.to_string(),
        }),
        Some((_, deleting)) => Ok(deleting),
    }
}

/// Records a real write to object `id` that changed something other than its
/// spec: a new `resource_version`, `updated_at` and a log entry.
fn touch(tx: &mut WriteTx<'_>, object: &ObjectRef) -> Result<()> {
    let resource_version = tx.next_resource_version();
    let now = tx.now();
    tx.conn().execute_later(
        "UPDATE objects SET resource_version = ?2, updated_at = ?3 WHERE id = ?1",
        params![object.id, resource_version, now.as_millis()],
    )?;
    log_update(tx, object, resource_version)
}

/// Writes the status of object `id`; the bytes already stored write nothing.
///
/// # Errors
/// [`Error::NotFound`] when the object is gone; [`Error::WrongKind`];
/// [`Error::SchemaVersionDowngrade`] when a newer build wrote the stored
/// status.
pub(crate) fn write_status(tx: &mut WriteTx<'_>, object: &ObjectRef, status: &Json) -> Result<()> {
    let (gk, id) = (&object.group_kind, object.id);
    status.check_size()?;
    let status_version = tx.schema_versions(gk).status;
    let resource_version = tx.next_resource_version();
    let now = tx.now();
    // One statement on the hot path; the kind is folded into the WHERE, and
    // only a miss pays for finding out why.
    let written = tx.conn().execute(
        "UPDATE objects SET status = ?4, resource_version = ?5, updated_at = ?6, \
                status_version = ?7 \
         WHERE id = ?1 AND grp = ?2 AND kind = ?3 \
           AND status IS DISTINCT FROM ?4 AND status_version <= ?7",
        params![
            id,
            &gk.group,
            &gk.kind,
            status.as_str(),
            resource_version,
            now.as_millis(),
            status_version
        ],
    )?;
    if written == 0 {
        tx.give_back_resource_version(resource_version);
        return why_status_unwritten(tx, object, status, status_version);
    }
    log_update(tx, object, resource_version)
}

/// Why a status update matched no row: gone, another kind's, already these
/// bytes (fine: nothing to write), or stored by a newer build.
fn why_status_unwritten(
    tx: &WriteTx<'_>,
    object: &ObjectRef,
    status: &Json,
    writer: i64,
) -> Result<()> {
    require_own(tx, object)?;
    let (gk, id) = (&object.group_kind, object.id);
    let (stored, stored_version, name): (Option<String>, i64, String) = tx.conn().query_one(
        "SELECT status, status_version, name FROM objects WHERE id = ?1",
        params![id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?;
    if stored.as_deref() == Some(status.as_str()) {
        return Ok(());
    }
    Err(Error::SchemaVersionDowngrade {
        what: format!("{gk}/{name}"),
        document: "status",
        stored: stored_version,
        writer,
    })
}

/// Records that a pass settled `generation`, and takes away the owed passes it
/// serviced. Writes nothing for a generation already recorded.
pub(crate) fn stamp_observed(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    generation: i64,
    owed_serviced: i64,
) -> Result<()> {
    let id = object.id;
    let resource_version = tx.next_resource_version();
    let now = tx.now().as_millis();
    let stamped = tx.conn().execute(
        "UPDATE objects SET observed_generation = ?2, observed_at = ?3, updated_at = ?3, \
                reconcile_owed = CASE WHEN reconcile_owed > ?4 THEN reconcile_owed - ?4 ELSE 0 END, \
                resource_version = ?5 \
         WHERE id = ?1 AND (observed_generation IS NULL OR observed_generation < ?2)",
        params![id, generation, now, owed_serviced, resource_version],
    )?;
    if stamped > 0 {
        return log_update(tx, object, resource_version);
    }
    tx.give_back_resource_version(resource_version);
    subtract_owed(tx, id, owed_serviced)
}

/// The handshake of a settled pass that also reported a status: both land in
/// one write, so a watcher sees the status and the settled generation at once.
pub(crate) fn settle_with_status(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    status: &Json,
    generation: i64,
    owed_serviced: i64,
) -> Result<()> {
    let (gk, id) = (&object.group_kind, object.id);
    let status_version = tx.schema_versions(gk).status;
    let resource_version = tx.next_resource_version();
    let now = tx.now().as_millis();
    let params = params![
        id,
        &gk.group,
        &gk.kind,
        status.as_str(),
        resource_version,
        now,
        generation,
        owed_serviced,
        status_version
    ];
    if tx.conn().dialect() == Dialect::Postgres {
        // The handshake of every settled pass: one statement that waits for
        // no answer and logs the update only if it landed.
        return tx.conn().execute_later(SETTLE_AND_LOG, params);
    }
    if tx.conn().execute(SETTLE, params)? == 0 {
        require_own(tx, object)?;
        return Err(Error::Internal(format!("{gk} {id} could not be written")));
    }
    log_update(tx, object, resource_version)
}

/// The settling update: the status, the settled generation (never moved
/// back) and the owed passes serviced, on object `?1` if it is of kind
/// `?2`/`?3`.
macro_rules! settle_update {
    () => {
        "UPDATE objects SET status = ?4, resource_version = ?5, updated_at = ?6, \
                status_version = ?9, \
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

fn log_update(tx: &WriteTx<'_>, object: &ObjectRef, resource_version: i64) -> Result<()> {
    rows::log_write(
        tx.conn(),
        LogEntry {
            resource_version,
            object_id: object.id,
            group_kind: &object.group_kind,
            op: WriteOp::Update,
            written_at: tx.now(),
            row_image: None,
        },
    )
}

/// Records when object `id` asked to run again (`None`: it did not), in
/// milliseconds since the epoch; bookkeeping only, so no version moves.
pub(crate) fn set_requeue_at(tx: &mut WriteTx<'_>, id: ObjectId, due: Option<i64>) -> Result<()> {
    tx.conn().execute_later(
        "UPDATE objects SET requeue_at = ?2 WHERE id = ?1",
        params![id, due],
    )?;
    Ok(())
}

/// Takes away owed passes a successful pass serviced; bookkeeping only, so no
/// version moves.
pub(crate) fn subtract_owed(tx: &mut WriteTx<'_>, id: ObjectId, serviced: i64) -> Result<()> {
    if serviced > 0 {
        tx.conn().execute_later(
            "UPDATE objects \
             SET reconcile_owed = CASE WHEN reconcile_owed > ?2 THEN reconcile_owed - ?2 ELSE 0 END \
             WHERE id = ?1",
            params![id, serviced],
        )?;
    }
    Ok(())
}

/// Refuses a batch of conditions that names a type twice or names none.
pub(crate) fn validate_conditions(conditions: &[Condition]) -> Result<()> {
    let mut seen = HashSet::new();
    for condition in conditions {
        if condition.type_.is_empty() {
            return Err(Error::InvalidCondition(
                "a condition type must not be empty".into(),
            ));
        }
        let problem = label_problem("a condition type", &condition.type_)
            .or_else(|| label_problem("a condition reason", &condition.reason))
            .or_else(|| message_problem("a condition message", &condition.message));
        if let Some(problem) = problem {
            return Err(Error::InvalidCondition(problem));
        }
        if !seen.insert(condition.type_.as_str()) {
            return Err(Error::DuplicateConditionType(condition.type_.clone()));
        }
    }
    Ok(())
}

struct StoredCondition {
    status: String,
    reason: String,
    message: String,
    liveness: bool,
    written_session: i64,
    transitioned_at: i64,
}

/// Writes each condition that differs from what is stored, under one version
/// bump; returns whether anything was written. A liveness condition written
/// by another session is rewritten even when its content matches, which is
/// what confirms it in this one.
pub(crate) fn set_conditions(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    conditions: &[Condition],
) -> Result<bool> {
    let id = object.id;
    validate_conditions(conditions)?;
    require_own(tx, object)?;
    let now = tx.now().as_millis();
    let session = tx.session();
    let mut changed = false;
    for condition in conditions {
        let stored = tx.conn().query_opt(
            "SELECT status, reason, message, liveness, written_session, transitioned_at \
             FROM conditions WHERE object_id = ?1 AND type = ?2",
            params![id, &condition.type_],
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
        )?;
        let status = condition.status.as_str();
        if let Some(stored) = &stored {
            let same = stored.status == status
                && stored.reason == condition.reason
                && stored.message == condition.message
                && stored.liveness == condition.liveness;
            let confirmed = !condition.liveness || stored.written_session == session;
            if same && confirmed {
                continue;
            }
        }
        let transitioned_at = match &stored {
            Some(stored) if stored.status == status => stored.transitioned_at,
            _ => now,
        };
        tx.conn().execute_later(
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
                status,
                &condition.reason,
                &condition.message,
                condition.liveness,
                session,
                transitioned_at,
                now,
            ],
        )?;
        changed = true;
    }
    if changed {
        touch(tx, object)?;
    }
    Ok(changed)
}

/// Removes the condition of `type_`; returns whether there was one.
pub(crate) fn delete_condition(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    type_: &str,
) -> Result<bool> {
    let id = object.id;
    require_own(tx, object)?;
    let deleted = tx.conn().execute(
        "DELETE FROM conditions WHERE object_id = ?1 AND type = ?2",
        params![id, type_],
    )?;
    if deleted > 0 {
        touch(tx, object)?;
    }
    Ok(deleted > 0)
}

/// Adds `finalizer` to object `id`; returns whether it was new. A deleting
/// object takes no new finalizers.
pub(crate) fn add_finalizer(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    finalizer: &str,
) -> Result<bool> {
    let (gk, id) = (&object.group_kind, object.id);
    if require_own(tx, object)? {
        return Err(Error::DeletionPending {
            what: format!("{gk} {id} (no finalizer can be added)"),
        });
    }
    let mut finalizers = stored_finalizers(tx, id)?;
    if finalizers.iter().any(|f| f == finalizer) {
        return Ok(false);
    }
    finalizers.push(finalizer.to_string());
    store_finalizers(tx, id, &finalizers)?;
    touch(tx, object)?;
    Ok(true)
}

fn stored_finalizers(tx: &WriteTx<'_>, id: ObjectId) -> Result<Vec<String>> {
    let stored: String = tx.conn().query_one(
        "SELECT finalizers FROM objects WHERE id = ?1",
        params![id],
        |row| row.get(0),
    )?;
    serde_json::from_str(&stored)
        .map_err(|e| Error::Internal(format!("stored finalizers do not parse: {e}")))
}

fn store_finalizers(tx: &WriteTx<'_>, id: ObjectId, finalizers: &[String]) -> Result<()> {
    let text = serde_json::to_string(finalizers)
        .map_err(|e| Error::Internal(format!("finalizers do not serialise: {e}")))?;
    tx.conn().execute_later(
        "UPDATE objects SET finalizers = ?2 WHERE id = ?1",
        params![id, &text],
    )?;
    Ok(())
}

/// Removes `finalizer` from object `id`; returns whether it was there. Clearing
/// the last finalizer of a deleting object pushes it, so it is collected.
pub(crate) fn delete_finalizer(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    finalizer: &str,
) -> Result<bool> {
    let (gk, id) = (&object.group_kind, object.id);
    let deleting = require_own(tx, object)?;
    let mut finalizers = stored_finalizers(tx, id)?;
    let before = finalizers.len();
    finalizers.retain(|f| f != finalizer);
    if finalizers.len() == before {
        return Ok(false);
    }
    store_finalizers(tx, id, &finalizers)?;
    touch(tx, object)?;
    if finalizers.is_empty() && deleting {
        tx.push(Push {
            id,
            group_kind: gk.clone(),
        });
    }
    Ok(true)
}
