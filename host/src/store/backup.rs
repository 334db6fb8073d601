//! Backups of a SQLite store taken while it serves, and restores from them.
//!
//! A backup is `VACUUM INTO` on a read-only connection of its own: one read
//! transaction, so the copy is the store as of one commit, and a reader in
//! WAL mode never blocks the writer (the store's checkpoints are passive,
//! so they never wait on it either; the log grows while the copy is made).
//! The copy is written under a temporary name, its write-log position read
//! from the copy itself, flushed to disk, then renamed to its name, and its
//! SHA-256 written beside it as `FILE.sha256` (the format `sha256sum -c`
//! reads). A backup cut short leaves only a temporary file, which no
//! restore takes for a backup: it has no checksum file.
//!
//! A restore checks the checksum, SQLite's `integrity_check` and the schema
//! version before anything else, then prepares the copy to serve as a new
//! store: its write positions jump past anything the old store could have
//! reached since the backup, and every watch resumed from before the jump is
//! told it is too old (so a watcher relists instead of silently missing the
//! writes the backup does not hold); every object owes one pass (what hosts
//! held in memory did not survive). Only then is it renamed into place.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::rows::snapshot::{self, invalid};

pub use crate::store::rows::snapshot::RESTORE_GAP;

/// What a backup holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backup {
    /// The backup file.
    pub path: PathBuf,
    /// The write-log position it holds: every write at or below it is in
    /// the backup, none above.
    pub position: i64,
    /// The objects in it.
    pub objects: i64,
    /// Its size.
    pub bytes: u64,
    /// Its SHA-256, in hex, as written to `FILE.sha256`.
    pub sha256: String,
    /// How long it took.
    pub took: Duration,
}

/// What a restore made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The new store.
    pub path: PathBuf,
    /// The write-log position the backup held.
    pub position: i64,
    /// The objects restored, each owing one pass.
    pub objects: i64,
    /// The first write position the new store hands out.
    pub next_position: i64,
}

/// What preparing a store its server restored did.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The write-log position the dump held.
    pub position: i64,
    /// The objects restored, each owing one pass.
    pub objects: i64,
    /// The first write position the store hands out now.
    pub next_position: i64,
}

impl Store {
    /// Makes a PostgreSQL store that the server's own tools restored
    /// (`pg_restore` of a `pg_dump`) ready to serve, as [`restore`] makes a
    /// SQLite copy: write positions moved [`RESTORE_GAP`] past the dump's,
    /// so a watch resumed across the restore is refused rather than
    /// silently resumed; every object owing one pass, since no host's
    /// memory survived; and the host lease taken from whoever held it in
    /// the dump, so no host from before the restore can commit into it.
    ///
    /// A lease that is live in the restored row is that of the host from
    /// before the dump (or of a host serving this database now: then the
    /// database was not just restored). It is taken only when
    /// `take_live_lease` says so.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] on a SQLite store (`restore` prepares its
    /// copy itself), or when a host holds the lease and `take_live_lease`
    /// is false.
    pub async fn prepare_restored(&self, take_live_lease: bool) -> Result<Prepared> {
        if !self.is_postgres() {
            return Err(Error::InvalidOption(
                "a SQLite store is prepared by `beehive restore FILE` itself".into(),
            ));
        }
        if let Some(holder) = self.lease_holder()?.filter(|h| h.live && !take_live_lease) {
            return Err(Error::InvalidOption(format!(
                "host {} holds this store's lease: if the database is being served, stop its \
                 hosts first; if it was just restored from a dump, that is the host from \
                 before the dump, and --take-lease takes the lease from it now",
                holder.holder
            )));
        }
        let now = crate::object::Timestamp::now();
        let (position, objects) = self
            .write(move |tx| {
                let marked = snapshot::mark_restored(tx.conn(), now)?;
                crate::store::rows::lease::fence_out(tx.conn())?;
                Ok(marked)
            })
            .await?;
        Ok(Prepared {
            position,
            objects,
            next_position: position + RESTORE_GAP + 1,
        })
    }

