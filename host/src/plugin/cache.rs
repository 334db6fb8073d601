//! The compiled-artifact cache: a component is compiled once per content and
//! engine configuration, and later loads deserialize the artifact instead.
//!
//! Deserializing is `unsafe` in wasmtime (the bytes become executable code),
//! so the adversary is whoever can write the cache directory: another
//! process of this user, a backup restored from elsewhere, a plugin granted
//! the wrong directory. An artifact is loaded only if its last 32 bytes are
//! an HMAC-SHA256, under a secret key only this host's user can read, of the
//! source's content hash followed by the artifact. Without the key nobody
//! can seal an artifact, so neither a foreign one nor one plugin's artifact
//! under another's name passes. The key is a file of its own (by default
//! beside the cache directory, for `beehive run` beside the database),
//! created owner-only on first use; a key file that is not a private regular
//! file of this user turns the cache off, with a warning. The directory is
//! made owner-only, and one that others can write to is not used. Files are
//! written under a temporary name, synced and renamed, so a crash never
//! leaves a partial artifact under the real name.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::operator_file::{self, MAX_PLUGIN_BYTES};

/// The most bytes of one artifact the cache reads: compiled code is a few
/// times larger than the component it came from.
const MAX_ARTIFACT_BYTES: u64 = 4 * MAX_PLUGIN_BYTES;

/// The length of the sealing key and of the seal.
const KEY_BYTES: usize = 32;

/// Where compiled components live, keyed by content hash and engine (so by
/// compiler: the baseline and the optimised code of one file are two
/// artifacts).
pub(crate) struct Cache {
    dir: PathBuf,
    /// The secret the seals are made with; `None` when it could not be read
    /// or made, and then nothing is cached.
    key: Option<[u8; KEY_BYTES]>,
}

impl Cache {
    /// The cache in `dir`, sealed with the key in `key_file` (made if
    /// missing).
    pub(crate) fn new(dir: PathBuf, key_file: &Path) -> Self {
        let key = match sealing_key(key_file) {
            Ok(key) => Some(key),
            Err(error) => {
                tracing::warn!(
                    key = %key_file.display(),
                    "not caching compiled plugins: the sealing key cannot be used: {error}"
                );
                None
            }
        };
        Cache { dir, key }
    }

    /// The key file beside `dir` that [`Cache::new`] uses when none is named.
    pub(crate) fn default_key_file(dir: &Path) -> PathBuf {
        let mut name = dir.as_os_str().to_owned();
        name.push(".key");
        PathBuf::from(name)
    }

    fn path(&self, engine: &Engine, content_hash: &str) -> PathBuf {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir
            .join(format!("{content_hash}-{:016x}.cwasm", hasher.finish()))
    }

    /// Whether an artifact for `content_hash` compiled for `engine` is on
    /// disk: a hint (it may still fail its seal), for ordering loads.
    pub(crate) fn holds(&self, engine: &Engine, content_hash: &str) -> bool {
        self.key.is_some() && self.path(engine, content_hash).is_file()
    }

    /// Removes the artifact for `content_hash` compiled for `engine`, if
    /// there is one: baseline code once the optimised code is cached.
    pub(crate) fn remove(&self, engine: &Engine, content_hash: &str) {
        let _ = std::fs::remove_file(self.path(engine, content_hash));
    }

    /// The cached component for `content_hash`, if a sound artifact exists.
    pub(crate) fn load(&self, engine: &Engine, content_hash: &str) -> Option<Component> {
        let key = self.key.as_ref()?;
        if !self.is_private() {
            return None;
        }
        let bytes =
            operator_file::read(&self.path(engine, content_hash), MAX_ARTIFACT_BYTES).ok()?;
        let (artifact, seal) = bytes.split_at_checked(bytes.len().checked_sub(KEY_BYTES)?)?;
        if sealer(key, content_hash, artifact)
            .verify_slice(seal)
            .is_err()
        {
            tracing::warn!(
                content_hash,
                "ignoring a compiled artifact this host did not seal for this plugin \
                 (damaged, forged, or compiled from other source); compiling again"
            );
            return None;
        }
        // SAFETY: the seal verified under this host's secret key, which only
        // this host's user can read, so this host wrote these exact bytes
        // for this content hash; the name pins the engine configuration, and
        // wasmtime re-checks it while deserializing.
        unsafe { Component::deserialize(engine, artifact) }.ok()
    }

