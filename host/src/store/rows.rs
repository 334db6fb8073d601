//! The SQL behind objects, conditions and edges, on any connection: the
//! writer's inside a job, or a pooled reader.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::{Error, Result};
use crate::json::Json;
use crate::object::{
    Condition, ConditionStatus, GroupKind, Loads, Meta, ObjectId, ObjectRef, RawObject, Relations,
    Timestamp,
};
use crate::store::events;

/// A row as read, before conditions and relations are attached.
pub(crate) type ObjectRow = RawObject;

const COLUMNS: &str = "id, grp, kind, name, spec, status, spec_version, status_version, \
     generation, observed_generation, observed_at, resource_version, deletion_requested_at, \
     finalizers, created_at, updated_at, reconcile_owed, requeue_at";

fn object_from_row(row: &Row<'_>) -> rusqlite::Result<RawObject> {
    let finalizers: String = row.get(13)?;
    let finalizers: Vec<String> = serde_json::from_str(&finalizers).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(13, rusqlite::types::Type::Text, Box::new(e))
    })?;
    Ok(RawObject {
        meta: Meta {
            id: row.get(0)?,
            group_kind: GroupKind::new(row.get::<_, String>(1)?, row.get::<_, String>(2)?),
            name: row.get(3)?,
            spec_version: row.get(6)?,
            status_version: row.get(7)?,
            generation: row.get(8)?,
            observed_generation: row.get(9)?,
            observed_at: row.get::<_, Option<i64>>(10)?.map(Timestamp::from_millis),
            resource_version: row.get(11)?,
            deletion_requested_at: row.get::<_, Option<i64>>(12)?.map(Timestamp::from_millis),
            finalizers,
            conditions: Vec::new(),
            created_at: Timestamp::from_millis(row.get(14)?),
            updated_at: Timestamp::from_millis(row.get(15)?),
            reconcile_owed: row.get(16)?,
            requeue_at: row.get::<_, Option<i64>>(17)?.map(Timestamp::from_millis),
        },
        spec: Json::from_stored(row.get(4)?),
        status: row.get::<_, Option<String>>(5)?.map(Json::from_stored),
        relations: Relations::default(),
    })
}

/// The object with `id`, whatever its kind.
pub(crate) fn select_by_id(conn: &Connection, id: ObjectId) -> Result<Option<ObjectRow>> {
    let sql = format!("SELECT {COLUMNS} FROM objects WHERE id = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([id], object_from_row)
        .optional()?)
}

/// The object of kind `gk` holding `name`.
pub(crate) fn select_by_name(
    conn: &Connection,
    gk: &GroupKind,
    name: &str,
) -> Result<Option<ObjectRow>> {
    let sql = format!("SELECT {COLUMNS} FROM objects WHERE grp = ?1 AND kind = ?2 AND name = ?3");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row(params![gk.group, gk.kind, name], object_from_row)
        .optional()?)
}

/// Every object of kind `gk`, by id.
pub(crate) fn select_kind(conn: &Connection, gk: &GroupKind) -> Result<Vec<ObjectRow>> {
    let sql = format!("SELECT {COLUMNS} FROM objects WHERE grp = ?1 AND kind = ?2 ORDER BY id");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![gk.group, gk.kind], object_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Up to `limit` objects of kind `gk` with ids above `after`, by id.
pub(crate) fn select_kind_page(
    conn: &Connection,
    gk: &GroupKind,
    after: ObjectId,
    limit: usize,
) -> Result<Vec<ObjectRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM objects WHERE grp = ?1 AND kind = ?2 AND id > ?3 ORDER BY id LIMIT ?4"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![gk.group, gk.kind, after, limit as i64],
        object_from_row,
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The objects of kind `gk` owned by `owner`, by id: the kind filter and the
/// row read fold into the edge join.
pub(crate) fn select_owned(
    conn: &Connection,
    gk: &GroupKind,
    owner: ObjectId,
) -> Result<Vec<ObjectRow>> {
    let columns = COLUMNS
        .split(", ")
        .map(|c| format!("o.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT {columns} FROM edges e JOIN objects o ON o.id = e.from_id \
         WHERE e.to_id = ?1 AND e.relation = 'owned_by' AND o.grp = ?2 AND o.kind = ?3 \
         ORDER BY o.id"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![owner, gk.group, gk.kind], object_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Whether `id` is owned by `owner`.
pub(crate) fn is_owned_by(conn: &Connection, id: ObjectId, owner: ObjectId) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM edges \
             WHERE from_id = ?1 AND to_id = ?2 AND relation = 'owned_by')",
        )?
        .query_row([id, owner], |row| row.get(0))?)
}

