//! A fake controller client for unit tests on the host target: it keeps what
//! a pass wrote in memory, and fake kind clients keep objects in memory.
//!
//! ```
//! use beehive_guest::fake::FakeClient;
//! use beehive_guest::{Client, ControllerClient};
//!
//! let fake = FakeClient::new();
//! let client: Client<'_, serde_json::Value> = Client::new(&fake);
//! client.update_status(&serde_json::json!({"ok": true})).unwrap();
//! assert_eq!(fake.status().unwrap(), serde_json::json!({"ok": true}));
//! ```

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::client::{Client, ControllerClient, CreateOptions, IfHeld, KindClient};
use crate::http::{HttpError, Request, Response};
use crate::types::{
    Action, Condition, Error, EventSpec, GroupKind, Labels, Meta, ObjectId, ObjectRef, RawObject,
    Result, Selector, StoreGrants, StoreVerb, Timestamp,
};
use crate::{Controller, ObjectOf};

/// Records what a pass did.
#[derive(Default)]
pub struct FakeClient {
    state: RefCell<PassRecord>,
    objects: Rc<RefCell<Objects>>,
}

/// Everything a pass wrote through its controller client.
#[derive(Clone, Debug, Default)]
pub struct PassRecord {
    /// The last status written, as JSON text.
    pub status: Option<String>,
    /// Conditions by type.
    pub conditions: BTreeMap<String, Condition>,
    /// Events, in order.
    pub events: Vec<EventSpec>,
    /// Finalizers added.
    pub added_finalizers: Vec<String>,
    /// Finalizers removed.
    pub deleted_finalizers: Vec<String>,
    /// Declared dependencies.
    pub dependencies: BTreeSet<ObjectId>,
    /// Open transaction frames.
    pub open_frames: usize,
    /// Frames committed and rolled back.
    pub commits: usize,
    /// Frames rolled back.
    pub rollbacks: usize,
}

#[derive(Default)]
struct Objects {
    next_id: ObjectId,
    by_id: BTreeMap<ObjectId, (RawObject, Option<ObjectId>)>,
    /// What the plugin may touch besides its own kind; `None` allows all.
    grants: Option<StoreGrants>,
    /// The kind of the object last reconciled: always read-write.
    own: Option<GroupKind>,
    /// The object last reconciled, when its deletion was requested: the
    /// host refuses a finalizer added to it.
    deleting: Option<String>,
    /// Denials so far, each once.
    denied: Vec<(GroupKind, StoreVerb)>,
}

impl Objects {
    /// Allows `verb` on `kind`, as the host's policy check would.
    fn check(&mut self, kind: &GroupKind, verb: StoreVerb) -> Result<()> {
        let Some(grants) = &self.grants else {
            return Ok(());
        };
        let own = self.own.clone().unwrap_or_default();
        if grants.allows(&own, kind, verb) {
            return Ok(());
        }
        if !self.denied.iter().any(|(k, v)| k == kind && *v == verb) {
            self.denied.push((kind.clone(), verb));
        }
        Err(Error::NotGranted {
            kind: kind.clone(),
            verb,
        })
    }

    /// Allows `verb` on object `id`'s kind; an unknown id passes.
    fn check_object(&mut self, id: ObjectId, verb: StoreVerb) -> Result<()> {
        match self.by_id.get(&id).map(|(o, _)| o.meta.group_kind.clone()) {
            Some(kind) => self.check(&kind, verb),
            None => Ok(()),
        }
    }
}

impl FakeClient {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    /// This fake, checking store calls as a host with `grants` in the
    /// plugin's policy (`[store]`) would: the kind of the object a
    /// [`FakeClient::reconcile`] is handed is always read-write, anything
    /// else only as granted, and a denied call fails with
    /// [`Error::NotGranted`]. A fake made without it allows every call.
    pub fn with_store_grants(self, grants: StoreGrants) -> Self {
        self.objects.borrow_mut().grants = Some(grants);
        self
    }

    /// The kinds and verbs denied so far, each once, as the host leaves a
    /// `StoreAccessDenied` event for each.
    pub fn denials(&self) -> Vec<(GroupKind, StoreVerb)> {
        self.objects.borrow().denied.clone()
    }

