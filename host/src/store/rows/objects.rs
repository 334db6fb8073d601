//! The `objects` table and the write log's entries, on any connection (the
//! writer's inside a job, or a pooled reader): objects are read with their
//! conditions and relations attached.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::json::Json;
use crate::object::{
    Bookkeeping, Condition, ConditionStatus, GroupKind, Labels, Loads, Meta, ObjectId, ObjectRef,
    RawObject, Relations, Timestamp,
};
use crate::store::backend::{Conn, Dialect, Param, Row, RowCount, params};
use crate::store::rows::events;
use crate::trace::TraceContext;

/// A row as read, before conditions and relations are attached.
pub(crate) type ObjectRow = RawObject;

/// An object row's columns, in the order `object_from_row` reads them; a
/// macro so the hottest queries below are whole string constants.
macro_rules! object_columns {
    () => {
        "id, grp, kind, name, spec, status, spec_version, status_version, \
         generation, observed_generation, observed_at, resource_version, deletion_requested_at, \
         finalizers, created_at, updated_at, reconcile_owed, requeue_at, labels, trace_parent"
    };
}

const COLUMNS: &str = object_columns!();

/// The rows of the id list parameter `?1` in SQLite, to join a table to:
/// `IN (SELECT value FROM json_each(?1))` would build a temporary b-tree of
/// the list on every run, which cost a pass's load more than its rows.
/// A join driven by the list yields each id once only if the list holds it
/// once ([`unique_ids`]), and in no promised order.
macro_rules! sqlite_id_list {
    () => {
        "(SELECT value FROM json_each(?1)) AS ids CROSS JOIN "
    };
}

/// The objects whose ids are in parameter `?1`, each with the ids of what
/// it depends on as a comma-separated list, or NULL (column 20); `$list` is
/// the dialect's aggregate of `to_id`, `$from` the dialect's way to the rows.
macro_rules! select_with_dependencies {
    ($list:literal, $from:expr) => {
        concat!(
            "SELECT ",
            object_columns!(),
            ", (SELECT ",
            $list,
            " FROM edges WHERE from_id = objects.id AND relation = 'depends_on') FROM ",
            $from
        )
    };
}

/// The objects whose ids are in parameter `?1`, with NULL for column 20.
macro_rules! select_without_dependencies {
    ($from:expr) => {
        concat!("SELECT ", object_columns!(), ", NULL FROM ", $from)
    };
}

/// The conditions of the objects whose ids are in parameter `?1`.
macro_rules! select_conditions {
    ($from:expr) => {
        concat!(
            "SELECT c.object_id, c.type, c.status, c.reason, c.message, c.liveness, \
                    c.written_session, c.transitioned_at, c.updated_at FROM ",
            $from
        )
    };
}

fn object_from_row(row: &Row<'_>) -> Result<RawObject> {
    let finalizers: String = row.get(13)?;
    let finalizers: Vec<String> = serde_json::from_str(&finalizers)
        .map_err(|e| Error::Internal(format!("stored finalizers do not parse: {e}")))?;
    Ok(RawObject {
        meta: Meta {
            id: row.get(0)?,
            group_kind: group_kind_at(row, 1)?,
            name: row.get(3)?,
            generation: row.get(8)?,
            observed_generation: row.get(9)?,
            observed_at: row.get::<Option<i64>>(10)?.map(Timestamp::from_millis),
            resource_version: row.get(11)?,
            deletion_requested_at: row.get::<Option<i64>>(12)?.map(Timestamp::from_millis),
            finalizers,
            conditions: Vec::new(),
            labels: labels_from(&row.get::<String>(18)?)?,
            created_at: Timestamp::from_millis(row.get(14)?),
            updated_at: Timestamp::from_millis(row.get(15)?),
        },
        spec: Json::from_stored(row.get(4)?),
        status: row.get::<Option<String>>(5)?.map(Json::from_stored),
        relations: Relations::default(),
        bookkeeping: Bookkeeping {
            spec_version: row.get(6)?,
            status_version: row.get(7)?,
            reconcile_owed: row.get(16)?,
            requeue_at: row.get::<Option<i64>>(17)?.map(Timestamp::from_millis),
            // Written only from a parsed context; anything else is no parent.
            trace: row
                .get::<Option<String>>(19)?
                .and_then(|text| TraceContext::parse(&text).ok()),
        },
    })
}

