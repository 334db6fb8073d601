//! Trigger channels: addresses fed from outside the store (a file watcher,
//! a cloud API, a probe), each resolved within a kind and requeued.
//!
//! A poke is a latency hint, not a write: nothing re-derives a lost one, so a
//! kind whose truth lives outside the store still wants a cadence of its own.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::Receiver;

use crate::engine::kind::Kind;
use crate::object::ObjectId;
use crate::store::Store;
use crate::sync::lock;

/// One feed of addresses.
pub(crate) enum Feed {
    ById(Receiver<ObjectId>),
    ByName(Receiver<String>),
}

/// A feed given in options, which are cloned: the first registration that
/// takes it owns it.
#[derive(Clone)]
pub(crate) struct FeedSlot(Arc<Mutex<Option<Feed>>>);

impl FeedSlot {
    pub(crate) fn new(feed: Feed) -> Self {
        FeedSlot(Arc::new(Mutex::new(Some(feed))))
    }

    pub(crate) fn take(&self) -> Option<Feed> {
        lock(&self.0).take()
    }
}

/// Receives addresses until the channel closes (after draining what was
/// sent) or the kind stops, requeueing each object of `kind` they name. An
/// address naming nothing of the kind is skipped.
pub(crate) async fn run(kind: Arc<Kind>, store: Store, mut feed: Feed) {
    loop {
        let id = tokio::select! {
            _ = kind.cancel.cancelled() => return,
            id = next(&kind, &store, &mut feed) => id,
        };
        match id {
            Some(Some(id)) => kind.queue.requeue(id, false),
            Some(None) => {}
            None => return,
        }
    }
}

/// The next address, resolved: `None` once the channel is closed and
/// drained, `Some(None)` for an address that names nothing of the kind.
async fn next(kind: &Kind, store: &Store, feed: &mut Feed) -> Option<Option<ObjectId>> {
    let resolved = match feed {
        Feed::ById(ids) => {
            let id = ids.recv().await?;
            store
                .read(|r| r.kind_and_deletion(id))
                .map(|found| found.filter(|(gk, _)| *gk == kind.group_kind).map(|_| id))
        }
        Feed::ByName(names) => {
            let name = names.recv().await?;
            store
                .read(|r| r.object_row_by_name(&kind.group_kind, &name))
                .map(|found| found.map(|o| o.meta.id))
        }
    };
    Some(resolved.unwrap_or_else(|error| {
        tracing::warn!(kind = %kind.group_kind, %error, "a trigger could not be resolved");
        None
    }))
}
