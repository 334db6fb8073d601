//! The PostgreSQL schema, as numbered one-step migrations tracked in the
//! `beehive_schema` table of the connection's schema.
//!
//! The tables mirror SQLite's (see `store::schema`): the same columns, every
//! integer `BIGINT`, every identifying text compared byte by byte
//! (`COLLATE "C"`, as SQLite does), so both backends answer alike. Opens
//! racing on a fresh database serialise on a transaction-scoped advisory
//! lock; a database newer than this build is refused.

use crate::error::{Error, Result};
use crate::store::backend::postgres::PgConn;

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
];

/// Traces (see SQLite's migration 11).
const MIGRATION_10: &str = r#"
ALTER TABLE objects ADD COLUMN trace_parent TEXT;
ALTER TABLE objects ADD COLUMN last_pass_trace TEXT;
ALTER TABLE events ADD COLUMN trace_id TEXT;
"#;

/// Labels (see SQLite's migration 10).
const MIGRATION_9: &str = r#"
ALTER TABLE objects ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
CREATE TABLE object_labels (
    object_id BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    key       TEXT COLLATE "C" NOT NULL,
    value     TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (object_id, key)
);
CREATE INDEX object_labels_by_value ON object_labels (key, value, object_id);
"#;

/// The versions each kind has been served by, and its newest rollout's
/// progress (see SQLite's migration 9).
const MIGRATION_8: &str = r#"
CREATE TABLE rollouts (
    grp          TEXT COLLATE "C" NOT NULL,
    kind         TEXT COLLATE "C" NOT NULL,
    revision     BIGINT NOT NULL CHECK (revision >= 1),
    source       TEXT   NOT NULL,
    content_hash TEXT,
    state        TEXT   NOT NULL
                 CHECK (state = 'rolling' OR state = 'complete' OR state = 'superseded'),
    started_at   BIGINT NOT NULL,
    finished_at  BIGINT,
    objects      BIGINT NOT NULL,
    passed       BIGINT NOT NULL DEFAULT 0,
    failed       BIGINT NOT NULL DEFAULT 0,
    through_id   BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (grp, kind, revision)
);
"#;

/// Whether a kind's controller checks specs with code of its own (see
/// SQLite's migration 8).
const MIGRATION_7: &str = r#"
ALTER TABLE registrations ADD COLUMN validates BIGINT NOT NULL DEFAULT 0;
"#;

/// Event horizons per timeline: trimming one category of an object's events
/// no longer ends watches of its other categories. `event_horizons` keeps the
/// horizons trims recorded before, which applied to every timeline of their
/// object; nothing writes it any more, and a watch honours both.
const MIGRATION_6: &str = r#"
CREATE TABLE event_timeline_horizons (
    object_id        BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    category         TEXT    NOT NULL,
    resource_version BIGINT NOT NULL,
    PRIMARY KEY (object_id, category)
);
"#;

/// Kind schemas: the JSON Schemas a kind's controller declares for its spec
/// and status, so a process with no host running checks writes by them too.
const MIGRATION_5: &str = r#"
ALTER TABLE registrations ADD COLUMN spec_schema TEXT;
ALTER TABLE registrations ADD COLUMN status_schema TEXT;
"#;

/// The fence check every commit of an active host runs (see
/// `postgres::lease`), as a function: PL/pgSQL keeps its plan per
/// connection, where an inline `DO` block was compiled anew for every
/// commit. Its message starts with `commit::LOST`.
const MIGRATION_4: &str = r#"
CREATE FUNCTION beehive_fence(tenure BIGINT) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM host_lease
        WHERE id = 1 AND token = tenure AND expires_at > clock_timestamp() FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease lost: this host is no longer the active one (its tenure % expired or was taken over)', tenure;
    END IF;
END $$;
"#;