/// Labels as stored: a JSON object of strings (`{}`, the most common, read
/// without a parse).
pub(crate) fn labels_from(text: &str) -> Result<Labels> {
    if text == "{}" {
        return Ok(Labels::new());
    }
    serde_json::from_str(text)
        .map_err(|e| Error::Internal(format!("stored labels do not parse: {e}")))
}

/// Labels as stored.
pub(crate) fn labels_text(labels: &Labels) -> Result<String> {
    serde_json::to_string(labels)
        .map_err(|e| Error::Internal(format!("labels do not serialise: {e}")))
}

/// Replaces object `id`'s labels: the row's map and the index's rows.
pub(crate) fn write_labels(conn: Conn<'_>, id: ObjectId, labels: &Labels) -> Result<()> {
    conn.execute_later(
        "UPDATE objects SET labels = ?2 WHERE id = ?1",
        params![id, labels_text(labels)?.as_str()],
    )?;
    conn.execute_later(
        "DELETE FROM object_labels WHERE object_id = ?1",
        params![id],
    )?;
    index_labels(conn, id, labels)
}

/// Adds object `id`'s labels to the index.
fn index_labels(conn: Conn<'_>, id: ObjectId, labels: &Labels) -> Result<()> {
    for (key, value) in labels {
        conn.execute_later(
            "INSERT INTO object_labels (object_id, key, value) VALUES (?1, ?2, ?3)",
            params![id, key.as_str(), value.as_str()],
        )?;
    }
    Ok(())
}

/// The kind held in columns `index` (group) and `index + 1` (kind).
pub(crate) fn group_kind_at(row: &Row<'_>, index: usize) -> Result<GroupKind> {
    Ok(GroupKind::new(
        row.get::<String>(index)?,
        row.get::<String>(index + 1)?,
    ))
}

/// The object with `id`, whatever its kind.
pub(crate) fn select_by_id(conn: Conn<'_>, id: ObjectId) -> Result<Option<ObjectRow>> {
    let sql = format!("SELECT {COLUMNS} FROM objects WHERE id = ?1");
    conn.query_opt(&sql, params![id], object_from_row)
}

/// The object of kind `gk` holding `name`.
pub(crate) fn select_by_name(
    conn: Conn<'_>,
    gk: &GroupKind,
    name: &str,
) -> Result<Option<ObjectRow>> {
    let sql = format!("SELECT {COLUMNS} FROM objects WHERE grp = ?1 AND kind = ?2 AND name = ?3");
    conn.query_opt(&sql, params![&gk.group, &gk.kind, name], object_from_row)
}

/// Every object of kind `gk`, by id.
pub(crate) fn select_kind(conn: Conn<'_>, gk: &GroupKind) -> Result<Vec<ObjectRow>> {
    let sql = format!("SELECT {COLUMNS} FROM objects WHERE grp = ?1 AND kind = ?2 ORDER BY id");
    conn.query_all(&sql, params![&gk.group, &gk.kind], object_from_row)
}

/// Up to `limit` objects of kind `gk` with ids above `after`, by id.
pub(crate) fn select_kind_page(
    conn: Conn<'_>,
    gk: &GroupKind,
    after: ObjectId,
    limit: usize,
) -> Result<Vec<ObjectRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM objects WHERE grp = ?1 AND kind = ?2 AND id > ?3 ORDER BY id LIMIT ?4"
    );
    conn.query_all(
        &sql,
        params![&gk.group, &gk.kind, after, limit as i64],
        object_from_row,
    )
}

/// The objects of kind `gk` owned by `owner`, by id: the kind filter and the
/// row read fold into the edge join.
pub(crate) fn select_owned(
    conn: Conn<'_>,
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
    conn.query_all(&sql, params![owner, &gk.group, &gk.kind], object_from_row)
}

