//! The client a pass is handed: writes status and metadata of one object.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::client::RawClient;
use crate::client::TransactionSource;
use crate::engine::status_grace::{GraceWriter, HeldStatus};
use crate::error::{Error, Result};
use crate::event::EventSpec;
use crate::json::Json;
use crate::object::{Condition, GroupKind, ObjectId, ObjectRef};
use crate::store::Direction;
use crate::store::{Session, Store, WriteTx, ops, validate_conditions};
use crate::sync::lock;
use crate::trace::Span;

/// The write surface of one pass, bound to the object the pass was handed.
///
/// It writes that object's status, conditions, events and finalizers, and
/// reads its edges; it cannot touch a sibling, which would race that object's
/// own pass. It lives exactly as long as the pass: once `reconcile` returns,
/// every method fails with [`Error::ReconcileReturned`], because a write with
/// no pass behind it moves state that nothing re-derives.
///
/// Each write commits on its own; the generation handshake is the host's and
/// happens after the pass.
///
/// # Status is written behind
/// A changed status is held and committed with the pass's next write, or with
/// the handshake when the pass returns, so the common pass (report a status,
/// settle) costs one write, not two. Order is kept: any later write of the
/// pass commits after it. A status still held after [`STATUS_GRACE`] is
/// written on its own, so a long pass shows what it reported. The price: an
/// `update_status` that finds the object gone cannot say so; the pass ends
/// instead, and the object is forgotten.
#[derive(Clone)]
pub struct ControllerClient {
    pass: Arc<PassState>,
}

struct PassState {
    store: Store,
    /// Writes the status this pass holds once the grace is over.
    grace: Arc<GraceWriter>,
    /// The object the pass is about.
    object: ObjectRef,
    status: Mutex<StatusSlot>,
    returned: AtomicBool,
    /// The transaction the pass has open, if any: every write of the pass,
    /// kind clients' included, joins it.
    transaction: Mutex<Option<Arc<Session>>>,
    hold_limit: Duration,
    /// The object's dependencies this pass knows are committed (loaded with
    /// it or asserted since, less those dropped since): re-asserting one
    /// needs no store call.
    known_dependencies: Mutex<Vec<ObjectId>>,
    /// Why the object does not decode, once the pass has said so with a
    /// `DecodeFailed` Warning event: the object is quarantined.
    decode_failure: Mutex<Option<String>>,
    /// The pass's span, when the host traces: its writes' spans go under it.
    span: Option<Arc<Span>>,
}

/// The reason of the Warning event that quarantines an object: its spec or
/// status does not decode into the controller's types.
pub const DECODE_FAILED: &str = "DecodeFailed";

impl HeldStatus for PassState {
    fn write_if_still_held(&self) {
        if self.returned.load(Ordering::SeqCst) {
            return;
        }
        let answer = {
            let mut slot = lock(&self.status);
            slot.flush_scheduled = false;
            let Some(status) = slot.pending.take() else {
                return;
            };
            let object = self.object.clone();
            self.store
                .submit(move |tx| ops::write_status(tx, &object, &status))
        };
        let id = self.object.id;
        self.store.spawn(async move {
            if let Err(error) = answer.await {
                tracing::warn!(object = id, %error, "a held status could not be written");
            }
        });
    }
}

impl TransactionSource for PassState {
    fn open_transaction(&self) -> Option<Arc<Session>> {
        lock(&self.transaction).clone()
    }
}

/// How long a changed status may wait for the pass's next write.
pub const STATUS_GRACE: Duration = Duration::from_millis(50);

struct StatusSlot {
    /// The status the object holds once `pending` is written: the in-memory
    /// gate that makes an unchanged `update_status` cost no store call.
    latest: Option<Json>,
    /// A reported status not yet handed to the writer.
    pending: Option<Json>,
    /// Whether a grace flush is already scheduled.
    flush_scheduled: bool,
    /// `latest` as each open transaction frame found it, outermost first:
    /// a frame that is rolled back restores what it saw, so a status it
    /// wrote and undid is written again when reported again.
    saved: Vec<Option<Json>>,
}