    /// What the pass wrote.
    pub fn record(&self) -> PassRecord {
        self.state.borrow().clone()
    }

    /// Every object the fake kind clients hold, by id.
    pub fn objects(&self) -> Vec<RawObject> {
        let objects = self.objects.borrow();
        objects.by_id.values().map(|(o, _)| o.clone()).collect()
    }

    /// Changes an object the fake kind clients hold, as another controller
    /// or a user would between passes (a child's status, say).
    ///
    /// # Panics
    /// When there is no object `id`: a test's mistake.
    pub fn edit_object(&self, id: ObjectId, edit: impl FnOnce(&mut RawObject)) {
        let mut objects = self.objects.borrow_mut();
        let (object, _) = objects.by_id.get_mut(&id).expect("no such object");
        edit(object);
    }

    /// Removes the objects whose deletion was requested and that hold no
    /// finalizers, as the host's collector would.
    pub fn collect_garbage(&self) {
        self.objects
            .borrow_mut()
            .by_id
            .retain(|_, (o, _)| !(o.meta.is_deleting() && o.meta.finalizers.is_empty()));
    }

    /// Closes the innermost open frame, or says there is none.
    fn close_frame(&self) -> Result<std::cell::RefMut<'_, PassRecord>> {
        let mut state = self.state.borrow_mut();
        state.open_frames = state
            .open_frames
            .checked_sub(1)
            .ok_or(Error::NoTransaction)?;
        Ok(state)
    }

    /// Runs one pass of `controller` over `object` against this fake, as the
    /// host runs it against the store.
    ///
    /// # Errors
    /// Whatever the pass returned.
    pub fn reconcile<C: Controller>(&self, controller: &C, object: &ObjectOf<C>) -> Result<Action> {
        {
            let mut objects = self.objects.borrow_mut();
            objects.own = Some(object.meta.group_kind.clone());
            objects.deleting = object.meta.is_deleting().then(|| object.meta.label());
        }
        controller.reconcile(&Client::new(self), object)
    }

    /// The last status written, decoded.
    pub fn status(&self) -> Option<serde_json::Value> {
        let text = self.state.borrow().status.clone()?;
        serde_json::from_str(&text).ok()
    }
}

impl ControllerClient for FakeClient {
    fn update_status_json(&self, status: String) -> Result<()> {
        self.state.borrow_mut().status = Some(status);
        Ok(())
    }

    fn set_conditions(&self, conditions: Vec<Condition>) -> Result<()> {
        let mut seen = BTreeSet::new();
        for condition in &conditions {
            if !seen.insert(condition.type_.clone()) {
                return Err(Error::DuplicateConditionType(condition.type_.clone()));
            }
        }
        let mut state = self.state.borrow_mut();
        for condition in conditions {
            state.conditions.insert(condition.type_.clone(), condition);
        }
        Ok(())
    }

    fn delete_condition(&self, type_: &str) -> Result<()> {
        self.state.borrow_mut().conditions.remove(type_);
        Ok(())
    }

    fn add_event(&self, event: EventSpec) -> Result<()> {
        self.state.borrow_mut().events.push(event);
        Ok(())
    }

    fn add_finalizer(&self, finalizer: &str) -> Result<()> {
        if let Some(object) = &self.objects.borrow().deleting {
            return Err(Error::DeletionPending(object.clone()));
        }
        let mut state = self.state.borrow_mut();
        state.added_finalizers.push(finalizer.to_string());
        Ok(())
    }

    fn delete_finalizer(&self, finalizer: &str) -> Result<()> {
        let mut state = self.state.borrow_mut();
        state.deleted_finalizers.push(finalizer.to_string());
        Ok(())
    }

    fn add_dependency(&self, target: ObjectId) -> Result<()> {
        self.objects
            .borrow_mut()
            .check_object(target, StoreVerb::Read)?;
        self.state.borrow_mut().dependencies.insert(target);
        Ok(())
    }

    fn delete_dependency(&self, target: ObjectId) -> Result<()> {
        self.state.borrow_mut().dependencies.remove(&target);
        Ok(())
    }

    fn has_incoming_edges(&self) -> Result<bool> {
        Ok(false)
    }

    fn owner(&self) -> Result<Option<ObjectRef>> {
        Ok(None)
    }

