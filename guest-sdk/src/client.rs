//! The clients a pass uses: the controller client bound to its object, and
//! kind clients for any kind. Both are traits, so the same `reconcile` runs
//! against the host inside a component and against [`crate::fake`] in tests.

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::types::{Condition, EventSpec, Object, ObjectId, ObjectRef, RawObject, Result};

/// Options applied when a create inserts the row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateOptions {
    /// An owner: deleting it cascades to the new object.
    pub owner: Option<ObjectId>,
    /// Finalizers (the kind must have a controller in the host).
    pub finalizers: Vec<String>,
}

impl CreateOptions {
    /// Owned by `owner`.
    pub fn owner(owner: ObjectId) -> Self {
        CreateOptions {
            owner: Some(owner),
            finalizers: Vec::new(),
        }
    }
}

/// The untyped write surface of one pass.
pub trait ControllerClient {
    /// Records the status (JSON text); equal bytes write nothing.
    fn update_status_json(&self, status: String) -> Result<()>;
    /// Writes several conditions as one write.
    fn set_conditions(&self, conditions: Vec<Condition>) -> Result<()>;
    /// Removes a condition.
    fn delete_condition(&self, type_: &str) -> Result<()>;
    /// Records an observation.
    fn add_event(&self, event: EventSpec) -> Result<()>;
    /// Removes a finalizer of this object.
    fn delete_finalizer(&self, finalizer: &str) -> Result<()>;
    /// Declares a dependency on `target`.
    fn add_dependency(&self, target: ObjectId) -> Result<()>;
    /// Drops a dependency.
    fn delete_dependency(&self, target: ObjectId) -> Result<()>;
    /// Whether anything with a live claim points at this object.
    fn has_incoming_edges(&self) -> Result<bool>;
    /// The owner, if any.
    fn get_owner(&self) -> Result<Option<ObjectRef>>;
    /// What this object depends on.
    fn list_dependencies(&self) -> Result<Vec<ObjectRef>>;
    /// What depends on this object.
    fn list_dependents(&self) -> Result<Vec<ObjectRef>>;
    /// What this object owns.
    fn list_owned(&self) -> Result<Vec<ObjectRef>>;
    /// Opens a transaction frame.
    fn begin(&self) -> Result<()>;
    /// Closes the innermost frame, keeping its writes.
    fn commit(&self) -> Result<()>;
    /// Closes the innermost frame, undoing its writes.
    fn rollback(&self) -> Result<()>;
    /// A client for (`group`, `kind`) whose calls join this pass's open
    /// transaction.
    fn kind_client(&self, group: &str, kind: &str) -> Box<dyn KindClient>;
}

/// The untyped client of one kind.
pub trait KindClient {
    /// Creates `name`.
    fn create(&self, name: &str, spec: String, options: CreateOptions) -> Result<RawObject>;
    /// Returns what holds `name`, creating it if nothing does; `true` if created.
    fn get_or_create(
        &self,
        name: &str,
        spec: String,
        options: CreateOptions,
    ) -> Result<(RawObject, bool)>;
    /// Makes `name` hold `spec`; `true` if created.
    fn create_or_update(
        &self,
        name: &str,
        spec: String,
        options: CreateOptions,
    ) -> Result<(RawObject, bool)>;
    /// Reads by id.
    fn get(&self, id: ObjectId) -> Result<RawObject>;
    /// Reads by name.
    fn get_by_name(&self, name: &str) -> Result<RawObject>;
    /// Up to `limit` objects after `after`, by id; the id to continue after.
    fn list(
        &self,
        after: Option<ObjectId>,
        limit: u32,
    ) -> Result<(Vec<RawObject>, Option<ObjectId>)>;
    /// Replaces the spec of `id`.
    fn update(&self, id: ObjectId, spec: String) -> Result<RawObject>;
    /// Requests deletion of `id`.
    fn delete(&self, id: ObjectId) -> Result<()>;
    /// Requests deletion of whatever holds `name`; absent is fine.
    fn delete_by_name(&self, name: &str) -> Result<()>;
    /// The objects of this kind that `owner` owns.
    fn list_owned_objects(&self, owner: ObjectId) -> Result<Vec<RawObject>>;
}

/// The typed face of a pass's controller client.
pub struct Client<'a, Status> {
    raw: &'a dyn ControllerClient,
    _status: PhantomData<fn(Status)>,
}

impl<'a, Status: Serialize> Client<'a, Status> {
    /// Wraps an untyped client.
    pub fn new(raw: &'a dyn ControllerClient) -> Self {
        Client {
            raw,
            _status: PhantomData,
        }
    }

