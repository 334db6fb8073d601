//! The compiled-artifact cache: a component is compiled once per content and
//! engine configuration, and later loads deserialize the artifact instead.
//!
//! Deserializing is `unsafe` in wasmtime (the bytes become executable code),
//! so an artifact is only ever loaded if it carries, in its last 32 bytes, the
//! SHA-256 of the source's content hash followed by the artifact: a file this
//! host did not write whole is ignored and rebuilt, and one plugin's artifact
//! copied under another's name does not pass for it. The directory is made
//! owner-only, and one that others can write to is not used at all. Files
//! are written under a temporary name, synced and renamed, so a crash never
//! leaves a partial artifact under the real name.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled components live, keyed by content hash and engine.
pub(crate) struct Cache {
    dir: PathBuf,
    engine_key: String,
}

impl Cache {
    pub(crate) fn new(dir: PathBuf, engine: &Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Cache {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
        }
    }

    fn path(&self, content_hash: &str) -> PathBuf {
        self.dir
            .join(format!("{content_hash}-{}.cwasm", self.engine_key))
    }

    /// The cached component for `content_hash`, if a sound artifact exists.
    pub(crate) fn load(&self, engine: &Engine, content_hash: &str) -> Option<Component> {
        if !self.is_private() {
            return None;
        }
        let bytes = std::fs::read(self.path(content_hash)).ok()?;
        let (artifact, digest) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
        if seal(content_hash, artifact).as_slice() != digest {
            tracing::warn!(
                content_hash,
                "ignoring a compiled artifact that is damaged or was compiled from other source"
            );
            return None;
        }
        // SAFETY: the artifact was written by `store` below, by this host, and
        // its digest proves it is whole; its name pins the content and the
        // engine configuration it was compiled for, and wasmtime re-checks
        // the configuration while deserializing.
        unsafe { Component::deserialize(engine, artifact) }.ok()
    }

    /// Writes `component`'s artifact for `content_hash`; failures only cost a
    /// recompile next time, so they are logged, not returned.
    pub(crate) fn store(&self, component: &Component, content_hash: &str) {
        if let Err(error) = self.try_store(component, content_hash) {
            tracing::warn!(%error, "could not cache a compiled plugin");
        }
    }

    fn try_store(&self, component: &Component, content_hash: &str) -> std::io::Result<()> {
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
        let path = self.path(content_hash);
        let temporary = temporary_name(&path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(&artifact)?;
        file.write_all(&seal(content_hash, &artifact))?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)
    }
}

impl Cache {
    /// Whether the directory is this user's and no one else can write in
    /// it: otherwise another user could plant code for the host to run.
    fn is_private(&self) -> bool {
        let Ok(meta) = std::fs::metadata(&self.dir) else {
            return false;
        };
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let private = meta.uid() == me && meta.mode() & 0o022 == 0;
        if !private {
            tracing::warn!(
                dir = %self.dir.display(),
                "the plugin cache is writable by others or not this user's: not using it"
            );
        }
        private
    }
}

/// The trailer that binds an artifact to the source it was compiled from.
fn seal(content_hash: &str, artifact: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(content_hash.as_bytes());
    hasher.update(artifact);
    hasher.finalize().into()
}

fn temporary_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(name)
}
