//! Dependency edges (`depends_on`): declaring and dropping them, the owed
//! pass an edge's creation records, cycle refusal, and the waker's
//! bookkeeping.

use crate::error::{Error, Result};
use crate::object::{ObjectId, ObjectRef};
use crate::store::ops::observed::require_own;
use crate::store::rows::edges;
use crate::store::rows::objects as rows;
use crate::store::rows::observed;
use crate::store::writer::{Push, WriteTx};

/// Records that `from` (of kind `gk`) depends on `to`; returns whether the
/// edge is new. Creating it also records, in the same transaction, one owed
/// pass on `from` and pushes it, so a change to `to` that landed between the
/// caller's read and this commit is still seen. Re-asserting an edge writes
/// nothing. A self edge is accepted and never wakes its object.
///
/// # Errors
/// [`Error::NotFound`] when either end is missing; [`Error::WrongKind`] when
/// `from` is another kind's; [`Error::DependencyCycle`] when the edge would
/// close a cycle (nothing is written).
pub(crate) fn add_dependency(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    to: ObjectId,
) -> Result<bool> {
    require_own(tx, object)?;
    let from = object.id;
    if rows::select_kind_and_deletion(tx.conn(), to)?.is_none() {
        return Err(Error::not_found(format!("dependency target {to}")));
    }
    if edges::has_dependency(tx.conn(), from, to)? {
        return Ok(false);
    }
    if from != to
        && let Some(cycle) = find_cycle(tx, from, to)?
    {
        return Err(Error::DependencyCycle { cycle });
    }
    edges::insert_dependency(tx.conn(), from, to)?;
    if from == to {
        // The pass asserting it is the pass that reads the target: no
        // change can slip between, so no owed pass is due.
        return Ok(true);
    }
    observed::add_owed(tx.conn(), from)?;
    // The owed pass just recorded will read everything written so far, so
    // the waker need not wake `from` for any of it.
    let seen = tx.current_resource_version();
    record_watermark(tx, from, seen)?;
    tx.push(Push {
        id: from,
        group_kind: object.group_kind.clone(),
    });
    Ok(true)
}

/// Drops the edge `from` → `to`; returns whether there was one. A deleting
/// target whose last live claim this was is pushed, so it is collected now.
pub(crate) fn delete_dependency(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    to: ObjectId,
) -> Result<bool> {
    require_own(tx, object)?;
    let deleted = edges::delete_dependency(tx.conn(), object.id, to)?;
    if deleted {
        push_if_unblocked(tx, to)?;
    }
    Ok(deleted)
}

/// Pushes every deleting target of `id`'s dependencies that no longer has a
/// live claim: `id` itself was just marked for deletion, so it holds none.
pub(crate) fn push_unblocked_targets(tx: &mut WriteTx<'_>, id: ObjectId) -> Result<()> {
    for target in edges::deleting_targets(tx.conn(), id)? {
        push_if_unblocked(tx, target)?;
    }
    Ok(())
}

fn push_if_unblocked(tx: &mut WriteTx<'_>, target: ObjectId) -> Result<()> {
    let Some((group_kind, deleting)) = rows::select_kind_and_deletion(tx.conn(), target)? else {
        return Ok(());
    };
    if deleting && !edges::has_live_claims(tx.conn(), target)? {
        tx.push(Push {
            id: target,
            group_kind,
        });
    }
    Ok(())
}

/// The cycle that an edge `from` → `to` would close, as `Kind/name` labels
/// starting and ending at `from`, if `from` is reachable from `to`.
fn find_cycle(tx: &WriteTx<'_>, from: ObjectId, to: ObjectId) -> Result<Option<Vec<String>>> {
    let Some(path) = edges::dependency_path(tx.conn(), from, to)? else {
        return Ok(None);
    };
    let mut labels = Vec::with_capacity(path.len() + 1);
    for id in std::iter::once(from).chain(path) {
        let label = match rows::select_by_id(tx.conn(), id)? {
            Some(object) => object.meta.label(),
            None => format!("object {id}"),
        };
        labels.push(label);
    }
    Ok(Some(labels))
}

/// Records the write cursor a successful pass of `id` observed at its load.
pub(crate) fn record_watermark(tx: &mut WriteTx<'_>, id: ObjectId, cursor: i64) -> Result<()> {
    edges::raise_watermark(tx.conn(), id, cursor)
}

/// Persists the waker's cursor.
pub(crate) fn save_waker_cursor(tx: &mut WriteTx<'_>, cursor: i64) -> Result<()> {
    edges::save_waker_cursor(tx.conn(), cursor)
}