/// The objects of kind `gk` that may match `selector`, by id: those
/// carrying the label its first `in`/`=` or exists requirement names, read
/// through the label index, or every object of the kind when it has none.
/// The caller checks the whole selector. With `page` (`after`, `limit`),
/// only up to `limit` rows with ids above `after`.
pub(crate) fn select_by_selector(
    conn: Conn<'_>,
    gk: &GroupKind,
    selector: &crate::object::Selector,
    page: Option<(ObjectId, usize)>,
) -> Result<Vec<ObjectRow>> {
    use crate::object::Requirement;
    let indexed = selector.requirements().iter().find_map(|r| match r {
        Requirement::In(key, values) => Some((key, values.as_slice())),
        Requirement::Exists(key) => Some((key, &[][..])),
        _ => None,
    });
    let Some((key, values)) = indexed else {
        return match page {
            Some((after, limit)) => select_kind_page(conn, gk, after, limit),
            None => select_kind(conn, gk),
        };
    };
    let columns = COLUMNS
        .split(", ")
        .map(|c| format!("o.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let (after, limit) = page.unwrap_or((0, i64::MAX as usize));
    let mut params: Vec<Param<'_>> = vec![
        Param::from(&gk.group),
        Param::from(&gk.kind),
        Param::from(key.as_str()),
        Param::from(after),
        Param::from(limit as i64),
    ];
    let mut sql = format!(
        "SELECT {columns} FROM object_labels l JOIN objects o ON o.id = l.object_id \
         WHERE l.key = ?3 AND o.grp = ?1 AND o.kind = ?2 AND o.id > ?4"
    );
    if !values.is_empty() {
        let placeholders: Vec<String> = (0..values.len()).map(|i| format!("?{}", i + 6)).collect();
        sql += &format!(" AND l.value IN ({})", placeholders.join(", "));
        params.extend(values.iter().map(|v| Param::from(v.as_str())));
    }
    sql += " ORDER BY o.id LIMIT ?5";
    conn.query_all(&sql, &params, object_from_row)
}

/// Whether `id` is owned by `owner`.
pub(crate) fn is_owned_by(conn: Conn<'_>, id: ObjectId, owner: ObjectId) -> Result<bool> {
    conn.exists(
        "SELECT 1 FROM edges WHERE from_id = ?1 AND to_id = ?2 AND relation = 'owned_by'",
        params![id, owner],
    )
}

fn ids_of(objects: &[RawObject]) -> Vec<ObjectId> {
    unique_ids(objects.iter().map(|o| o.meta.id).collect())
}

/// `ids` sorted, each once: an id list parameter's rows are joined, not
/// matched with `IN`, so a repeated id would repeat its rows.
fn unique_ids(mut ids: Vec<ObjectId>) -> Vec<ObjectId> {
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Attaches each object's conditions: one query however many objects.
///
/// A liveness condition written by another store session reads back as
/// `Unknown` with `unconfirmed` set, keeping the stored stamps and text.
pub(crate) fn load_conditions(
    conn: Conn<'_>,
    session: i64,
    objects: &mut [RawObject],
) -> Result<()> {
    if objects.is_empty() {
        return Ok(());
    }
    let ids = ids_of(objects);
    let rows = conn.query_all(conditions_sql(conn), params![ids.as_slice()], |row| {
        condition_from_row(row, session)
    })?;
    attach_conditions(objects, rows);
    Ok(())
}

/// The conditions of the objects whose ids are in parameter `?1`.
fn conditions_sql(conn: Conn<'_>) -> &'static str {
    match conn.dialect() {
        Dialect::Sqlite => select_conditions!(concat!(
            sqlite_id_list!(),
            "conditions c ON c.object_id = ids.value"
        )),
        Dialect::Postgres => select_conditions!("conditions c WHERE c.object_id = ANY(?1)"),
    }
}

fn condition_from_row(row: &Row<'_>, session: i64) -> Result<(ObjectId, Condition)> {
    let liveness: bool = row.get(5)?;
    let written_session: i64 = row.get(6)?;
    let stale = liveness && written_session != session;
    let status = match row.get::<String>(2)?.as_str() {
        _ if stale => ConditionStatus::Unknown,
        "True" => ConditionStatus::True,
        "False" => ConditionStatus::False,
        // The schema's CHECK admits nothing else.
        _ => ConditionStatus::Unknown,
    };
    Ok((
        row.get::<ObjectId>(0)?,
        Condition {
            type_: row.get(1)?,
            status,
            reason: row.get(3)?,
            message: row.get(4)?,
            liveness,
            unconfirmed: stale,
            transitioned_at: Timestamp::from_millis(row.get(7)?),
            updated_at: Timestamp::from_millis(row.get(8)?),
        },
    ))
}

/// Gives each object its conditions, ordered by type.
fn attach_conditions(objects: &mut [RawObject], rows: Vec<(ObjectId, Condition)>) {
    let mut by_object: HashMap<ObjectId, Vec<Condition>> = HashMap::new();
    for (id, condition) in rows {
        by_object.entry(id).or_default().push(condition);
    }
    for object in objects.iter_mut() {
        let mut conditions = by_object.remove(&object.meta.id).unwrap_or_default();
        conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
        object.meta.conditions = conditions;
    }
}

/// The objects with `ids` (whatever their kind) that exist, by id, with
/// their conditions, and the ids of what each depends on (if `dependencies`
/// asks; else none), asked together: one round trip in PostgreSQL.
pub(crate) fn select_with_conditions(
    conn: Conn<'_>,
    ids: &[ObjectId],
    session: i64,
    dependencies: bool,
) -> Result<Vec<(RawObject, Vec<ObjectId>)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = unique_ids(ids.to_vec());
    let ids = ids.as_slice();
    let object_sql = match (conn.dialect(), dependencies) {
        (Dialect::Sqlite, true) => select_with_dependencies!(
            "group_concat(to_id)",
            concat!(sqlite_id_list!(), "objects ON objects.id = ids.value")
        ),
        (Dialect::Sqlite, false) => select_without_dependencies!(concat!(
            sqlite_id_list!(),
            "objects ON objects.id = ids.value"
        )),
        (Dialect::Postgres, true) => {
            select_with_dependencies!("string_agg(to_id::text, ',')", "objects WHERE id = ANY(?1)")
        }
        (Dialect::Postgres, false) => select_without_dependencies!("objects WHERE id = ANY(?1)"),
    };
    let (found, conditions) = conn.query_two(
        (object_sql, params![ids]),
        (conditions_sql(conn), params![ids]),
        |row| Ok((object_from_row(row)?, id_list(row.get(20)?)?)),
        |row| condition_from_row(row, session),
    )?;
    let mut found = found;
    found.sort_by_key(|(object, _)| object.meta.id);
    let (mut objects, dependencies): (Vec<RawObject>, Vec<Vec<ObjectId>>) =
        found.into_iter().unzip();
    attach_conditions(&mut objects, conditions);
    Ok(objects.into_iter().zip(dependencies).collect())
}

/// The ids of a comma-separated list as the store aggregates them.
fn id_list(list: Option<String>) -> Result<Vec<ObjectId>> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    list.split(',')
        .map(|id| {
            id.parse()
                .map_err(|_| Error::Internal(format!("a stored id list does not parse: {list}")))
        })
        .collect()
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
    /// The edge column holding the objects asked about, the one holding the
    /// objects at the other end, and the relation.
    fn columns(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Direction::Owner => ("from_id", "to_id", "owned_by"),
            Direction::Dependencies => ("from_id", "to_id", "depends_on"),
            Direction::Dependents => ("to_id", "from_id", "depends_on"),
            Direction::Owned => ("to_id", "from_id", "owned_by"),
        }
    }

    fn sql(self, conn: Conn<'_>) -> String {
        let (near, far, relation) = self.columns();
        let select = format!("SELECT e.{near}, o.id, o.grp, o.kind FROM ");
        match conn.dialect() {
            Dialect::Sqlite => format!(
                "{select}{}edges e ON e.{near} = ids.value AND e.relation = '{relation}' \
                 JOIN objects o ON o.id = e.{far}",
                sqlite_id_list!()
            ),
            Dialect::Postgres => format!(
                "{select}edges e JOIN objects o ON o.id = e.{far} \
                 WHERE e.{near} = ANY(?1) AND e.relation = '{relation}'"
            ),
        }
    }
}