impl StatusSlot {
    fn frame_opened(&mut self) {
        self.saved.push(self.latest.clone());
    }

    /// Closes the innermost frame; one that did not keep its writes puts
    /// back the status it saw.
    fn frame_closed(&mut self, kept: bool) {
        if let Some(seen) = self.saved.pop()
            && !kept
        {
            self.latest = seen;
        }
    }

    /// The whole transaction is gone (rolled back, timed out, abandoned):
    /// back to what the outermost frame saw.
    fn transaction_lost(&mut self) {
        if let Some(seen) = self.saved.drain(..).next() {
            self.latest = seen;
        }
    }
}

impl std::fmt::Debug for ControllerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerClient")
            .field("object", &self.pass.object)
            .finish()
    }
}

impl ControllerClient {
    pub(crate) fn new(
        store: Store,
        object: ObjectRef,
        status: Option<Json>,
        loaded_dependencies: Vec<ObjectId>,
        hold_limit: Duration,
        grace: Arc<GraceWriter>,
        span: Option<Arc<Span>>,
    ) -> Self {
        ControllerClient {
            pass: Arc::new(PassState {
                store,
                grace,
                object,
                status: Mutex::new(StatusSlot {
                    latest: status,
                    pending: None,
                    flush_scheduled: false,
                    saved: Vec::new(),
                }),
                returned: AtomicBool::new(false),
                transaction: Mutex::new(None),
                hold_limit,
                known_dependencies: Mutex::new(loaded_dependencies),
                decode_failure: Mutex::new(None),
                span,
            }),
        }
    }

    /// Ends the pass: every later call fails with [`Error::ReconcileReturned`].
    /// Returns the status still held, for the handshake to write, and whether
    /// the pass left a transaction open (which is rolled back here).
    pub(crate) fn end(&self) -> (Option<Json>, bool) {
        self.pass.returned.store(true, Ordering::SeqCst);
        let left_open = lock(&self.pass.transaction).take();
        if let Some(session) = &left_open {
            let _ = session.rollback();
            lock(&self.pass.status).transaction_lost();
        }
        (lock(&self.pass.status).pending.take(), left_open.is_some())
    }

    /// Why the object does not decode, if the pass said so (a
    /// `DecodeFailed` Warning event, from the host's typed controllers or a
    /// plugin's SDK).
    pub(crate) fn decode_failure(&self) -> Option<String> {
        lock(&self.pass.decode_failure).clone()
    }

    /// The pass's span, when the host traces: a plugin's HTTP requests go
    /// under it.
    pub(crate) fn span(&self) -> Option<&Arc<Span>> {
        self.pass.span.as_ref()
    }

    /// The pass's trace id (hex), when its span is sampled: what its
    /// events and the object's `describe` show.
    fn sampled_trace_id(&self) -> Option<String> {
        let context = self.span()?.context();
        context.sampled.then(|| context.trace_id.to_hex())
    }

    /// A client for `group_kind` whose calls join this pass's open
    /// transaction, if it has one.
    pub fn kind_client(&self, group_kind: GroupKind) -> RawClient {
        let source: Arc<dyn TransactionSource> = self.pass.clone();
        let trace = self.span().map(|span| span.context());
        RawClient::joining(&self.pass.store, group_kind, source).traced(trace)
    }

    /// Opens a transaction frame: until the matching [`ControllerClient::commit`]
    /// or [`ControllerClient::rollback`], every write of this pass (kind
    /// clients from [`ControllerClient::kind_client`] included) joins it, and
    /// reads through them see its writes. Frames nest as savepoints. A
    /// transaction holds the store's writer, so it has a hold limit (1 s by
    /// default) after which it is rolled back; a pass that returns with a
    /// frame open has it rolled back and fails.
    ///
    /// # Errors
    /// [`Error::ReconcileReturned`] after the pass; a store error if the held
    /// status written before the transaction fails.
    pub async fn begin(&self) -> Result<()> {
        let pass = self.live()?;
        let open = lock(&pass.transaction).clone();
        if let Some(session) = open {
            session.push_frame()?;
            lock(&pass.status).frame_opened();
            return Ok(());
        }
        // A status reported before the transaction is not part of it.
        let held = lock(&pass.status).pending.take();
        if let Some(status) = held {
            let object = pass.object.clone();
            pass.store
                .write(move |tx| ops::write_status(tx, &object, &status))
                .await?;
        }
        let session = pass.store.begin_session(pass.hold_limit).await?;
        *lock(&pass.transaction) = Some(session);
        lock(&pass.status).frame_opened();
        Ok(())
    }

