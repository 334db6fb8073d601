//! A plugin directory kept in step with a host: every `*.wasm` file in it
//! serves its kind, and changes to the files are hot-swapped in.
//!
//! A sync compares each file's size and modification time with what the last
//! sync saw, loads what changed (several files at once, compiling off the
//! async workers, so a slow compile holds back no other file), and as each
//! load finishes touches the host: a new version replaces the old one (passes in
//! flight finish on the old one; every object of the kind is queued once), a
//! file that no longer loads leaves its old version serving, a removed file
//! unregisters its kind unless another file now serves it. The watcher runs a
//! sync shortly after the directory goes quiet, and on a slow cadence behind
//! that, so a missed notification costs latency only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::directory_watch::{WatchHandle, watch_directory};
use crate::engine::Host;
use crate::object::GroupKind;
use crate::operator_file::{self, MAX_PLUGIN_BYTES};
use crate::plugin::policy::OffLimits;
use crate::plugin::trust::{Signer, Trust, cosign_signature_of, signature_of};
use crate::plugin::{Error, Limits, Plugin, Policy, Runtime, hex};
use crate::sync::lock;

/// A plugin serving its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The file it was loaded from.
    pub path: PathBuf,
    /// The kind it reconciles.
    pub group_kind: GroupKind,
    /// SHA-256 of the file's bytes, in hex: which version serves.
    pub content_hash: String,
    /// The limits its passes run under.
    pub limits: Limits,
    /// What its policy file grants (config values stay hidden).
    pub policy: Arc<Policy>,
    /// Who signed it, when the directory has a trust file.
    pub signer: Option<Signer>,
    code: Arc<super::code::CodeCell>,
}

impl Served {
    /// The code its passes run now ([`Plugin::tier`]).
    pub fn tier(&self) -> super::Tier {
        self.code.current().tier
    }

    /// The contract version it was built against.
    pub fn contract(&self) -> super::Contract {
        self.code.current().contract
    }
}

/// A file whose current content does not serve.
#[derive(Clone, Debug)]
pub struct LoadFailure {
    /// The file.
    pub path: PathBuf,
    /// Why it did not load.
    pub error: Arc<Error>,
}

/// A plugin file being loaded now: compiled, or read from the compiled-code
/// cache, then asked what it serves.
#[derive(Clone, Debug)]
pub struct Loading {
    /// The file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// When the load began.
    pub since: SystemTime,
}

/// What a sync changed.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Change {
    /// A file's plugin now serves its kind: a new file, a new version, or
    /// one that names a different kind than before (then `replaced` names
    /// the old kind, which was unregistered).
    Loaded {
        /// What serves now.
        served: Served,
        /// What the file served before, if anything.
        replaced: Option<Box<Served>>,
    },
    /// A file was removed and its kind has no controller now; its objects stay.
    Unregistered(Served),
    /// A file could not be loaded; the version it served before, if any,
    /// keeps serving.
    Failed {
        /// Why.
        failure: LoadFailure,
        /// The older version still serving.
        still_serving: Option<Served>,
    },
}