fn refs_by_object(
    conn: Conn<'_>,
    direction: Direction,
    ids: &[ObjectId],
) -> Result<HashMap<ObjectId, Vec<ObjectRef>>> {
    let rows = conn.query_all(&direction.sql(conn), params![ids], |row| {
        Ok((
            row.get::<ObjectId>(0)?,
            ObjectRef {
                id: row.get(1)?,
                group_kind: group_kind_at(row, 2)?,
            },
        ))
    })?;
    let mut by_object: HashMap<ObjectId, Vec<ObjectRef>> = HashMap::new();
    for (id, target) in rows {
        by_object.entry(id).or_default().push(target);
    }
    for refs in by_object.values_mut() {
        refs.sort_by_key(|target| target.id);
    }
    Ok(by_object)
}

/// The objects at the other end of `id`'s edges in one direction, by id.
pub(crate) fn select_refs(
    conn: Conn<'_>,
    id: ObjectId,
    direction: Direction,
) -> Result<Vec<ObjectRef>> {
    let mut by_object = refs_by_object(conn, direction, &[id])?;
    Ok(by_object.remove(&id).unwrap_or_default())
}

/// Attaches the requested relations: one query per relation, however many objects.
pub(crate) fn load_relations(
    conn: Conn<'_>,
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
    let ids = ids_of(objects);
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
    pub(crate) labels: &'a Labels,
    /// The trace context the write carried (its `traceparent`).
    pub(crate) trace: Option<&'a str>,
    pub(crate) id: ObjectId,
    pub(crate) resource_version: i64,
    pub(crate) now: Timestamp,
}

