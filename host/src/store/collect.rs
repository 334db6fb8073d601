//! Garbage collection of deletion-pending objects.
//!
//! Collecting an object first cascades its deletion mark to the children it
//! owns (each of which is pushed), then removes the row once its finalizers
//! are empty and nothing with a live claim points at it: no owned child, and
//! no dependent that is not itself being deleted.

use crate::error::Result;
use crate::object::{GroupKind, ObjectId};
use crate::store::dependencies;
use crate::store::rows::{self, LogEntry, WriteOp, group_kind_at};
use crate::store::sql::{Conn, params};
use crate::store::{Push, WriteTx};

/// What a collect did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collected {
    /// The row is gone (or was already).
    Removed,
    /// Finalizers remain: the kind's controller must clear them.
    AwaitingFinalizers,
    /// Something with a live claim still points at it.
    Claimed,
    /// It is not being deleted.
    Live,
}

/// Collects object `id` as far as it can go now.
pub(crate) fn collect(tx: &mut WriteTx<'_>, id: ObjectId) -> Result<Collected> {
    let Some(object) = rows::select_by_id(tx.conn(), id)? else {
        return Ok(Collected::Removed);
    };
    if object.meta.deletion_requested_at.is_none() {
        return Ok(Collected::Live);
    }
    cascade(tx, id)?;
    if !object.meta.finalizers.is_empty() {
        return Ok(Collected::AwaitingFinalizers);
    }
    if has_live_claims(tx.conn(), id)? {
        return Ok(Collected::Claimed);
    }
    let owner = deleting_owner(tx.conn(), id)?;
    let object = tx.reader().with_conditions(object)?;
    let image = serde_json::to_string(&crate::object::ObjectDocument::from(&object))
        // Plain fields and string-keyed JSON: nothing here can fail to print.
        .expect("an object document serializes");
    tx.conn()
        .execute_later("DELETE FROM objects WHERE id = ?1", params![id])?;
    let resource_version = tx.next_resource_version();
    rows::log_write(
        tx.conn(),
        LogEntry {
            resource_version,
            object_id: id,
            group_kind: &object.meta.group_kind,
            op: WriteOp::Delete,
            written_at: tx.now(),
            row_image: Some(image),
        },
    )?;
    // The newest id may just have gone; keep the counters from going back.
    tx.save_sequences();
    if let Some(owner) = owner
        && !has_live_claims(tx.conn(), owner.id)?
    {
        // The owner was waiting for its last claim to go, and this was it.
        tx.push(owner);
    }
    Ok(Collected::Removed)
}

/// Marks every live child that `id` owns for deletion, pushing each.
fn cascade(tx: &mut WriteTx<'_>, id: ObjectId) -> Result<()> {
    let live_children: Vec<(ObjectId, GroupKind)> = tx.conn().query_all(
        "SELECT o.id, o.grp, o.kind FROM edges e JOIN objects o ON o.id = e.from_id \
         WHERE e.to_id = ?1 AND e.relation = 'owned_by' AND o.deletion_requested_at IS NULL",
        params![id],
        |row| Ok((row.get(0)?, group_kind_at(row, 1)?)),
    )?;
    let now = tx.now();
    for (child, group_kind) in live_children {
        let resource_version = tx.next_resource_version();
        tx.conn().execute_later(
            "UPDATE objects SET deletion_requested_at = ?2, resource_version = ?3, updated_at = ?2 \
             WHERE id = ?1",
            params![child, now.as_millis(), resource_version],
        )?;
        rows::log_write(
            tx.conn(),
            LogEntry {
                resource_version,
                object_id: child,
                group_kind: &group_kind,
                op: WriteOp::Update,
                written_at: now,
                row_image: None,
            },
        )?;
        tx.push(Push {
            id: child,
            group_kind,
        });
        dependencies::push_unblocked_targets(tx, child)?;
    }
    Ok(())
}

/// Does anything with a live claim point at `id`: an owned child (deleting or
/// not, since it must go first), or a dependent not itself being deleted?
pub(crate) fn has_live_claims(conn: Conn<'_>, id: ObjectId) -> Result<bool> {
    conn.exists(
        "SELECT 1 FROM edges e JOIN objects o ON o.id = e.from_id \
         WHERE e.to_id = ?1 AND e.from_id <> ?1 \
           AND (e.relation = 'owned_by' OR o.deletion_requested_at IS NULL) \
         LIMIT 1",
        params![id],
    )
}

/// The owner of `id`, if it has one that is being deleted.
fn deleting_owner(conn: Conn<'_>, id: ObjectId) -> Result<Option<Push>> {
    conn.query_opt(
        "SELECT o.id, o.grp, o.kind FROM edges e JOIN objects o ON o.id = e.to_id \
         WHERE e.from_id = ?1 AND e.relation = 'owned_by' \
           AND o.deletion_requested_at IS NOT NULL",
        params![id],
        |row| {
            Ok(Push {
                id: row.get(0)?,
                group_kind: group_kind_at(row, 1)?,
            })
        },
    )
}