impl Change {
    /// Logs it as an operator should see it: a failure as a warning.
    pub fn log(&self) {
        match self {
            Change::Failed { .. } => tracing::warn!("plugin: {self}"),
            _ => tracing::info!("plugin: {self}"),
        }
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Loaded { served, replaced } => {
                write!(
                    f,
                    "{} serves {} (version {})",
                    served.path.display(),
                    served.group_kind,
                    short(&served.content_hash)
                )?;
                match replaced {
                    Some(old) if old.group_kind != served.group_kind => {
                        write!(f, ", no longer {}", old.group_kind)
                    }
                    Some(old) => write!(f, ", replacing version {}", short(&old.content_hash)),
                    None => Ok(()),
                }
            }
            Change::Unregistered(old) => write!(
                f,
                "{} was removed: {} has no controller now",
                old.path.display(),
                old.group_kind
            ),
            Change::Failed {
                failure,
                still_serving,
            } => {
                write!(f, "{}", failure.error)?;
                match still_serving {
                    Some(old) => write!(f, " (version {} keeps serving)", short(&old.content_hash)),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The first twelve hex digits of a content hash, as the logs show it.
pub(crate) fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// What a sync last saw of a plugin file and its policy file, to tell
/// whether either changed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    len: u64,
    modified: Option<SystemTime>,
    policy: Option<(u64, Option<SystemTime>)>,
    /// Its detached signatures' (minisign's, cosign's): a new signature is
    /// a reason to load again.
    signatures: [Option<(u64, Option<SystemTime>)>; 2],
}

fn fingerprint(path: &Path) -> Option<Fingerprint> {
    let meta = std::fs::metadata(path).ok()?;
    let beside = |file: PathBuf| {
        std::fs::symlink_metadata(file)
            .ok()
            .map(|m| (m.len(), m.modified().ok()))
    };
    meta.is_file().then(|| Fingerprint {
        len: meta.len(),
        modified: meta.modified().ok(),
        policy: beside(Policy::file_of(path)),
        signatures: [
            beside(signature_of(path)),
            beside(cosign_signature_of(path)),
        ],
    })
}

#[derive(Debug)]
struct FileState {
    seen: Fingerprint,
    /// The last load failed for a passing reason: the next sync tries
    /// again even though the file did not change.
    retry: bool,
    serving: Option<Served>,
    failure: Option<LoadFailure>,
}

/// A directory of plugins loaded into a host, and kept loaded as its files
/// change.
///
/// # Example
/// ```no_run
/// # async fn demo(host: beehive::Host) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use beehive::plugin::{Directory, Runtime, RuntimeOptions};
///
/// let runtime = Runtime::new(RuntimeOptions::new().cache_dir("plugin-cache"))?;
/// let plugins = Directory::new(runtime, host, "plugins");
/// for change in plugins.sync().await? {
///     println!("{change}");
/// }
/// let _watching = plugins.watch(Duration::from_secs(30))?;
/// # Ok(()) }
/// ```
pub struct Directory {
    runtime: Arc<Runtime>,
    host: Host,
    dir: PathBuf,
    /// Held for a whole sync: one look at the directory at a time.
    files: tokio::sync::Mutex<BTreeMap<PathBuf, FileState>>,
    /// What the last sync left, for readers that must not wait for a sync.
    report: Mutex<Report>,
    /// The plugin files as the latest sync listed them.
    listed: Mutex<BTreeMap<PathBuf, Fingerprint>>,
}

/// What a sync has done so far, as [`Directory::served`],
/// [`Directory::failures`] and [`Directory::loading`] show it.
#[derive(Default)]
struct Report {
    served: Vec<Served>,
    failures: Vec<LoadFailure>,
    loading: Vec<Loading>,
    /// Whether a sync has finished since the directory was made.
    synced: bool,
}

/// How many cached plugins one sync loads at once (beside one compile):
/// enough that they serve together, few enough that a directory of many
/// does not multiply the host's memory while it loads.
const LOADS_AT_ONCE: usize = 4;

/// A changed file, read and checked, waiting to be loaded.
struct Pending {
    path: PathBuf,
    seen: Fingerprint,
    serving: Option<Served>,
    bytes: Vec<u8>,
    content_hash: String,
    policy: Policy,
    signer: Option<Signer>,
}

/// What [`Directory::prepare`] found a changed file needs.
enum Prepared {
    /// Nothing: it vanished, is still being written, or is unchanged in
    /// content and policy.
    Nothing,
    /// It could not be read, or its policy is wrong.
    Failed(Box<Change>),
    /// Its content or policy is new: load it.
    Load(Box<Pending>),
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory").field("dir", &self.dir).finish()
    }
}

impl Directory {
    /// The plugins of `dir`, to be loaded into `host` by [`Directory::sync`].
    pub fn new(runtime: Arc<Runtime>, host: Host, dir: impl Into<PathBuf>) -> Arc<Self> {
        Arc::new(Directory {
            runtime,
            host,
            dir: dir.into(),
            files: tokio::sync::Mutex::new(BTreeMap::new()),
            report: Mutex::new(Report::default()),
            listed: Mutex::new(BTreeMap::new()),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The log lines its plugins logged.
    pub fn logs(&self) -> &super::PluginLogs {
        self.runtime.logs()
    }

    /// The plugins serving now, by file name.
    pub fn served(&self) -> Vec<Served> {
        self.report().served.clone()
    }

    /// The files whose current content failed to load, by file name.
    pub fn failures(&self) -> Vec<LoadFailure> {
        self.report().failures.clone()
    }

    /// The files a sync is loading now (a version already serving keeps
    /// serving meanwhile), by file name.
    pub fn loading(&self) -> Vec<Loading> {
        self.report().loading.clone()
    }

    /// The plugin files (or their policy files) added, changed or removed
    /// since the latest sync listed the directory: a file dropped a moment
    /// ago waits here for the watch to notice it. Empty when the directory
    /// cannot be read.
    pub fn unseen(&self) -> Vec<PathBuf> {
        let Ok(present) = self.list() else {
            return Vec::new();
        };
        let listed = lock(&self.listed);
        let changed = present
            .iter()
            .filter(|(path, seen)| listed.get(*path) != Some(*seen))
            .map(|(path, _)| path.clone());
        let removed = listed.keys().filter(|path| !present.contains_key(*path));
        changed.chain(removed.cloned()).collect()
    }

    /// Whether a sync has finished: every file present then serves or is
    /// refused. A host with a plugin still compiling at start is not yet.
    pub fn synced(&self) -> bool {
        self.report().synced
    }

    fn report(&self) -> std::sync::MutexGuard<'_, Report> {
        lock(&self.report)
    }

    /// Brings the host in step with the directory and says what changed.
    ///
    /// # Errors
    /// [`Error::Read`] when the directory cannot be read; problems
    /// with single files are [`Change::Failed`] entries instead.
    pub async fn sync(&self) -> Result<Vec<Change>, Error> {
        self.sync_with(|_| {}).await
    }

    /// [`Directory::sync`], calling `on_change` with each change as it
    /// happens: a plugin that loads quickly is reported (and serves) while
    /// another is still compiling.
    ///
    /// # Errors
    /// As [`Directory::sync`].
    pub async fn sync_with(
        &self,
        mut on_change: impl FnMut(&Change) + Send,
    ) -> Result<Vec<Change>, Error> {
        let mut files = self.files.lock().await;
        let present = self.list()?;
        *lock(&self.listed) = present.clone();
        let removed: Vec<Served> = {
            let gone: Vec<PathBuf> = files
                .keys()
                .filter(|p| !present.contains_key(*p))
                .cloned()
                .collect();
            let metrics = self.host.store().metrics();
            let mut removed = Vec::new();
            for path in &gone {
                metrics.plugin_gone(&plugin_label(path));
                let Some(served) = files.remove(path).and_then(|f| f.serving) else {
                    continue;
                };
                metrics.plugin_serving(
                    &plugin_label(path),
                    &served.group_kind.to_string(),
                    &served.content_hash,
                    false,
                );
                removed.push(served);
            }
            removed
        };
        let mut changes = Vec::new();
        let mut report = |change: Change| {
            self.measure(&change);
            on_change(&change);
            changes.push(change);
        };
        // Read once a sync: every file changed since is checked against it.
        let trust = Trust::of_directory(&self.dir);
        let mut pending = Vec::new();
        for (path, seen) in present {
            if files.get(&path).is_some_and(|f| f.seen == seen && !f.retry) {
                continue;
            }
            self.host
                .store()
                .metrics()
                .plugin_seen(&plugin_label(&path));
            match self.prepare(&mut files, &path, seen, &trust) {
                Prepared::Nothing => {}
                Prepared::Failed(change) => report(*change),
                Prepared::Load(load) => pending.push(*load),
            }
        }
        self.load_all(&mut files, pending, &mut report).await;
        for old in removed {
            let still_served = files.values().any(|f| {
                f.serving
                    .as_ref()
                    .is_some_and(|s| s.group_kind == old.group_kind)
            });
            if !still_served {
                self.release(&old.group_kind).await;
                report(Change::Unregistered(old));
            }
        }
        self.publish(&files);
        self.report().synced = true;
        Ok(changes)
    }

    /// Loads the pending files (cached ones [`LOADS_AT_ONCE`] at a time,
    /// beside one compile at a time) and installs each as soon as it has
    /// loaded.
    async fn load_all(
        &self,
        files: &mut BTreeMap<PathBuf, FileState>,
        pending: Vec<Pending>,
        report: &mut impl FnMut(Change),
    ) {
        use futures_util::StreamExt;

        // Cached plugins load together; compiles take turns, smallest
        // first, so many small plugins serve before one large one does.
        let (cached, mut to_compile): (Vec<Pending>, Vec<Pending>) = pending
            .into_iter()
            .partition(|p| self.runtime.has_compiled(&p.content_hash));
        to_compile.sort_by_key(|p| p.bytes.len());
        let pending: Vec<&Pending> = cached.iter().chain(&to_compile).collect();
        self.report().loading = pending
            .iter()
            .map(|p| Loading {
                path: p.path.clone(),
                bytes: p.bytes.len() as u64,
                since: SystemTime::now(),
            })
            .collect();
        let cached = futures_util::stream::iter(cached.into_iter().map(|p| self.load(p)))
            .buffer_unordered(LOADS_AT_ONCE);
        let compiled =
            futures_util::stream::iter(to_compile.into_iter().map(|p| self.load(p))).buffered(1);
        let mut loads = futures_util::stream::select(cached, compiled);
        while let Some((pending, loaded)) = loads.next().await {
            let path = pending.path.clone();
            let change = self.settle(files, pending, loaded).await;
            self.report().loading.retain(|l| l.path != path);
            self.publish(files);
            if let Some(change) = change {
                report(change);
            }
        }
    }

    /// Loads one file on a task of its own, so that loads proceed in
    /// parallel, and hands back what it was loading.
    async fn load(&self, mut pending: Pending) -> (Pending, Result<Plugin, Error>) {
        let runtime = self.runtime.clone();
        let path = pending.path.clone();
        let bytes = std::mem::take(&mut pending.bytes);
        let (content_hash, policy) = (pending.content_hash.clone(), pending.policy.clone());
        let task =
            tokio::spawn(
                async move { runtime.load_bytes(&path, bytes, content_hash, policy).await },
            );
        let loaded = task.await.unwrap_or_else(|e| {
            Err(Error::LoadPanicked {
                path: pending.path.clone(),
                message: e.to_string(),
            })
        });
        (pending, loaded)
    }

    /// Keeps `beehive_plugin_info` and the load-failure counts in step.
    fn measure(&self, change: &Change) {
        let metrics = self.host.store().metrics();
        let serving = |served: &Served, on: bool| {
            metrics.plugin_serving(
                &plugin_label(&served.path),
                &served.group_kind.to_string(),
                &served.content_hash,
                on,
            );
        };
        match change {
            Change::Loaded { served, replaced } => {
                if let Some(old) = replaced {
                    serving(old, false);
                }
                serving(served, true);
            }
            Change::Unregistered(old) => serving(old, false),
            Change::Failed { failure, .. } => {
                let reason = match *failure.error {
                    Error::Signature { .. } => "signature",
                    _ => "load",
                };
                metrics.plugin_load_failed(&plugin_label(&failure.path), reason);
            }
        }
    }

    /// The `*.wasm` files in the directory (hidden ones are a writer's
    /// temporaries) and what they look like now.
    fn list(&self) -> Result<BTreeMap<PathBuf, Fingerprint>, Error> {
        let entries = std::fs::read_dir(&self.dir).map_err(|source| Error::Read {
            path: self.dir.clone(),
            source,
        })?;
        Ok(entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| is_plugin_file(p))
            .filter_map(|p| fingerprint(&p).map(|f| (p, f)))
            .collect())
    }

    /// Reads a new or changed file and its policy, and says whether it
    /// must be loaded.
    fn prepare(
        &self,
        files: &mut BTreeMap<PathBuf, FileState>,
        path: &Path,
        seen: Fingerprint,
        trust: &Result<Option<Trust>, String>,
    ) -> Prepared {
        let serving = files.get(path).and_then(|f| f.serving.clone());
        let bytes = match operator_file::read(path, MAX_PLUGIN_BYTES) {
            Ok(bytes) => bytes,
            // Removed since the listing: the next sync sees it gone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Prepared::Nothing,
            Err(source) => {
                let error = Error::Read {
                    path: path.to_path_buf(),
                    source,
                };
                return Prepared::Failed(Box::new(record_failure(
                    files, path, seen, serving, error,
                )));
            }
        };
        // Still being written: the writer's next notification brings it back.
        if fingerprint(path).as_ref() != Some(&seen) {
            return Prepared::Nothing;
        }
        let policy = match self.policy_of(path) {
            Ok(policy) => policy,
            Err(error) => {
                // A policy that cannot be read grants nothing: what it
                // took away must not stay granted while it is fixed.
                let none = beehive_types::StoreGrants::default();
                self.runtime.revise_store_grants(path, &none);
                return Prepared::Failed(Box::new(record_failure(
                    files, path, seen, serving, error,
                )));
            }
        };
        self.runtime.revise_store_grants(path, &policy.store);
        let content_hash = hex(&Sha256::digest(&bytes));
        if serving
            .as_ref()
            .is_some_and(|s| s.content_hash == content_hash && *s.policy == policy)
        {
            files.insert(
                path.to_path_buf(),
                FileState {
                    seen,
                    retry: false,
                    serving,
                    failure: None,
                },
            );
            return Prepared::Nothing;
        }
        // The newest signing time served here, by this process or one
        // before it: a restart must not open the door to a rollback.
        let recorded = self
            .host
            .store()
            .plugin_signed_at(&plugin_label(path))
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot read the plugin's last signing time");
                None
            });
        let signer = match signed(path, &bytes, &policy, trust, serving.as_ref(), recorded) {
            Ok(signer) => signer,
            Err(message) => {
                let error = Error::Signature {
                    path: path.to_path_buf(),
                    message,
                };
                return Prepared::Failed(Box::new(record_failure(
                    files, path, seen, serving, error,
                )));
            }
        };
        Prepared::Load(Box::new(Pending {
            path: path.to_path_buf(),
            seen,
            serving,
            bytes,
            content_hash,
            policy,
            signer,
        }))
    }

    /// Lets a loaded plugin serve, or records why it does not.
    async fn settle(
        &self,
        files: &mut BTreeMap<PathBuf, FileState>,
        pending: Pending,
        loaded: Result<Plugin, Error>,
    ) -> Option<Change> {
        let Pending {
            path,
            seen,
            serving,
            signer,
            ..
        } = pending;
        let signed_at = signer.as_ref().and_then(|s| s.signed_at);
        let outcome = match loaded {
            Ok(plugin) => self.install(files, plugin, serving.clone(), signer).await,
            Err(error) => Err(error),
        };
        if let (Ok(_), Some(at)) = (&outcome, signed_at) {
            let store = self.host.store();
            if let Err(error) = store
                .record_plugin_signed_at(&plugin_label(&path), at)
                .await
            {
                tracing::warn!(%error, "cannot record the plugin's signing time");
            }
        }
        match outcome {
            Ok(served) => {
                files.insert(
                    path,
                    FileState {
                        seen,
                        retry: false,
                        serving: Some(served.clone()),
                        failure: None,
                    },
                );
                Some(Change::Loaded {
                    served,
                    replaced: serving.map(Box::new),
                })
            }
            Err(_) if fingerprint(&path).as_ref() != Some(&seen) => None,
            Err(error) => Some(record_failure(files, &path, seen, serving, error)),
        }
    }

    /// The policy in the plugin's `NAME.toml`, or no grants without one. No
    /// grant may reach the plugin directory, the database's, or the
    /// compiled-code cache and its key.
    fn policy_of(&self, wasm: &Path) -> Result<Policy, Error> {
        Policy::read_checked(&Policy::file_of(wasm), &self.off_limits())
    }

    /// What no grant may reach, resolved as it is now.
    fn off_limits(&self) -> OffLimits {
        let store = self.host.store();
        // A PostgreSQL store's path is its connection string.
        let db_dir = (!store.is_postgres())
            .then(|| store.path().parent())
            .flatten()
            .map(|dir| match dir {
                dir if dir.as_os_str().is_empty() => Path::new("."),
                dir => dir,
            });
        let mut places = vec![self.dir.clone()];
        places.extend(db_dir.map(Path::to_path_buf));
        places.extend(self.runtime.protected_paths());
        OffLimits {
            places: places.iter().filter_map(|p| resolved(p)).collect(),
            store_device: db_dir
                .and_then(|dir| std::fs::metadata(dir).ok())
                .map(|meta| std::os::unix::fs::MetadataExt::dev(&meta)),
        }
    }

    /// Registers a loaded plugin for its kind, unless another file serves it.
    async fn install(
        &self,
        files: &BTreeMap<PathBuf, FileState>,
        plugin: Plugin,
        previous: Option<Served>,
        signer: Option<Signer>,
    ) -> Result<Served, Error> {
        // The host's default worker count is the operator's too: a plugin
        // that asks for none gets it, under the plugin's ceiling.
        let workers = plugin.workers(self.host.default_concurrency());
        let served = Served {
            path: plugin.path().to_path_buf(),
            group_kind: plugin.group_kind(),
            content_hash: plugin.content_hash().to_string(),
            limits: Limits {
                concurrency: workers,
                ..plugin.limits()
            },
            policy: plugin.sandbox.policy.clone(),
            signer,
            code: plugin.sandbox.code.clone(),
        };
        let rival = files.iter().find(|(path, f)| {
            **path != served.path
                && f.serving
                    .as_ref()
                    .is_some_and(|s| s.group_kind == served.group_kind)
        });
        if let Some((other, _)) = rival {
            return Err(Error::KindClaimed {
                path: served.path.clone(),
                kind: served.group_kind.to_string(),
                other: other.display().to_string(),
            });
        }
        if let Some(old) = previous.filter(|old| old.group_kind != served.group_kind) {
            self.release(&old.group_kind).await;
        }
        let options = plugin.controller_options().concurrency(workers);
        self.host
            .register(served.group_kind.clone(), plugin, options)
            .await
            .map_err(|source| Error::Register {
                path: served.path.clone(),
                source,
            })?;
        Ok(served)
    }

    /// Unregisters a kind no file serves any more; its objects stay.
    async fn release(&self, group_kind: &GroupKind) {
        if let Err(error) = self.host.unregister(group_kind).await {
            tracing::warn!(kind = %group_kind, "cannot unregister: {error}");
        }
    }

    fn publish(&self, files: &BTreeMap<PathBuf, FileState>) {
        let mut report = self.report();
        report.served = files.values().filter_map(|f| f.serving.clone()).collect();
        report.failures = files.values().filter_map(|f| f.failure.clone()).collect();
    }

    /// Watches the directory and syncs shortly after it changes, and every
    /// `rescan` regardless. Changes are logged. Watching ends when the
    /// handle is stopped or dropped.
    ///
    /// # Errors
    /// [`Error::Watch`] when the directory cannot be watched.
    pub fn watch(self: &Arc<Self>, rescan: Duration) -> Result<WatchHandle, Error> {
        let directory = self.clone();
        watch_directory(&self.dir, rescan, move || {
            let directory = directory.clone();
            async move {
                if let Err(error) = directory.sync_with(Change::log).await {
                    tracing::warn!("plugin directory: {error}");
                }
            }
        })
        .map_err(|e| Error::Watch {
            path: self.dir.clone(),
            message: e.to_string(),
        })
    }
}

/// `path` canonical; one that does not exist yet (a cache made on first
/// use) by its nearest existing ancestor's canonical path, so a grant cannot
/// hold it either.
fn resolved(path: &Path) -> Option<PathBuf> {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        let at_or_here = if at.as_os_str().is_empty() {
            Path::new(".")
        } else {
            at
        };
        if let Ok(found) = at_or_here.canonicalize() {
            return Some(missing.iter().rev().fold(found, |dir, name| dir.join(name)));
        }
        missing.push(at.file_name()?);
        at = at.parent()?;
    }
}