/// The insert of a new object at generation 1: a taken name inserts
/// nothing rather than failing (in PostgreSQL a failed statement would
/// spoil the rest of the transaction).
macro_rules! insert_object_sql {
    () => {
        "INSERT INTO objects (id, grp, kind, name, spec, generation, resource_version, \
                              finalizers, created_at, updated_at, spec_version, labels, \
                              trace_parent) \
         VALUES (?8, ?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?7, ?9, ?10, ?11) \
         ON CONFLICT DO NOTHING"
    };
}

/// The insert and its write-log entry in one statement (PostgreSQL): the
/// entry exists only if the row does.
const INSERT_OBJECT_AND_LOG: &str = concat!(
    "WITH created AS (",
    insert_object_sql!(),
    " RETURNING id) \
     INSERT INTO object_writes (resource_version, object_id, grp, kind, op, written_at) \
     SELECT ?5, id, ?1, ?2, 'create', ?7 FROM created"
);

/// Inserts a new object at generation 1 and returns it as stored.
///
/// # Errors
/// [`Error::NameTaken`] when a live or deletion-pending row holds the name.
pub(crate) fn insert_object(conn: Conn<'_>, new: NewObject<'_>) -> Result<RawObject> {
    new.spec.check_limits()?;
    let finalizers = finalizers_text(new.finalizers)?;
    let labels = labels_text(new.labels)?;
    if conn.execute(
        insert_object_sql!(),
        &insert_params(&new, &finalizers, &labels),
    )? == 0
    {
        return Err(Error::NameTaken {
            kind: new.group_kind.to_string(),
            name: new.name.to_string(),
        });
    }
    index_labels(conn, new.id, new.labels)?;
    log_create(conn, &new)?;
    Ok(stored_new(new))
}

/// Inserts a new object and logs its creation (PostgreSQL), sent with the
/// next round trip; the count says whether it was created (0: the name
/// was taken, and nothing was written).
pub(crate) fn insert_object_later(
    conn: Conn<'_>,
    new: NewObject<'_>,
) -> Result<(RawObject, RowCount)> {
    new.spec.check_limits()?;
    let finalizers = finalizers_text(new.finalizers)?;
    let labels = labels_text(new.labels)?;
    let params = insert_params(&new, &finalizers, &labels);
    let rows = conn.execute_counted(INSERT_OBJECT_AND_LOG, &params)?;
    // Each insert does nothing for a taken name: the object's id is new,
    // so its label rows are inserted only with the object's own row.
    for (key, value) in new.labels {
        conn.execute_later(
            "INSERT INTO object_labels (object_id, key, value) \
             SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM objects WHERE id = ?1)",
            params![new.id, key.as_str(), value.as_str()],
        )?;
    }
    Ok((stored_new(new), rows))
}

