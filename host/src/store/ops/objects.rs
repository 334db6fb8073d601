//! Writes to objects, composed: create, update, mark for deletion. Each
//! runs inside a write job, logs what it changed and pushes the objects that
//! owe a pass because of it.

use crate::error::{Error, Result};
use crate::json::Json;
use crate::object::{GroupKind, Labels, ObjectId, RawObject};
use crate::store::backend::Dialect;
use crate::store::ops::dependencies;
use crate::store::rows::edges;
use crate::store::rows::objects::{self as rows, LogEntry, NewObject, SpecChange, WriteOp};
use crate::store::writer::{Hook, Push, WriteTx};
use crate::trace::TraceContext;

/// Everything a create needs once it holds the writer.
pub(crate) struct Create {
    pub(crate) group_kind: GroupKind,
    /// Checked against the naming policy before it reaches the writer.
    pub(crate) name: String,
    pub(crate) spec: Json,
    /// The schema version the spec was written at.
    pub(crate) spec_version: i64,
    /// Must exist when the row is inserted; a deleting owner is woken to see
    /// its new child.
    pub(crate) owner: Option<ObjectId>,
    pub(crate) finalizers: Vec<String>,
    /// Set on the new object; on an existing one, by a create-or-update,
    /// they replace its labels (`None` leaves them).
    pub(crate) labels: Option<Labels>,
    /// Runs only if the row was inserted and its transaction commits.
    pub(crate) on_create: Option<Hook>,
    /// The trace context the write carries, stored with the spec.
    pub(crate) trace: Option<TraceContext>,
}

impl Create {
    /// Inserts the object; the unique index on names refuses a held name.
    fn insert(self, tx: &mut WriteTx<'_>) -> Result<RawObject> {
        let owner = match self.owner {
            Some(owner) => match rows::select_kind_and_deletion(tx.conn(), owner)? {
                Some((group_kind, deleting)) => Some((owner, group_kind, deleting)),
                None => {
                    return Err(Error::InvalidOption(format!(
                        "owner {owner} does not exist"
                    )));
                }
            },
            None => None,
        };
        let id = tx.next_object_id();
        let resource_version = tx.next_resource_version();
        let no_labels = Labels::new();
        let traceparent = self.trace.map(|t| t.traceparent());
        let new = NewObject {
            group_kind: &self.group_kind,
            name: &self.name,
            spec: &self.spec,
            spec_version: self.spec_version,
            finalizers: &self.finalizers,
            labels: self.labels.as_ref().unwrap_or(&no_labels),
            trace: traceparent.as_deref(),
            id,
            resource_version,
            now: tx.now(),
        };
        // A plain create in a batch on PostgreSQL waits for no answer: a
        // taken name writes nothing, and the count read after the commit
        // fails the job. An owner edge or a hook would need the answer now.
        let answer_later = owner.is_none()
            && self.on_create.is_none()
            && tx.defers_verdicts()
            && tx.conn().dialect() == Dialect::Postgres;
        let object = if answer_later {
            let (object, rows) = rows::insert_object_later(tx.conn(), new)?;
            let taken = Error::NameTaken {
                kind: self.group_kind.to_string(),
                name: self.name.clone(),
            };
            tx.fail_if_nothing_written(rows, taken)?;
            object
        } else {
            rows::insert_object(tx.conn(), new)?
        };
        tx.push(push_for(&object));
        if let Some((owner, group_kind, deleting)) = owner {
            edges::insert_owner_edge(tx.conn(), object.meta.id, owner)?;
            if deleting {
                // The owner waits for its children to go; it must see this one.
                tx.push(Push {
                    id: owner,
                    group_kind,
                });
            }
        }
        if let Some(hook) = self.on_create {
            tx.after_commit(hook);
        }
        Ok(object)
    }
}

/// Creates the object `create` describes.
///
/// # Errors
/// [`Error::NameTaken`] when something holds the name; [`Error::InvalidOption`]
/// for an owner that does not exist.
pub(crate) fn create(tx: &mut WriteTx<'_>, create: Create) -> Result<RawObject> {
    create.insert(tx)
}

/// What holds the name, with its conditions, or the object `create`
/// describes; `true` when it was created.
pub(crate) fn get_or_create(tx: &mut WriteTx<'_>, create: Create) -> Result<(RawObject, bool)> {
    match rows::select_by_name(tx.conn(), &create.group_kind, &create.name)? {
        Some(found) => Ok((tx.reader().with_conditions(found)?, false)),
        None => Ok((create.insert(tx)?, true)),
    }
}

/// Writes `create`'s spec onto what holds the name, or creates it; `true`
/// when it was created.
pub(crate) fn create_or_update(tx: &mut WriteTx<'_>, create: Create) -> Result<(RawObject, bool)> {
    match rows::select_by_name(tx.conn(), &create.group_kind, &create.name)? {
        None => Ok((create.insert(tx)?, true)),
        Some(found) => {
            let change = SpecChange {
                spec: create.spec,
                spec_version: create.spec_version,
                trace: create.trace,
            };
            let mut object = apply_spec(tx, found, change)?;
            if let Some(labels) = create.labels {
                replace_labels(tx, &mut object, labels)?;
            }
            Ok((object, false))
        }
    }
}

/// Replaces the labels of object `id` of `group_kind` with what `change`
/// makes of them.
///
/// # Errors
/// [`Error::NotFound`], [`Error::WrongKind`]; [`Error::InvalidOption`] for
/// labels that break the rules.
pub(crate) fn relabel(
    tx: &mut WriteTx<'_>,
    group_kind: &GroupKind,
    id: ObjectId,
    change: impl FnOnce(&Labels) -> Result<Labels>,
) -> Result<RawObject> {
    let found = select_own_for_write(tx, group_kind, id)?;
    let mut object = tx.reader().with_conditions(found)?;
    let labels = change(&object.meta.labels)?;
    replace_labels(tx, &mut object, labels)?;
    Ok(object)
}

