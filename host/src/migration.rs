//! Schema-version migration of stored specs and statuses.
//!
//! Specs and statuses are stored as JSON, so reshaping a kind's types would
//! break decoding of rows written before. A kind's [`Migrator`] names the
//! versions this build writes and upgrades older documents on read; each row
//! records the version its spec and its status were written at, and a
//! document is re-stamped when it is next written, never by a bulk rewrite.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::error::{Error, Result};
use crate::json::Json;
use crate::object::{GroupKind, RawObject};
use crate::sync::{read, write};

/// Upgrades a kind's stored documents to the shape this build expects.
///
/// Versions start at 1; version 0 means "not versioned" for the current
/// version and "written before versioning" for a stored one, so once a
/// kind has a migrator its converters must accept `from == 0`. A document
/// stored at a version above the current one was written by a newer build
/// and fails to read rather than being misread.
///
/// # Example
/// ```
/// use beehive::Json;
/// use beehive::migration::Migrator;
///
/// /// Version 1 renamed `size` to `replicas`.
/// struct ClusterMigrator;
///
/// impl Migrator for ClusterMigrator {
///     fn spec_version(&self) -> u32 { 1 }
///     fn status_version(&self) -> u32 { 0 }
///     fn convert_spec(&self, _from: u32, spec: Json) -> Result<Json, String> {
///         let mut value = spec.to_value();
///         if let Some(size) = value.as_object_mut().and_then(|o| o.remove("size")) {
///             value["replicas"] = size;
///         }
///         Ok(Json::from_value(&value))
///     }
///     fn convert_status(&self, _from: u32, status: Json) -> Result<Json, String> {
///         Ok(status)
///     }
/// }
/// ```
pub trait Migrator: Send + Sync + 'static {
    /// The spec version this build writes; 0 leaves specs unversioned.
    fn spec_version(&self) -> u32;

    /// The status version this build writes; 0 leaves statuses unversioned.
    fn status_version(&self) -> u32;

    /// Upgrades a spec written at version `from` (below the current one).
    ///
    /// # Errors
    /// Why it cannot be upgraded; the read fails with [`Error::Migration`].
    fn convert_spec(&self, from: u32, spec: Json) -> std::result::Result<Json, String>;

    /// Upgrades a status written at version `from` (below the current one).
    ///
    /// # Errors
    /// As [`Migrator::convert_spec`].
    fn convert_status(&self, from: u32, status: Json) -> std::result::Result<Json, String>;
}

/// The versions a kind's writes are stamped with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SchemaVersions {
    pub(crate) spec: i64,
    pub(crate) status: i64,
}

/// The migrators of the registered kinds of one store.
#[derive(Default)]
pub(crate) struct Migrations {
    by_kind: RwLock<HashMap<GroupKind, Arc<dyn Migrator>>>,
    /// The versions recorded with the registrations of kinds this process
    /// has no migrator for, read once per kind.
    recorded: RwLock<HashMap<GroupKind, SchemaVersions>>,
    /// Whether any kind has one: reads skip the lookup while none does.
    any: AtomicBool,
}

impl Migrations {
    /// Installs (or, with `None`, removes) the migrator of `group_kind`.
    pub(crate) fn set(&self, group_kind: &GroupKind, migrator: Option<Arc<dyn Migrator>>) {
        let mut by_kind = write(&self.by_kind);
        match migrator {
            Some(m) => by_kind.insert(group_kind.clone(), m),
            None => by_kind.remove(group_kind),
        };
        self.any.store(!by_kind.is_empty(), Ordering::SeqCst);
        drop(by_kind);
        // The registration just recorded may say otherwise now.
        write(&self.recorded).remove(group_kind);
    }

    fn get(&self, group_kind: &GroupKind) -> Option<Arc<dyn Migrator>> {
        if !self.any.load(Ordering::SeqCst) {
            return None;
        }
        let by_kind = read(&self.by_kind);
        by_kind.get(group_kind).cloned()
    }

    /// The versions writes of `group_kind` are stamped with.
    pub(crate) fn versions(&self, group_kind: &GroupKind) -> SchemaVersions {
        self.get(group_kind)
            .map(|m| SchemaVersions {
                spec: i64::from(m.spec_version()),
                status: i64::from(m.status_version()),
            })
            .unwrap_or_default()
    }

