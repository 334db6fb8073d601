//! Trigger channels: addresses fed from outside the store (a file watcher,
//! a cloud API, a probe), each resolved within a kind and requeued.
//!
//! A poke is a latency hint, not a write: nothing re-derives a lost one, so a
//! kind whose truth lives outside the store still wants a cadence of its own.

use tokio_util::sync::CancellationToken;

use crate::engine::controller::Feed;
use crate::object::{GroupKind, ObjectId};
use crate::store::Store;

/// Receives addresses until the channel closes (after draining what was
/// sent) or `cancel` fires, handing `requeue` each object of `group_kind`
/// they name. An address naming nothing of the kind is skipped.
pub(crate) async fn run(
    mut feed: Feed,
    store: Store,
    group_kind: GroupKind,
    cancel: CancellationToken,
    requeue: impl Fn(ObjectId),
) {
    loop {
        let id = tokio::select! {
            _ = cancel.cancelled() => return,
            id = next(&group_kind, &store, &mut feed) => id,
        };
        match id {
            Some(Some(id)) => requeue(id),
            Some(None) => {}
            None => return,
        }
    }
}

/// The next address, resolved: `None` once the channel is closed and
/// drained, `Some(None)` for an address that names nothing of the kind.
async fn next(group_kind: &GroupKind, store: &Store, feed: &mut Feed) -> Option<Option<ObjectId>> {
    let resolved = match feed {
        Feed::ById(ids) => {
            let id = ids.recv().await?;
            store
                .read(|r| r.kind_and_deletion(id))
                .map(|found| found.filter(|(gk, _)| gk == group_kind).map(|_| id))
        }
        Feed::ByName(names) => {
            let name = names.recv().await?;
            store
                .read(|r| r.object_row_by_name(group_kind, &name))
                .map(|found| found.map(|o| o.meta.id))
        }
    };
    Some(resolved.unwrap_or_else(|error| {
        tracing::warn!(kind = %group_kind, %error, "a trigger could not be resolved");
        None
    }))
}
