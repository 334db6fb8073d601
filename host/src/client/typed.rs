//! The typed client: the untyped client's verbs over serde types.

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::options::CreateOptions;
use crate::client::raw::RawClient;
use crate::error::{Error, Result};
use crate::event::{Event, EventFilter};
use crate::json::Json;
use crate::object::{GroupKind, Loads, Object, ObjectId, ObjectRef, RawObject};
use crate::store::Store;

impl<Spec: DeserializeOwned, Status: DeserializeOwned> Object<Spec, Status> {
    /// Decodes an untyped object.
    ///
    /// # Errors
    /// [`Error::Decode`] when the spec or status does not fit the types.
    pub fn from_raw(raw: RawObject) -> Result<Self> {
        let label = raw.meta.label();
        let spec = raw.spec.decode().map_err(|source| Error::Decode {
            what: format!("spec of {label}"),
            source,
        })?;
        let status = decode_status(&raw)?;
        Ok(Object {
            meta: raw.meta,
            spec,
            status,
            relations: raw.relations,
            bookkeeping: raw.bookkeeping,
        })
    }
}

impl<Spec, Status: DeserializeOwned> Object<Spec, Status> {
    /// An untyped object whose spec is already decoded as `spec`.
    fn with_spec(raw: RawObject, spec: Spec) -> Result<Self> {
        let status = decode_status(&raw)?;
        Ok(Object {
            meta: raw.meta,
            spec,
            status,
            relations: raw.relations,
            bookkeeping: raw.bookkeeping,
        })
    }
}

fn decode_status<Status: DeserializeOwned>(raw: &RawObject) -> Result<Option<Status>> {
    match &raw.status {
        Some(status) => Ok(Some(status.decode().map_err(|source| Error::Decode {
            what: format!("status of {}", raw.meta.label()),
            source,
        })?)),
        None => Ok(None),
    }
}

/// The typed client for one kind: [`RawClient`]'s verbs with `Spec` and
/// `Status` as serde types.
///
/// Every write checks that the canonical bytes it is about to write decode
/// back into `Spec`; a spec that does not (a `Serialize` and `Deserialize`
/// that disagree) fails with [`Error::Decode`] and nothing is committed, so no
/// unreadable row is ever written and an updated object keeps its old spec.
/// The check runs before the write takes the store's writer, so it costs
/// other writers nothing.
///
/// # Example
/// ```no_run
/// # async fn demo() -> beehive::Result<()> {
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct ClusterSpec { replicas: u32 }
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct ClusterStatus { ready: u32 }
///
/// let store = beehive::Store::temporary()?;
/// let clusters = beehive::Client::<ClusterSpec, ClusterStatus>::new(
///     &store,
///     beehive::GroupKind::new("acme.com", "Cluster"),
/// );
/// let created = clusters.create("prod", &ClusterSpec { replicas: 3 }, Default::default()).await?;
/// clusters.update(created.id(), &ClusterSpec { replicas: 5 }).await?;
/// # Ok(()) }
/// ```
pub struct Client<Spec, Status> {
    raw: RawClient,
    _types: PhantomData<fn() -> (Spec, Status)>,
}

impl<Spec, Status> Clone for Client<Spec, Status> {
    fn clone(&self) -> Self {
        Client {
            raw: self.raw.clone(),
            _types: PhantomData,
        }
    }
}

impl<Spec, Status> std::fmt::Debug for Client<Spec, Status> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("group_kind", self.raw.group_kind())
            .finish()
    }
}