    fn dependencies(&self) -> Result<Vec<ObjectRef>> {
        Ok(self
            .state
            .borrow()
            .dependencies
            .iter()
            .map(|id| ObjectRef {
                id: *id,
                group_kind: GroupKind::default(),
            })
            .collect())
    }

    fn dependents(&self) -> Result<Vec<ObjectRef>> {
        Ok(Vec::new())
    }

    fn owned(&self) -> Result<Vec<ObjectRef>> {
        Ok(Vec::new())
    }

    fn begin(&self) -> Result<()> {
        self.state.borrow_mut().open_frames += 1;
        Ok(())
    }

    fn commit(&self) -> Result<()> {
        self.close_frame()?.commits += 1;
        Ok(())
    }

    fn rollback(&self) -> Result<()> {
        self.close_frame()?.rollbacks += 1;
        Ok(())
    }

    fn kind_client(&self, group: &str, kind: &str) -> Box<dyn KindClient> {
        Box::new(FakeKindClient {
            group_kind: GroupKind::new(group, kind),
            objects: self.objects.clone(),
        })
    }
}

/// An in-memory kind client sharing its objects with the fake that made it.
pub struct FakeKindClient {
    group_kind: GroupKind,
    objects: Rc<RefCell<Objects>>,
}

impl FakeKindClient {
    fn check(&self, verb: StoreVerb) -> Result<()> {
        self.objects.borrow_mut().check(&self.group_kind, verb)
    }

    fn find(&self, name: &str) -> Option<RawObject> {
        self.objects
            .borrow()
            .by_id
            .values()
            .map(|(object, _)| object)
            .find(|o| o.meta.group_kind == self.group_kind && o.meta.name == name)
            .cloned()
    }

    fn insert(&self, name: &str, spec: String, options: CreateOptions) -> RawObject {
        let mut objects = self.objects.borrow_mut();
        objects.next_id += 1;
        let object = RawObject {
            meta: Meta {
                id: objects.next_id,
                group_kind: self.group_kind.clone(),
                name: name.to_string(),
                generation: 1,
                finalizers: options.finalizers,
                labels: options.labels.unwrap_or_default(),
                ..Meta::default()
            },
            spec,
            status: None,
        };
        objects
            .by_id
            .insert(object.meta.id, (object.clone(), options.owner));
        object
    }

    /// Replaces the labels of `id`, checked by the host's rules.
    fn relabel(&self, id: ObjectId, labels: Labels) -> Result<()> {
        if let Some(problem) = beehive_types::labels_problem(&labels) {
            return Err(Error::InvalidOption(problem));
        }
        let mut objects = self.objects.borrow_mut();
        if let Some((object, _)) = objects.by_id.get_mut(&id) {
            object.meta.labels = labels;
        }
        Ok(())
    }

    fn write_spec(&self, id: ObjectId, spec: String) -> Result<RawObject> {
        let mut objects = self.objects.borrow_mut();
        let (object, _) = objects
            .by_id
            .get_mut(&id)
            .ok_or_else(|| Error::NotFound(format!("{id}")))?;
        if object.meta.is_deleting() {
            return Err(Error::DeletionPending(object.meta.name.clone()));
        }
        if object.spec != spec {
            object.spec = spec;
            object.meta.generation += 1;
        }
        Ok(object.clone())
    }
}

impl KindClient for FakeKindClient {
    fn create(&self, name: &str, spec: String, options: CreateOptions) -> Result<RawObject> {
        self.check(StoreVerb::Write)?;
        if let Some(owner) = options.owner {
            self.objects
                .borrow_mut()
                .check_object(owner, StoreVerb::Read)?;
        }
        if name.is_empty() {
            return Err(Error::InvalidName);
        }
        if self.find(name).is_some() {
            return Err(Error::NameTaken(name.to_string()));
        }
        if let Some(problem) = options
            .labels
            .as_ref()
            .and_then(beehive_types::labels_problem)
        {
            return Err(Error::InvalidOption(problem));
        }
        Ok(self.insert(name, spec, options))
    }