    /// Writes a consistent copy of this store to `file`, which must not
    /// exist, while the store keeps serving, and its SHA-256 to
    /// `FILE.sha256`.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] on a PostgreSQL store (its server's tools
    /// back it up) or when `file` exists; [`Error::Io`] or
    /// [`Error::Database`] when the copy cannot be written (a full disk, a
    /// missing directory): nothing is left under `file` then.
    pub fn backup_to(&self, file: &Path) -> Result<Backup> {
        if self.is_postgres() {
            return Err(Error::InvalidOption(
                "a PostgreSQL store is backed up with the server's own tools (pg_dump, or \
                 continuous archiving): see docs/backups.md"
                    .into(),
            ));
        }
        if file.symlink_metadata().is_ok() {
            return Err(Error::InvalidOption(format!(
                "{} already exists: back up to a new name (a backup never replaces a file)",
                file.display()
            )));
        }
        let started = Instant::now();
        let partial = partial_name(file);
        let copied = snapshot::copy_into(self.path(), &partial);
        let backup = copied.and_then(|(position, objects)| {
            let (bytes, sha256) = flush_and_hash(&partial)?;
            std::fs::rename(&partial, file)?;
            sync_directory(file)?;
            write_checksum(file, &sha256)?;
            Ok(Backup {
                path: file.to_path_buf(),
                position,
                objects,
                bytes,
                sha256,
                took: started.elapsed(),
            })
        });
        if backup.is_err() {
            _ = std::fs::remove_file(&partial);
        }
        backup
    }
}

/// The temporary name a backup is written under, beside its final one.
fn partial_name(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map_or("backup".into(), |n| n.to_string_lossy().into_owned());
    file.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

/// Flushes `file` to disk; its size and SHA-256.
fn flush_and_hash(file: &Path) -> Result<(u64, String)> {
    let mut opened = File::open(file)?;
    opened.sync_all()?;
    let (bytes, sha256) = hash(&mut opened)?;
    Ok((bytes, sha256))
}

fn hash(reader: &mut impl Read) -> Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let read = reader.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        bytes += read as u64;
    }
    let digest = hasher.finalize();
    Ok((bytes, digest.iter().map(|b| format!("{b:02x}")).collect()))
}