    /// Closes the innermost frame, keeping its writes; closing the outermost
    /// commits, delivers the pushes and runs on-create hooks.
    ///
    /// # Errors
    /// [`Error::NoTransaction`] with no frame open;
    /// [`Error::TransactionTimedOut`] when the hold limit rolled it back.
    pub async fn commit(&self) -> Result<()> {
        self.end_frame(true)
    }

    /// Closes the innermost frame, undoing its writes; pushes and hooks it
    /// made are dropped.
    ///
    /// # Errors
    /// As [`ControllerClient::commit`].
    pub async fn rollback(&self) -> Result<()> {
        self.end_frame(false)
    }

    fn end_frame(&self, keep: bool) -> Result<()> {
        let pass = self.live()?;
        let mut open = lock(&pass.transaction);
        let session = open.clone().ok_or(Error::NoTransaction)?;
        let ended = if session.depth() > 1 {
            session.pop_frame(keep)
        } else {
            *open = None;
            if keep {
                session.commit()
            } else {
                session.rollback()
            }
        };
        drop(open);
        let mut status = lock(&pass.status);
        match &ended {
            Err(Error::TransactionTimedOut) => status.transaction_lost(),
            Ok(()) => status.frame_closed(keep),
            Err(_) => status.frame_closed(false),
        }
        ended
    }

