//! `beehive backup FILE`, `beehive restore FILE`, and the scheduled backups
//! of `beehive run --backup-dir`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use beehive::Store;
use beehive::object::Timestamp;
use beehive::store::backup::{self, Backup};

use crate::endpoint::Paths;
use crate::failure::Failure;
use crate::protocol::{BackupView, Reply, Request};

/// Backs the store up into `file`, through the running host or, with none,
/// on the database itself.
pub(crate) async fn backup(paths: &Paths, file: &Path) -> Result<String, Failure> {
    let file =
        std::path::absolute(file).map_err(|e| format!("cannot resolve {}: {e}", file.display()))?;
    let request = Request::Backup { file };
    match crate::commands::dispatch(paths, request).await? {
        Reply::BackedUp(view) => Ok(describe(&view)),
        other => Err(crate::commands::unexpected(&other)),
    }
}

/// What `backup` prints: what the file holds, and its checksum line.
fn describe(view: &BackupView) -> String {
    format!(
        "backed up {} objects at write-log position {} into {} ({:.1} MiB in {:.1} s)\n\
         {}  {}\n",
        view.objects,
        view.position,
        view.file.display(),
        view.bytes as f64 / f64::from(1 << 20),
        view.took_ms as f64 / 1000.0,
        view.sha256,
        view.file.display()
    )
}

/// Writes a backup of `store` into `file` on a blocking thread: the copy is
/// file work, seconds long for a large store.
pub(crate) async fn take(store: &Store, file: PathBuf) -> Result<BackupView, Failure> {
    let store = store.clone();
    let taken = tokio::task::spawn_blocking(move || store.backup_to(&file))
        .await
        .map_err(|e| format!("the backup's thread failed: {e}"))?;
    let Backup {
        path,
        position,
        objects,
        bytes,
        sha256,
        took,
    } = taken.map_err(Failure::from)?;
    Ok(BackupView {
        file: path,
        position,
        objects,
        bytes,
        sha256,
        took_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
    })
}

/// Restores the backup `file` as the new store `paths.db`.
pub(crate) fn restore(paths: &Paths, file: &Path) -> Result<String, Failure> {
    if paths.is_postgres() {
        return Err(Failure::usage(
            "a backup restores into a SQLite file: restore a PostgreSQL store with the \
             server's own tools (pg_restore); see docs/backups.md",
        ));
    }
    let restored = backup::restore(file, &paths.db).map_err(Failure::from)?;
    Ok(format!(
        "restored {} (write-log position {}, {} objects) into {}: every object owes one pass, \
         and watches resumed from a position before {} are refused as too old\n",
        file.display(),
        restored.position,
        restored.objects,
        restored.path.display(),
        restored.next_position
    ))
}

/// `restore --prepare`: readies a PostgreSQL database `pg_restore` filled.
pub(crate) async fn prepare_restored(paths: &Paths, take_lease: bool) -> Result<String, Failure> {
    if !paths.is_postgres() {
        return Err(Failure::usage(
            "restore --prepare readies a PostgreSQL database pg_restore filled; a SQLite \
             store is restored from a backup file: `beehive --db NEW restore FILE`",
        ));
    }
    let store = paths.open_store()?;
    let prepared = store
        .prepare_restored(take_lease)
        .await
        .map_err(|e| Failure::about(&paths.shown, e))?;
    Ok(format!(
        "prepared {} (write-log position {}, {} objects): every object owes one pass, watches \
         resumed from a position before {} are refused as too old, and no host from before \
         the restore can commit\n",
        paths.shown, prepared.position, prepared.objects, prepared.next_position
    ))
}

/// The name of a scheduled backup taken at `at`: they sort by time.
fn scheduled_name(at: Timestamp) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(at.as_millis().max(0) as u64);
    format!("beehive-{}.db", humantime::format_rfc3339_millis(at))
}

/// Refuses a backup directory that is not a plain directory: a symlink
/// (named instead of what it points to) or anything else.
pub(crate) fn require_backup_dir(dir: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(format!(
            "backup directory {} is a symbolic link: name the directory it points to",
            dir.display()
        )),
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "backup directory {} is not a directory",
            dir.display()
        )),
        Err(e) => Err(format!("backup directory {}: {e}", dir.display())),
    }
}

/// Takes a backup into `dir` every `every`, keeping the newest `keep`;
/// a failure is logged and counted, and the next one is tried on time.
pub(crate) async fn scheduled(store: Store, dir: PathBuf, every: Duration, keep: usize) {
    remove_partials(&dir);
    loop {
        tokio::time::sleep(every).await;
        let now = Timestamp::now();
        let file = dir.join(scheduled_name(now));
        let taken = match require_backup_dir(&dir) {
            Ok(()) => take(&store, file).await.map_err(|f| f.message),
            Err(why) => Err(why),
        };
        match taken {
            Ok(view) => {
                store.metrics().backup_succeeded(now);
                tracing::info!(
                    file = %view.file.display(),
                    position = view.position,
                    objects = view.objects,
                    "scheduled backup written"
                );
                prune(&dir, keep);
            }
            Err(why) => {
                store.metrics().backup_failed();
                tracing::warn!("scheduled backup failed: {why}");
            }
        }
    }
}

/// Removes what backups cut short left in `dir` (a killed host's).
fn remove_partials(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.contains(".partial-") {
            _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Removes all but the newest `keep` scheduled backups in `dir`, with their
/// checksum files.
fn prune(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut backups: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("beehive-") && n.ends_with(".db"))
        })
        .collect();
    backups.sort();
    let excess = backups.len().saturating_sub(keep);
    for old in &backups[..excess] {
        if let Err(error) = std::fs::remove_file(old) {
            tracing::warn!("cannot remove the old backup {}: {error}", old.display());
        }
        _ = std::fs::remove_file(backup::checksum_file(old));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduled_names_sort_by_time() {
        let earlier = scheduled_name(Timestamp::from_millis(1_000));
        let later = scheduled_name(Timestamp::from_millis(60_000));
        assert_eq!(earlier, "beehive-1970-01-01T00:00:01.000Z.db");
        assert!(earlier < later);
    }

    #[test]
    fn pruning_keeps_the_newest_and_their_checksums() {
        let dir = tempfile::tempdir().unwrap();
        for second in 1..=4 {
            let name = scheduled_name(Timestamp::from_millis(second * 1000));
            std::fs::write(dir.path().join(&name), "db").unwrap();
            std::fs::write(dir.path().join(format!("{name}.sha256")), "x").unwrap();
        }
        std::fs::write(dir.path().join("notes.txt"), "kept").unwrap();
        prune(dir.path(), 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "beehive-1970-01-01T00:00:03.000Z.db",
                "beehive-1970-01-01T00:00:03.000Z.db.sha256",
                "beehive-1970-01-01T00:00:04.000Z.db",
                "beehive-1970-01-01T00:00:04.000Z.db.sha256",
                "notes.txt"
            ]
        );
    }

    #[test]
    fn a_symlink_or_a_fifo_is_no_backup_directory() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(
            require_backup_dir(&link)
                .unwrap_err()
                .contains("symbolic link")
        );
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(
            require_backup_dir(&fifo)
                .unwrap_err()
                .contains("not a directory")
        );
        assert!(require_backup_dir(dir.path()).is_ok());
    }
}