/// Plugins that travel with the store: every pushed component once, by the
/// SHA-256 of its bytes, and the set hosts serve (a name, the version it
/// points at, and its policy file's text). See `postgres::plugins`.
const MIGRATION_3: &str = r#"
CREATE TABLE plugin_blobs (
    hash      TEXT COLLATE "C" PRIMARY KEY,
    bytes     BYTEA  NOT NULL,
    pushed_at BIGINT NOT NULL
);
CREATE TABLE plugin_set (
    name      TEXT COLLATE "C" PRIMARY KEY CHECK (name <> ''),
    hash      TEXT COLLATE "C" NOT NULL REFERENCES plugin_blobs (hash),
    policy    TEXT,
    pushed_at BIGINT NOT NULL
);
"#;

/// One active host per store: who holds the lease, its fencing token, and
/// until when (by the database's clock). See `postgres::lease`.
const MIGRATION_2: &str = r#"
CREATE TABLE host_lease (
    id         BIGINT      PRIMARY KEY CHECK (id = 1),
    holder     TEXT        NOT NULL,
    token      BIGINT      NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
INSERT INTO host_lease (id, holder, token, expires_at) VALUES (1, '', 0, '-infinity');
"#;

/// The schema as SQLite's stands at its fourth migration.
const MIGRATION_1: &str = r#"
CREATE TABLE objects (
    id                    BIGINT PRIMARY KEY,
    grp                   TEXT COLLATE "C" NOT NULL,
    kind                  TEXT COLLATE "C" NOT NULL CHECK (kind <> ''),
    name                  TEXT COLLATE "C" NOT NULL CHECK (name <> ''),
    spec                  TEXT   NOT NULL,
    status                TEXT,
    spec_version          BIGINT NOT NULL DEFAULT 0,
    status_version        BIGINT NOT NULL DEFAULT 0,
    generation            BIGINT NOT NULL,
    observed_generation   BIGINT,
    observed_at           BIGINT,
    resource_version      BIGINT NOT NULL,
    deletion_requested_at BIGINT,
    finalizers            TEXT   NOT NULL DEFAULT '[]',
    reconcile_owed        BIGINT NOT NULL DEFAULT 0 CHECK (reconcile_owed >= 0),
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL,
    requeue_at            BIGINT,
    UNIQUE (grp, kind, name)
);

CREATE INDEX objects_owed ON objects (grp, kind, id)
    WHERE observed_generation IS NULL
       OR observed_generation < generation
       OR reconcile_owed > 0
       OR deletion_requested_at IS NOT NULL;
CREATE INDEX objects_deleting ON objects (deletion_requested_at, id)
    WHERE deletion_requested_at IS NOT NULL;
CREATE INDEX objects_requeue ON objects (grp, kind, id) WHERE requeue_at IS NOT NULL;
-- A kind's objects in id order (pages, scans), and the one index that
-- matches a write's whole `id AND grp AND kind` lookup: without it a plan made
-- before statistics exist can pick the name index and read the whole kind.
CREATE INDEX objects_by_kind ON objects (grp, kind, id);

CREATE TABLE conditions (
    object_id       BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    type            TEXT COLLATE "C" NOT NULL CHECK (type <> ''),
    status          TEXT   NOT NULL CHECK (status IN ('True', 'False', 'Unknown')),
    reason          TEXT   NOT NULL,
    message         TEXT   NOT NULL,
    liveness        BIGINT NOT NULL CHECK (liveness IN (0, 1)),
    written_session BIGINT NOT NULL,
    transitioned_at BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (object_id, type)
);

CREATE TABLE edges (
    from_id  BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    relation TEXT   NOT NULL CHECK (relation IN ('owned_by', 'depends_on')),
    to_id    BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    PRIMARY KEY (from_id, relation, to_id)
);
CREATE INDEX edges_incoming ON edges (to_id, relation, from_id);
CREATE UNIQUE INDEX edges_one_owner ON edges (from_id) WHERE relation = 'owned_by';

CREATE TABLE events (
    id               BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    object_id        BIGINT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    category         TEXT COLLATE "C" NOT NULL,
    type             TEXT   NOT NULL CHECK (type IN ('Normal', 'Warning')),
    reason           TEXT COLLATE "C" NOT NULL,
    message          TEXT   NOT NULL,
    detail           TEXT,
    count            BIGINT NOT NULL CHECK (count >= 1),
    first_at         BIGINT NOT NULL,
    last_at          BIGINT NOT NULL,
    resource_version BIGINT NOT NULL
);
CREATE INDEX events_timeline ON events (object_id, category, id);
CREATE INDEX events_by_version ON events (resource_version);
CREATE INDEX events_by_age ON events (last_at);

CREATE TABLE object_writes (
    resource_version BIGINT PRIMARY KEY,
    object_id        BIGINT NOT NULL,
    grp              TEXT COLLATE "C" NOT NULL,
    kind             TEXT COLLATE "C" NOT NULL,
    op               TEXT   NOT NULL CHECK (op IN ('create', 'update', 'delete')),
    written_at       BIGINT NOT NULL,
    row_image        TEXT
);
CREATE INDEX object_writes_by_kind ON object_writes (grp, kind, resource_version);
CREATE INDEX object_writes_by_object ON object_writes (object_id, resource_version);

CREATE TABLE dependency_watermarks (
    object_id        BIGINT PRIMARY KEY REFERENCES objects (id) ON DELETE CASCADE,
    resource_version BIGINT NOT NULL
);

CREATE TABLE registrations (
    grp            TEXT COLLATE "C" NOT NULL,
    kind           TEXT COLLATE "C" NOT NULL,
    finalizers     TEXT   NOT NULL,
    spec_version   BIGINT NOT NULL,
    status_version BIGINT NOT NULL,
    source         TEXT   NOT NULL,
    content_hash   TEXT,
    registered_at  BIGINT NOT NULL,
    PRIMARY KEY (grp, kind)
);

CREATE TABLE write_log_horizons (
    grp              TEXT COLLATE "C" NOT NULL,
    kind             TEXT COLLATE "C" NOT NULL,
    resource_version BIGINT NOT NULL,
    PRIMARY KEY (grp, kind)
);

CREATE TABLE event_horizons (
    object_id        BIGINT PRIMARY KEY REFERENCES objects (id) ON DELETE CASCADE,
    resource_version BIGINT NOT NULL
);

-- The counters every write transaction takes under a row lock (see the
-- writer), and the dependency waker's cursor.
CREATE TABLE kv (
    key   TEXT COLLATE "C" PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO kv (key, value) VALUES ('resource_version', 0), ('object_id', 0);
"#;

/// The newest schema version this build knows.
pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Any fixed number: the advisory lock migrations take, per database.
const MIGRATION_LOCK: i64 = 0x6265_6568_6976_6501;

/// Brings the connection's schema up to [`latest_version`], or refuses one
/// that is newer.
pub(crate) fn migrate(conn: &PgConn) -> Result<()> {
    conn.simple(&format!(
        "BEGIN; SELECT pg_advisory_xact_lock({MIGRATION_LOCK}); \
         CREATE TABLE IF NOT EXISTS beehive_schema (version BIGINT NOT NULL); \
         INSERT INTO beehive_schema (version) \
             SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM beehive_schema);"
    ))?;
    let migrated = step(conn);
    let end = if migrated.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    let ended = conn.simple(end).map(|_| ());
    migrated.and(ended)
}

fn step(conn: &PgConn) -> Result<()> {
    let rows = conn.query("SELECT version FROM beehive_schema", &[])?;
    let current: i64 = rows
        .first()
        .map(|row| row.get(0))
        .ok_or_else(|| Error::Internal("beehive_schema has no row".into()))?;
    let latest = latest_version();
    if current > latest {
        return Err(Error::SchemaTooNew {
            found: current,
            supported: latest,
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        conn.simple(sql)?;
        conn.simple(&format!(
            "UPDATE beehive_schema SET version = {}",
            index as i64 + 1
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_says_the_lease_was_lost_as_the_store_recognises_it() {
        let prefix = format!("'{}:", crate::store::backend::postgres::commit::LOST);
        assert!(MIGRATION_4.contains(&prefix));
    }
}