fn finalizers_text(finalizers: &[String]) -> Result<String> {
    serde_json::to_string(finalizers)
        .map_err(|e| Error::Internal(format!("finalizers do not serialise: {e}")))
}

fn insert_params<'p>(
    new: &'p NewObject<'_>,
    finalizers: &'p str,
    labels: &'p str,
) -> [Param<'p>; 11] {
    [
        Param::from(&new.group_kind.group),
        Param::from(&new.group_kind.kind),
        Param::from(new.name),
        Param::from(new.spec.as_str()),
        Param::from(new.resource_version),
        Param::from(finalizers),
        Param::from(new.now.as_millis()),
        Param::from(new.id),
        Param::from(new.spec_version),
        Param::from(labels),
        Param::from(new.trace),
    ]
}

fn log_create(conn: Conn<'_>, new: &NewObject<'_>) -> Result<()> {
    log_write(
        conn,
        LogEntry {
            resource_version: new.resource_version,
            object_id: new.id,
            group_kind: new.group_kind,
            op: WriteOp::Create,
            written_at: new.now,
            row_image: None,
        },
    )
}

/// The row [`insert_object`] stores, as read back.
fn stored_new(new: NewObject<'_>) -> RawObject {
    RawObject {
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
            labels: new.labels.clone(),
            created_at: new.now,
            updated_at: new.now,
        },
        spec: new.spec.clone(),
        status: None,
        relations: Relations::default(),
        bookkeeping: Bookkeeping {
            spec_version: new.spec_version,
            trace: new.trace.and_then(|text| TraceContext::parse(text).ok()),
            ..Bookkeeping::default()
        },
    }
}

/// A new spec, the version it is written at, and the trace context the
/// write carried (none clears the one an earlier write left).
pub(crate) struct SpecChange {
    pub(crate) spec: Json,
    pub(crate) spec_version: i64,
    pub(crate) trace: Option<TraceContext>,
}

/// Writes a new spec onto `object` (a real change), bumping its generation,
/// and updates `object` to match.
pub(crate) fn update_spec(
    conn: Conn<'_>,
    object: &mut RawObject,
    change: SpecChange,
    resource_version: i64,
    now: Timestamp,
) -> Result<()> {
    let SpecChange {
        spec,
        spec_version,
        trace,
    } = change;
    spec.check_limits()?;
    let traceparent = trace.map(|t| t.traceparent());
    conn.execute_later(
        "UPDATE objects SET spec = ?2, generation = generation + 1, resource_version = ?3, \
                            updated_at = ?4, spec_version = ?5, trace_parent = ?6 \
         WHERE id = ?1",
        params![
            object.meta.id,
            spec.as_str(),
            resource_version,
            now.as_millis(),
            spec_version,
            traceparent.as_deref()
        ],
    )?;
    object.bookkeeping.trace = trace;
    object.spec = spec;
    object.bookkeeping.spec_version = spec_version;
    object.meta.generation += 1;
    object.meta.resource_version = resource_version;
    object.meta.updated_at = now;
    Ok(())
}

/// Sets the deletion mark on a live `object` and updates `object` to match.
pub(crate) fn mark_deleted(
    conn: Conn<'_>,
    object: &mut RawObject,
    resource_version: i64,
    now: Timestamp,
) -> Result<()> {
    conn.execute_later(
        "UPDATE objects SET deletion_requested_at = ?2, resource_version = ?3, updated_at = ?2 \
         WHERE id = ?1 AND deletion_requested_at IS NULL",
        params![object.meta.id, now.as_millis(), resource_version],
    )?;
    object.meta.deletion_requested_at = Some(now);
    object.meta.resource_version = resource_version;
    object.meta.updated_at = now;
    Ok(())
}

