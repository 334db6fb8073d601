//! Watches through the typed client: the raw streams, decoded.

use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::typed::Client;
use crate::client::watch::{ChangeType, ObjectListStream, WatchOptions};
use crate::error::Result;
use crate::object::Object;
use crate::object::ObjectId;

/// One change on a typed stream.
#[derive(Clone, Debug)]
pub struct TypedChange<Spec, Status> {
    /// What happened.
    pub change: ChangeType,
    /// The object's id.
    pub id: ObjectId,
    /// Its current state; on `Deleted`, its state when collected, if kept
    /// and it decodes.
    pub object: Option<Object<Spec, Status>>,
    /// Where to resume after handling this change; see
    /// [`crate::client::ObjectChange::resource_version`].
    pub resource_version: i64,
}

/// [`ObjectListStream`] with decoded objects, a [`Stream`] of changes
/// ending as it does. A change whose object does not decode into the types
/// is logged and skipped (a deletion is still delivered, without it).
pub struct TypedListStream<Spec, Status> {
    /// The objects the watch read first (empty when resuming).
    pub snapshot: Vec<Object<Spec, Status>>,
    /// The log position the snapshot is complete as of.
    pub resource_version: i64,
    raw: ObjectListStream,
    _types: PhantomData<fn() -> (Spec, Status)>,
}

// Nothing in it is pinned structurally: the raw stream is polled through a
// fresh `Pin::new`, and the snapshot is plain data.
impl<Spec, Status> Unpin for TypedListStream<Spec, Status> {}

impl<Spec: DeserializeOwned, Status: DeserializeOwned> Stream for TypedListStream<Spec, Status> {
    type Item = Result<TypedChange<Spec, Status>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let change = match Pin::new(&mut this.raw).poll_next(cx) {
                Poll::Ready(Some(Ok(change))) => change,
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            };
            let object = match change.object.map(Object::from_raw).transpose() {
                Ok(object) => object,
                // A deletion is news even when the final state does not fit.
                Err(_) if change.change == ChangeType::Deleted => None,
                Err(error) => {
                    tracing::warn!(%error, "a watch skips an object that does not decode");
                    continue;
                }
            };
            return Poll::Ready(Some(Ok(TypedChange {
                change: change.change,
                id: change.id,
                object,
                resource_version: change.resource_version,
            })));
        }
    }
}

impl<Spec, Status> std::fmt::Debug for TypedListStream<Spec, Status> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedListStream")
            .field("snapshot", &self.snapshot.len())
            .field("resource_version", &self.resource_version)
            .finish_non_exhaustive()
    }
}

impl<Spec, Status> Client<Spec, Status>
where
    Spec: Serialize + DeserializeOwned + 'static,
    Status: Serialize + DeserializeOwned + 'static,
{
    /// See [`crate::RawClient::watch_list`]; objects that do not decode are
    /// skipped.
    ///
    /// # Errors
    /// As [`crate::RawClient::watch_list`].
    pub fn watch_list(&self, options: WatchOptions) -> Result<TypedListStream<Spec, Status>> {
        self.raw().watch_list(options).map(typed)
    }

    /// See [`crate::RawClient::watch_owned_objects`].
    ///
    /// # Errors
    /// As [`crate::RawClient::watch_list`].
    pub fn watch_owned_objects(
        &self,
        owner: ObjectId,
        options: WatchOptions,
    ) -> Result<TypedListStream<Spec, Status>> {
        self.raw().watch_owned_objects(owner, options).map(typed)
    }
}

fn typed<Spec: DeserializeOwned, Status: DeserializeOwned>(
    mut raw: ObjectListStream,
) -> TypedListStream<Spec, Status> {
    let snapshot = std::mem::take(&mut raw.snapshot);
    TypedListStream {
        snapshot: crate::client::typed::decode_all(snapshot),
        resource_version: raw.resource_version,
        raw,
        _types: PhantomData,
    }
}
