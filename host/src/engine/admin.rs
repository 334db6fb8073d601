//! Writes that only a pass can otherwise make, from outside one: fixtures
//! for tests, and maintenance on a stopped host.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;

use crate::engine::controller_client::{ControllerClient, STATUS_GRACE};
use crate::engine::status_grace::GraceWriter;
use crate::error::Result;
use crate::event::EventSpec;
use crate::json::Json;
use crate::object::{Condition, GroupKind, ObjectId, ObjectRef};
use crate::store::Store;

/// How long one admin write may hold the writer.
const HOLD_LIMIT: Duration = Duration::from_secs(5);

/// Writes status, conditions, finalizers, events and dependency edges of
/// one kind's objects from outside a pass. Each verb runs through a
/// [`ControllerClient`] for the object, inside a transaction of its own, so
/// it means exactly what it means during a pass and has landed when it
/// returns. Needs no registered controller and no running host.
///
/// Two uses: test fixtures, and maintenance — a backfill that must set
/// status, an object wedged by a finalizer nothing will clear, a stale
/// dependency edge whose source has no controller. Run it while no host
/// runs over the store: a write during a host's pass of the same object
/// races it, and the later write wins. Not for reconcile logic.
///
/// # Example
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> beehive::Result<()> {
/// use beehive::engine::AdminClient;
/// use beehive::{CreateOptions, GroupKind, Json, RawClient, Store};
///
/// let store = Store::temporary()?;
/// let kind = GroupKind::new("acme.com", "Cluster");
/// let prod = RawClient::new(&store, kind.clone())
///     .create("prod", Json::parse("{}")?, CreateOptions::new())
///     .await?;
/// AdminClient::new(&store, kind.clone())
///     .update_status(prod.meta.id, &serde_json::json!({"ready": 3}))
///     .await?;
/// let read = RawClient::new(&store, kind).get(prod.meta.id)?;
/// assert_eq!(read.status.unwrap().as_str(), r#"{"ready":3}"#);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct AdminClient {
    store: Store,
    group_kind: GroupKind,
}

impl AdminClient {
    /// An admin client for `group_kind`'s objects.
    pub fn new(store: &Store, group_kind: GroupKind) -> Self {
        AdminClient {
            store: store.clone(),
            group_kind,
        }
    }

    /// Runs `verb` on object `id` in a transaction of its own.
    async fn on<T, F, Fut>(&self, id: ObjectId, verb: F) -> Result<T>
    where
        F: FnOnce(ControllerClient) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        // No known status or edges: the first status write always writes,
        // and every edge is asked of the store.
        let client = ControllerClient::new(
            self.store.clone(),
            ObjectRef {
                id,
                group_kind: self.group_kind.clone(),
            },
            None,
            Vec::new(),
            HOLD_LIMIT,
            GraceWriter::new(STATUS_GRACE),
            None,
        );
        let outcome = client.within(verb).await;
        client.end();
        outcome
    }

    /// Sets object `id`'s status.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`] for a missing id; [`crate::Error::WrongKind`]
    /// for another kind's; [`crate::Error::InvalidDocument`] when `status`
    /// does not serialise to a JSON object.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn update_status<S: Serialize + ?Sized>(
        &self,
        id: ObjectId,
        status: &S,
    ) -> Result<()> {
        let status = Json::from_serialize(status)?;
        self.update_status_json(id, status).await
    }

    /// [`AdminClient::update_status`] for a status already in JSON.
    ///
    /// # Errors
    /// As [`AdminClient::update_status`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn update_status_json(&self, id: ObjectId, status: Json) -> Result<()> {
        self.on(id, |c| async move { c.update_status_json(status).await })
            .await
    }

    /// Writes one condition; see [`ControllerClient::set_condition`].
    ///
    /// # Errors
    /// As [`ControllerClient::set_condition`], plus the id's errors.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn set_condition(&self, id: ObjectId, condition: Condition) -> Result<()> {
        self.set_conditions(id, vec![condition]).await
    }

    /// Writes several conditions at once; see [`ControllerClient::set_conditions`].
    ///
    /// # Errors
    /// As [`ControllerClient::set_conditions`], plus the id's errors.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn set_conditions(&self, id: ObjectId, conditions: Vec<Condition>) -> Result<()> {
        self.on(id, |c| async move { c.set_conditions(conditions).await })
            .await
    }

    /// Removes a condition; see [`ControllerClient::delete_condition`].
    ///
    /// # Errors
    /// The id's errors.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete_condition(&self, id: ObjectId, type_: &str) -> Result<()> {
        self.on(id, |c| async move { c.delete_condition(type_).await })
            .await
    }

    /// Records an event on object `id`'s timeline; see [`ControllerClient::add_event`].
    ///
    /// # Errors
    /// The id's errors.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn add_event(&self, id: ObjectId, event: EventSpec) -> Result<()> {
        self.on(id, |c| async move { c.add_event(event).await })
            .await
    }

    /// Removes a finalizer, whichever controller owns it: the way out for
    /// an object wedged by a finalizer nothing will clear.
    ///
    /// # Errors
    /// The id's errors.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete_finalizer(&self, id: ObjectId, finalizer: &str) -> Result<()> {
        self.on(id, |c| async move { c.delete_finalizer(finalizer).await })
            .await
    }

    /// Records that `from` depends on `to`; see [`ControllerClient::add_dependency`].
    ///
    /// # Errors
    /// As [`ControllerClient::add_dependency`], plus `from`'s errors.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn add_dependency(&self, from: ObjectId, to: ObjectId) -> Result<()> {
        self.on(from, |c| async move { c.add_dependency(to).await })
            .await
    }

    /// Drops `from`'s dependency on `to`: for an edge whose source has no
    /// controller, the only way to drop it.
    ///
    /// # Errors
    /// `from`'s errors.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete_dependency(&self, from: ObjectId, to: ObjectId) -> Result<()> {
        self.on(from, |c| async move { c.delete_dependency(to).await })
            .await
    }
}
