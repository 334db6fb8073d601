//! The untyped client: one kind's objects with spec and status as canonical
//! JSON. The CLI, the local API and plugins use it; the typed client wraps it.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::client::options::CreateOptions;
use crate::error::{Error, Result};
use crate::event::{Event, EventFilter};
use crate::json::Json;
use crate::object::{GroupKind, Loads, ObjectId, ObjectRef, RawObject};
use crate::store::Direction;
use crate::store::Session;
use crate::store::WriteTx;
use crate::store::{Create, SpecChange, ops};
use crate::store::{Reader, Store};
use crate::trace::TraceContext;

/// The untyped client for one (group, kind).
///
/// Writes are `async` because they wait for a group commit; reads run on the
/// calling thread against a read-only connection and never wait for the writer.
///
/// # Names and ids
/// The id is the key: id-keyed calls act on one incarnation or fail with
/// [`Error::NotFound`]. The `…_by_name` calls act on whatever holds the name
/// now. How the name-keyed writes treat a name:
///
/// | name held by | `create` | `get_or_create` | `update_by_name` | `create_or_update` | `delete_by_name` |
/// |---|---|---|---|---|---|
/// | nothing | creates | creates, `true` | `NotFound` | creates, `true` | `Ok`, no write |
/// | a live row | `NameTaken` | returns it, `false` | writes the spec | writes the spec, `false` | marks it deleted |
/// | a deletion-pending row | `NameTaken` | returns it, `false` | `DeletionPending` | `DeletionPending` | `Ok`, no write |
#[derive(Clone)]
pub struct RawClient {
    store: Store,
    group_kind: GroupKind,
    /// Where a transaction this client's calls should join comes from: the
    /// pass that made the client, if any.
    transactions: Option<Arc<dyn TransactionSource>>,
    /// Cancelled when the host this client came from stops: its watches
    /// end then. A client made on the store alone has none.
    host_stopped: Option<CancellationToken>,
    /// The trace context its spec writes carry unless told otherwise: a
    /// pass's, so what a pass writes is reconciled in the pass's trace.
    trace: Option<TraceContext>,
}

impl std::fmt::Debug for RawClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawClient")
            .field("group_kind", &self.group_kind)
            .finish()
    }
}

/// Something that may have a transaction open, such as a pass.
pub(crate) trait TransactionSource: Send + Sync {
    /// The transaction open now, if any.
    fn open_transaction(&self) -> Option<Arc<Session>>;
}

impl RawClient {
    /// A client for `group_kind` over `store`.
    pub fn new(store: &Store, group_kind: GroupKind) -> Self {
        RawClient {
            store: store.clone(),
            group_kind,
            transactions: None,
            host_stopped: None,
            trace: None,
        }
    }

    /// This client, its watches ending when `stopped` is cancelled.
    pub(crate) fn bounded_by(mut self, stopped: CancellationToken) -> Self {
        self.host_stopped = Some(stopped);
        self
    }

    /// The token whose cancellation ends this client's watches, if any.
    pub(crate) fn host_stopped(&self) -> Option<&CancellationToken> {
        self.host_stopped.as_ref()
    }

    /// A client whose calls join whatever transaction `source` has open.
    pub(crate) fn joining(
        store: &Store,
        group_kind: GroupKind,
        source: Arc<dyn TransactionSource>,
    ) -> Self {
        RawClient {
            store: store.clone(),
            group_kind,
            transactions: Some(source),
            host_stopped: None,
            trace: None,
        }
    }

    /// This client, its spec writes carrying `trace` unless their options
    /// name another.
    pub(crate) fn traced(mut self, trace: Option<TraceContext>) -> Self {
        self.trace = trace;
        self
    }

    fn open_transaction(&self) -> Option<Arc<Session>> {
        self.transactions.as_ref()?.open_transaction()
    }

