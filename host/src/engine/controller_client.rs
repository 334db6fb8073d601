//! The client a pass is handed: writes status and metadata of one object.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::event::EventSpec;
use crate::json::Json;
use crate::object::{Condition, GroupKind, ObjectId, ObjectRef};
use crate::store::rows::{self, Direction};
use crate::store::{Store, WriteTx, events, observed};

/// The write surface of one pass, bound to the object the pass was handed.
///
/// It writes that object's status, conditions, events and finalizers, and
/// reads its edges; it cannot touch a sibling, which would race that object's
/// own pass. It lives exactly as long as the pass: once `reconcile` returns,
/// every method fails with [`Error::ReconcileReturned`], because a write with
/// no pass behind it moves state that nothing re-derives.
///
/// Each write commits on its own (or, later, inside a transaction the pass
/// opened); the generation handshake is the host's and happens after the pass.
#[derive(Clone)]
pub struct ControllerClient {
    pass: Arc<PassState>,
}

struct PassState {
    store: Store,
    group_kind: GroupKind,
    object_id: ObjectId,
    /// The status as last loaded or written by this pass: the in-memory gate
    /// that makes an unchanged `update_status` cost no store call.
    status: Mutex<Option<Json>>,
    returned: AtomicBool,
}

impl std::fmt::Debug for ControllerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerClient")
            .field("group_kind", &self.pass.group_kind)
            .field("object_id", &self.pass.object_id)
            .finish()
    }
}

impl ControllerClient {
    pub(crate) fn new(
        store: Store,
        group_kind: GroupKind,
        object_id: ObjectId,
        status: Option<Json>,
    ) -> Self {
        ControllerClient {
            pass: Arc::new(PassState {
                store,
                group_kind,
                object_id,
                status: Mutex::new(status),
                returned: AtomicBool::new(false),
            }),
        }
    }

    /// Ends the pass: every later call fails with [`Error::ReconcileReturned`].
    pub(crate) fn end(&self) {
        self.pass.returned.store(true, Ordering::SeqCst);
    }

    /// The id of the object this pass is about.
    pub fn object_id(&self) -> ObjectId {
        self.pass.object_id
    }

    fn live(&self) -> Result<&PassState> {
        if self.pass.returned.load(Ordering::SeqCst) {
            Err(Error::ReconcileReturned)
        } else {
            Ok(&self.pass)
        }
    }

    async fn write<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut WriteTx<'_>, &GroupKind, ObjectId) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let pass = self.live()?;
        let group_kind = pass.group_kind.clone();
        let id = pass.object_id;
        pass.store.write(move |tx| work(tx, &group_kind, id)).await
    }

    /// Records `status`. Status that serialises to the bytes this pass already
    /// holds writes nothing and reaches no store, so report observed state on
    /// every pass without an equality check of your own.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the object is gone (only noticed by a real
    /// write); [`Error::InvalidDocument`] when it does not serialise.
    pub async fn update_status<S: Serialize + ?Sized>(&self, status: &S) -> Result<()> {
        self.update_status_json(Json::from_serialize(status)?).await
    }

    /// [`ControllerClient::update_status`] for a status already in JSON.
    ///
    /// # Errors
    /// As [`ControllerClient::update_status`].
    pub async fn update_status_json(&self, status: Json) -> Result<()> {
        let pass = self.live()?;
        if lock(&pass.status).as_ref() == Some(&status) {
            return Ok(());
        }
        let written = status.clone();
        self.write(move |tx, gk, id| observed::write_status(tx, gk, id, &written))
            .await?;
        *lock(&pass.status) = Some(status);
        Ok(())
    }

    /// Writes one condition; see [`ControllerClient::set_conditions`].
    ///
    /// # Errors
    /// As [`ControllerClient::set_conditions`].
    pub async fn set_condition(&self, condition: Condition) -> Result<()> {
        self.set_conditions(vec![condition]).await
    }

    /// Writes several conditions as one write under one version bump. Those
    /// matching what is stored are not rewritten (their `updated_at` holds);
    /// a batch that matches entirely writes nothing. The store stamps
    /// `transitioned_at` (when the status last changed) and `updated_at`.
    ///
    /// # Errors
    /// [`Error::DuplicateConditionType`] when a type appears twice and
    /// [`Error::InvalidCondition`] for an empty type; nothing is written
    /// then. (Rust strings are UTF-8 by construction, so the text is always
    /// storable.)
    pub async fn set_conditions(&self, conditions: Vec<Condition>) -> Result<()> {
        self.live()?;
        if conditions.is_empty() {
            return Ok(());
        }
        observed::validate_conditions(&conditions)?;
        self.write(move |tx, gk, id| observed::set_conditions(tx, gk, id, &conditions))
            .await
            .map(drop)
    }

    /// Removes the condition of `type_`, if there is one.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the object is gone.
    pub async fn delete_condition(&self, type_: &str) -> Result<()> {
        let type_ = type_.to_string();
        self.write(move |tx, gk, id| observed::delete_condition(tx, gk, id, &type_))
            .await
            .map(drop)
    }

    /// Records an observation in the object's event log; repeating the latest
    /// run's (category, type, reason) extends that run.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for an event without a reason.
    pub async fn add_event(&self, event: EventSpec) -> Result<()> {
        self.live()?;
        event.validate()?;
        self.write(move |tx, _gk, id| events::add_event(tx, id, &event))
            .await
    }

    /// Removes `finalizer` from the object. Clearing the last finalizer of an
    /// object being deleted lets it be collected.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the object is gone.
    pub async fn delete_finalizer(&self, finalizer: &str) -> Result<()> {
        let finalizer = finalizer.to_string();
        self.write(move |tx, gk, id| observed::delete_finalizer(tx, gk, id, &finalizer))
            .await
            .map(drop)
    }

    /// The object's owner, if it has one.
    pub fn get_owner(&self) -> Result<Option<ObjectRef>> {
        Ok(self.refs(Direction::Owner)?.into_iter().next())
    }

    /// The objects this one depends on.
    pub fn list_dependencies(&self) -> Result<Vec<ObjectRef>> {
        self.refs(Direction::Dependencies)
    }

    /// The objects that depend on this one.
    pub fn list_dependents(&self) -> Result<Vec<ObjectRef>> {
        self.refs(Direction::Dependents)
    }

    /// The objects this one owns.
    pub fn list_owned(&self) -> Result<Vec<ObjectRef>> {
        self.refs(Direction::Owned)
    }

    fn refs(&self, direction: Direction) -> Result<Vec<ObjectRef>> {
        let pass = self.live()?;
        pass.store
            .read(|conn| rows::select_refs(conn, pass.object_id, direction))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