/// Writes `labels` onto `object` if they differ: a write of its own (a new
/// resource version, a log entry watches see) that leaves the generation,
/// and so owes no pass.
fn replace_labels(tx: &mut WriteTx<'_>, object: &mut RawObject, labels: Labels) -> Result<()> {
    if object.meta.labels == labels {
        return Ok(());
    }
    if let Some(problem) = beehive_types::labels_problem(&labels) {
        return Err(Error::InvalidOption(problem));
    }
    let resource_version = tx.next_resource_version();
    rows::write_labels(tx.conn(), object.meta.id, &labels)?;
    crate::store::rows::observed::touch(tx.conn(), object.meta.id, resource_version, tx.now())?;
    object.meta.labels = labels;
    object.meta.resource_version = resource_version;
    object.meta.updated_at = tx.now();
    rows::log_write(tx.conn(), LogEntry::of(&object.meta, WriteOp::Update))
}

/// Writes `spec` onto object `id` of `group_kind`.
pub(crate) fn update(
    tx: &mut WriteTx<'_>,
    group_kind: &GroupKind,
    id: ObjectId,
    change: SpecChange,
) -> Result<RawObject> {
    let found = select_own_for_write(tx, group_kind, id)?;
    apply_spec(tx, found, change)
}

/// Writes `spec` onto what of `group_kind` holds `name`.
pub(crate) fn update_by_name(
    tx: &mut WriteTx<'_>,
    group_kind: &GroupKind,
    name: &str,
    change: SpecChange,
) -> Result<RawObject> {
    let found = rows::select_by_name(tx.conn(), group_kind, name)?
        .ok_or_else(|| Error::not_found(format!("{group_kind}/{name}")))?;
    apply_spec(tx, found, change)
}

/// Marks object `id` of `group_kind` for deletion.
pub(crate) fn delete(tx: &mut WriteTx<'_>, group_kind: &GroupKind, id: ObjectId) -> Result<()> {
    let found = select_own_for_write(tx, group_kind, id)?;
    mark_for_deletion(tx, found)
}

/// Marks what of `group_kind` holds `name` for deletion; nothing is `Ok`.
pub(crate) fn delete_by_name(
    tx: &mut WriteTx<'_>,
    group_kind: &GroupKind,
    name: &str,
) -> Result<()> {
    match rows::select_by_name(tx.conn(), group_kind, name)? {
        Some(found) => mark_for_deletion(tx, found),
        None => Ok(()),
    }
}

/// Reads `id` for an id-keyed write: it must exist and be of this kind.
fn select_own_for_write(
    tx: &WriteTx<'_>,
    group_kind: &GroupKind,
    id: ObjectId,
) -> Result<RawObject> {
    let found = rows::select_by_id(tx.conn(), id)?
        .ok_or_else(|| Error::not_found(format!("{group_kind} {id}")))?;
    if &found.meta.group_kind != group_kind {
        return Err(Error::WrongKind {
            id,
            expected: group_kind.to_string(),
            actual: found.meta.group_kind.to_string(),
        });
    }
    Ok(found)
}

/// Writes `spec` at schema version `spec_version` onto a found row. Equal
/// bytes at the same version write nothing; a row stored at an older
/// version is re-stamped even when the bytes match.
fn apply_spec(tx: &mut WriteTx<'_>, object: RawObject, change: SpecChange) -> Result<RawObject> {
    let (spec, spec_version) = (&change.spec, change.spec_version);
    if object.meta.deletion_requested_at.is_some() {
        return Err(Error::DeletionPending {
            what: object.meta.label(),
        });
    }
    let mut object = tx.reader().with_conditions(object)?;
    // Identical bytes write nothing unless they are written at a newer
    // version (they now mean that version's spec: a new generation); never
    // refused, whichever build wrote them. Different bytes must not be
    // tagged below what a newer build stored.
    if object.spec == *spec && spec_version <= object.bookkeeping.spec_version {
        return Ok(object);
    }
    if spec_version < object.bookkeeping.spec_version {
        return Err(Error::SchemaVersionDowngrade {
            what: object.meta.label(),
            document: "spec",
            stored: object.bookkeeping.spec_version,
            writer: spec_version,
        });
    }
    let resource_version = tx.next_resource_version();
    rows::update_spec(tx.conn(), &mut object, change, resource_version, tx.now())?;
    rows::log_write(tx.conn(), LogEntry::of(&object.meta, WriteOp::Update))?;
    tx.push(push_for(&object));
    Ok(object)
}

/// Sets the deletion mark on a found row; a row already marked is left alone.
fn mark_for_deletion(tx: &mut WriteTx<'_>, mut object: RawObject) -> Result<()> {
    if object.meta.deletion_requested_at.is_some() {
        return Ok(());
    }
    let resource_version = tx.next_resource_version();
    rows::mark_deleted(tx.conn(), &mut object, resource_version, tx.now())?;
    rows::log_write(tx.conn(), LogEntry::of(&object.meta, WriteOp::Update))?;
    tx.push(push_for(&object));
    // A dependent being deleted holds no claim: its deleting targets may go.
    dependencies::push_unblocked_targets(tx, object.meta.id)
}

/// The push announcing that `object` owes a pass.
fn push_for(object: &RawObject) -> Push {
    Push {
        id: object.meta.id,
        group_kind: object.meta.group_kind.clone(),
    }
}