/// Where a backup's checksum is kept.
pub fn checksum_file(backup: &Path) -> PathBuf {
    let mut name = backup.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

fn write_checksum(backup: &Path, sha256: &str) -> Result<()> {
    let name = backup
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let checksum = checksum_file(backup);
    let partial = partial_name(&checksum);
    let mut file = File::create(&partial)?;
    file.write_all(format!("{sha256}  {name}\n").as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&partial, &checksum)?;
    sync_directory(&checksum)
}

fn sync_directory(file: &Path) -> Result<()> {
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// Restores the backup `file` as a new store at `db`, which must not exist
/// (nor its write-ahead log).
///
/// # Errors
/// [`Error::InvalidBackup`] when the file is not a whole backup (no
/// checksum file, a checksum that does not match, a failed
/// `integrity_check`, not a Beehive store); [`Error::SchemaTooNew`] for a
/// backup of a newer build; [`Error::InvalidOption`] when `db` exists.
/// Nothing is left at `db` on an error.
pub fn restore(file: &Path, db: &Path) -> Result<Restored> {
    for existing in [db.to_path_buf(), with_suffix(db, "-wal")] {
        if existing.symlink_metadata().is_ok() {
            return Err(Error::InvalidOption(format!(
                "{} exists: a restore makes a new store, and never writes over one \
                 (restore to a new path, then move it into place with the host stopped)",
                existing.display()
            )));
        }
    }
    verify_checksum(file)?;
    let partial = partial_name(db);
    let restored = std::fs::copy(file, &partial)
        .map_err(Error::from)
        .and_then(|_| snapshot::prepare(file, &partial))
        .and_then(|prepared| {
            File::open(&partial)?.sync_all()?;
            std::fs::rename(&partial, db)?;
            sync_directory(db)?;
            Ok(Restored {
                path: db.to_path_buf(),
                position: prepared.position,
                objects: prepared.objects,
                next_position: prepared.next_position,
            })
        });
    if restored.is_err() {
        _ = std::fs::remove_file(&partial);
    }
    restored
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Checks `file` against its `FILE.sha256`.
fn verify_checksum(file: &Path) -> Result<()> {
    let checksum = checksum_file(file);
    let recorded = std::fs::read_to_string(&checksum).map_err(|e| {
        invalid(
            file,
            format!(
                "its checksum file {} cannot be read ({e}): a backup is whole only with it, \
                 and one cut short has none",
                checksum.display()
            ),
        )
    })?;
    let expected = recorded.split_whitespace().next().unwrap_or_default();
    let (_, actual) = hash(&mut File::open(file)?)?;
    if expected != actual {
        return Err(invalid(
            file,
            format!(
                "its SHA-256 is {actual}, but {} records {expected}: the file was changed \
                 or cut short since the backup",
                checksum.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::CreateOptions;
    use crate::client::RawClient;
    use crate::json::Json;
    use crate::object::GroupKind;

    async fn store_with(dir: &Path, names: &[&str]) -> Store {
        let store = Store::open(dir.join("live.db")).unwrap();
        let client = RawClient::new(&store, GroupKind::new("test.dev", "Widget"));
        for name in names {
            let spec = Json::parse(r#"{"size": 1}"#).unwrap();
            client
                .create(name, spec, CreateOptions::new())
                .await
                .unwrap();
        }
        store
    }

    #[tokio::test]
    async fn a_restored_store_holds_the_backup_owes_every_pass_and_moves_positions_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(dir.path(), &["a", "b"]).await;
        let backup = store.backup_to(&dir.path().join("b.db")).unwrap();
        assert_eq!(backup.objects, 2);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&backup.path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "owner-only, as the store is");
        let refused = store.backup_to(&backup.path).unwrap_err();
        assert!(matches!(refused, Error::InvalidOption(_)), "{refused}");

        let restored = restore(&backup.path, &dir.path().join("new.db")).unwrap();
        assert_eq!(restored.position, backup.position);
        assert_eq!(restored.next_position, backup.position + RESTORE_GAP + 1);
        let conn = rusqlite::Connection::open(&restored.path).unwrap();
        let owed: i64 = conn
            .query_row("SELECT SUM(reconcile_owed) FROM objects", [], |r| r.get(0))
            .unwrap();
        assert_eq!(owed, 2);
        drop(conn);
        let reopened = Store::open(&restored.path).unwrap();
        let client = RawClient::new(&reopened, GroupKind::new("test.dev", "Widget"));
        let spec = Json::parse("{}").unwrap();
        let created = client
            .create("c", spec, CreateOptions::new())
            .await
            .unwrap();
        assert!(created.meta.resource_version > backup.position + RESTORE_GAP);

        let again = restore(&backup.path, &restored.path).unwrap_err();
        assert!(matches!(again, Error::InvalidOption(_)), "{again}");
    }

    #[tokio::test]
    async fn a_backup_of_a_newer_build_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(dir.path(), &["a"]).await;
        let backup = store.backup_to(&dir.path().join("b.db")).unwrap();
        let conn = rusqlite::Connection::open(&backup.path).unwrap();
        conn.pragma_update(None, "user_version", 999).unwrap();
        drop(conn);
        let (_, sha256) = hash(&mut File::open(&backup.path).unwrap()).unwrap();
        std::fs::remove_file(checksum_file(&backup.path)).unwrap();
        write_checksum(&backup.path, &sha256).unwrap();
        let refused = restore(&backup.path, &dir.path().join("new.db")).unwrap_err();
        assert!(
            matches!(refused, Error::SchemaTooNew { found: 999, .. }),
            "{refused}"
        );
        assert!(!dir.path().join("new.db").exists());
    }
}
