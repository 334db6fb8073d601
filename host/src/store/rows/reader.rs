//! Every question the engine and the clients ask the store, answered in
//! objects, references, events and log positions.
//!
//! A [`Reader`] is handed out by [`Store::read`](crate::store::Store::read)
//! (a pooled read-only connection) and by a pass's open transaction
//! (`Session::read`, which sees that transaction's writes). Code outside
//! `store/` reads through it and never sees the database library.

use crate::error::Result;
use crate::event::{Event, EventFilter};
use crate::object::{GroupKind, Loads, ObjectId, ObjectRef, RawObject};
use crate::store::backend::Conn;
use crate::store::rows::objects::{self as rows, Direction};
use crate::store::rows::registrations::{self, RegisteredKind};
use crate::store::rows::rollouts::{self, Rollout};
use crate::store::rows::{edges, events, observed, scan, write_log};

/// The most batches of candidates one selected page reads.
pub(crate) const SELECTED_PAGE_READS: usize = 8;

/// A read view of the store.
pub(crate) struct Reader<'c> {
    conn: Conn<'c>,
    /// This store session, against which liveness conditions are judged.
    session: i64,
}

impl<'c> Reader<'c> {
    pub(crate) fn new(conn: Conn<'c>, session: i64) -> Self {
        Reader { conn, session }
    }

