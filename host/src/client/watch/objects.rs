//! Object watches: a kind, one object, or one owner's children.

use std::collections::HashSet;

use super::{ChangeType, Delivery, End, ObjectChange, PAGE, WatchOptions, WatchStream};
use crate::client::RawClient;
use crate::error::{Error, Result};
use crate::object::{GroupKind, Loads, ObjectId, RawObject};
use crate::store::{Reader, Store};

/// A kind's objects (or one owner's), then every change to them. It ends
/// with [`Error::WatchTooOld`] (watch again for a fresh snapshot) or
/// [`Error::Stopped`].
pub type ObjectListStream = WatchStream<Vec<RawObject>, ObjectChange>;

/// One object, or `None` while its id holds nothing of the kind, then every
/// change to it; it ends as [`ObjectListStream`] does.
pub type ObjectStream = WatchStream<Option<RawObject>, ObjectChange>;

impl RawClient {
    /// Every object of this kind, and every change to them from here on.
    /// The snapshot is read before this returns, so a write made after it is
    /// always on the stream. Needs a tokio runtime; needs no controller.
    ///
    /// # Errors
    /// A store error when the snapshot cannot be read.
    pub fn watch_list(&self, options: WatchOptions) -> Result<ObjectListStream> {
        self.start_watch(Scope::Kind, options)
    }

    /// Object `id` of this kind, and every change to it from here on. The id
    /// need not hold anything yet: its creation arrives as `Added`.
    ///
    /// # Errors
    /// As [`RawClient::watch_list`].
    pub fn watch(&self, id: ObjectId, options: WatchOptions) -> Result<ObjectStream> {
        let list = self.start_watch(Scope::Object(id), options)?;
        Ok(ObjectStream {
            snapshot: list.snapshot.into_iter().next(),
            resource_version: list.resource_version,
            feed: list.feed,
        })
    }

    /// [`RawClient::watch_list`] narrowed to the objects `owner` owns: a
    /// child created later arrives as `Added`, a child collected as
    /// `Deleted`.
    ///
    /// # Errors
    /// As [`RawClient::watch_list`].
    pub fn watch_owned_objects(
        &self,
        owner: ObjectId,
        options: WatchOptions,
    ) -> Result<ObjectListStream> {
        self.start_watch(Scope::OwnedBy(owner), options)
    }

    /// Reads the snapshot (or checks the resume position) and starts the tail.
    fn start_watch(&self, scope: Scope, options: WatchOptions) -> Result<ObjectListStream> {
        let (feed, delivery) = self.open_stream(options.floor_interval)?;
        let store = self.store().clone();
        let group_kind = self.group_kind().clone();
        let (objects, position) = match options.resume_from {
            Some(position) => {
                let head = store.read(|r| r.kind_head(&group_kind))?;
                if position > head {
                    // Nothing can be streamed truthfully.
                    return Err(Error::WatchTooNew {
                        kind: group_kind.to_string(),
                    });
                }
                (Vec::new(), position)
            }
            None => {
                let loads = options.loads;
                // One read transaction, so the snapshot is exactly as of `head`.
                let (objects, head) = store.read(|r| {
                    r.consistent(|r| {
                        let head = r.kind_head(&group_kind)?;
                        Ok((current(r, &group_kind, scope, loads)?, head))
                    })
                })?;
                (store.migrations().upgrade_all(objects), head)
            }
        };
        let selector = options.selector.unwrap_or_default();
        let mut objects = objects;
        objects.retain(|o| selector.matches(&o.meta.labels));
        let tail = Tail {
            selector,
            known: objects.iter().map(|o| o.meta.id).collect(),
            store,
            group_kind: group_kind.clone(),
            scope,
            loads: options.loads,
            cursor: position,
            delivery,
        };
        tail.store.clone().spawn(tail.run());
        Ok(ObjectListStream {
            snapshot: objects,
            resource_version: position,
            feed,
        })
    }
}

/// Which objects of the kind a stream follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Kind,
    Object(ObjectId),
    OwnedBy(ObjectId),
}

/// The objects in `scope` now, with conditions and `loads`.
fn current(
    r: &Reader<'_>,
    group_kind: &GroupKind,
    scope: Scope,
    loads: Loads,
) -> Result<Vec<RawObject>> {
    match scope {
        Scope::Object(id) => Ok(r.object(group_kind, id, loads)?.into_iter().collect()),
        Scope::Kind => r.objects(group_kind, loads),
        Scope::OwnedBy(owner) => r.owned_objects(group_kind, owner, loads),
    }
}

/// One object that moved in a page of the log.
struct Moved {
    id: ObjectId,
    /// Its last entry in the page: the change's resume position.
    position: i64,
    /// Its current state; `None` once its row is gone.
    current: Option<RawObject>,
    /// Its state when collected, if the row is gone and the log kept it.
    last_image: Option<RawObject>,
}

/// One step of a tail: the objects that moved and how far the log was read.
struct Page {
    /// In the order of their last entry in the page.
    moved: Vec<Moved>,
    last: i64,
    full: bool,
    horizon: i64,
}

