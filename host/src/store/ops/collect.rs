//! Garbage collection of deletion-pending objects.
//!
//! Collecting an object first cascades its deletion mark to the children it
//! owns (each of which is pushed), then removes the row once its finalizers
//! are empty and nothing with a live claim points at it: no owned child, and
//! no dependent that is not itself being deleted.

use crate::error::Result;
use crate::object::{GroupKind, ObjectId};
use crate::store::ops::dependencies;
use crate::store::rows::edges::{deleting_owner, has_live_claims, live_children};
use crate::store::rows::objects::{self as rows, Direction, LogEntry, WriteOp};
use crate::store::rows::write_log::CollectedImage;
use crate::store::writer::{Push, WriteTx};

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
    let owner = deleting_owner(tx.conn(), id)?.map(|(id, group_kind)| Push { id, group_kind });
    let object = tx.reader().with_conditions(object)?;
    let owned_by = tx.reader().refs(id, Direction::Owner)?.into_iter().next();
    let image = CollectedImage::new(&object, owned_by).to_json();
    rows::delete_row(tx.conn(), id)?;
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
    let live_children: Vec<(ObjectId, GroupKind)> = live_children(tx.conn(), id)?;
    let now = tx.now();
    for (child, group_kind) in live_children {
        let resource_version = tx.next_resource_version();
        rows::mark_deleted_by_id(tx.conn(), child, resource_version, now)?;
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
