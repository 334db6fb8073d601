//! The clients a pass uses: the controller client bound to its object, and
//! kind clients for any kind. Both are traits, so the same `reconcile` runs
//! against the host inside a component and against [`crate::fake`] in tests.

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::types::{Condition, EventSpec, Labels, Object, ObjectId, ObjectRef, RawObject, Result};

/// Options applied when a create inserts the row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateOptions {
    /// An owner: deleting it cascades to the new object.
    pub owner: Option<ObjectId>,
    /// Finalizers (the kind must have a controller in the host).
    pub finalizers: Vec<String>,
    /// Labels for the object. On an object that exists, a create-or-update
    /// replaces its labels with these; `None` leaves them as they are.
    pub labels: Option<Labels>,
}

impl CreateOptions {
    /// Owned by `owner`.
    pub fn owner(owner: ObjectId) -> Self {
        CreateOptions {
            owner: Some(owner),
            ..CreateOptions::default()
        }
    }

    /// These options, with `labels` as the object's labels.
    pub fn labels<K: Into<String>, V: Into<String>>(
        mut self,
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let labels = labels.into_iter().map(|(k, v)| (k.into(), v.into()));
        self.labels = Some(labels.collect());
        self
    }
}

/// What a pass writes and reads about its object, untyped: the verbs of the
/// contract's controller client, one method each. [`Client`] derefs to it,
/// so `client.add_finalizer(..)` is this trait's; the typed client adds
/// only what carries a type (the status, other kinds' clients).
///
/// Every method returns what the host reports as [`crate::Error`].
pub trait ControllerClient {
    /// Records the status (JSON text); equal bytes write nothing.
    fn update_status_json(&self, status: String) -> Result<()>;
    /// Writes several conditions as one write.
    fn set_conditions(&self, conditions: Vec<Condition>) -> Result<()>;
    /// Removes the condition of `type_`, if there is one.
    fn delete_condition(&self, type_: &str) -> Result<()>;
    /// Records an observation in the object's timeline.
    fn add_event(&self, event: EventSpec) -> Result<()>;
    /// Adds `finalizer` to the object (see [`crate::finalizer`]);
    /// [`crate::Error::DeletionPending`] while the object is being deleted.
    fn add_finalizer(&self, finalizer: &str) -> Result<()>;
    /// Removes `finalizer`; clearing the last one lets a deleting object go.
    fn delete_finalizer(&self, finalizer: &str) -> Result<()>;
    /// Declares that this object depends on `target`: its changes wake this
    /// object. [`crate::Error::DependencyCycle`] when the edge would close a
    /// cycle.
    fn add_dependency(&self, target: ObjectId) -> Result<()>;
    /// Drops the dependency on `target`.
    fn delete_dependency(&self, target: ObjectId) -> Result<()>;
    /// Whether anything with a live claim (an owned child, a dependent)
    /// points at this object.
    fn has_incoming_edges(&self) -> Result<bool>;
    /// The owner, if any.
    fn owner(&self) -> Result<Option<ObjectRef>>;
    /// What this object depends on.
    fn dependencies(&self) -> Result<Vec<ObjectRef>>;
    /// What depends on this object.
    fn dependents(&self) -> Result<Vec<ObjectRef>>;
    /// What this object owns.
    fn owned(&self) -> Result<Vec<ObjectRef>>;
    /// Opens a transaction frame (see [`Client::within`]).
    fn begin(&self) -> Result<()>;
    /// Closes the innermost frame, keeping its writes.
    fn commit(&self) -> Result<()>;
    /// Closes the innermost frame, undoing its writes.
    fn rollback(&self) -> Result<()>;
    /// A client for (`group`, `kind`) whose calls join this pass's open
    /// transaction.
    fn kind_client(&self, group: &str, kind: &str) -> Box<dyn KindClient>;
}

/// What [`KindClient::put`] does when something already holds the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfHeld {
    /// Return it as it is: get-or-create.
    Keep,
    /// Replace its spec: create-or-update.
    Update,
}

