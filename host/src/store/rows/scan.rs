//! The scans behind the drivers: each reads an index of outstanding work, or
//! the kind, and returns ids to enqueue.

use crate::error::Result;
use crate::object::{GroupKind, ObjectId};
use crate::store::backend::{Conn, params};
use crate::store::rows::objects::group_kind_at;

/// Objects of `gk` that the store records as owing a pass: an unobserved
/// generation, owed dependency wakes, or a pending deletion; at most `limit`
/// of them, in id order, past id `after`. Reads the partial index of
/// outstanding work, never the whole kind.
pub(crate) fn owed_page(
    conn: Conn<'_>,
    gk: &GroupKind,
    after: ObjectId,
    limit: usize,
) -> Result<Vec<ObjectId>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // The WHERE clause repeats the partial index's, so the planner can use it.
    conn.query_all(
        "SELECT id FROM objects \
         WHERE grp = ?1 AND kind = ?2 \
           AND (observed_generation IS NULL \
                OR observed_generation < generation \
                OR reconcile_owed > 0 \
                OR deletion_requested_at IS NOT NULL) \
           AND id > ?3 \
         ORDER BY id LIMIT ?4",
        params![&gk.group, &gk.kind, after, limit],
        |row| row.get(0),
    )
}

/// Every object of `gk`.
pub(crate) fn all_of_kind(conn: Conn<'_>, gk: &GroupKind) -> Result<Vec<ObjectId>> {
    conn.query_all(
        "SELECT id FROM objects WHERE grp = ?1 AND kind = ?2 ORDER BY id",
        params![&gk.group, &gk.kind],
        |row| row.get(0),
    )
}

/// Up to `limit` ids of `gk` past `after`, in id order.
pub(crate) fn ids_after(
    conn: Conn<'_>,
    gk: &GroupKind,
    after: ObjectId,
    limit: usize,
) -> Result<Vec<ObjectId>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    conn.query_all(
        "SELECT id FROM objects WHERE grp = ?1 AND kind = ?2 AND id > ?3 ORDER BY id LIMIT ?4",
        params![&gk.group, &gk.kind, after, limit],
        |row| row.get(0),
    )
}

/// The ids of `gk` from `first` to `last`, both included.
pub(crate) fn ids_between(
    conn: Conn<'_>,
    gk: &GroupKind,
    first: ObjectId,
    last: ObjectId,
) -> Result<Vec<ObjectId>> {
    conn.query_all(
        "SELECT id FROM objects WHERE grp = ?1 AND kind = ?2 AND id >= ?3 AND id <= ?4 \
         ORDER BY id",
        params![&gk.group, &gk.kind, first, last],
        |row| row.get(0),
    )
}

/// Up to `limit` names of `gk`'s objects that start with `prefix`, in
/// order. Names compare byte by byte on both backends, so the names with
/// the prefix are the run that starts at it.
pub(crate) fn names_from(
    conn: Conn<'_>,
    gk: &GroupKind,
    prefix: &str,
    limit: usize,
) -> Result<Vec<String>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let names: Vec<String> = conn.query_all(
        "SELECT name FROM objects WHERE grp = ?1 AND kind = ?2 AND name >= ?3 \
         ORDER BY name LIMIT ?4",
        params![&gk.group, &gk.kind, prefix, limit],
        |row| row.get(0),
    )?;
    Ok(names
        .into_iter()
        .take_while(|name| name.starts_with(prefix))
        .collect())
}

/// How many objects `gk` has.
pub(crate) fn count_of_kind(conn: Conn<'_>, gk: &GroupKind) -> Result<i64> {
    conn.query_one(
        "SELECT COUNT(*) FROM objects WHERE grp = ?1 AND kind = ?2",
        params![&gk.group, &gk.kind],
        |row| row.get(0),
    )
}