    /// Runs `work` in a transaction frame: committed when it returns `Ok`,
    /// rolled back when it returns `Err` (which is passed on).
    ///
    /// ```no_run
    /// # async fn demo(client: &beehive::ControllerClient) -> beehive::Result<()> {
    /// use beehive::{Condition, ConditionStatus, EventSpec};
    /// client
    ///     .within(|tx| async move {
    ///         tx.set_condition(Condition::new("Ready", ConditionStatus::True)).await?;
    ///         tx.add_event(EventSpec::normal("BecameReady")).await
    ///     })
    ///     .await
    /// # }
    /// ```
    ///
    /// # Errors
    /// What `work` returns, or what opening or committing the frame returns.
    pub async fn within<T, F, Fut>(&self, work: F) -> Result<T>
    where
        F: FnOnce(ControllerClient) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.begin().await?;
        match work(self.clone()).await {
            Ok(value) => {
                self.commit().await?;
                Ok(value)
            }
            Err(error) => {
                // The frame may already be gone (a timeout); the error that
                // ended the work is the one worth reporting.
                let _ = self.rollback().await;
                Err(error)
            }
        }
    }

    /// The id of the object this pass is about.
    pub fn object_id(&self) -> ObjectId {
        self.pass.object.id
    }

    /// The kind of the object this pass is about.
    pub(crate) fn group_kind(&self) -> &GroupKind {
        &self.pass.object.group_kind
    }

    fn live(&self) -> Result<&PassState> {
        if self.pass.returned.load(Ordering::SeqCst) {
            Err(Error::ReconcileReturned)
        } else {
            Ok(&self.pass)
        }
    }

    /// Submits `work`, preceded by any held status, in one job. The slot's
    /// lock is held while submitting, so writes reach the writer in the order
    /// the pass made them.
    async fn write<R: Send + 'static>(
        &self,
        what: &'static str,
        work: impl FnOnce(&mut WriteTx<'_>, &ObjectRef) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let pass = self.live()?;
        let span = pass.span.as_ref().map(|span| span.store_write(what));
        let written = self.write_now(pass, work).await;
        if let Some(span) = span {
            span.end(crate::trace::status_of(&written));
        }
        written
    }

    async fn write_now<R: Send + 'static>(
        &self,
        pass: &PassState,
        work: impl FnOnce(&mut WriteTx<'_>, &ObjectRef) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let object = pass.object.clone();
        if let Some(session) = pass.open_transaction() {
            // Inside a transaction nothing is held: status writes go straight in.
            return session.run(move |tx| work(tx, &object));
        }
        let answer = {
            let mut slot = lock(&pass.status);
            let pending = slot.pending.take();
            pass.store.submit(move |tx| {
                if let Some(status) = pending {
                    ops::write_status(tx, &object, &status)?;
                }
                work(tx, &object)
            })
        };
        answer.await
    }

    /// Records `status`. Status that serialises to the bytes this pass already
    /// holds writes nothing and reaches no store, so report observed state on
    /// every pass without an equality check of your own. A changed status is
    /// written behind (see the type's docs).
    ///
    /// # Errors
    /// [`Error::InvalidDocument`] when it does not serialise;
    /// [`Error::ReconcileReturned`] after the pass.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn update_status<S: Serialize + ?Sized>(&self, status: &S) -> Result<()> {
        self.update_status_json(Json::from_serialize(status)?).await
    }

    /// [`ControllerClient::update_status`] for a status already in JSON.
    ///
    /// # Errors
    /// As [`ControllerClient::update_status`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn update_status_json(&self, status: Json) -> Result<()> {
        let pass = self.live()?;
        status.check_limits()?;
        if lock(&pass.status).latest.as_ref() == Some(&status) {
            return Ok(());
        }
        if pass.open_transaction().is_some() {
            let written = status.clone();
            self.write("update_status", move |tx, object| {
                ops::write_status(tx, object, &written)
            })
            .await?;
            // A rollback would make this stale; it then only costs a write.
            lock(&pass.status).latest = Some(status);
            return Ok(());
        }
        let mut slot = lock(&pass.status);
        slot.latest = Some(status.clone());
        slot.pending = Some(status);
        if !slot.flush_scheduled {
            slot.flush_scheduled = true;
            let pass: Arc<dyn HeldStatus> = self.pass.clone();
            self.pass
                .grace
                .hold(Arc::downgrade(&pass), &self.pass.store);
        }
        Ok(())
    }

    /// Writes one condition; see [`ControllerClient::set_conditions`].
    ///
    /// # Errors
    /// As [`ControllerClient::set_conditions`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
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
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn set_conditions(&self, conditions: Vec<Condition>) -> Result<()> {
        self.live()?;
        if conditions.is_empty() {
            return Ok(());
        }
        validate_conditions(&conditions)?;
        self.write("set_conditions", move |tx, object| {
            ops::set_conditions(tx, object, &conditions)
        })
        .await
        .map(drop)
    }

    /// Removes the condition of `type_`, if there is one.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the object is gone.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete_condition(&self, type_: &str) -> Result<()> {
        let type_ = type_.to_string();
        self.write("delete_condition", move |tx, object| {
            ops::delete_condition(tx, object, &type_)
        })
        .await
        .map(drop)
    }

    /// Records an observation in the object's event log; repeating the latest
    /// run's (category, type, reason) extends that run.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for an event without a reason.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn add_event(&self, event: EventSpec) -> Result<()> {
        self.live()?;
        crate::event::validate(&event)?;
        if event.type_ == crate::event::EventType::Warning && event.reason == DECODE_FAILED {
            *lock(&self.pass.decode_failure) = Some(event.message.clone());
        }
        let trace_id = self.sampled_trace_id();
        self.write("add_event", move |tx, object| {
            ops::add_event(tx, object, &event, trace_id.as_deref())
        })
        .await
    }

    /// Adds `finalizer` to the object, so it is kept after its deletion is
    /// requested until a pass removes the finalizer; one it already has
    /// writes nothing.
    ///
    /// # Errors
    /// [`Error::DeletionPending`] once deletion was requested (a finalizer
    /// can no longer hold it back); [`Error::InvalidOption`] for a name
    /// outside the naming policy; [`Error::NotFound`] when the object is
    /// gone.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn add_finalizer(&self, finalizer: &str) -> Result<()> {
        if let Some(problem) = crate::naming::label_problem("a finalizer", finalizer) {
            return Err(Error::InvalidOption(problem));
        }
        let finalizer = finalizer.to_string();
        self.write("add_finalizer", move |tx, object| {
            ops::add_finalizer(tx, object, &finalizer)
        })
        .await
        .map(drop)
    }

    /// Removes `finalizer` from the object. Clearing the last finalizer of an
    /// object being deleted lets it be collected.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the object is gone.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete_finalizer(&self, finalizer: &str) -> Result<()> {
        let finalizer = finalizer.to_string();
        self.write("delete_finalizer", move |tx, object| {
            ops::delete_finalizer(tx, object, &finalizer)
        })
        .await
        .map(drop)
    }

    /// Declares that this object depends on `target` (of any kind, including
    /// kinds with no controller): when `target`'s spec or status changes, this
    /// object is reconciled again. The call that creates the edge also records
    /// one owed pass on this object, atomically with the edge, so a change to
    /// the target between this pass's read and the edge's commit is not missed;
    /// re-asserting an existing edge on every pass writes nothing. A self edge
    /// is accepted and never wakes its object.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `target` does not exist;
    /// [`Error::DependencyCycle`] when the edge would close a cycle: nothing is
    /// written, and a Warning event naming the cycle is recorded on this object.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn add_dependency(&self, target: ObjectId) -> Result<()> {
        let pass = self.live()?;
        pass.store.note_dependency_edge();
        // Every pass of a dependent re-asserts its edges: one that the pass
        // loaded is answered from memory, one that exists by a read, neither
        // by a turn at the writer. The edge's foreign keys mean both ends
        // existed, as the write would check (a target deleted since wakes
        // this object again). Inside a held transaction only the transaction
        // sees its own writes, so it is asked instead.
        let outside_transaction = pass.open_transaction().is_none();
        if outside_transaction {
            if lock(&pass.known_dependencies).contains(&target) {
                return Ok(());
            }
            let from = pass.object.id;
            if pass.store.read(|r| r.has_dependency(from, target))? {
                lock(&pass.known_dependencies).push(target);
                return Ok(());
            }
        }
        let added = self
            .write("add_dependency", move |tx, object| {
                ops::add_dependency(tx, object, target)
            })
            .await;
        // What a held transaction writes may yet roll back.
        if added.is_ok() && outside_transaction {
            lock(&pass.known_dependencies).push(target);
        }
        if let Err(Error::DependencyCycle { cycle }) = &added {
            let event = EventSpec::warning("DependencyCycle")
                .category("dependencies")
                .message(format!(
                    "refused a dependency that would close a cycle: {}",
                    cycle.join(" → ")
                ));
            if let Err(error) = self.add_event(event).await {
                tracing::warn!(object = self.pass.object.id, %error, "could not record the cycle");
            }
        }
        added.map(drop)
    }

    /// Drops this object's dependency on `target`, if it has one. A deleting
    /// target held only by this edge is collected at once.
    ///
    /// # Errors
    /// [`Error::NotFound`] when this object is gone.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete_dependency(&self, target: ObjectId) -> Result<()> {
        lock(&self.pass.known_dependencies).retain(|&known| known != target);
        self.write("delete_dependency", move |tx, object| {
            ops::delete_dependency(tx, object, target)
        })
        .await
        .map(drop)
    }

    /// Whether anything with a live claim points at this object: an owned
    /// child, or a dependent not itself being deleted. A finalizer can wait
    /// on it, so a shared resource outlives its last real user.
    pub fn has_incoming_edges(&self) -> Result<bool> {
        let pass = self.live()?;
        let id = pass.object.id;
        match pass.open_transaction() {
            Some(session) => session.read(|r| r.has_live_claims(id)),
            None => pass.store.read(|r| r.has_live_claims(id)),
        }
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
        let id = pass.object.id;
        match pass.open_transaction() {
            Some(session) => session.read(|r| r.refs(id, direction)),
            None => pass.store.read(|r| r.refs(id, direction)),
        }
    }
}
