//! The record of which kinds have a controller, kept so other processes and
//! later runs can see what a kind is.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};
use crate::object::{GroupKind, Timestamp};
use crate::store::WriteTx;

/// One registered kind, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The kind.
    pub group_kind: GroupKind,
    /// Finalizers its controller owns.
    pub finalizers: Vec<String>,
    /// The spec schema version its controller writes.
    pub spec_version: i64,
    /// The status schema version its controller writes.
    pub status_version: i64,
    /// Where the controller came from: `native`, or a plugin file.
    pub source: String,
    /// The plugin's content hash, for a plugin.
    pub content_hash: Option<String>,
    /// When it was registered.
    pub registered_at: Timestamp,
}

/// Records `registration`, replacing an earlier one of the same kind.
pub(crate) fn record(tx: &mut WriteTx<'_>, registration: &Registration) -> Result<()> {
    let finalizers = serde_json::to_string(&registration.finalizers)
        .map_err(|e| Error::Internal(format!("finalizers do not serialise: {e}")))?;
    tx.conn()
        .prepare_cached(
            "INSERT OR REPLACE INTO registrations \
             (grp, kind, finalizers, spec_version, status_version, source, content_hash, registered_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            registration.group_kind.group,
            registration.group_kind.kind,
            finalizers,
            registration.spec_version,
            registration.status_version,
            registration.source,
            registration.content_hash,
            registration.registered_at.as_millis(),
        ])?;
    Ok(())
}

/// Forgets the registration of `gk`.
pub(crate) fn remove(tx: &mut WriteTx<'_>, gk: &GroupKind) -> Result<()> {
    tx.conn()
        .prepare_cached("DELETE FROM registrations WHERE grp = ?1 AND kind = ?2")?
        .execute(params![gk.group, gk.kind])?;
    Ok(())
}

/// The content hash recorded with `gk`'s registration, if there is one.
pub(crate) fn recorded_hash(conn: &Connection, gk: &GroupKind) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT content_hash FROM registrations WHERE grp = ?1 AND kind = ?2")?
        .query_row([&gk.group, &gk.kind], |row| row.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// Whether `gk` has a recorded registration.
pub(crate) fn is_registered(conn: &Connection, gk: &GroupKind) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM registrations WHERE grp = ?1 AND kind = ?2)")?
        .query_row([&gk.group, &gk.kind], |row| row.get(0))?)
}

/// Every recorded registration, by kind.
pub(crate) fn list(conn: &Connection) -> Result<Vec<Registration>> {
    let mut stmt = conn.prepare_cached(
        "SELECT grp, kind, finalizers, spec_version, status_version, source, content_hash, \
                registered_at \
         FROM registrations ORDER BY grp, kind",
    )?;
    let rows = stmt.query_map([], |row| {
        let finalizers: String = row.get(2)?;
        Ok(Registration {
            group_kind: GroupKind::new(row.get::<_, String>(0)?, row.get::<_, String>(1)?),
            finalizers: serde_json::from_str(&finalizers).unwrap_or_default(),
            spec_version: row.get(3)?,
            status_version: row.get(4)?,
            source: row.get(5)?,
            content_hash: row.get(6)?,
            registered_at: Timestamp::from_millis(row.get(7)?),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