    /// Runs `work` in the open transaction, or in the next group commit.
    async fn write<F, R>(&self, work: F) -> Result<R>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        match self.open_transaction() {
            Some(session) => session.run(work),
            None => self.store.write(work).await,
        }
    }

    /// Reads through the open transaction (seeing its writes), or on a
    /// pooled reader.
    fn read<R>(&self, work: impl FnOnce(&Reader<'_>) -> Result<R>) -> Result<R> {
        match self.open_transaction() {
            Some(session) => session.read(work),
            None => self.store.read(work),
        }
    }

    /// The store it reads and writes.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The kind this client reads and writes.
    pub fn group_kind(&self) -> &GroupKind {
        &self.group_kind
    }

    /// Creates `name` with `spec`. Never touches an existing row.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for `""`; [`Error::InvalidDocument`] when `spec`
    /// is not a JSON object; [`Error::NameTaken`] when a live or
    /// deletion-pending row holds the name; [`Error::InvalidOption`] for an
    /// empty finalizer or an owner that does not exist.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn create(
        &self,
        name: &str,
        spec: Json,
        options: CreateOptions,
    ) -> Result<RawObject> {
        let plan = self.plan_create(name, spec, options)?;
        self.write(move |tx| ops::create(tx, plan)).await
    }

    /// Returns the object holding `name`, creating it from `spec` if nothing
    /// does; `true` when this call created it. A found row is returned exactly
    /// as stored — options ignored, a deletion-pending row included. Atomic:
    /// concurrent callers on one name get one row.
    ///
    /// # Errors
    /// As [`RawClient::create`], except that a held name is not an error. The
    /// arguments are validated even when the row exists.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn get_or_create(
        &self,
        name: &str,
        spec: Json,
        options: CreateOptions,
    ) -> Result<(RawObject, bool)> {
        let plan = self.plan_create(name, spec, options)?;
        let (object, created) = self.write(move |tx| ops::get_or_create(tx, plan)).await?;
        Ok((self.upgraded(object)?, created))
    }

    /// Makes whatever holds `name` hold `spec`, creating it if nothing does;
    /// `true` when this call created it. Options apply only on create.
    ///
    /// # Errors
    /// As [`RawClient::create`]; [`Error::DeletionPending`] when the name is
    /// held by a row being deleted.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn create_or_update(
        &self,
        name: &str,
        spec: Json,
        options: CreateOptions,
    ) -> Result<(RawObject, bool)> {
        let plan = self.plan_create(name, spec, options)?;
        if let Some(stored) = self.unchanged_since_upgrade(name, &plan.spec)? {
            return Ok((stored, false));
        }
        let (object, created) = self
            .write(move |tx| ops::create_or_update(tx, plan))
            .await?;
        Ok((self.upgraded(object)?, created))
    }

    /// The object named `name`, as this build reads it, when that is `spec`
    /// although its stored bytes differ: it was written at an older spec
    /// version, and `spec` is the same spec converted (what `get -o yaml`
    /// printed after the plugin's upgrade). Writing it would count as a
    /// change: a new generation and a pass for nothing. The read is made
    /// only for a kind whose migrator converts specs.
    fn unchanged_since_upgrade(&self, name: &str, spec: &Json) -> Result<Option<RawObject>> {
        if self.store.migrations().versions(&self.group_kind).spec == 0 {
            return Ok(None);
        }
        let found = self.read(|r| r.object_by_name(&self.group_kind, name, Loads::none()))?;
        let Some(stored) = found else {
            return Ok(None);
        };
        if stored.meta.deletion_requested_at.is_some() || stored.spec == *spec {
            return Ok(None);
        }
        let current = self.upgraded(stored)?;
        Ok((current.spec == *spec).then_some(current))
    }

    /// Replaces the spec of object `id`. A spec whose canonical bytes equal the
    /// stored ones writes nothing: no generation, no `resource_version`, no
    /// log entry. ([`RawClient::update_by_name`] and
    /// [`RawClient::create_or_update`] also write nothing for the stored spec
    /// as converted by the kind's migrator.)
    ///
    /// # Errors
    /// [`Error::NotFound`] when `id` holds nothing; [`Error::WrongKind`] when it
    /// is another kind's; [`Error::DeletionPending`] when it is being deleted;
    /// [`Error::InvalidDocument`] when `spec` is not an object.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn update(&self, id: ObjectId, spec: Json) -> Result<RawObject> {
        self.check_spec(&format!("#{id}"), &spec)?;
        let (group_kind, spec_version) = (self.group_kind.clone(), self.spec_version()?);
        let change = SpecChange {
            spec,
            spec_version,
            trace: self.trace,
        };
        let updated = self
            .write(move |tx| ops::update(tx, &group_kind, id, change))
            .await?;
        self.upgraded(updated)
    }

    /// Replaces the spec of whatever holds `name`, resolving and writing in one
    /// transaction. For a read-modify-write use [`RawClient::update`] with the
    /// id you read.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::NotFound`] when nothing holds the name;
    /// [`Error::DeletionPending`]; [`Error::InvalidDocument`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn update_by_name(&self, name: &str, spec: Json) -> Result<RawObject> {
        check_name(name)?;
        self.check_spec(name, &spec)?;
        let (group_kind, spec_version) = (self.group_kind.clone(), self.spec_version()?);
        if let Some(stored) = self.unchanged_since_upgrade(name, &spec)? {
            return Ok(stored);
        }
        let name = name.to_string();
        let change = SpecChange {
            spec,
            spec_version,
            trace: self.trace,
        };
        let updated = self
            .write(move |tx| ops::update_by_name(tx, &group_kind, &name, change))
            .await?;
        self.upgraded(updated)
    }

    /// Requests deletion of object `id`: sets its deletion mark and leaves the
    /// row readable until its finalizers clear and garbage collection removes
    /// it. Idempotent on a row already being deleted.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `id` holds nothing; [`Error::WrongKind`] when it
    /// is another kind's.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete(&self, id: ObjectId) -> Result<()> {
        let group_kind = self.group_kind.clone();
        self.write(move |tx| ops::delete(tx, &group_kind, id)).await
    }

    /// Requests deletion of whatever holds `name`. Absent or already deleting
    /// is `Ok` and is answered by a read, without taking the writer.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for `""`.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still commit ([why](crate#cancel-safety)).
    pub async fn delete_by_name(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let probe = self
            .store
            .read(|r| r.object_row_by_name(&self.group_kind, name))?;
        match probe {
            None => return Ok(()),
            Some(found) if found.meta.deletion_requested_at.is_some() => return Ok(()),
            Some(_) => {}
        }
        // The probe is advisory: resolve again under the writer.
        let group_kind = self.group_kind.clone();
        let name = name.to_string();
        self.write(move |tx| ops::delete_by_name(tx, &group_kind, &name))
            .await
    }

    /// Reads object `id`, with its conditions and no relations.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `id` holds nothing of this kind.
    pub fn get(&self, id: ObjectId) -> Result<RawObject> {
        self.get_with(id, Loads::none())
    }

    /// [`RawClient::get`], with the relations `loads` asks for.
    ///
    /// # Errors
    /// As [`RawClient::get`].
    pub fn get_with(&self, id: ObjectId, loads: Loads) -> Result<RawObject> {
        let found = self.read(|r| r.object(&self.group_kind, id, loads))?;
        let object = found.ok_or_else(|| Error::not_found(format!("{} {id}", self.group_kind)))?;
        self.upgraded(object)
    }

    /// Reads whatever holds `name`, with its conditions and no relations.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for `""`; [`Error::NotFound`] when nothing of
    /// this kind holds the name.
    pub fn get_by_name(&self, name: &str) -> Result<RawObject> {
        self.get_by_name_with(name, Loads::none())
    }

    /// [`RawClient::get_by_name`], with the relations `loads` asks for.
    ///
    /// # Errors
    /// As [`RawClient::get_by_name`].
    pub fn get_by_name_with(&self, name: &str, loads: Loads) -> Result<RawObject> {
        check_name(name)?;
        let found = self.read(|r| r.object_by_name(&self.group_kind, name, loads))?;
        let object =
            found.ok_or_else(|| Error::not_found(format!("{}/{name}", self.group_kind)))?;
        self.upgraded(object)
    }

    /// Every object of this kind, by id, with conditions and no relations.
    pub fn list(&self) -> Result<Vec<RawObject>> {
        self.list_with(Loads::none())
    }

    /// [`RawClient::list`], with the relations `loads` asks for (one query
    /// per relation, however many objects).
    pub fn list_with(&self, loads: Loads) -> Result<Vec<RawObject>> {
        self.read_many(|r| r.objects(&self.group_kind, loads))
    }

    /// The objects of this kind whose labels match `selector`, by id. A
    /// selector that names a value or a key's presence is served by the
    /// label index: it reads only the objects carrying that label.
    ///
    /// # Errors
    /// A store error when the read fails.
    pub fn list_selected(&self, selector: &crate::object::Selector) -> Result<Vec<RawObject>> {
        self.list_selected_with(selector, Loads::none())
    }

    /// [`RawClient::list_selected`], with the relations `loads` asks for.
    ///
    /// # Errors
    /// A store error when the read fails.
    pub fn list_selected_with(
        &self,
        selector: &crate::object::Selector,
        loads: Loads,
    ) -> Result<Vec<RawObject>> {
        self.read_many(|r| r.objects_selected(&self.group_kind, selector, loads))
    }

    /// Replaces the labels of object `id` with what `change` makes of its
    /// current ones, in one write: a new resource version, seen by watches;
    /// the generation stays, so no pass is owed.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::InvalidOption`] for labels that break
    /// the rules, or the error `change` returns (nothing is written then).
    pub async fn relabel(
        &self,
        id: ObjectId,
        change: impl FnOnce(&crate::object::Labels) -> Result<crate::object::Labels> + Send + 'static,
    ) -> Result<RawObject> {
        let group_kind = self.group_kind.clone();
        let relabeled = self
            .write(move |tx| crate::store::ops::relabel(tx, &group_kind, id, change))
            .await?;
        self.upgraded(relabeled)
    }

    /// Up to `limit` objects of this kind with ids above `after`, by id, and
    /// the id to continue after when there may be more.
    pub fn list_page(
        &self,
        after: Option<ObjectId>,
        limit: usize,
    ) -> Result<(Vec<RawObject>, Option<ObjectId>)> {
        let objects =
            self.read_many(|r| r.objects_page(&self.group_kind, after.unwrap_or(0), limit))?;
        let next = (objects.len() == limit)
            .then(|| objects.last().map(|o| o.meta.id))
            .flatten();
        Ok((objects, next))
    }

    /// [`RawClient::list_page`], of the objects whose labels match
    /// `selector`. A page may be short, even empty, with an id to continue
    /// after: one call reads a bounded number of candidates.
    ///
    /// # Errors
    /// A store error when the read fails.
    pub fn list_selected_page(
        &self,
        selector: &crate::object::Selector,
        after: Option<ObjectId>,
        limit: usize,
    ) -> Result<(Vec<RawObject>, Option<ObjectId>)> {
        let (objects, next) = self.read(|r| {
            r.objects_selected_page(&self.group_kind, selector, after.unwrap_or(0), limit)
        })?;
        Ok((self.store.migrations().upgrade_all(objects), next))
    }

    /// The objects of this kind owned by `owner`, by id, deletion-pending ones
    /// included. A missing owner reads as no children.
    pub fn list_owned_objects(&self, owner: ObjectId) -> Result<Vec<RawObject>> {
        self.list_owned_objects_with(owner, Loads::none())
    }

    /// [`RawClient::list_owned_objects`], with the relations `loads` asks for.
    pub fn list_owned_objects_with(&self, owner: ObjectId, loads: Loads) -> Result<Vec<RawObject>> {
        self.read_many(|r| r.owned_objects(&self.group_kind, owner, loads))
    }

    fn read_many(
        &self,
        select: impl FnOnce(&Reader<'_>) -> Result<Vec<RawObject>>,
    ) -> Result<Vec<RawObject>> {
        self.read(select)
            .map(|objects| self.store.migrations().upgrade_all(objects))
    }

    /// `object` as this build reads it: spec and status upgraded by the
    /// kind's migrator, if it has one.
    fn upgraded(&self, object: RawObject) -> Result<RawObject> {
        self.store.migrations().upgrade(object)
    }

    /// The schema version this build writes specs of the kind at.
    /// The spec version this client's writes are stamped with: what the
    /// kind's plugin reads.
    fn spec_version(&self) -> Result<i64> {
        let group_kind = &self.group_kind;
        let versions =
            self.store
                .migrations()
                .versions_or_recorded(group_kind, || {
                    let recorded = self.store.read(|r| r.registered_versions(group_kind))?;
                    Ok(recorded
                        .map(|(spec, status)| crate::migration::SchemaVersions { spec, status }))
                })?;
        Ok(versions.spec)
    }

    /// `spec`, written at spec schema version `version` (what a manifest's
    /// `specVersion` says), as the kind's current version reads it: run
    /// through the kind's migrator when it is older, so it can then be
    /// written. `name` names the object in errors.
    ///
    /// # Errors
    /// [`Error::SpecVersionTooNew`] for a version the kind's plugin does not
    /// know; [`Error::Migration`] when the conversion fails, or when it is
    /// needed and this process has no migrator for the kind (no host serves
    /// it here).
    pub fn spec_from_version(&self, name: &str, version: i64, spec: Json) -> Result<Json> {
        let current = self.spec_version()?;
        let what = format!("{}/{name}", self.group_kind);
        self.store
            .migrations()
            .spec_from(&self.group_kind, &what, version, current, spec)
    }

    /// The spec version a write of this kind is stamped with now: the
    /// version the kind's plugin reads (0 for an unversioned kind).
    ///
    /// # Errors
    /// A store error reading the kind's registration.
    pub fn current_spec_version(&self) -> Result<i64> {
        self.spec_version()
    }

    /// The kind of object `id`, if it exists; through the open transaction,
    /// so an object it created is found.
    pub(crate) fn kind_of(&self, id: ObjectId) -> Result<Option<GroupKind>> {
        Ok(self
            .read(|r| r.kind_and_deletion(id))?
            .map(|(kind, _)| kind))
    }

    /// The owner of `id`, if it has one. Runs the edge query directly, with
    /// no kind check: another kind's id reads that object's owner.
    pub fn get_owner(&self, id: ObjectId) -> Result<Option<ObjectRef>> {
        Ok(self.refs(id, Direction::Owner)?.into_iter().next())
    }

    /// The objects `id` depends on. No kind check, as [`RawClient::get_owner`].
    pub fn list_dependencies(&self, id: ObjectId) -> Result<Vec<ObjectRef>> {
        self.refs(id, Direction::Dependencies)
    }

    /// The objects that depend on `id`. No kind check, as [`RawClient::get_owner`].
    pub fn list_dependents(&self, id: ObjectId) -> Result<Vec<ObjectRef>> {
        self.refs(id, Direction::Dependents)
    }

    /// The objects `id` owns, of every kind. No kind check, as [`RawClient::get_owner`].
    pub fn list_owned(&self, id: ObjectId) -> Result<Vec<ObjectRef>> {
        self.refs(id, Direction::Owned)
    }

    /// Object `id`'s event runs matching `filter`, newest first. Reads by id
    /// whatever the object's kind, since an event carries no kind of its own.
    pub fn list_events(&self, id: ObjectId, filter: &EventFilter) -> Result<Vec<Event>> {
        self.read(|r| r.events(id, filter))
    }

    /// The trace id (hex) of object `id`'s latest traced pass: set only by
    /// a host given a [`Tracer`](crate::trace::Tracer).
    ///
    /// # Errors
    /// A store error.
    pub fn last_pass_trace(&self, id: ObjectId) -> Result<Option<String>> {
        self.read(|r| r.last_pass_trace(id))
    }

    /// The current run of object `id`'s `category` timeline, if it has one.
    pub fn get_latest_event(&self, id: ObjectId, category: &str) -> Result<Option<Event>> {
        let filter = EventFilter::all().category(category).limit(1);
        Ok(self.list_events(id, &filter)?.into_iter().next())
    }

    fn refs(&self, id: ObjectId, direction: Direction) -> Result<Vec<ObjectRef>> {
        self.read(|r| r.refs(id, direction))
    }

    /// Checks a spec about to be written to `name` (or `#id`): a JSON
    /// object, keeping the kind's rules.
    fn check_spec(&self, name: &str, spec: &Json) -> Result<()> {
        spec.require_object()?;
        let group_kind = &self.group_kind;
        self.store.validations().check(
            group_kind,
            || format!("{group_kind}/{name}"),
            spec,
            || self.store.read(|r| r.spec_schema(group_kind)),
        )
    }

    fn plan_create(&self, name: &str, spec: Json, mut options: CreateOptions) -> Result<Create> {
        check_name(name)?;
        if let Some(problem) =
            crate::naming::kind_problem(&self.group_kind.group, &self.group_kind.kind)
        {
            return Err(Error::InvalidName(problem));
        }
        self.check_spec(name, &spec)?;
        options.validate()?;
        if !options.finalizers.is_empty()
            && !self.store.read(|r| r.is_registered(&self.group_kind))?
        {
            return Err(Error::InvalidOption(format!(
                "finalizers need a controller registered for {}, \
                 since only a controller can clear them",
                self.group_kind
            )));
        }
        Ok(Create {
            group_kind: self.group_kind.clone(),
            name: name.to_string(),
            spec,
            spec_version: self.spec_version()?,
            owner: options.owner,
            finalizers: options.finalizers,
            labels: options.labels,
            on_create: options.on_create,
            trace: options.trace.or(self.trace),
        })
    }
}

fn check_name(name: &str) -> Result<()> {
    match crate::naming::name_problem(name) {
        Some(problem) => Err(Error::InvalidName(problem)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn delete_by_name_answers_its_no_ops_without_the_writer() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let store = Store::temporary().unwrap();
        let client = RawClient::new(&store, GroupKind::core("Thing"));
        runtime.block_on(async {
            let pending = client
                .create("pending", Json::parse("{}").unwrap(), CreateOptions::new())
                .await
                .unwrap();
            client.delete(pending.meta.id).await.unwrap();
        });

        // Hold the writer on another thread until told to let go.
        let (held_tx, held_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = {
            let store = store.clone();
            std::thread::spawn(move || {
                let job = store.write(move |_tx| {
                    held_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok(())
                });
                tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap()
                    .block_on(job)
            })
        };
        held_rx.recv().unwrap();

        for name in ["absent", "pending"] {
            let answered = runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), client.delete_by_name(name)).await
            });
            assert!(
                matches!(answered, Ok(Ok(()))),
                "{name}: answered without waiting for the held writer"
            );
        }
        release_tx.send(()).unwrap();
        holder.join().unwrap().unwrap();
    }
}