/// Who signed `bytes`, the content of `path`, when the directory trusts
/// signers (`None` when it names none: plugins load unsigned); refused when
/// unsigned, badly signed, or an older signed build than the one serving
/// and the policy does not allow the rollback.
fn signed(
    path: &Path,
    bytes: &[u8],
    policy: &Policy,
    trust: &Result<Option<Trust>, String>,
    serving: Option<&Served>,
    recorded: Option<u64>,
) -> Result<Option<Signer>, String> {
    let trust = match trust {
        Ok(Some(trust)) => trust,
        Ok(None) => return Ok(None),
        // Fails closed: nothing new loads under a trust file nobody can read.
        Err(why) => return Err(format!("the trust file is wrong: {why}")),
    };
    let signer = trust.verify(path, bytes, &policy.trust)?;
    let serving_since = serving
        .and_then(|s| s.signer.as_ref())
        .and_then(|s| s.signed_at)
        .max(recorded);
    if let Some(serving_since) = serving_since
        && !policy.trust.allow_rollback
        && signer.signed_at.is_none_or(|at| at < serving_since)
    {
        let when = signer
            .signed_at
            .map_or_else(|| "at no stated time".to_string(), |at| format!("at {at}"));
        return Err(format!(
            "a rollback: signed {when}, before the newest build that served here (signed at \
             {serving_since}); \
             to allow it, add `allow_rollback = true` under [trust] in {}",
            Policy::file_of(path).display()
        ));
    }
    Ok(Some(signer))
}

fn record_failure(
    files: &mut BTreeMap<PathBuf, FileState>,
    path: &Path,
    seen: Fingerprint,
    still_serving: Option<Served>,
    error: Error,
) -> Change {
    let retry = error.is_transient();
    let failure = LoadFailure {
        path: path.to_path_buf(),
        error: Arc::new(error),
    };
    files.insert(
        path.to_path_buf(),
        FileState {
            seen,
            retry,
            serving: still_serving.clone(),
            failure: Some(failure.clone()),
        },
    );
    Change::Failed {
        failure,
        still_serving,
    }
}

/// `greeting` for `plugins/greeting.wasm`, as metrics label it.
fn plugin_label(path: &Path) -> String {
    path.file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn is_plugin_file(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'));
    !hidden && path.extension().is_some_and(|ext| ext == "wasm")
}