    /// Runs `work` inside one read transaction, so every answer it gets is
    /// as of the same moment.
    pub(crate) fn consistent<R>(&self, work: impl FnOnce(&Reader<'_>) -> Result<R>) -> Result<R> {
        self.conn
            .read_transaction(|conn| work(&Reader::new(conn, self.session)))
    }

    /// Object `id` of kind `group_kind`, with its conditions and `loads`.
    pub(crate) fn object(
        &self,
        group_kind: &GroupKind,
        id: ObjectId,
        loads: Loads,
    ) -> Result<Option<RawObject>> {
        let found = rows::select_with_conditions(self.conn, &[id], self.session, false)?
            .pop()
            .filter(|(o, _)| o.meta.group_kind == *group_kind);
        let Some((object, _)) = found else {
            return Ok(None);
        };
        let mut objects = [object];
        rows::load_relations(self.conn, loads, &mut objects)?;
        let [object] = objects;
        Ok(Some(object))
    }

    /// What passes of objects `ids` load: each object that exists (whatever
    /// its kind), by id, with its conditions and the ids of what it depends
    /// on.
    pub(crate) fn objects_for_passes(
        &self,
        ids: &[ObjectId],
    ) -> Result<Vec<(RawObject, Vec<ObjectId>)>> {
        rows::select_with_conditions(self.conn, ids, self.session, true)
    }

    /// What of `group_kind` holds `name`, with its conditions and `loads`.
    pub(crate) fn object_by_name(
        &self,
        group_kind: &GroupKind,
        name: &str,
        loads: Loads,
    ) -> Result<Option<RawObject>> {
        let found = rows::select_by_name(self.conn, group_kind, name)?;
        found
            .map(|object| self.complete_one(object, loads))
            .transpose()
    }

    /// What of `group_kind` holds `name`, as stored.
    pub(crate) fn object_row_by_name(
        &self,
        group_kind: &GroupKind,
        name: &str,
    ) -> Result<Option<RawObject>> {
        rows::select_by_name(self.conn, group_kind, name)
    }

    /// Every object of `group_kind`, by id, with conditions and `loads`.
    pub(crate) fn objects(&self, group_kind: &GroupKind, loads: Loads) -> Result<Vec<RawObject>> {
        self.complete(rows::select_kind(self.conn, group_kind)?, loads)
    }

    /// The objects of `group_kind` whose labels match `selector`, by id,
    /// with conditions and `loads`.
    pub(crate) fn objects_selected(
        &self,
        group_kind: &GroupKind,
        selector: &crate::object::Selector,
        loads: Loads,
    ) -> Result<Vec<RawObject>> {
        let mut found = rows::select_by_selector(self.conn, group_kind, selector, None)?;
        found.retain(|object| selector.matches(&object.meta.labels));
        self.complete(found, loads)
    }

    /// Up to `limit` objects of `group_kind` with ids above `after` whose
    /// labels match `selector`, by id, with conditions; and the id to
    /// continue after when there may be more. Reads at most
    /// [`SELECTED_PAGE_READS`] batches of candidates, so a selector few
    /// objects match answers a short page (even an empty one) with an id to
    /// continue after, rather than reading the whole kind in one call.
    pub(crate) fn objects_selected_page(
        &self,
        group_kind: &GroupKind,
        selector: &crate::object::Selector,
        mut after: ObjectId,
        limit: usize,
    ) -> Result<(Vec<RawObject>, Option<ObjectId>)> {
        let mut found = Vec::new();
        for _ in 0..SELECTED_PAGE_READS {
            let batch =
                rows::select_by_selector(self.conn, group_kind, selector, Some((after, limit)))?;
            let exhausted = batch.len() < limit;
            for object in batch {
                after = object.meta.id;
                if selector.matches(&object.meta.labels) {
                    found.push(object);
                    if found.len() == limit {
                        return Ok((self.complete(found, Loads::none())?, Some(after)));
                    }
                }
            }
            if exhausted {
                return Ok((self.complete(found, Loads::none())?, None));
            }
        }
        Ok((self.complete(found, Loads::none())?, Some(after)))
    }

    /// Up to `limit` objects of `group_kind` with ids above `after`, by id,
    /// with conditions.
    pub(crate) fn objects_page(
        &self,
        group_kind: &GroupKind,
        after: ObjectId,
        limit: usize,
    ) -> Result<Vec<RawObject>> {
        let page = rows::select_kind_page(self.conn, group_kind, after, limit)?;
        self.complete(page, Loads::none())
    }

    /// The objects of `group_kind` owned by `owner`, by id, with conditions
    /// and `loads`.
    pub(crate) fn owned_objects(
        &self,
        group_kind: &GroupKind,
        owner: ObjectId,
        loads: Loads,
    ) -> Result<Vec<RawObject>> {
        self.complete(rows::select_owned(self.conn, group_kind, owner)?, loads)
    }

    /// `object`, as stored, with its conditions attached.
    pub(crate) fn with_conditions(&self, object: RawObject) -> Result<RawObject> {
        self.complete_one(object, Loads::none())
    }

    /// `complete` for one object, without a vector: `get` is the hottest read.
    fn complete_one(&self, object: RawObject, loads: Loads) -> Result<RawObject> {
        let mut objects = [object];
        rows::load_conditions(self.conn, self.session, &mut objects)?;
        rows::load_relations(self.conn, loads, &mut objects)?;
        let [object] = objects;
        Ok(object)
    }

    fn complete(&self, mut objects: Vec<RawObject>, loads: Loads) -> Result<Vec<RawObject>> {
        rows::load_conditions(self.conn, self.session, &mut objects)?;
        rows::load_relations(self.conn, loads, &mut objects)?;
        Ok(objects)
    }

    /// Whether `id` is owned by `owner`.
    pub(crate) fn is_owned_by(&self, id: ObjectId, owner: ObjectId) -> Result<bool> {
        rows::is_owned_by(self.conn, id, owner)
    }

    /// The kind of object `id` and whether it is being deleted, if it exists.
    pub(crate) fn kind_and_deletion(&self, id: ObjectId) -> Result<Option<(GroupKind, bool)>> {
        rows::select_kind_and_deletion(self.conn, id)
    }

    /// The objects at the other end of `id`'s edges in one direction.
    pub(crate) fn refs(&self, id: ObjectId, direction: Direction) -> Result<Vec<ObjectRef>> {
        rows::select_refs(self.conn, id, direction)
    }

    /// Whether anything with a live claim (an owned child) points at `id`.
    pub(crate) fn has_live_claims(&self, id: ObjectId) -> Result<bool> {
        edges::has_live_claims(self.conn, id)
    }

    /// Object `id`'s event runs that `filter` selects, newest first.
    pub(crate) fn events(&self, id: ObjectId, filter: &EventFilter) -> Result<Vec<Event>> {
        events::list_events(self.conn, id, filter)
    }

    /// The newest Warning runs of every object (see
    /// [`events::recent_warnings`]).
    pub(crate) fn recent_warnings(
        &self,
        limit: usize,
        scan: usize,
    ) -> Result<Vec<(GroupKind, String, Event)>> {
        events::recent_warnings(self.conn, limit, scan)
    }

    /// Object `id`'s runs (in `category`, if given) written above `cursor`,
    /// oldest first, at most `limit`.
    pub(crate) fn events_above(
        &self,
        id: ObjectId,
        category: Option<&str>,
        cursor: i64,
        limit: usize,
    ) -> Result<Vec<Event>> {
        events::events_above(self.conn, id, category, cursor, limit)
    }

    /// The objects of `group_kind` that owe a pass: at most `limit`, in id
    /// order, past id `after`.
    pub(crate) fn owed_page(
        &self,
        group_kind: &GroupKind,
        after: ObjectId,
        limit: usize,
    ) -> Result<Vec<ObjectId>> {
        scan::owed_page(self.conn, group_kind, after, limit)
    }

    /// Every object id of `group_kind`.
    pub(crate) fn all_ids(&self, group_kind: &GroupKind) -> Result<Vec<ObjectId>> {
        scan::all_of_kind(self.conn, group_kind)
    }

    /// Up to `limit` ids of `group_kind` past `after`, in id order.
    pub(crate) fn ids_after(
        &self,
        group_kind: &GroupKind,
        after: ObjectId,
        limit: usize,
    ) -> Result<Vec<ObjectId>> {
        scan::ids_after(self.conn, group_kind, after, limit)
    }

    /// The ids of `group_kind` from `first` to `last`, both included.
    pub(crate) fn ids_between(
        &self,
        group_kind: &GroupKind,
        first: ObjectId,
        last: ObjectId,
    ) -> Result<Vec<ObjectId>> {
        scan::ids_between(self.conn, group_kind, first, last)
    }

    /// Up to `limit` names of `group_kind`'s objects that start with
    /// `prefix`, in order.
    pub(crate) fn names_from(
        &self,
        group_kind: &GroupKind,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>> {
        scan::names_from(self.conn, group_kind, prefix, limit)
    }

    /// How many objects `group_kind` has.
    pub(crate) fn count_of_kind(&self, group_kind: &GroupKind) -> Result<i64> {
        scan::count_of_kind(self.conn, group_kind)
    }

    /// The revisions `group_kind` has been served by, oldest first.
    pub(crate) fn rollouts(&self, group_kind: &GroupKind) -> Result<Vec<Rollout>> {
        rollouts::list(self.conn, group_kind)
    }

    /// The newest signing time recorded for plugin `name`.
    pub(crate) fn plugin_signed_at(&self, name: &str) -> Result<Option<i64>> {
        crate::store::rows::signatures::newest(self.conn, name)
    }

    /// The newest revision `group_kind` has been served by.
    pub(crate) fn latest_rollout(&self, group_kind: &GroupKind) -> Result<Option<Rollout>> {
        rollouts::latest(self.conn, group_kind)
    }

    /// The recorded next-pass times of `group_kind`'s objects.
    pub(crate) fn requeues(&self, group_kind: &GroupKind) -> Result<Vec<(ObjectId, i64)>> {
        scan::requeues(self.conn, group_kind)
    }

    /// Every object being deleted, with its kind.
    pub(crate) fn deleting(&self) -> Result<Vec<(ObjectId, GroupKind)>> {
        scan::deleting(self.conn)
    }

    /// Every kind with objects or a registration, sorted.
    pub(crate) fn kinds(&self) -> Result<Vec<GroupKind>> {
        scan::kinds(self.conn)
    }

    /// Per kind: its objects, and how many have a generation not yet observed.
    pub(crate) fn counts_by_kind(&self) -> Result<Vec<(GroupKind, i64, i64)>> {
        scan::counts_by_kind(self.conn)
    }

    /// The content hash the registration of `group_kind` recorded, if any.
    pub(crate) fn recorded_hash(&self, group_kind: &GroupKind) -> Result<Option<String>> {
        registrations::recorded_hash(self.conn, group_kind)
    }

    /// The (spec, status) versions the registration of `group_kind`
    /// recorded, if it has one.
    pub(crate) fn registered_versions(&self, group_kind: &GroupKind) -> Result<Option<(i64, i64)>> {
        registrations::versions(self.conn, group_kind)
    }

    /// The spec schema the registration of `group_kind` recorded, if any.
    pub(crate) fn spec_schema(&self, group_kind: &GroupKind) -> Result<Option<String>> {
        registrations::spec_schema(self.conn, group_kind)
    }

    /// Whether a host has a controller registered for `group_kind`: its
    /// registration is recorded until it is unregistered.
    pub(crate) fn is_registered(&self, group_kind: &GroupKind) -> Result<bool> {
        registrations::is_registered(self.conn, group_kind)
    }

    /// Every recorded registration.
    pub(crate) fn registrations(&self) -> Result<Vec<RegisteredKind>> {
        registrations::list(self.conn)
    }

    /// Up to `limit` write-log entries above `cursor`, as (position, id).
    pub(crate) fn log_above(&self, cursor: i64, limit: usize) -> Result<Vec<(i64, ObjectId)>> {
        write_log::log_above(self.conn, cursor, limit)
    }

    /// Whether `from` already depends on `to`.
    pub(crate) fn has_dependency(&self, from: ObjectId, to: ObjectId) -> Result<bool> {
        edges::has_dependency(self.conn, from, to)
    }

    /// The trace id of object `id`'s latest traced pass, if it had one.
    pub(crate) fn last_pass_trace(&self, id: ObjectId) -> Result<Option<String>> {
        observed::last_pass_trace(self.conn, id)
    }

    /// The trace contexts of the dependency writes that may have woken
    /// `from` (see [`edges::dependency_traces`]).
    pub(crate) fn dependency_traces(&self, from: ObjectId) -> Result<Vec<String>> {
        edges::dependency_traces(self.conn, from)
    }

    /// The dependents of the `moved` targets that have not seen the move.
    pub(crate) fn dependents_of(
        &self,
        moved: &[(ObjectId, i64)],
    ) -> Result<Vec<(ObjectId, GroupKind)>> {
        edges::dependents_of(self.conn, moved)
    }

    /// Dependents a target moved past since their last successful pass.
    pub(crate) fn stale_dependents(&self) -> Result<Vec<(ObjectId, GroupKind)>> {
        edges::stale_dependents(self.conn)
    }

    /// Where the dependency waker last saved its cursor.
    pub(crate) fn waker_cursor(&self) -> Result<Option<i64>> {
        edges::load_waker_cursor(self.conn)
    }

    /// The newest committed position.
    pub(crate) fn store_head(&self) -> Result<i64> {
        write_log::store_head(self.conn)
    }

    /// The newest position a stream of `group_kind` can be complete as of.
    pub(crate) fn kind_head(&self, group_kind: &GroupKind) -> Result<i64> {
        write_log::kind_head(self.conn, group_kind)
    }

    /// Where retention cut `group_kind`'s write log (0 if nowhere).
    pub(crate) fn kind_horizon(&self, group_kind: &GroupKind) -> Result<i64> {
        write_log::kind_horizon(self.conn, group_kind)
    }

    /// Where retention cut object `id`'s event runs (0 if nowhere).
    pub(crate) fn event_horizon(&self, id: ObjectId, category: Option<&str>) -> Result<i64> {
        write_log::event_horizon(self.conn, id, category)
    }

    /// Up to `limit` of `group_kind`'s log entries above `cursor` (object
    /// `only`'s, if given), oldest first, as (position, id).
    pub(crate) fn entries_above(
        &self,
        group_kind: &GroupKind,
        cursor: i64,
        only: Option<ObjectId>,
        limit: usize,
    ) -> Result<Vec<(i64, ObjectId)>> {
        write_log::entries_above(self.conn, group_kind, cursor, only, limit)
    }

    /// The state object `id` was collected in, if its log kept it.
    pub(crate) fn collected_image(&self, id: ObjectId) -> Result<Option<RawObject>> {
        write_log::collected_image(self.conn, id)
    }
}