fn ids_json(objects: &[RawObject]) -> String {
    let ids: Vec<ObjectId> = objects.iter().map(|o| o.meta.id).collect();
    serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into())
}

/// Attaches each object's conditions: one query however many objects.
///
/// A liveness condition written by another store session reads back as
/// `Unknown` with `unconfirmed` set, keeping the stored stamps and text.
pub(crate) fn load_conditions(
    conn: &Connection,
    session: i64,
    objects: &mut [RawObject],
) -> Result<()> {
    if objects.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT object_id, type, status, reason, message, liveness, written_session, \
                transitioned_at, updated_at \
         FROM conditions WHERE object_id IN (SELECT value FROM json_each(?1)) \
         ORDER BY object_id, type",
    )?;
    let mut by_object: HashMap<ObjectId, Vec<Condition>> = HashMap::new();
    let rows = stmt.query_map([ids_json(objects)], |row| {
        let liveness: bool = row.get(5)?;
        let written_session: i64 = row.get(6)?;
        let stale = liveness && written_session != session;
        let status: String = row.get(2)?;
        Ok((
            row.get::<_, ObjectId>(0)?,
            Condition {
                type_: row.get(1)?,
                status: if stale {
                    ConditionStatus::Unknown
                } else {
                    ConditionStatus::from_stored(&status)
                },
                reason: row.get(3)?,
                message: row.get(4)?,
                liveness,
                unconfirmed: stale,
                transitioned_at: Timestamp::from_millis(row.get(7)?),
                updated_at: Timestamp::from_millis(row.get(8)?),
            },
        ))
    })?;
    for row in rows {
        let (id, condition) = row?;
        by_object.entry(id).or_default().push(condition);
    }
    for object in objects.iter_mut() {
        object.meta.conditions = by_object.remove(&object.meta.id).unwrap_or_default();
    }
    Ok(())
}

/// One direction of one edge relation.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Direction {
    /// Outgoing `owned_by`: the owner.
    Owner,
    /// Outgoing `depends_on`.
    Dependencies,
    /// Incoming `depends_on`.
    Dependents,
    /// Incoming `owned_by`: the children.
    Owned,
}

impl Direction {
    fn sql(self) -> &'static str {
        match self {
            Direction::Owner => {
                "SELECT e.from_id, o.id, o.grp, o.kind FROM edges e JOIN objects o ON o.id = e.to_id \
                 WHERE e.from_id IN (SELECT value FROM json_each(?1)) AND e.relation = 'owned_by' \
                 ORDER BY e.from_id, o.id"
            }
            Direction::Dependencies => {
                "SELECT e.from_id, o.id, o.grp, o.kind FROM edges e JOIN objects o ON o.id = e.to_id \
                 WHERE e.from_id IN (SELECT value FROM json_each(?1)) AND e.relation = 'depends_on' \
                 ORDER BY e.from_id, o.id"
            }
            Direction::Dependents => {
                "SELECT e.to_id, o.id, o.grp, o.kind FROM edges e JOIN objects o ON o.id = e.from_id \
                 WHERE e.to_id IN (SELECT value FROM json_each(?1)) AND e.relation = 'depends_on' \
                 ORDER BY e.to_id, o.id"
            }
            Direction::Owned => {
                "SELECT e.to_id, o.id, o.grp, o.kind FROM edges e JOIN objects o ON o.id = e.from_id \
                 WHERE e.to_id IN (SELECT value FROM json_each(?1)) AND e.relation = 'owned_by' \
                 ORDER BY e.to_id, o.id"
            }
        }
    }
}

