//! The schema, as numbered one-step migrations tracked in `PRAGMA user_version`.
//!
//! Migration `n` (1-based) upgrades a database at version `n - 1` to `n`. The
//! writer runs them in one IMMEDIATE transaction before any reader opens; a
//! database newer than this build is refused rather than guessed at.

use rusqlite::Connection;

use crate::error::{Error, Result};

/// Every migration, oldest first. Never edit one that has shipped: add another.
const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    MIGRATION_7,
    MIGRATION_8,
    MIGRATION_9,
    MIGRATION_10,
    MIGRATION_11,
];

/// Traces: the context (W3C `traceparent`) the latest spec write carried,
/// if any, whose trace the passes that reconcile that generation join; the
/// trace id of the latest traced pass, for `describe`; and the trace id of
/// the pass that wrote each event run's latest occurrence.
const MIGRATION_11: &str = r#"
ALTER TABLE objects ADD COLUMN trace_parent TEXT;
ALTER TABLE objects ADD COLUMN last_pass_trace TEXT;
ALTER TABLE events ADD COLUMN trace_id TEXT;
"#;

/// Labels: each object's as a JSON map read with its row, and one row per
/// label in `object_labels`, so a selector finds its objects by index
/// instead of reading every object of the kind.
const MIGRATION_10: &str = r#"
ALTER TABLE objects ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
CREATE TABLE object_labels (
    object_id INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    key       TEXT    NOT NULL,
    value     TEXT    NOT NULL,
    PRIMARY KEY (object_id, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX object_labels_by_value ON object_labels (key, value, object_id);
"#;

/// The versions each kind has been served by, one revision per controller
/// registered or replaced, and how far the newest one's rollout (a pass of
/// every object on it) has gone, so a host that stops mid-rollout resumes
/// it where it was.
const MIGRATION_9: &str = r#"
CREATE TABLE rollouts (
    grp          TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    revision     INTEGER NOT NULL CHECK (revision >= 1),
    source       TEXT    NOT NULL,
    content_hash TEXT,
    state        TEXT    NOT NULL
                 CHECK (state = 'rolling' OR state = 'complete' OR state = 'superseded'),
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    objects      INTEGER NOT NULL,
    passed       INTEGER NOT NULL DEFAULT 0,
    failed       INTEGER NOT NULL DEFAULT 0,
    -- Every object of the kind with an id at or below it has had its pass.
    through_id   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (grp, kind, revision)
) STRICT;
"#;

/// Whether a kind's controller checks specs with code of its own (a
/// plugin's `validate` export, a native `SpecValidator`): a process with no
/// host cannot run that check, and says so when it writes the kind.
const MIGRATION_8: &str = r#"
ALTER TABLE registrations ADD COLUMN validates INTEGER NOT NULL DEFAULT 0;
"#;

/// Constant-list checks written as comparisons: SQLite evaluates a CHECK's
/// `x IN (...)` by building a temporary b-tree of the list on every insert,
/// which cost a create about a tenth of its time. The text is edited in
/// place (the documented way to change a CHECK, which leaves the stored
/// rows as they are); [`migrate`] then bumps the schema cookie so every
/// connection reads it again.
const MIGRATION_7: &str = r#"
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, 'CHECK (op IN (''create'', ''update'', ''delete''))',
                          'CHECK (op = ''create'' OR op = ''update'' OR op = ''delete'')')
 WHERE type = 'table' AND name = 'object_writes';
UPDATE sqlite_schema
   SET sql = replace(replace(sql,
                 'CHECK (status IN (''True'', ''False'', ''Unknown''))',
                 'CHECK (status = ''True'' OR status = ''False'' OR status = ''Unknown'')'),
                 'CHECK (liveness IN (0, 1))',
                 'CHECK (liveness = 0 OR liveness = 1)')
 WHERE type = 'table' AND name = 'conditions';
UPDATE sqlite_schema
   SET sql = replace(sql, 'CHECK (relation IN (''owned_by'', ''depends_on''))',
                          'CHECK (relation = ''owned_by'' OR relation = ''depends_on'')')
 WHERE type = 'table' AND name = 'edges';
UPDATE sqlite_schema
   SET sql = replace(sql, 'CHECK (type IN (''Normal'', ''Warning''))',
                          'CHECK (type = ''Normal'' OR type = ''Warning'')')
 WHERE type = 'table' AND name = 'events';
PRAGMA writable_schema = OFF;
"#;

/// Event horizons per timeline: trimming one category of an object's events
/// no longer ends watches of its other categories. `event_horizons` keeps the
/// horizons trims recorded before, which applied to every timeline of their
/// object; nothing writes it any more, and a watch honours both.
const MIGRATION_6: &str = r#"
CREATE TABLE event_timeline_horizons (
    object_id        INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    category         TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    PRIMARY KEY (object_id, category)
) STRICT;
"#;

/// Kind schemas: the JSON Schemas a kind's controller declares for its spec
/// and status, so a process with no host running checks writes by them too.
const MIGRATION_5: &str = r#"
ALTER TABLE registrations ADD COLUMN spec_schema TEXT;
ALTER TABLE registrations ADD COLUMN status_schema TEXT;
"#;

/// Durable requeues: when a pass asked to run again (a requeue delay, a
/// cadence, a backoff step), so a restart keeps the appointment.
const MIGRATION_4: &str = r#"
ALTER TABLE objects ADD COLUMN requeue_at INTEGER;
CREATE INDEX objects_requeue ON objects (grp, kind, id) WHERE requeue_at IS NOT NULL;
"#;

/// Event watches: how far retention has trimmed each object's event log, so
/// an event watch resumed below it can tell instead of skipping runs. Goes
/// with the object.
const MIGRATION_3: &str = r#"
CREATE TABLE event_horizons (
    object_id        INTEGER PRIMARY KEY REFERENCES objects (id) ON DELETE CASCADE,
    resource_version INTEGER NOT NULL
) STRICT;
"#;

/// Watches: how far retention has trimmed each kind's write log, so a watch
/// whose unread entries were trimmed can tell instead of skipping them.
const MIGRATION_2: &str = r#"
CREATE TABLE write_log_horizons (
    grp              TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    PRIMARY KEY (grp, kind)
) STRICT;
"#;

/// The first schema: objects and everything hanging off them.
const MIGRATION_1: &str = r#"
CREATE TABLE objects (
    -- Assigned by the writer from kv 'object_id', so a collected object's id is
    -- never handed out again.
    id                    INTEGER PRIMARY KEY,
    grp                   TEXT    NOT NULL,
    kind                  TEXT    NOT NULL CHECK (kind <> ''),
    name                  TEXT    NOT NULL CHECK (name <> ''),
    spec                  TEXT    NOT NULL,
    status                TEXT,
    spec_version          INTEGER NOT NULL DEFAULT 0,
    status_version        INTEGER NOT NULL DEFAULT 0,
    generation            INTEGER NOT NULL,
    observed_generation   INTEGER,
    observed_at           INTEGER,
    resource_version      INTEGER NOT NULL,
    deletion_requested_at INTEGER,
    finalizers            TEXT    NOT NULL DEFAULT '[]',
    reconcile_owed        INTEGER NOT NULL DEFAULT 0 CHECK (reconcile_owed >= 0),
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL,
    UNIQUE (grp, kind, name)
) STRICT;

-- The owed pass reads only outstanding work, never the whole kind.
CREATE INDEX objects_owed ON objects (grp, kind, id)
    WHERE observed_generation IS NULL
       OR observed_generation < generation
       OR reconcile_owed > 0
       OR deletion_requested_at IS NOT NULL;

CREATE INDEX objects_deleting ON objects (deletion_requested_at, id)
    WHERE deletion_requested_at IS NOT NULL;

CREATE TABLE conditions (
    object_id       INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    type            TEXT    NOT NULL CHECK (type <> ''),
    status          TEXT    NOT NULL CHECK (status IN ('True', 'False', 'Unknown')),
    reason          TEXT    NOT NULL,
    message         TEXT    NOT NULL,
    liveness        INTEGER NOT NULL CHECK (liveness IN (0, 1)),
    -- The store session that wrote it: a liveness condition from another
    -- session reads back as Unknown.
    written_session INTEGER NOT NULL,
    transitioned_at INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (object_id, type)
) STRICT, WITHOUT ROWID;

CREATE TABLE edges (
    from_id  INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    relation TEXT    NOT NULL CHECK (relation IN ('owned_by', 'depends_on')),
    to_id    INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    PRIMARY KEY (from_id, relation, to_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX edges_incoming ON edges (to_id, relation, from_id);

-- An object has at most one owner.
CREATE UNIQUE INDEX edges_one_owner ON edges (from_id) WHERE relation = 'owned_by';

CREATE TABLE events (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    object_id        INTEGER NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    category         TEXT    NOT NULL,
    type             TEXT    NOT NULL CHECK (type IN ('Normal', 'Warning')),
    reason           TEXT    NOT NULL,
    message          TEXT    NOT NULL,
    detail           TEXT,
    count            INTEGER NOT NULL CHECK (count >= 1),
    first_at         INTEGER NOT NULL,
    last_at          INTEGER NOT NULL,
    resource_version INTEGER NOT NULL
) STRICT;

CREATE INDEX events_timeline ON events (object_id, category, id);
-- Resumable reads of one object's log, and the sequence's maximum at open.
CREATE INDEX events_by_version ON events (resource_version);
CREATE INDEX events_by_age ON events (last_at);

-- One entry per real object write; the delete entry carries the final row image.
-- No foreign key: the log outlives the rows it describes.
CREATE TABLE object_writes (
    resource_version INTEGER PRIMARY KEY,
    object_id        INTEGER NOT NULL,
    grp              TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    op               TEXT    NOT NULL CHECK (op IN ('create', 'update', 'delete')),
    written_at       INTEGER NOT NULL,
    row_image        TEXT
) STRICT;


-- The store-wide write cursor a dependent's last successful pass observed.
CREATE TABLE dependency_watermarks (
    object_id        INTEGER PRIMARY KEY REFERENCES objects (id) ON DELETE CASCADE,
    resource_version INTEGER NOT NULL
) STRICT;

-- What each registered kind is, so other processes and later runs can tell.
CREATE TABLE registrations (
    grp            TEXT    NOT NULL,
    kind           TEXT    NOT NULL,
    finalizers     TEXT    NOT NULL,
    spec_version   INTEGER NOT NULL,
    status_version INTEGER NOT NULL,
    source         TEXT    NOT NULL,
    content_hash   TEXT,
    registered_at  INTEGER NOT NULL,
    PRIMARY KEY (grp, kind)
) STRICT, WITHOUT ROWID;

CREATE TABLE kv (
    key   TEXT PRIMARY KEY,
    value ANY  NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO kv (key, value) VALUES ('resource_version', 0), ('object_id', 0);
"#;

/// The newest schema version this build knows.
pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings the database up to [`latest_version`], or refuses one that is newer.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let latest = latest_version();
    if current > latest {
        return Err(Error::SchemaTooNew {
            found: current,
            supported: latest,
        });
    }
    if current == latest {
        return Ok(());
    }
    if current == 0 {
        // Only takes effect before the first table exists, and must be outside
        // a transaction.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    // Re-read under the write lock: another connection may have migrated meanwhile.
    let current: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
    }
    // A migration may have edited schema text in place, which SQLite does
    // not count as a schema change: moving the cookie makes every
    // connection, this one included, parse the schema again.
    let cookie: i64 = tx.pragma_query_value(None, "schema_version", |row| row.get(0))?;
    tx.pragma_update(None, "schema_version", cookie + 1)?;
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::backend::Conn;

    fn open() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("t.db")).unwrap();
        (dir, conn)
    }

    #[test]
    fn a_fresh_database_reaches_the_latest_version_with_incremental_vacuum() {
        let (_dir, mut conn) = open();
        migrate(&mut conn).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, latest_version());
        let vacuum: i64 = conn
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
            .unwrap();
        assert_eq!(vacuum, 2, "2 is INCREMENTAL");
        // Running again is a no-op.
        migrate(&mut conn).unwrap();
    }

    #[test]
    fn a_database_from_a_newer_build_is_refused() {
        let (_dir, mut conn) = open();
        conn.pragma_update(None, "user_version", 99).unwrap();
        assert!(matches!(
            migrate(&mut conn),
            Err(Error::SchemaTooNew { found: 99, .. })
        ));
    }

    #[test]
    fn a_horizon_trimmed_before_timelines_had_their_own_still_holds_for_every_timeline() {
        let (_dir, mut conn) = open();
        // The database as schema 5 left it, one object's events trimmed.
        for sql in &MIGRATIONS[..5] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 5).unwrap();
        conn.execute_batch(
            "INSERT INTO objects (id, grp, kind, name, spec, generation, resource_version, created_at, updated_at)
             VALUES (1, 'g', 'K', 'a', '{}', 1, 1, 0, 0);
             INSERT INTO event_horizons (object_id, resource_version) VALUES (1, 40);",
        )
        .unwrap();

        migrate(&mut conn).unwrap();
        let horizon = |category: Option<&str>| {
            crate::store::rows::write_log::event_horizon(Conn::Sqlite(&conn), 1, category).unwrap()
        };
        assert_eq!((horizon(Some("a")), horizon(None)), (40, 40));
        // A trim from now on raises one timeline's horizon only.
        conn.execute(
            "INSERT INTO event_timeline_horizons (object_id, category, resource_version) VALUES (1, 'b', 90)",
            [],
        )
        .unwrap();
        assert_eq!(
            (horizon(Some("a")), horizon(Some("b")), horizon(None)),
            (40, 90, 90)
        );
    }

    /// The opcodes SQLite runs for `sql`.
    fn opcodes(conn: &Connection, sql: &str) -> Vec<String> {
        let mut statement = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        statement
            .query_map([], |row| row.get::<_, String>(1))
            .unwrap()
            .map(|opcode| opcode.unwrap())
            .collect()
    }

    #[test]
    fn constant_list_checks_hold_without_a_temporary_btree_per_insert() {
        let (_dir, mut conn) = open();
        // A database as schema 6 left it, with a row in each table the
        // edit touches, upgraded in place.
        for sql in &MIGRATIONS[..6] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 6).unwrap();
        conn.execute_batch(
            "INSERT INTO objects (id, grp, kind, name, spec, generation, resource_version, created_at, updated_at)
             VALUES (1, 'g', 'K', 'a', '{}', 1, 1, 0, 0), (2, 'g', 'K', 'b', '{}', 1, 2, 0, 0);
             INSERT INTO object_writes VALUES (1, 1, 'g', 'K', 'create', 0, NULL);
             INSERT INTO edges VALUES (2, 'owned_by', 1);
             INSERT INTO events (object_id, category, type, reason, message, count, first_at, last_at, resource_version)
             VALUES (1, '', 'Normal', 'R', 'm', 1, 0, 0, 1);
             INSERT INTO conditions VALUES (1, 'Ready', 'True', 'R', 'm', 0, 1, 0, 0);",
        )
        .unwrap();
        migrate(&mut conn).unwrap();

        let text: String = conn
            .query_row(
                "SELECT group_concat(sql, ' ') FROM sqlite_schema WHERE type = 'table'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert!(!text.contains(" IN ("), "a list check is left: {text}");
        let integrity: String = conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(integrity, "ok");
        for insert in [
            "INSERT INTO object_writes VALUES (2, 1, 'g', 'K', 'update', 0, NULL)",
            "INSERT INTO edges VALUES (1, 'depends_on', 2)",
            "INSERT INTO events (object_id, category, type, reason, message, count, first_at, last_at, resource_version) \
             VALUES (1, '', 'Warning', 'R', 'm', 1, 0, 0, 2)",
            "INSERT INTO conditions VALUES (1, 'Synced', 'Unknown', 'R', 'm', 1, 1, 0, 0)",
        ] {
            assert!(
                !opcodes(&conn, insert)
                    .iter()
                    .any(|op| op == "OpenEphemeral"),
                "{insert} builds a temporary b-tree"
            );
            conn.execute(insert, []).unwrap();
        }
        for refused in [
            "INSERT INTO object_writes VALUES (3, 1, 'g', 'K', 'upsert', 0, NULL)",
            "INSERT INTO edges VALUES (1, 'likes', 2)",
            "INSERT INTO events (object_id, category, type, reason, message, count, first_at, last_at, resource_version) \
             VALUES (1, '', 'Error', 'R', 'm', 1, 0, 0, 3)",
            "INSERT INTO conditions VALUES (1, 'Other', 'Maybe', 'R', 'm', 1, 1, 0, 0)",
            "INSERT INTO conditions VALUES (1, 'Other', 'True', 'R', 'm', 2, 1, 0, 0)",
        ] {
            assert!(conn.execute(refused, []).is_err(), "{refused} was stored");
        }
    }

    #[test]
    fn the_schema_itself_refuses_an_empty_name() {
        let (_dir, mut conn) = open();
        migrate(&mut conn).unwrap();
        let result = conn.execute(
            "INSERT INTO objects (grp, kind, name, spec, generation, resource_version, created_at, updated_at)
             VALUES ('', 'K', '', '{}', 1, 1, 0, 0)",
            [],
        );
        assert!(result.is_err());
    }
}
