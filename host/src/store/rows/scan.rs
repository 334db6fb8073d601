//! The scans behind the drivers: each reads an index of outstanding work, or
//! the kind, and returns ids to enqueue.

use crate::error::Result;
use crate::object::{GroupKind, ObjectId};
use crate::store::backend::{Conn, params};
use crate::store::rows::objects::group_kind_at;

/// Objects of `gk` that the store records as owing a pass: an unobserved
/// generation, owed dependency wakes, or a pending deletion. Reads the
/// partial index of outstanding work, never the whole kind.
pub(crate) fn owed(conn: Conn<'_>, gk: &GroupKind) -> Result<Vec<ObjectId>> {
    // The WHERE clause repeats the partial index's, so the planner can use it.
    conn.query_all(
        "SELECT id FROM objects \
         WHERE grp = ?1 AND kind = ?2 \
           AND (observed_generation IS NULL \
                OR observed_generation < generation \
                OR reconcile_owed > 0 \
                OR deletion_requested_at IS NOT NULL) \
         ORDER BY id",
        params![&gk.group, &gk.kind],
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
    conn.query_all(
        "SELECT grp, kind, COUNT(*), \
                COUNT(*) FILTER (WHERE observed_generation IS NULL \
                                    OR observed_generation < generation) \
         FROM objects GROUP BY grp, kind ORDER BY grp, kind",
        params![],
        |row| Ok((group_kind_at(row, 0)?, row.get(2)?, row.get(3)?)),
    )
}

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