fn refs_by_object(
    conn: &Connection,
    direction: Direction,
    ids_json: &str,
) -> Result<HashMap<ObjectId, Vec<ObjectRef>>> {
    let mut stmt = conn.prepare_cached(direction.sql())?;
    let rows = stmt.query_map([ids_json], |row| {
        Ok((
            row.get::<_, ObjectId>(0)?,
            ObjectRef {
                id: row.get(1)?,
                group_kind: GroupKind::new(row.get::<_, String>(2)?, row.get::<_, String>(3)?),
            },
        ))
    })?;
    let mut by_object: HashMap<ObjectId, Vec<ObjectRef>> = HashMap::new();
    for row in rows {
        let (id, target) = row?;
        by_object.entry(id).or_default().push(target);
    }
    Ok(by_object)
}

/// The objects at the other end of `id`'s edges in one direction, by id.
pub(crate) fn select_refs(
    conn: &Connection,
    id: ObjectId,
    direction: Direction,
) -> Result<Vec<ObjectRef>> {
    let mut by_object = refs_by_object(conn, direction, &format!("[{id}]"))?;
    Ok(by_object.remove(&id).unwrap_or_default())
}

/// Attaches the requested relations: one query per relation, however many objects.
pub(crate) fn load_relations(
    conn: &Connection,
    loads: Loads,
    objects: &mut [RawObject],
) -> Result<()> {
    if !loads.any() || objects.is_empty() {
        return Ok(());
    }
    if loads.events {
        for object in objects.iter_mut() {
            let all = crate::event::EventFilter::all();
            object.relations.events = Some(events::list_events(conn, object.meta.id, &all)?);
        }
    }
    let ids = ids_json(objects);
    let wanted = [
        (loads.owner, Direction::Owner),
        (loads.dependencies, Direction::Dependencies),
        (loads.dependents, Direction::Dependents),
        (loads.owned, Direction::Owned),
    ];
    for (wanted, direction) in wanted {
        if !wanted {
            continue;
        }
        let mut by_object = refs_by_object(conn, direction, &ids)?;
        for object in objects.iter_mut() {
            let refs = by_object.remove(&object.meta.id).unwrap_or_default();
            let relations = &mut object.relations;
            match direction {
                Direction::Owner => relations.owner = Some(refs.into_iter().next()),
                Direction::Dependencies => relations.dependencies = Some(refs),
                Direction::Dependents => relations.dependents = Some(refs),
                Direction::Owned => relations.owned = Some(refs),
            }
        }
    }
    Ok(())
}

/// What a create writes.
pub(crate) struct NewObject<'a> {
    pub(crate) group_kind: &'a GroupKind,
    pub(crate) name: &'a str,
    pub(crate) spec: &'a Json,
    /// The schema version the spec is written at.
    pub(crate) spec_version: i64,
    pub(crate) finalizers: &'a [String],
    pub(crate) id: ObjectId,
    pub(crate) resource_version: i64,
    pub(crate) now: Timestamp,
}

/// Inserts a new object at generation 1 and returns it as stored.
///
/// # Errors
/// [`Error::NameTaken`] when a live or deletion-pending row holds the name.
pub(crate) fn insert_object(conn: &Connection, new: NewObject<'_>) -> Result<RawObject> {
    new.spec.check_size()?;
    let finalizers = serde_json::to_string(new.finalizers)
        .map_err(|e| Error::Internal(format!("finalizers do not serialise: {e}")))?;
    let inserted = conn
        .prepare_cached(
            "INSERT INTO objects (id, grp, kind, name, spec, generation, resource_version, \
                                  finalizers, created_at, updated_at, spec_version) \
             VALUES (?8, ?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?7, ?9)",
        )?
        .execute(params![
            new.group_kind.group,
            new.group_kind.kind,
            new.name,
            new.spec.as_str(),
            new.resource_version,
            finalizers,
            new.now.as_millis(),
            new.id,
            new.spec_version,
        ]);
    match inserted {
        Ok(_) => {}
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
        {
            return Err(Error::NameTaken {
                kind: new.group_kind.to_string(),
                name: new.name.to_string(),
            });
        }
        Err(e) => return Err(e.into()),
    }
    Ok(RawObject {
        meta: Meta {
            id: new.id,
            group_kind: new.group_kind.clone(),
            name: new.name.to_string(),
            generation: 1,
            observed_generation: None,
            observed_at: None,
            resource_version: new.resource_version,
            deletion_requested_at: None,
            finalizers: new.finalizers.to_vec(),
            conditions: Vec::new(),
            created_at: new.now,
            updated_at: new.now,
            spec_version: new.spec_version,
            status_version: 0,
            reconcile_owed: 0,
            requeue_at: None,
        },
        spec: new.spec.clone(),
        status: None,
        relations: Relations::default(),
    })
}