/// Sets the deletion mark on object `id`, whatever it held.
pub(crate) fn mark_deleted_by_id(
    conn: Conn<'_>,
    id: ObjectId,
    resource_version: i64,
    now: Timestamp,
) -> Result<()> {
    conn.execute_later(
        "UPDATE objects SET deletion_requested_at = ?2, resource_version = ?3, updated_at = ?2 \
         WHERE id = ?1",
        params![id, now.as_millis(), resource_version],
    )
}

/// Removes object `id`'s row (its edges and conditions go with it).
pub(crate) fn delete_row(conn: Conn<'_>, id: ObjectId) -> Result<()> {
    conn.execute_later("DELETE FROM objects WHERE id = ?1", params![id])
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
pub(crate) fn log_write(conn: Conn<'_>, entry: LogEntry<'_>) -> Result<()> {
    let op = match entry.op {
        WriteOp::Create => "create",
        WriteOp::Update => "update",
        WriteOp::Delete => "delete",
    };
    conn.execute_later(
        "INSERT INTO object_writes (resource_version, object_id, grp, kind, op, written_at, row_image) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            entry.resource_version,
            entry.object_id,
            &entry.group_kind.group,
            &entry.group_kind.kind,
            op,
            entry.written_at.as_millis(),
            entry.row_image.as_deref(),
        ],
    )?;
    Ok(())
}

/// The kind of object `id` and whether it is being deleted, if it exists.
pub(crate) fn select_kind_and_deletion(
    conn: Conn<'_>,
    id: ObjectId,
) -> Result<Option<(GroupKind, bool)>> {
    conn.query_opt(
        "SELECT grp, kind, deletion_requested_at IS NOT NULL FROM objects WHERE id = ?1",
        params![id],
        |row| Ok((group_kind_at(row, 0)?, row.get::<bool>(2)?)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migrated() -> (tempfile::TempDir, rusqlite::Connection) {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
        crate::store::schema::sqlite::migrate(&mut conn).unwrap();
        (dir, conn)
    }

    fn builds_a_temporary_btree(conn: &rusqlite::Connection, sql: &str) -> bool {
        let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let opcodes: Vec<String> = explain
            .query_map(["[1]"], |row| row.get(1))
            .unwrap()
            .map(|opcode| opcode.unwrap())
            .collect();
        opcodes.iter().any(|opcode| opcode == "OpenEphemeral")
    }

    #[test]
    fn reading_by_an_id_list_builds_no_temporary_btree() {
        let (_dir, conn) = migrated();
        let sqlite = Conn::Sqlite(&conn);
        let mut statements = vec![
            select_with_dependencies!(
                "group_concat(to_id)",
                concat!(sqlite_id_list!(), "objects ON objects.id = ids.value")
            )
            .to_string(),
            conditions_sql(sqlite).to_string(),
        ];
        for direction in [
            Direction::Owner,
            Direction::Dependencies,
            Direction::Dependents,
            Direction::Owned,
        ] {
            statements.push(direction.sql(sqlite));
        }
        for sql in statements {
            assert!(!builds_a_temporary_btree(&conn, &sql), "{sql}");
        }
    }

    #[test]
    fn an_id_asked_for_twice_is_read_once_and_objects_come_in_id_order() {
        let (_dir, conn) = migrated();
        conn.execute_batch(
            "INSERT INTO objects (id, grp, kind, name, spec, generation, resource_version, created_at, updated_at)
             VALUES (7, 'g', 'K', 'b', '{}', 1, 1, 0, 0), (3, 'g', 'K', 'a', '{}', 1, 2, 0, 0);
             INSERT INTO conditions VALUES (7, 'Synced', 'True', 'R', 'm', 0, 1, 0, 0),
                                           (7, 'Ready', 'False', 'R', 'm', 0, 1, 0, 0);",
        )
        .unwrap();
        let found = select_with_conditions(Conn::Sqlite(&conn), &[7, 3, 7], 1, true).unwrap();
        let ids: Vec<ObjectId> = found.iter().map(|(object, _)| object.meta.id).collect();
        assert_eq!(ids, [3, 7]);
        let types: Vec<&str> = found[1]
            .0
            .meta
            .conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, ["Ready", "Synced"]);
    }
}