    /// The untyped client.
    pub fn raw(&self) -> &'a dyn ControllerClient {
        self.raw
    }

    /// Records `status`; equal bytes write nothing.
    ///
    /// # Errors
    /// What the host reports.
    pub fn update_status(&self, status: &Status) -> Result<()> {
        let text = serde_json::to_string(status)
            .map_err(|e| crate::Error::InvalidDocument(e.to_string()))?;
        self.raw.update_status_json(text)
    }

    /// Writes one condition.
    ///
    /// # Errors
    /// What the host reports.
    pub fn set_condition(&self, condition: Condition) -> Result<()> {
        self.raw.set_conditions(vec![condition])
    }

    /// A typed client for (`group`, `kind`).
    pub fn kind<Spec, KindStatus>(&self, group: &str, kind: &str) -> Kind<Spec, KindStatus>
    where
        Spec: Serialize + DeserializeOwned,
        KindStatus: DeserializeOwned,
    {
        Kind::new(self.raw.kind_client(group, kind))
    }

    /// Runs `work` in a transaction frame: committed on `Ok`, rolled back on
    /// `Err`.
    ///
    /// # Errors
    /// What `work` returns, or what opening or committing the frame returns.
    pub fn within<T>(&self, work: impl FnOnce(&Self) -> Result<T>) -> Result<T> {
        self.raw.begin()?;
        match work(self) {
            Ok(value) => {
                self.raw.commit()?;
                Ok(value)
            }
            Err(error) => {
                let _ = self.raw.rollback();
                Err(error)
            }
        }
    }
}

impl<'a, Status> std::ops::Deref for Client<'a, Status> {
    type Target = dyn ControllerClient + 'a;

    fn deref(&self) -> &Self::Target {
        self.raw
    }
}

/// A typed client of one kind.
pub struct Kind<Spec, Status> {
    raw: Box<dyn KindClient>,
    _types: PhantomData<fn() -> (Spec, Status)>,
}

impl<Spec: Serialize + DeserializeOwned, Status: DeserializeOwned> Kind<Spec, Status> {
    /// Wraps an untyped kind client.
    pub fn new(raw: Box<dyn KindClient>) -> Self {
        Kind {
            raw,
            _types: PhantomData,
        }
    }

    fn encode(spec: &Spec) -> Result<String> {
        serde_json::to_string(spec).map_err(|e| crate::Error::InvalidDocument(e.to_string()))
    }

    /// See [`KindClient::get_or_create`].
    ///
    /// # Errors
    /// What the host reports, or [`crate::Error::Decode`].
    pub fn get_or_create(
        &self,
        name: &str,
        spec: &Spec,
        options: CreateOptions,
    ) -> Result<(Object<Spec, Status>, bool)> {
        let (raw, created) = self.raw.get_or_create(name, Self::encode(spec)?, options)?;
        Ok((Object::decode(&raw)?, created))
    }

    /// See [`KindClient::create_or_update`].
    ///
    /// # Errors
    /// What the host reports, or [`crate::Error::Decode`].
    pub fn create_or_update(
        &self,
        name: &str,
        spec: &Spec,
        options: CreateOptions,
    ) -> Result<(Object<Spec, Status>, bool)> {
        let (raw, created) = self
            .raw
            .create_or_update(name, Self::encode(spec)?, options)?;
        Ok((Object::decode(&raw)?, created))
    }

    /// See [`KindClient::get_by_name`].
    ///
    /// # Errors
    /// What the host reports, or [`crate::Error::Decode`].
    pub fn get_by_name(&self, name: &str) -> Result<Object<Spec, Status>> {
        Object::decode(&self.raw.get_by_name(name)?)
    }

    /// See [`KindClient::delete_by_name`].
    ///
    /// # Errors
    /// What the host reports.
    pub fn delete_by_name(&self, name: &str) -> Result<()> {
        self.raw.delete_by_name(name)
    }

    /// See [`KindClient::list_owned_objects`]; objects that do not decode are skipped.
    ///
    /// # Errors
    /// What the host reports.
    pub fn list_owned_objects(&self, owner: ObjectId) -> Result<Vec<Object<Spec, Status>>> {
        Ok(self
            .raw
            .list_owned_objects(owner)?
            .iter()
            .filter_map(|raw| Object::decode(raw).ok())
            .collect())
    }

    /// The untyped client.
    pub fn raw(&self) -> &dyn KindClient {
        self.raw.as_ref()
    }
}