/// Objects of `gk` whose last pass asked to run again, and when (milliseconds
/// since the epoch).
pub(crate) fn requeues(conn: Conn<'_>, gk: &GroupKind) -> Result<Vec<(ObjectId, i64)>> {
    conn.query_all(
        "SELECT id, requeue_at FROM objects \
         WHERE grp = ?1 AND kind = ?2 AND requeue_at IS NOT NULL ORDER BY id",
        params![&gk.group, &gk.kind],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

/// Every deletion-pending object, of every kind.
pub(crate) fn deleting(conn: Conn<'_>) -> Result<Vec<(ObjectId, GroupKind)>> {
    conn.query_all(
        "SELECT id, grp, kind FROM objects WHERE deletion_requested_at IS NOT NULL \
         ORDER BY deletion_requested_at, id",
        params![],
        |row| Ok((row.get(0)?, group_kind_at(row, 1)?)),
    )
}

/// Every kind with objects or a registration, sorted.
pub(crate) fn kinds(conn: Conn<'_>) -> Result<Vec<GroupKind>> {
    // The objects' kinds, by skipping through the `(grp, kind, name)`
    // index a kind at a time: two seeks per kind, however many objects
    // each holds (a DISTINCT over `objects` reads every row).
    let mut kinds = Vec::new();
    let mut next = conn.query_opt(FIRST_KIND, params![], |row| group_kind_at(row, 0))?;
    while let Some(kind) = next {
        next = match conn.query_opt(
            NEXT_KIND_IN_GROUP,
            params![&kind.group, &kind.kind],
            |row| group_kind_at(row, 0),
        )? {
            Some(found) => Some(found),
            None => conn.query_opt(FIRST_KIND_AFTER_GROUP, params![&kind.group], |row| {
                group_kind_at(row, 0)
            })?,
        };
        kinds.push(kind);
    }
    // One row per kind: read whole.
    kinds.extend(
        conn.query_all("SELECT grp, kind FROM registrations", params![], |row| {
            group_kind_at(row, 0)
        })?,
    );
    kinds.sort_by(|a, b| (&a.kind, &a.group).cmp(&(&b.kind, &b.group)));
    kinds.dedup();
    Ok(kinds)
}

/// The first kind of the stored objects, in index order.
const FIRST_KIND: &str = "SELECT grp, kind FROM objects ORDER BY grp, kind LIMIT 1";

/// The next kind after `?2` within group `?1`.
const NEXT_KIND_IN_GROUP: &str = "SELECT grp, kind FROM objects WHERE grp = ?1 AND kind > ?2 \
     ORDER BY grp, kind LIMIT 1";

/// The first kind of the next group after `?1`.
const FIRST_KIND_AFTER_GROUP: &str =
    "SELECT grp, kind FROM objects WHERE grp > ?1 ORDER BY grp, kind LIMIT 1";

/// Per kind: its objects, and how many have a generation not yet observed.
pub(crate) fn counts_by_kind(conn: Conn<'_>) -> Result<Vec<(GroupKind, i64, i64)>> {
    let totals: Vec<(GroupKind, i64)> = conn.query_all(COUNT_OBJECTS, params![], |row| {
        Ok((group_kind_at(row, 0)?, row.get(2)?))
    })?;
    let unsettled: std::collections::HashMap<GroupKind, i64> = conn
        .query_all(COUNT_UNSETTLED, params![], |row| {
            Ok((group_kind_at(row, 0)?, row.get(2)?))
        })?
        .into_iter()
        .collect();
    Ok(totals
        .into_iter()
        .map(|(gk, total)| {
            let unsettled = unsettled.get(&gk).copied().unwrap_or(0);
            (gk, total, unsettled)
        })
        .collect())
}

/// Objects per kind, read from the `(grp, kind, name)` index alone: a
/// fraction of the table's pages, which hold the specs and statuses.
const COUNT_OBJECTS: &str =
    "SELECT grp, kind, COUNT(*) FROM objects GROUP BY grp, kind ORDER BY grp, kind";

/// Unsettled objects per kind, read through the partial index of
/// outstanding work (its condition is repeated first so the planner may use
/// it): in a settled store it holds almost nothing.
const COUNT_UNSETTLED: &str = "SELECT grp, kind, COUNT(*) FROM objects \
     WHERE (observed_generation IS NULL \
            OR observed_generation < generation \
            OR reconcile_owed > 0 \
            OR deletion_requested_at IS NOT NULL) \
       AND (observed_generation IS NULL OR observed_generation < generation) \
     GROUP BY grp, kind";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::backend::Conn;

    /// A SQLite database with the store's schema and `objects` rows of the
    /// given kinds, several each.
    fn database(kinds: &[(&str, &str)]) -> rusqlite::Connection {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::store::schema::sqlite::migrate(&mut conn).unwrap();
        let mut id = 0;
        for (group, kind) in kinds {
            for n in 0..3 {
                id += 1;
                conn.execute(
                    "INSERT INTO objects (id, grp, kind, name, spec, generation, resource_version, \
                                          finalizers, created_at, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, '{}', 1, ?1, '[]', 0, 0)",
                    rusqlite::params![id, group, kind, format!("o{n}")],
                )
                .unwrap();
            }
        }
        conn
    }

    #[test]
    fn kinds_lists_each_kind_once_in_order() {
        let conn = database(&[
            ("b.dev", "Web"),
            ("", "Pod"),
            ("a.dev", "Web"),
            ("a.dev", "Db"),
        ]);
        conn.execute(
            "INSERT INTO registrations (grp, kind, finalizers, spec_version, status_version, \
                                        source, registered_at) \
             VALUES ('z.dev', 'Empty', '[]', 0, 0, 'native', 0)",
            [],
        )
        .unwrap();
        let found: Vec<String> = kinds(Conn::Sqlite(&conn))
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            ["Db.a.dev", "Empty.z.dev", "Pod", "Web.a.dev", "Web.b.dev"]
        );
        let none = database(&[]);
        assert!(kinds(Conn::Sqlite(&none)).unwrap().is_empty());
    }

    /// The query plan of `sql` with `params`, a line per step.
    fn plan(conn: &rusqlite::Connection, sql: &str, params: &[&str]) -> Vec<String> {
        let mut plan = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        plan.query_map(rusqlite::params_from_iter(params), |row| {
            row.get::<_, String>(3)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    }

    #[test]
    fn the_counts_read_indexes_not_the_table() {
        let conn = database(&[("a.dev", "Web"), ("a.dev", "Db")]);
        let totals = plan(&conn, COUNT_OBJECTS, &[]);
        assert!(
            totals.iter().any(|step| step.contains("COVERING INDEX")),
            "{totals:?}"
        );
        let unsettled = plan(&conn, COUNT_UNSETTLED, &[]);
        assert!(
            unsettled.iter().any(|step| step.contains("objects_owed")),
            "{unsettled:?}"
        );
        conn.execute(
            "UPDATE objects SET observed_generation = 1 WHERE kind = 'Web' AND name <> 'o0'",
            [],
        )
        .unwrap();
        let counts: Vec<(String, i64, i64)> = counts_by_kind(Conn::Sqlite(&conn))
            .unwrap()
            .into_iter()
            .map(|(gk, total, unsettled)| (gk.to_string(), total, unsettled))
            .collect();
        assert_eq!(
            counts,
            [("Db.a.dev".into(), 3, 3), ("Web.a.dev".into(), 3, 1)]
        );
    }

    #[test]
    fn each_step_of_the_kind_listing_is_an_index_seek() {
        let conn = database(&[("a.dev", "Web")]);
        // Within a group the seek takes both columns: one on the group
        // alone would walk every object of the group.
        let within = plan(&conn, NEXT_KIND_IN_GROUP, &["a.dev", "Web"]);
        assert!(
            matches!(within.as_slice(), [step] if step.starts_with("SEARCH") && step.contains("grp=? AND kind>?")),
            "{within:?}"
        );
        let after = plan(&conn, FIRST_KIND_AFTER_GROUP, &["a.dev"]);
        assert!(
            matches!(after.as_slice(), [step] if step.starts_with("SEARCH")),
            "{after:?}"
        );
    }
}