    /// The versions a client's writes of `group_kind` are stamped with: its
    /// migrator's when one is registered in this process, otherwise those
    /// recorded with its registration (`recorded` reads them; called once
    /// per kind), so a process with no host (the CLI on the store) writes
    /// at the version the serving plugin reads.
    ///
    /// # Errors
    /// What `recorded` returns.
    pub(crate) fn versions_or_recorded(
        &self,
        group_kind: &GroupKind,
        recorded: impl FnOnce() -> Result<Option<SchemaVersions>>,
    ) -> Result<SchemaVersions> {
        if let Some(migrator) = self.get(group_kind) {
            return Ok(SchemaVersions {
                spec: i64::from(migrator.spec_version()),
                status: i64::from(migrator.status_version()),
            });
        }
        if let Some(versions) = read(&self.recorded).get(group_kind) {
            return Ok(*versions);
        }
        let versions = recorded()?.unwrap_or_default();
        write(&self.recorded).insert(group_kind.clone(), versions);
        Ok(versions)
    }

    /// `spec`, written at version `from`, as the current version of
    /// `group_kind` (`current`, from [`Migrations::versions_or_recorded`])
    /// reads it, converted by the kind's migrator where it is older.
    ///
    /// # Errors
    /// [`Error::SpecVersionTooNew`] for a version above the current one;
    /// [`Error::Migration`] when the conversion fails or this process has
    /// no migrator for the kind.
    pub(crate) fn spec_from(
        &self,
        group_kind: &GroupKind,
        what: &str,
        from: i64,
        current: i64,
        spec: Json,
    ) -> Result<Json> {
        if from == current {
            return Ok(spec);
        }
        if from > current || from < 0 {
            return Err(Error::SpecVersionTooNew {
                what: what.to_string(),
                version: from,
                current,
            });
        }
        let Some(migrator) = self.get(group_kind) else {
            return Err(Error::Migration {
                what: format!("spec of {what}"),
                message: format!(
                    "it is written at version {from}, the plugin reads version {current}, and \
                     only a running host has the plugin's migrator: apply it through the host"
                ),
            });
        };
        convert(
            &format!("spec of {what}"),
            from,
            current,
            spec,
            |from, spec| migrator.convert_spec(from, spec),
        )
    }

    /// `object` with its spec and status upgraded to the current versions.
    ///
    /// # Errors
    /// [`Error::Migration`] when a document was written by a newer build or
    /// its converter fails.
    pub(crate) fn upgrade(&self, mut object: RawObject) -> Result<RawObject> {
        let Some(migrator) = self.get(&object.meta.group_kind) else {
            return Ok(object);
        };
        let label = object.meta.label();
        let current = i64::from(migrator.spec_version());
        if current > 0 {
            object.spec = convert(
                &format!("spec of {label}"),
                object.bookkeeping.spec_version,
                current,
                object.spec,
                |from, spec| migrator.convert_spec(from, spec),
            )?;
            object.bookkeeping.spec_version = current;
        }
        let current = i64::from(migrator.status_version());
        if current > 0 {
            if let Some(status) = object.status.take() {
                object.status = Some(convert(
                    &format!("status of {label}"),
                    object.bookkeeping.status_version,
                    current,
                    status,
                    |from, status| migrator.convert_status(from, status),
                )?);
            }
            object.bookkeeping.status_version = current;
        }
        Ok(object)
    }

    /// Upgrades each object; one that cannot be read is logged and left out.
    pub(crate) fn upgrade_all(&self, objects: Vec<RawObject>) -> Vec<RawObject> {
        if !self.any.load(Ordering::SeqCst) {
            return objects;
        }
        objects
            .into_iter()
            .filter_map(|object| match self.upgrade(object) {
                Ok(object) => Some(object),
                Err(error) => {
                    tracing::warn!("skipping an object that cannot be read: {error}");
                    None
                }
            })
            .collect()
    }
}

fn convert(
    what: &str,
    stored: i64,
    current: i64,
    document: Json,
    converter: impl FnOnce(u32, Json) -> std::result::Result<Json, String>,
) -> Result<Json> {
    let migration = |message: String| Error::Migration {
        what: what.to_string(),
        message,
    };
    if stored == current {
        return Ok(document);
    }
    if stored > current {
        return Err(migration(format!(
            "written at version {stored} by a newer build; this build knows up to {current}"
        )));
    }
    let from = u32::try_from(stored).map_err(|_| migration(format!("stored version {stored}")))?;
    let converted = converter(from, document).map_err(migration)?;
    converted
        .require_object()
        .map_err(|e| migration(format!("the converter returned {e}")))?;
    Ok(converted)
}
