//! What controllers write about an object: status, conditions, finalizers
//! and the observed-generation stamp. Each write folds the object's kind into
//! its lookup, so a wrong id fails instead of touching another kind's row.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::json::Json;
use crate::naming::{label_problem, message_problem};
use crate::object::{Condition, ObjectId, ObjectRef};
use crate::store::backend::Dialect;
use crate::store::rows::conditions;
use crate::store::rows::objects::{self as rows, LogEntry, WriteOp};
use crate::store::rows::observed::{self, Settle, StatusWrite};
use crate::store::writer::{Push, WriteTx};

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
    observed::touch(tx.conn(), object.id, resource_version, tx.now())?;
    log_update(tx, object, resource_version)
}

/// Writes the status of object `id`; the bytes already stored write nothing.
///
/// # Errors
/// [`Error::NotFound`] when the object is gone; [`Error::WrongKind`];
/// [`Error::SchemaVersionDowngrade`] when a newer build wrote the stored
/// status.
pub(crate) fn write_status(tx: &mut WriteTx<'_>, object: &ObjectRef, status: &Json) -> Result<()> {
    status.check_limits()?;
    let status_version = tx.schema_versions(&object.group_kind).status;
    let resource_version = tx.next_resource_version();
    let write = StatusWrite {
        id: object.id,
        group_kind: &object.group_kind,
        status: status.as_str(),
        status_version,
        resource_version,
        now: tx.now(),
    };
    if !observed::update_status(tx.conn(), &write)? {
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
    let (stored, stored_version, name) = observed::stored_status(tx.conn(), object.id)?;
    if stored.as_deref() == Some(status.as_str()) {
        return Ok(());
    }
    Err(Error::SchemaVersionDowngrade {
        what: format!("{}/{name}", object.group_kind),
        document: "status",
        stored: stored_version,
        writer,
    })
}

/// What a settled pass records: the generation it settled, the owed passes
/// it serviced, and its trace when it is traced (kept for `describe` in the
/// same statement, so tracing adds none).
pub(crate) struct Settled<'a> {
    pub(crate) generation: i64,
    pub(crate) owed_serviced: i64,
    pub(crate) trace_id: Option<&'a str>,
}

/// Records that a pass settled `generation`, and takes away the owed passes it
/// serviced. Writes nothing for a generation already recorded.
pub(crate) fn stamp_observed(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    settled: Settled<'_>,
) -> Result<()> {
    let id = object.id;
    let owed_serviced = settled.owed_serviced;
    let resource_version = tx.next_resource_version();
    let stamp = observed::Stamp {
        id,
        generation: settled.generation,
        owed_serviced,
        resource_version,
        now: tx.now(),
        trace_id: settled.trace_id,
    };
    if observed::stamp_observed(tx.conn(), &stamp)? {
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
    settled: Settled<'_>,
) -> Result<()> {
    let (gk, id) = (&object.group_kind, object.id);
    let resource_version = tx.next_resource_version();
    let settle = Settle {
        status: StatusWrite {
            id,
            group_kind: gk,
            status: status.as_str(),
            status_version: tx.schema_versions(gk).status,
            resource_version,
            now: tx.now(),
        },
        generation: settled.generation,
        owed_serviced: settled.owed_serviced,
        trace_id: settled.trace_id,
    };
    if tx.conn().dialect() == Dialect::Postgres {
        // One statement that waits for no answer and logs the update only
        // if it landed.
        return observed::settle_and_log_later(tx.conn(), &settle);
    }
    if !observed::settle(tx.conn(), &settle)? {
        require_own(tx, object)?;
        return Err(Error::Internal(format!("{gk} {id} could not be written")));
    }
    log_update(tx, object, resource_version)
}

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
    observed::set_requeue_at(tx.conn(), id, due)
}

/// Records the trace id of object `id`'s latest traced pass; bookkeeping
/// only, so no version moves.
pub(crate) fn set_last_pass_trace(
    tx: &mut WriteTx<'_>,
    id: ObjectId,
    trace_id: &str,
) -> Result<()> {
    observed::set_last_pass_trace(tx.conn(), id, trace_id)
}

/// Takes away owed passes a successful pass serviced; bookkeeping only, so no
/// version moves.
pub(crate) fn subtract_owed(tx: &mut WriteTx<'_>, id: ObjectId, serviced: i64) -> Result<()> {
    if serviced > 0 {
        observed::subtract_owed(tx.conn(), id, serviced)?;
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
        let stored = conditions::stored(tx.conn(), id, &condition.type_)?;
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
        conditions::upsert(tx.conn(), id, condition, session, transitioned_at, now)?;
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
    require_own(tx, object)?;
    let deleted = conditions::delete(tx.conn(), object.id, type_)?;
    if deleted {
        touch(tx, object)?;
    }
    Ok(deleted)
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
    let mut finalizers = observed::finalizers(tx.conn(), id)?;
    if finalizers.iter().any(|f| f == finalizer) {
        return Ok(false);
    }
    finalizers.push(finalizer.to_string());
    observed::set_finalizers(tx.conn(), id, &finalizers)?;
    touch(tx, object)?;
    Ok(true)
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
    let mut finalizers = observed::finalizers(tx.conn(), id)?;
    let before = finalizers.len();
    finalizers.retain(|f| f != finalizer);
    if finalizers.len() == before {
        return Ok(false);
    }
    observed::set_finalizers(tx.conn(), id, &finalizers)?;
    touch(tx, object)?;
    if finalizers.is_empty() && deleting {
        tx.push(Push {
            id,
            group_kind: gk.clone(),
        });
    }
    Ok(true)
}