impl<Spec, Status> Client<Spec, Status>
where
    Spec: Serialize + DeserializeOwned + 'static,
    Status: Serialize + DeserializeOwned + 'static,
{
    /// A client for `group_kind` over `store`.
    pub fn new(store: &Store, group_kind: GroupKind) -> Self {
        Self::from_raw(RawClient::new(store, group_kind))
    }

    /// Wraps an untyped client.
    pub fn from_raw(raw: RawClient) -> Self {
        Client {
            raw,
            _types: PhantomData,
        }
    }

    /// The canonical form of `spec`, provided it decodes back into `Spec`,
    /// and that decoded value: what the stored row will read back as.
    fn encode(&self, spec: &Spec) -> Result<(Json, Spec)> {
        let json = Json::from_serialize(spec)?;
        let decoded = json.decode::<Spec>().map_err(|source| Error::Decode {
            what: format!("the spec written to {}", self.raw.group_kind()),
            source,
        })?;
        Ok((json, decoded))
    }

    /// The untyped client underneath.
    pub fn raw(&self) -> &RawClient {
        &self.raw
    }

    /// See [`RawClient::create`].
    ///
    /// # Errors
    /// As [`RawClient::create`], plus [`Error::Decode`] for a spec that does
    /// not round-trip.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn create(
        &self,
        name: &str,
        spec: &Spec,
        options: CreateOptions,
    ) -> Result<Object<Spec, Status>> {
        let (json, decoded) = self.encode(spec)?;
        let raw = self.raw.create(name, json, options).await?;
        Object::with_spec(raw, decoded)
    }

    /// See [`RawClient::get_or_create`].
    ///
    /// # Errors
    /// As [`RawClient::get_or_create`], plus [`Error::Decode`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn get_or_create(
        &self,
        name: &str,
        spec: &Spec,
        options: CreateOptions,
    ) -> Result<(Object<Spec, Status>, bool)> {
        let (json, decoded) = self.encode(spec)?;
        let (raw, created) = self.raw.get_or_create(name, json, options).await?;
        // A found row keeps its own spec; only a created one holds ours.
        let object = if created {
            Object::with_spec(raw, decoded)?
        } else {
            Object::from_raw(raw)?
        };
        Ok((object, created))
    }

    /// See [`RawClient::create_or_update`].
    ///
    /// # Errors
    /// As [`RawClient::create_or_update`], plus [`Error::Decode`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn create_or_update(
        &self,
        name: &str,
        spec: &Spec,
        options: CreateOptions,
    ) -> Result<(Object<Spec, Status>, bool)> {
        let (json, decoded) = self.encode(spec)?;
        let (raw, created) = self.raw.create_or_update(name, json, options).await?;
        Ok((Object::with_spec(raw, decoded)?, created))
    }

    /// See [`RawClient::update`].
    ///
    /// # Errors
    /// As [`RawClient::update`], plus [`Error::Decode`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn update(&self, id: ObjectId, spec: &Spec) -> Result<Object<Spec, Status>> {
        let (json, decoded) = self.encode(spec)?;
        let raw = self.raw.update(id, json).await?;
        Object::with_spec(raw, decoded)
    }

    /// See [`RawClient::update_by_name`].
    ///
    /// # Errors
    /// As [`RawClient::update_by_name`], plus [`Error::Decode`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn update_by_name(&self, name: &str, spec: &Spec) -> Result<Object<Spec, Status>> {
        let (json, decoded) = self.encode(spec)?;
        let raw = self.raw.update_by_name(name, json).await?;
        Object::with_spec(raw, decoded)
    }

    /// See [`RawClient::delete`].
    ///
    /// # Errors
    /// As [`RawClient::delete`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete(&self, id: ObjectId) -> Result<()> {
        self.raw.delete(id).await
    }

    /// See [`RawClient::delete_by_name`].
    ///
    /// # Errors
    /// As [`RawClient::delete_by_name`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete_by_name(&self, name: &str) -> Result<()> {
        self.raw.delete_by_name(name).await
    }

    /// See [`RawClient::get`].
    ///
    /// # Errors
    /// As [`RawClient::get`], plus [`Error::Decode`] for a stored row that
    /// does not fit the types.
    pub fn get(&self, id: ObjectId) -> Result<Object<Spec, Status>> {
        self.get_with(id, Loads::none())
    }

    /// See [`RawClient::get_with`].
    ///
    /// # Errors
    /// As [`Client::get`].
    pub fn get_with(&self, id: ObjectId, loads: Loads) -> Result<Object<Spec, Status>> {
        Object::from_raw(self.raw.get_with(id, loads)?)
    }

    /// See [`RawClient::get_by_name`].
    ///
    /// # Errors
    /// As [`RawClient::get_by_name`], plus [`Error::Decode`].
    pub fn get_by_name(&self, name: &str) -> Result<Object<Spec, Status>> {
        self.get_by_name_with(name, Loads::none())
    }

    /// See [`RawClient::get_by_name_with`].
    ///
    /// # Errors
    /// As [`Client::get_by_name`].
    pub fn get_by_name_with(&self, name: &str, loads: Loads) -> Result<Object<Spec, Status>> {
        Object::from_raw(self.raw.get_by_name_with(name, loads)?)
    }

    /// See [`RawClient::list`]. A row that does not decode is skipped and
    /// logged, so one bad row cannot hide the rest of the kind.
    pub fn list(&self) -> Result<Vec<Object<Spec, Status>>> {
        self.list_with(Loads::none())
    }

    /// See [`RawClient::list_with`]; undecodable rows are skipped and logged,
    /// as in [`Client::list`].
    pub fn list_with(&self, loads: Loads) -> Result<Vec<Object<Spec, Status>>> {
        Ok(decode_all(self.raw.list_with(loads)?))
    }

    /// See [`RawClient::list_selected`]; undecodable rows are skipped and
    /// logged, as in [`Client::list`].
    ///
    /// # Errors
    /// A store error when the read fails.
    pub fn list_selected(
        &self,
        selector: &crate::object::Selector,
    ) -> Result<Vec<Object<Spec, Status>>> {
        Ok(decode_all(self.raw.list_selected(selector)?))
    }

    /// See [`RawClient::relabel`].
    ///
    /// # Errors
    /// As [`RawClient::relabel`], and [`Error::Decode`] when the stored
    /// documents do not decode into this client's types.
    pub async fn relabel(
        &self,
        id: ObjectId,
        change: impl FnOnce(&crate::object::Labels) -> Result<crate::object::Labels> + Send + 'static,
    ) -> Result<Object<Spec, Status>> {
        Object::from_raw(self.raw.relabel(id, change).await?)
    }

    /// See [`RawClient::list_owned_objects`]; undecodable rows are skipped
    /// and logged, as in [`Client::list`].
    pub fn list_owned_objects(&self, owner: ObjectId) -> Result<Vec<Object<Spec, Status>>> {
        self.list_owned_objects_with(owner, Loads::none())
    }

    /// See [`RawClient::list_owned_objects_with`]; undecodable rows are
    /// skipped and logged, as in [`Client::list`].
    pub fn list_owned_objects_with(
        &self,
        owner: ObjectId,
        loads: Loads,
    ) -> Result<Vec<Object<Spec, Status>>> {
        Ok(decode_all(self.raw.list_owned_objects_with(owner, loads)?))
    }

    /// See [`RawClient::list_events`].
    pub fn list_events(&self, id: ObjectId, filter: &EventFilter) -> Result<Vec<Event>> {
        self.raw.list_events(id, filter)
    }

    /// See [`RawClient::get_latest_event`].
    pub fn get_latest_event(&self, id: ObjectId, category: &str) -> Result<Option<Event>> {
        self.raw.get_latest_event(id, category)
    }

    /// See [`RawClient::get_owner`].
    pub fn get_owner(&self, id: ObjectId) -> Result<Option<ObjectRef>> {
        self.raw.get_owner(id)
    }

    /// See [`RawClient::list_dependencies`].
    pub fn list_dependencies(&self, id: ObjectId) -> Result<Vec<ObjectRef>> {
        self.raw.list_dependencies(id)
    }

    /// See [`RawClient::list_dependents`].
    pub fn list_dependents(&self, id: ObjectId) -> Result<Vec<ObjectRef>> {
        self.raw.list_dependents(id)
    }

    /// See [`RawClient::list_owned`].
    pub fn list_owned(&self, id: ObjectId) -> Result<Vec<ObjectRef>> {
        self.raw.list_owned(id)
    }
}

pub(crate) fn decode_all<Spec: DeserializeOwned, Status: DeserializeOwned>(
    raws: Vec<RawObject>,
) -> Vec<Object<Spec, Status>> {
    raws.into_iter()
        .filter_map(|raw| match Object::from_raw(raw) {
            Ok(object) => Some(object),
            Err(error) => {
                tracing::warn!(%error, "skipping an object that does not decode");
                None
            }
        })
        .collect()
}
