//! The SQL of backups and restores: a copy of a SQLite store made with
//! `VACUUM INTO`, and a restored copy checked and prepared to serve. The
//! files around them (names, flushes, checksums) are `store::backup`'s.

use std::path::Path;
use std::time::Duration;

use rusqlite::OpenFlags;

use crate::error::{Error, Result};
use crate::object::Timestamp;
use crate::store::backend::{Conn, params};
use crate::store::schema;

/// How far a restore moves the write positions past the backup's: more
/// writes than a store makes between a backup and its restore, so no
/// position handed out after the restore was handed out before it.
pub const RESTORE_GAP: i64 = 1 << 40;

/// What a restore made of a copy.
pub(crate) struct Prepared {
    /// The write-log position the backup held.
    pub(crate) position: i64,
    /// The objects restored, each owing one pass.
    pub(crate) objects: i64,
    /// The first write position the new store hands out.
    pub(crate) next_position: i64,
}

/// Why a backup file cannot be restored.
pub(crate) fn invalid(file: &Path, why: impl std::fmt::Display) -> Error {
    Error::InvalidBackup(format!("{}: {why}", file.display()))
}

/// `VACUUM INTO` from a read-only connection; the copy's write-log position
/// and object count.
pub(crate) fn copy_into(store: &Path, partial: &Path) -> Result<(i64, i64)> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let source = rusqlite::Connection::open_with_flags(store, flags)?;
    source.busy_timeout(Duration::from_secs(5))?;
    let target = partial
        .to_str()
        .ok_or_else(|| Error::InvalidOption(format!("{} is not UTF-8", partial.display())))?;
    // Made empty and owner-only first (VACUUM INTO fills an empty file): a
    // backup holds what the store holds, secrets in specs included.
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(partial)?;
    }
    source.execute("VACUUM INTO ?1", [target])?;
    drop(source);
    let copy = rusqlite::Connection::open_with_flags(partial, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let position = head(&copy)?;
    let objects = copy.query_row("SELECT COUNT(*) FROM objects", [], |row| row.get(0))?;
    Ok((position, objects))
}

/// The newest write position a SQLite store holds.
fn head(conn: &rusqlite::Connection) -> Result<i64> {
    Ok(conn.query_row(
        "SELECT MAX(COALESCE((SELECT MAX(resource_version) FROM object_writes), 0), \
                    COALESCE((SELECT value FROM kv WHERE key = 'resource_version'), 0), \
                    COALESCE((SELECT MAX(resource_version) FROM events), 0))",
        [],
        |row| row.get(0),
    )?)
}

/// Makes a PostgreSQL store its server restored (`pg_restore`) ready to
/// serve, as [`prepare`] does a SQLite copy: write positions moved
/// [`RESTORE_GAP`] past the newest it holds, a restore horizon under which
/// resumed watches are refused, every object owing one pass. Returns the
/// position it held and the objects it holds.
pub(crate) fn mark_restored(conn: Conn<'_>, now: Timestamp) -> Result<(i64, i64)> {
    let position: i64 = conn
        .query_opt(HEAD, params![], |row| row.get(0))?
        .unwrap_or(0);
    let next_position = position + RESTORE_GAP;
    conn.execute(
        "UPDATE kv SET value = ?1 WHERE key = 'resource_version'",
        params![next_position],
    )?;
    conn.execute(
        "INSERT INTO kv (key, value) VALUES ('restore_horizon', ?1), ('restored_at', ?2), \
                ('restored_position', ?3) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![next_position, now.as_millis(), position],
    )?;
    let objects = conn.execute(
        "UPDATE objects SET reconcile_owed = reconcile_owed + 1",
        params![],
    )?;
    Ok((position, objects as i64))
}

/// The newest write position a PostgreSQL store holds.
const HEAD: &str = "SELECT GREATEST(COALESCE((SELECT MAX(resource_version) FROM object_writes), 0), \
            COALESCE((SELECT value FROM kv WHERE key = 'resource_version'), 0), \
            COALESCE((SELECT MAX(resource_version) FROM events), 0))";

/// Checks the copy at `partial` and makes it ready to serve.
pub(crate) fn prepare(file: &Path, partial: &Path) -> Result<Prepared> {
    let mut conn = rusqlite::Connection::open(partial)?;
    let verdict: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .map_err(|e| invalid(file, format!("it is not a SQLite database ({e})")))?;
    if verdict != "ok" {
        return Err(invalid(file, format!("integrity_check failed: {verdict}")));
    }
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let supported = schema::sqlite::latest_version();
    if version > supported {
        return Err(Error::SchemaTooNew {
            found: version,
            supported,
        });
    }
    if version == 0 {
        return Err(invalid(file, "it holds no Beehive store"));
    }
    let position = head(&conn)?;
    let next_position = position + RESTORE_GAP;
    let now = Timestamp::now().as_millis();
    let tx = conn.transaction()?;
    tx.execute(
        "UPDATE kv SET value = ?1 WHERE key = 'resource_version'",
        [next_position],
    )?;
    tx.execute(
        "INSERT INTO kv (key, value) VALUES ('restore_horizon', ?1), ('restored_at', ?2), \
                ('restored_position', ?3) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [next_position, now, position],
    )?;
    let objects = tx.execute("UPDATE objects SET reconcile_owed = reconcile_owed + 1", [])? as i64;
    tx.commit()?;
    conn.pragma_update(None, "journal_mode", "DELETE")?;
    Ok(Prepared {
        position,
        objects,
        next_position: next_position + 1,
    })
}
