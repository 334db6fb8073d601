//! `beehive run` on a PostgreSQL store serves the store's plugin set: it
//! mirrors the set into a local directory (`NAME.wasm`, `NAME.toml`), which
//! the plugin directory watcher then serves and hot-swaps as usual.

use std::path::{Path, PathBuf};
use std::time::Duration;

use beehive::Store;
use beehive::store::PushedPlugin;

/// How often the set is read: a push reaches every host within about this.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Refuses a mirror directory another user could write into (it sits in
/// the shared temporary directory, and what is in it runs as plugins), and
/// makes a fresh one private.
pub fn require_private(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(format!(
            "{} is not a directory of this user's: refusing to serve plugins from it",
            dir.display()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Makes `dir` hold exactly the store's plugin set; logs what changed.
pub fn mirror(store: &Store, dir: &Path) -> Result<(), String> {
    let set = store
        .pushed_plugins()
        .map_err(|e| format!("reading the store's plugin set: {e}"))?;
    for plugin in &set {
        write_plugin(store, dir, plugin)?;
    }
    remove_others(dir, &set)
}

fn write_plugin(store: &Store, dir: &Path, plugin: &PushedPlugin) -> Result<(), String> {
    let wasm = dir.join(format!("{}.wasm", plugin.name));
    let marker = dir.join(format!(".{}.hash", plugin.name));
    let current = std::fs::read_to_string(&marker).unwrap_or_default();
    if current == plugin.hash && wasm.exists() {
        return write_policy(dir, plugin);
    }
    let bytes = store
        .pushed_plugin_bytes(&plugin.hash)
        .map_err(|e| format!("reading plugin {}: {e}", plugin.name))?
        .ok_or_else(|| {
            format!(
                "plugin {}'s bytes ({}) are missing",
                plugin.name, plugin.hash
            )
        })?;
    // The policy first: a new version must never run under an old grant.
    write_policy(dir, plugin)?;
    replace(&wasm, &bytes)?;
    replace(&marker, plugin.hash.as_bytes())?;
    tracing::info!(plugin = %plugin.name, hash = %plugin.hash, "plugin pulled from the store");
    Ok(())
}

fn write_policy(dir: &Path, plugin: &PushedPlugin) -> Result<(), String> {
    let path = dir.join(format!("{}.toml", plugin.name));
    match &plugin.policy {
        Some(text) if std::fs::read_to_string(&path).ok().as_deref() != Some(text) => {
            replace(&path, text.as_bytes())
        }
        Some(_) => Ok(()),
        None => remove_if_present(&path),
    }
}

/// Removes the plugins (and their policies and markers) the set no longer names.
fn remove_others(dir: &Path, set: &[PushedPlugin]) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = plugin_name(&path) else {
            continue;
        };
        if !set.iter().any(|p| p.name == stem) {
            remove_if_present(&path)?;
            if path.extension().is_some_and(|e| e == "wasm") {
                tracing::info!(plugin = %stem, "plugin removed from the store's set");
            }
        }
    }
    Ok(())
}

/// The plugin a mirrored file belongs to: `NAME.wasm`, `NAME.toml`, `.NAME.hash`.
fn plugin_name(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    if let Some(name) = file.strip_prefix('.').and_then(|f| f.strip_suffix(".hash")) {
        return Some(name.to_string());
    }
    let (name, extension) = file.rsplit_once('.')?;
    (matches!(extension, "wasm" | "toml") && !name.starts_with('.')).then(|| name.to_string())
}

/// Writes `path` whole, by renaming a finished file into place, so the
/// watcher never sees half a plugin.
fn replace(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let staging: PathBuf = {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".pulling");
        path.with_file_name(format!(".{}", name.to_string_lossy()))
    };
    std::fs::write(&staging, bytes).map_err(|e| format!("{}: {e}", staging.display()))?;
    std::fs::rename(&staging, path).map_err(|e| format!("{}: {e}", path.display()))
}

fn remove_if_present(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_directory_is_made_private_and_a_symlink_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("mirror");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        require_private(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let link = scratch.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let refused = require_private(&link).unwrap_err();
        assert!(refused.contains("refusing"), "{refused}");
    }

    #[test]
    fn mirrored_files_name_their_plugin() {
        assert_eq!(
            plugin_name(Path::new("/d/greeting.wasm")),
            Some("greeting".into())
        );
        assert_eq!(
            plugin_name(Path::new("/d/greeting.toml")),
            Some("greeting".into())
        );
        assert_eq!(
            plugin_name(Path::new("/d/.greeting.hash")),
            Some("greeting".into())
        );
        assert_eq!(plugin_name(Path::new("/d/.greeting.wasm.pulling")), None);
        assert_eq!(plugin_name(Path::new("/d/notes.txt")), None);
    }
}