/// The untyped client of one kind.
pub trait KindClient {
    /// Creates `name`.
    fn create(&self, name: &str, spec: String, options: CreateOptions) -> Result<RawObject>;
    /// Creates `name` if nothing holds it (`true`), or does what `if_held`
    /// says to what does (`false`).
    fn put(
        &self,
        name: &str,
        spec: String,
        options: CreateOptions,
        if_held: IfHeld,
    ) -> Result<(RawObject, bool)>;
    /// Reads by id.
    fn get(&self, id: ObjectId) -> Result<RawObject>;
    /// Reads by name.
    fn get_by_name(&self, name: &str) -> Result<RawObject>;
    /// Up to `limit` objects after `after`, by id, those whose labels
    /// match `selector` (kubectl's grammar) when one is given; the id to
    /// continue after. A selected page may be short, even empty, with an id
    /// to continue after: the host bounds what one call reads.
    fn list(
        &self,
        after: Option<ObjectId>,
        limit: u32,
        selector: Option<&str>,
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

/// The typed face of a pass's controller client: the status as `Status`,
/// typed clients for other kinds, transactions as a closure, and (through
/// `Deref`) every verb of [`ControllerClient`].
pub struct Client<'a, Status> {
    raw: &'a dyn ControllerClient,
    _status: PhantomData<fn(Status)>,
}

impl<'a, Status> std::ops::Deref for Client<'a, Status> {
    type Target = dyn ControllerClient + 'a;

    fn deref(&self) -> &Self::Target {
        self.raw
    }
}

impl<'a, Status: Serialize> Client<'a, Status> {
    /// Wraps an untyped client.
    pub fn new(raw: &'a dyn ControllerClient) -> Self {
        Client {
            raw,
            _status: PhantomData,
        }
    }

    /// The untyped client, for what the typed one does not cover.
    pub fn raw(&self) -> &'a dyn ControllerClient {
        self.raw
    }

    /// Records `status`; equal bytes write nothing.
    ///
    /// # Errors
    /// What the host reports.
    pub fn update_status(&self, status: &Status) -> Result<()> {
        let text = serde_json::to_string(status)?;
        self.raw.update_status_json(text)
    }

    /// Writes one condition.
    ///
    /// # Errors
    /// What the host reports.
    pub fn set_condition(&self, condition: Condition) -> Result<()> {
        self.raw.set_conditions(vec![condition])
    }

    /// A typed client for (`group`, `kind`) whose calls join this pass.
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

/// A typed client of one kind.
pub struct Kind<Spec, Status> {
    raw: Box<dyn KindClient>,
    _types: PhantomData<fn() -> (Spec, Status)>,
}

/// How many objects one page of [`Kind::list`] asks the host for.
const LIST_PAGE: u32 = 500;

impl<Spec: Serialize + DeserializeOwned, Status: DeserializeOwned> Kind<Spec, Status> {
    /// Wraps an untyped kind client.
    pub fn new(raw: Box<dyn KindClient>) -> Self {
        Kind {
            raw,
            _types: PhantomData,
        }
    }

    fn encode(spec: &Spec) -> Result<String> {
        Ok(serde_json::to_string(spec)?)
    }

    /// Creates `name`.
    ///
    /// # Errors
    /// [`crate::Error::NameTaken`] when something holds the name.
    pub fn create(
        &self,
        name: &str,
        spec: &Spec,
        options: CreateOptions,
    ) -> Result<Object<Spec, Status>> {
        Object::decode_owned(self.raw.create(name, Self::encode(spec)?, options)?)
    }

    /// What holds `name`, creating it if nothing does; `true` if created.
    ///
    /// # Errors
    /// What the host reports, or [`crate::Error::Decode`].
    pub fn get_or_create(
        &self,
        name: &str,
        spec: &Spec,
        options: CreateOptions,
    ) -> Result<(Object<Spec, Status>, bool)> {
        let spec = Self::encode(spec)?;
        let (raw, created) = self.raw.put(name, spec, options, IfHeld::Keep)?;
        Ok((Object::decode_owned(raw)?, created))
    }

    /// Makes `name` hold `spec`; `true` if created.
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
            .put(name, Self::encode(spec)?, options, IfHeld::Update)?;
        Ok((Object::decode_owned(raw)?, created))
    }

    /// Reads object `id`.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`], or [`crate::Error::Decode`].
    pub fn get(&self, id: ObjectId) -> Result<Object<Spec, Status>> {
        Object::decode_owned(self.raw.get(id)?)
    }

    /// Reads what holds `name`.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`], or [`crate::Error::Decode`].
    pub fn get_by_name(&self, name: &str) -> Result<Object<Spec, Status>> {
        Object::decode_owned(self.raw.get_by_name(name)?)
    }

    /// Every object of the kind, by id, read page by page.
    ///
    /// # Errors
    /// What the host reports, or [`crate::Error::Decode`] naming the first
    /// object that does not decode.
    pub fn list(&self) -> Result<Vec<Object<Spec, Status>>> {
        self.pages(None)
    }