fn read_page(
    r: &Reader<'_>,
    group_kind: &GroupKind,
    scope: Scope,
    cursor: i64,
    loads: Loads,
) -> Result<Page> {
    let only = match scope {
        Scope::Object(id) => Some(id),
        Scope::Kind | Scope::OwnedBy(_) => None,
    };
    let horizon = r.kind_horizon(group_kind)?;
    let entries = r.entries_above(group_kind, cursor, only, PAGE)?;
    let last = entries.last().map_or(cursor, |(rv, _)| *rv);
    let mut latest: Vec<(ObjectId, i64)> = Vec::new();
    for (rv, id) in entries.iter().rev() {
        if !latest.iter().any(|(seen, _)| seen == id) {
            latest.push((*id, *rv));
        }
    }
    latest.reverse();
    let mut moved = Vec::with_capacity(latest.len());
    for (id, position) in latest {
        let current = r.object(group_kind, id, loads)?;
        if let (Scope::OwnedBy(owner), Some(_)) = (scope, &current)
            && !r.is_owned_by(id, owner)?
        {
            continue;
        }
        let last_image = match current {
            Some(_) => None,
            None => r.collected_image(id)?,
        };
        moved.push(Moved {
            id,
            position,
            current,
            last_image,
        });
    }
    Ok(Page {
        moved,
        last,
        full: entries.len() == PAGE,
        horizon,
    })
}

/// The task behind one stream.
struct Tail {
    store: Store,
    group_kind: GroupKind,
    scope: Scope,
    loads: Loads,
    cursor: i64,
    /// The objects delivered as present (in the snapshot, or added since).
    known: HashSet<ObjectId>,
    /// Only objects whose labels match are followed (everything, by default).
    selector: crate::object::Selector,
    delivery: Delivery<ObjectChange>,
}

impl Tail {
    async fn run(mut self) {
        loop {
            match self.drain().await {
                Ok(true) => {}
                Ok(false) => return,
                Err(end) => {
                    self.delivery.end(end);
                    return;
                }
            }
            if !self.delivery.next_wake().await {
                return;
            }
        }
    }

    /// Delivers everything above the cursor. `Ok(false)` once the subscriber
    /// has gone.
    async fn drain(&mut self) -> std::result::Result<bool, End> {
        loop {
            let (group_kind, scope, cursor, loads) =
                (&self.group_kind, self.scope, self.cursor, self.loads);
            let page = match self
                .store
                .read(|r| r.consistent(|r| read_page(r, group_kind, scope, cursor, loads)))
            {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(kind = %self.group_kind, %error, "a watch could not read; retrying at the next wake");
                    return Ok(true);
                }
            };
            if page.horizon > self.cursor {
                return Err(End::TooOld);
            }
            for moved in page.moved {
                let Some(change) = self.change(moved) else {
                    continue;
                };
                if !self.delivery.send(change).await {
                    return Ok(false);
                }
            }
            self.cursor = page.last;
            if !page.full {
                return Ok(true);
            }
        }
    }

    fn change(&mut self, moved: Moved) -> Option<ObjectChange> {
        let Moved {
            id,
            position,
            current,
            last_image,
        } = moved;
        let Some(object) = current else {
            let known = self.known.remove(&id);
            if let Scope::OwnedBy(owner) = self.scope
                && !known
                && !was_owned_by(last_image.as_ref(), owner)
            {
                return None;
            }
            let matched = last_image
                .as_ref()
                .is_some_and(|o| self.selector.matches(&o.meta.labels));
            if !known && !matched {
                return None;
            }
            // A final state this build cannot read is left out; the deletion
            // itself is still news.
            let object = last_image.and_then(|o| self.store.migrations().upgrade(o).ok());
            return Some(ObjectChange {
                change: ChangeType::Deleted,
                id,
                object,
                resource_version: position,
            });
        };
        let object = match self.store.migrations().upgrade(object) {
            Ok(object) => object,
            Err(error) => {
                tracing::warn!(%error, "a watch skips an object it cannot read");
                return None;
            }
        };
        if !self.selector.matches(&object.meta.labels) {
            // Out of the selection: news only to a reader that had it.
            return self.known.remove(&id).then_some(ObjectChange {
                change: ChangeType::Deleted,
                id,
                object: Some(object),
                resource_version: position,
            });
        }
        let change = if self.known.insert(id) {
            ChangeType::Added
        } else {
            ChangeType::Modified
        };
        Some(ObjectChange {
            change,
            id,
            object: Some(object),
            resource_version: position,
        })
    }
}

/// Whether a collected object's logged image names `owner` as its owner.
/// Images logged before owners were kept name none: such a child is reported
/// only to a stream that saw it alive.
fn was_owned_by(image: Option<&RawObject>, owner: ObjectId) -> bool {
    image
        .and_then(|image| image.relations.owner().ok().flatten())
        .is_some_and(|owned_by| owned_by.id == owner)
}