/// Writes a new spec onto `object` (a real change), bumping its generation,
/// and updates `object` to match.
pub(crate) fn update_spec(
    conn: &Connection,
    object: &mut RawObject,
    spec: Json,
    spec_version: i64,
    resource_version: i64,
    now: Timestamp,
) -> Result<()> {
    spec.check_size()?;
    conn.prepare_cached(
        "UPDATE objects SET spec = ?2, generation = generation + 1, resource_version = ?3, \
                            updated_at = ?4, spec_version = ?5 \
         WHERE id = ?1",
    )?
    .execute(params![
        object.meta.id,
        spec.as_str(),
        resource_version,
        now.as_millis(),
        spec_version
    ])?;
    object.spec = spec;
    object.meta.spec_version = spec_version;
    object.meta.generation += 1;
    object.meta.resource_version = resource_version;
    object.meta.updated_at = now;
    Ok(())
}

/// Sets the deletion mark on a live `object` and updates `object` to match.
pub(crate) fn mark_deleted(
    conn: &Connection,
    object: &mut RawObject,
    resource_version: i64,
    now: Timestamp,
) -> Result<()> {
    conn.prepare_cached(
        "UPDATE objects SET deletion_requested_at = ?2, resource_version = ?3, updated_at = ?2 \
         WHERE id = ?1 AND deletion_requested_at IS NULL",
    )?
    .execute(params![object.meta.id, now.as_millis(), resource_version])?;
    object.meta.deletion_requested_at = Some(now);
    object.meta.resource_version = resource_version;
    object.meta.updated_at = now;
    Ok(())
}

/// What a write-log entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteOp {
    Create,
    Update,
    Delete,
}

/// One entry of the object write log.
pub(crate) struct LogEntry<'a> {
    pub(crate) resource_version: i64,
    pub(crate) object_id: ObjectId,
    pub(crate) group_kind: &'a GroupKind,
    pub(crate) op: WriteOp,
    pub(crate) written_at: Timestamp,
    /// The final row, on a delete.
    pub(crate) row_image: Option<String>,
}

impl<'a> LogEntry<'a> {
    /// The entry for a write that left `object` as it is now.
    pub(crate) fn of(object: &'a Meta, op: WriteOp) -> Self {
        LogEntry {
            resource_version: object.resource_version,
            object_id: object.id,
            group_kind: &object.group_kind,
            op,
            written_at: object.updated_at,
            row_image: None,
        }
    }
}

/// Appends one entry to the object write log, in the write's own transaction.
pub(crate) fn log_write(conn: &Connection, entry: LogEntry<'_>) -> Result<()> {
    let op = match entry.op {
        WriteOp::Create => "create",
        WriteOp::Update => "update",
        WriteOp::Delete => "delete",
    };
    conn.prepare_cached(
        "INSERT INTO object_writes (resource_version, object_id, grp, kind, op, written_at, row_image) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        entry.resource_version,
        entry.object_id,
        entry.group_kind.group,
        entry.group_kind.kind,
        op,
        entry.written_at.as_millis(),
        entry.row_image,
    ])?;
    Ok(())
}

/// Records that `from` is owned by `owner`.
pub(crate) fn insert_owner_edge(conn: &Connection, from: ObjectId, owner: ObjectId) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO edges (from_id, relation, to_id) VALUES (?1, 'owned_by', ?2)",
    )?
    .execute([from, owner])?;
    Ok(())
}

/// The kind of object `id` and whether it is being deleted, if it exists.
pub(crate) fn select_kind_and_deletion(
    conn: &Connection,
    id: ObjectId,
) -> Result<Option<(GroupKind, bool)>> {
    Ok(conn
        .prepare_cached(
            "SELECT grp, kind, deletion_requested_at IS NOT NULL FROM objects WHERE id = ?1",
        )?
        .query_row([id], |row| {
            Ok((
                GroupKind::new(row.get::<_, String>(0)?, row.get::<_, String>(1)?),
                row.get::<_, bool>(2)?,
            ))
        })
        .optional()?)
}