    /// The objects of the kind whose labels match `selector`, in kubectl's
    /// grammar (`tier=web,env in (a,b),!legacy`), by id, read page by page.
    ///
    /// # Errors
    /// [`crate::Error::InvalidOption`] naming where a selector does not
    /// parse; otherwise as [`Kind::list`].
    pub fn list_selected(&self, selector: &str) -> Result<Vec<Object<Spec, Status>>> {
        self.pages(Some(selector))
    }

    fn pages(&self, selector: Option<&str>) -> Result<Vec<Object<Spec, Status>>> {
        let mut objects = Vec::new();
        let mut after = None;
        loop {
            let (page, next) = self.raw.list(after, LIST_PAGE, selector)?;
            for raw in page {
                objects.push(Object::decode_owned(raw)?);
            }
            match next {
                Some(id) => after = Some(id),
                None => return Ok(objects),
            }
        }
    }

    /// Replaces the spec of `id`.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`], or what the host reports.
    pub fn update(&self, id: ObjectId, spec: &Spec) -> Result<Object<Spec, Status>> {
        Object::decode_owned(self.raw.update(id, Self::encode(spec)?)?)
    }

    /// Requests deletion of `id`.
    ///
    /// # Errors
    /// What the host reports.
    pub fn delete(&self, id: ObjectId) -> Result<()> {
        self.raw.delete(id)
    }

    /// Requests deletion of whatever holds `name`; absent is fine.
    ///
    /// # Errors
    /// What the host reports.
    pub fn delete_by_name(&self, name: &str) -> Result<()> {
        self.raw.delete_by_name(name)
    }

    /// The objects of this kind that `owner` owns.
    ///
    /// # Errors
    /// What the host reports, or [`crate::Error::Decode`] naming a child that
    /// does not decode: a teardown must not skip what it cannot read (use
    /// [`Kind::raw`] to work with such children untyped).
    pub fn list_owned_objects(&self, owner: ObjectId) -> Result<Vec<Object<Spec, Status>>> {
        self.raw
            .list_owned_objects(owner)?
            .into_iter()
            .map(Object::decode_owned)
            .collect()
    }

    /// The untyped client.
    pub fn raw(&self) -> &dyn KindClient {
        self.raw.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeClient;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Spec {
        n: u32,
    }

    #[test]
    fn typed_kind_verbs_read_and_write_through_the_fake() {
        let fake = FakeClient::new();
        let client: Client<'_, ()> = Client::new(&fake);
        let kind: Kind<Spec, ()> = client.kind("t.dev", "Thing");
        let made = kind
            .create("a", &Spec { n: 1 }, CreateOptions::default())
            .unwrap();
        assert_eq!(kind.get(made.meta.id).unwrap().spec, Spec { n: 1 });
        let updated = kind.update(made.meta.id, &Spec { n: 2 }).unwrap();
        assert_eq!(updated.spec, Spec { n: 2 });
        for i in 0..3 {
            kind.create(&format!("b{i}"), &Spec { n: i }, CreateOptions::default())
                .unwrap();
        }
        assert_eq!(kind.list().unwrap().len(), 4);
        kind.delete(made.meta.id).unwrap();
        assert!(kind.get(made.meta.id).unwrap().meta.is_deleting());
        fake.collect_garbage();
        assert_eq!(kind.list().unwrap().len(), 3);
    }

    #[test]
    fn an_owned_child_that_does_not_decode_is_an_error_not_a_gap() {
        let fake = FakeClient::new();
        let client: Client<'_, ()> = Client::new(&fake);
        let raw = fake.kind_client("t.dev", "Thing");
        raw.create("good", r#"{"n":1}"#.into(), CreateOptions::owner(7))
            .unwrap();
        raw.create("bad", r#"{"n":"x"}"#.into(), CreateOptions::owner(7))
            .unwrap();
        let kind: Kind<Spec, ()> = client.kind("t.dev", "Thing");
        let error = kind.list_owned_objects(7).unwrap_err();
        assert!(
            matches!(&error, crate::Error::Decode(m) if m.contains("bad")),
            "{error}"
        );
        assert_eq!(kind.raw().list_owned_objects(7).unwrap().len(), 2);
    }

    #[test]
    fn errors_read_as_sentences() {
        assert_eq!(
            crate::Error::NotFound("Thing/a".into()).to_string(),
            "not found: Thing/a"
        );
        assert_eq!(
            crate::Error::ReconcileReturned.to_string(),
            "the pass has returned; its client cannot be used"
        );
    }
}