    /// Writes `component`'s artifact for `content_hash`; failures only cost a
    /// recompile next time, so they are logged, not returned.
    pub(crate) fn store(&self, component: &Component, content_hash: &str) {
        let Some(key) = &self.key else { return };
        if let Err(error) = self.try_store(key, component, content_hash) {
            tracing::warn!(%error, "could not cache a compiled plugin");
        }
    }

    fn try_store(
        &self,
        key: &[u8; KEY_BYTES],
        component: &Component,
        content_hash: &str,
    ) -> std::io::Result<()> {
        let artifact = component
            .serialize()
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        if !self.is_private() {
            return Err(std::io::Error::other(format!(
                "{} is not private to this user: not caching there",
                self.dir.display()
            )));
        }
        let path = self.path(component.engine(), content_hash);
        let temporary = temporary_name(&path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(&artifact)?;
        file.write_all(&sealer(key, content_hash, &artifact).finalize().into_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)
    }

    /// Whether the directory is this user's and no one else can write in
    /// it: otherwise another user could plant code for the host to run.
    fn is_private(&self) -> bool {
        let Ok(meta) = std::fs::metadata(&self.dir) else {
            return false;
        };
        let private = meta.uid() == effective_uid() && meta.mode() & 0o022 == 0;
        if !private {
            tracing::warn!(
                dir = %self.dir.display(),
                "the plugin cache is writable by others or not this user's: not using it"
            );
        }
        private
    }
}

/// The MAC over `content_hash` and `artifact`, ready to finalize or verify.
fn sealer(key: &[u8; KEY_BYTES], content_hash: &str, artifact: &[u8]) -> Hmac<Sha256> {
    // Invariant: HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(content_hash.as_bytes());
    mac.update(artifact);
    mac
}

/// The key in `file`, made (random, owner-only) when there is none. A key
/// another user owns or could read is refused: it would let them seal code.
fn sealing_key(file: &Path) -> Result<[u8; KEY_BYTES], String> {
    match make_key(file) {
        Ok(key) => return Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create it: {e}")),
    }
    let meta = std::fs::symlink_metadata(file).map_err(|e| e.to_string())?;
    if !meta.file_type().is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.uid() != effective_uid() || meta.mode() & 0o077 != 0 {
        return Err("it is not private to this user (it must be mode 0600, owned by us)".into());
    }
    let bytes = operator_file::read(file, KEY_BYTES as u64).map_err(|e| e.to_string())?;
    bytes
        .try_into()
        .map_err(|_| format!("it does not hold a {KEY_BYTES}-byte key"))
}

fn make_key(file: &Path) -> std::io::Result<[u8; KEY_BYTES]> {
    let mut key = [0u8; KEY_BYTES];
    getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)?;
    out.write_all(&key)?;
    out.sync_all()?;
    Ok(key)
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn temporary_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_made_private_once_and_a_shared_one_is_refused() {
        use std::os::unix::fs::PermissionsExt;

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cache.key");
        let made = sealing_key(&file).unwrap();
        assert_eq!(sealing_key(&file).unwrap(), made, "read back, not remade");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = sealing_key(&file).unwrap_err();
        assert!(error.contains("not private"), "{error}");
    }

    #[test]
    fn a_seal_depends_on_the_key_the_content_and_the_artifact() {
        let seal = |key: u8, hash: &str, artifact: &[u8]| {
            sealer(&[key; KEY_BYTES], hash, artifact)
                .finalize()
                .into_bytes()
                .to_vec()
        };
        let original = seal(1, "abc", b"code");
        assert_ne!(seal(2, "abc", b"code"), original);
        assert_ne!(seal(1, "abd", b"code"), original);
        assert_ne!(seal(1, "abc", b"cods"), original);
        assert!(
            sealer(&[1; KEY_BYTES], "abc", b"code")
                .verify_slice(&original)
                .is_ok()
        );
    }
}