    fn put(
        &self,
        name: &str,
        spec: String,
        options: CreateOptions,
        if_held: IfHeld,
    ) -> Result<(RawObject, bool)> {
        self.check(StoreVerb::Write)?;
        match (self.find(name), if_held) {
            (None, _) => Ok((self.create(name, spec, options)?, true)),
            (Some(found), IfHeld::Keep) => Ok((found, false)),
            (Some(found), IfHeld::Update) => {
                let id = found.meta.id;
                if let Some(labels) = options.labels {
                    self.relabel(id, labels)?;
                }
                Ok((self.write_spec(id, spec)?, false))
            }
        }
    }

    fn get(&self, id: ObjectId) -> Result<RawObject> {
        self.check(StoreVerb::Read)?;
        self.objects
            .borrow()
            .by_id
            .get(&id)
            .map(|(object, _)| object.clone())
            .filter(|o| o.meta.group_kind == self.group_kind)
            .ok_or_else(|| Error::NotFound(format!("{id}")))
    }

    fn get_by_name(&self, name: &str) -> Result<RawObject> {
        self.check(StoreVerb::Read)?;
        self.find(name)
            .ok_or_else(|| Error::NotFound(name.to_string()))
    }

    fn list(
        &self,
        after: Option<ObjectId>,
        limit: u32,
        selector: Option<&str>,
    ) -> Result<(Vec<RawObject>, Option<ObjectId>)> {
        self.check(StoreVerb::Read)?;
        let selector = match selector {
            Some(text) => Selector::parse(text)
                .map_err(|e| Error::InvalidOption(format!("the selector {text:?}: {e}")))?,
            None => Selector::everything(),
        };
        let objects = self.objects.borrow();
        let page: Vec<RawObject> = objects
            .by_id
            .range(after.map_or(0, |a| a + 1)..)
            .map(|(_, (object, _))| object)
            .filter(|o| o.meta.group_kind == self.group_kind)
            .filter(|o| selector.matches(&o.meta.labels))
            .take(limit as usize)
            .cloned()
            .collect();
        let next = (page.len() == limit as usize)
            .then(|| page.last().map(|o| o.meta.id))
            .flatten();
        Ok((page, next))
    }

    fn update(&self, id: ObjectId, spec: String) -> Result<RawObject> {
        self.check(StoreVerb::Write)?;
        self.get(id)?;
        self.write_spec(id, spec)
    }

    fn delete(&self, id: ObjectId) -> Result<()> {
        self.check(StoreVerb::Write)?;
        let mut objects = self.objects.borrow_mut();
        let (object, _) = objects
            .by_id
            .get_mut(&id)
            .ok_or_else(|| Error::NotFound(format!("{id}")))?;
        object
            .meta
            .deletion_requested_at
            .get_or_insert(Timestamp::from_millis(1));
        Ok(())
    }

    fn delete_by_name(&self, name: &str) -> Result<()> {
        self.check(StoreVerb::Write)?;
        match self.find(name) {
            Some(found) => self.delete(found.meta.id),
            None => Ok(()),
        }
    }

    fn list_owned_objects(&self, owner: ObjectId) -> Result<Vec<RawObject>> {
        self.check(StoreVerb::Read)?;
        Ok(self
            .objects
            .borrow()
            .by_id
            .values()
            .filter(|(o, o_owner)| *o_owner == Some(owner) && o.meta.group_kind == self.group_kind)
            .map(|(object, _)| object.clone())
            .collect())
    }
}

std::thread_local! {
    static CONFIG: std::cell::RefCell<std::collections::BTreeMap<String, String>> =
        std::cell::RefCell::default();
}

/// Gives `key` the value `value` for [`crate::config::get`] on this thread,
/// as an operator's policy file would.
pub fn set_config(key: impl Into<String>, value: impl Into<String>) {
    CONFIG.with(|config| config.borrow_mut().insert(key.into(), value.into()));
}

