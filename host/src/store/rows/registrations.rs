//! The `registrations` table: which kinds have a controller, kept so other
//! processes and later runs can see what a kind is.

use crate::error::{Error, Result};
use crate::object::{GroupKind, Timestamp};
use crate::store::backend::{Conn, params};
use crate::store::rows::objects::group_kind_at;

/// One registered kind, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredKind {
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
    /// The JSON Schema of the spec its controller declares, if any.
    pub spec_schema: Option<String>,
    /// The JSON Schema of the status its controller declares, if any.
    pub status_schema: Option<String>,
    /// Whether its controller checks specs with code of its own (a plugin's
    /// `validate`), which only a host serving it can run.
    pub validates: bool,
}

/// Records `registration`, replacing an earlier one of the same kind.
pub(crate) fn upsert(conn: Conn<'_>, registration: &RegisteredKind) -> Result<()> {
    let finalizers = serde_json::to_string(&registration.finalizers)
        .map_err(|e| Error::Internal(format!("finalizers do not serialise: {e}")))?;
    conn.execute_later(
        "INSERT INTO registrations \
         (grp, kind, finalizers, spec_version, status_version, source, content_hash, registered_at, \
          spec_schema, status_schema, validates) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (grp, kind) DO UPDATE SET finalizers = excluded.finalizers, \
            spec_version = excluded.spec_version, status_version = excluded.status_version, \
            source = excluded.source, content_hash = excluded.content_hash, \
            registered_at = excluded.registered_at, spec_schema = excluded.spec_schema, \
            status_schema = excluded.status_schema, validates = excluded.validates",
        params![
            &registration.group_kind.group,
            &registration.group_kind.kind,
            &finalizers,
            registration.spec_version,
            registration.status_version,
            &registration.source,
            registration.content_hash.as_deref(),
            registration.registered_at.as_millis(),
            registration.spec_schema.as_deref(),
            registration.status_schema.as_deref(),
            i64::from(registration.validates),
        ],
    )?;
    Ok(())
}

/// Forgets the registration of `gk`.
pub(crate) fn delete(conn: Conn<'_>, gk: &GroupKind) -> Result<()> {
    conn.execute_later(
        "DELETE FROM registrations WHERE grp = ?1 AND kind = ?2",
        params![&gk.group, &gk.kind],
    )?;
    Ok(())
}

/// The content hash recorded with `gk`'s registration, if there is one.
pub(crate) fn recorded_hash(conn: Conn<'_>, gk: &GroupKind) -> Result<Option<String>> {
    Ok(conn
        .query_opt(
            "SELECT content_hash FROM registrations WHERE grp = ?1 AND kind = ?2",
            params![&gk.group, &gk.kind],
            |row| row.get::<Option<String>>(0),
        )?
        .flatten())
}

/// The spec schema recorded with `gk`'s registration, if there is one.
pub(crate) fn spec_schema(conn: Conn<'_>, gk: &GroupKind) -> Result<Option<String>> {
    Ok(conn
        .query_opt(
            "SELECT spec_schema FROM registrations WHERE grp = ?1 AND kind = ?2",
            params![&gk.group, &gk.kind],
            |row| row.get::<Option<String>>(0),
        )?
        .flatten())
}

/// The (spec, status) versions recorded with `gk`'s registration.
pub(crate) fn versions(conn: Conn<'_>, gk: &GroupKind) -> Result<Option<(i64, i64)>> {
    conn.query_opt(
        "SELECT spec_version, status_version FROM registrations WHERE grp = ?1 AND kind = ?2",
        params![&gk.group, &gk.kind],
        |row| Ok((row.get::<i64>(0)?, row.get::<i64>(1)?)),
    )
}

/// Whether `gk` has a recorded registration.
pub(crate) fn is_registered(conn: Conn<'_>, gk: &GroupKind) -> Result<bool> {
    conn.exists(
        "SELECT 1 FROM registrations WHERE grp = ?1 AND kind = ?2",
        params![&gk.group, &gk.kind],
    )
}

/// Every recorded registration, by kind.
pub(crate) fn list(conn: Conn<'_>) -> Result<Vec<RegisteredKind>> {
    conn.query_all(
        "SELECT grp, kind, finalizers, spec_version, status_version, source, content_hash, \
                registered_at, spec_schema, status_schema, validates \
         FROM registrations ORDER BY grp, kind",
        params![],
        |row| {
            let finalizers: String = row.get(2)?;
            Ok(RegisteredKind {
                group_kind: group_kind_at(row, 0)?,
                finalizers: serde_json::from_str(&finalizers).unwrap_or_default(),
                spec_version: row.get(3)?,
                status_version: row.get(4)?,
                source: row.get(5)?,
                content_hash: row.get(6)?,
                registered_at: Timestamp::from_millis(row.get(7)?),
                spec_schema: row.get(8)?,
                status_schema: row.get(9)?,
                validates: row.get::<i64>(10)? != 0,
            })
        },
    )
}