/// Forgets every value [`set_config`] gave on this thread.
pub fn clear_config() {
    CONFIG.with(|config| config.borrow_mut().clear());
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn config_value(key: &str) -> Option<String> {
    CONFIG.with(|config| config.borrow().get(key).cloned())
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn config_keys() -> Vec<String> {
    CONFIG.with(|config| config.borrow().keys().cloned().collect())
}

/// Stubbed responses by (method, URL), and the requests sent, per thread.
#[derive(Default)]
struct HttpStubs {
    responses: Vec<(String, String, Result<Response, HttpError>)>,
    sent: Vec<Request>,
}

std::thread_local! {
    static HTTP: std::cell::RefCell<HttpStubs> = std::cell::RefCell::default();
}

/// Answers every `method` request to exactly `url` on this thread with
/// `answer` (a later stub for the same request replaces it). A request
/// nothing stubs fails with [`HttpError::Denied`], as one the operator's
/// policy does not grant.
pub fn stub_http(method: &str, url: &str, answer: Result<Response, HttpError>) {
    let method = method.to_ascii_uppercase();
    HTTP.with(|http| {
        let mut http = http.borrow_mut();
        http.responses
            .retain(|(m, u, _)| !(*m == method && u == url));
        http.responses.push((method, url.to_string(), answer));
    });
}

/// The requests sent on this thread since the last [`clear_http`], in order.
pub fn sent_requests() -> Vec<Request> {
    HTTP.with(|http| http.borrow().sent.clone())
}

/// Forgets this thread's stubs and sent requests.
pub fn clear_http() {
    HTTP.with(|http| *http.borrow_mut() = HttpStubs::default());
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn send_http(request: Request) -> Result<Response, HttpError> {
    crate::http::split_url(request.url())?;
    HTTP.with(|http| {
        let mut http = http.borrow_mut();
        let answer = http
            .responses
            .iter()
            .find(|(m, u, _)| m == request.method() && u == request.url())
            .map(|(_, _, answer)| answer.clone())
            .unwrap_or(Err(HttpError::Denied));
        http.sent.push(request);
        answer
    })
}

#[cfg(test)]
mod http_tests {
    use crate::http::{self, HttpError, Request, Response};

    #[test]
    fn stubbed_requests_are_answered_and_recorded_and_others_denied() {
        super::clear_http();
        super::stub_http("get", "http://svc/health", Ok(Response::new(200, "ok")));
        super::stub_http(
            "POST",
            "http://svc/slow",
            Err(HttpError::Timeout("waiting".into())),
        );
        assert_eq!(http::get("http://svc/health").unwrap().text(), "ok");
        assert!(matches!(
            Request::post("http://svc/slow").body("x").send(),
            Err(HttpError::Timeout(_))
        ));
        assert_eq!(http::get("http://elsewhere/"), Err(HttpError::Denied));
        let sent = super::sent_requests();
        assert_eq!(sent.len(), 3);
        assert_eq!(sent[1].body_bytes(), b"x");
        super::clear_http();
        assert!(super::sent_requests().is_empty());
    }
}

#[cfg(test)]
mod config_tests {
    #[test]
    fn fake_config_values_are_read_back() {
        super::set_config("region", "eu");
        assert_eq!(crate::config::get("region").as_deref(), Some("eu"));
        assert_eq!(crate::config::keys(), ["region"]);
        super::clear_config();
        assert_eq!(crate::config::get("region"), None);
    }
}

#[cfg(test)]
mod refusal_tests {
    use crate::fake::FakeClient;
    use crate::types::Timestamp;
    use crate::{Action, ClientOf, Controller, Error, Object, ObjectOf, Registration, Result};

    /// Adds a finalizer on every pass.
    #[derive(Default)]
    struct Holds;

    impl Controller for Holds {
        type Spec = ();
        type Status = ();

        fn reconcile(&self, client: &ClientOf<'_, Self>, _: &ObjectOf<Self>) -> Result<Action> {
            client.add_finalizer("example.dev/hold")?;
            Ok(Action::settled())
        }

        fn registration() -> Registration {
            Registration::new("example.dev", "Held")
        }
    }

    #[test]
    fn a_finalizer_added_to_an_object_being_deleted_is_refused_as_the_host_does() {
        let fake = FakeClient::new();
        let mut object = Object::new("a", ());
        assert_eq!(fake.reconcile(&Holds, &object).unwrap(), Action::settled());
        object.meta.deletion_requested_at = Some(Timestamp::from_millis(1));
        let refused = fake.reconcile(&Holds, &object).unwrap_err();
        assert!(matches!(refused, Error::DeletionPending(_)), "{refused:?}");
        assert_eq!(fake.record().added_finalizers, ["example.dev/hold"]);
    }
}
