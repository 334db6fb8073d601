//! The plugin runtime: one wasmtime engine, linker, epoch ticker, memory
//! budget and compiled-code cache per process, and loading a plugin file
//! into a [`Plugin`]: compile (or take from the cache), check its memory and
//! contract, ask what it reconciles, clamp that under the operator's limits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, InstancePre, Linker};

use crate::metrics::PluginMetrics;
use crate::operator_file::{self, MAX_PLUGIN_BYTES};
use crate::plugin::clock::Ticker;
use crate::plugin::code::{Backend, Code, CodeCell, Compiler, TIERED_FROM_BYTES, Tier};
use crate::plugin::contract::{Contract, served, v0_2::Registration};
use crate::plugin::memory::Budget;
use crate::plugin::sandbox::Sandbox;
use crate::plugin::side_calls::Extras;
use crate::plugin::state::PluginState;
use crate::plugin::store_gate::GrantsByFile;
use crate::plugin::{Error, LimitOverrides, Limits, Plugin, Policy, cache, http, limits};
use crate::sync::lock;

/// How a [`Runtime`] is set up.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    limits: Limits,
    plugin_limits: BTreeMap<String, LimitOverrides>,
    cache_dir: Option<PathBuf>,
    cache_key: Option<PathBuf>,
    memory_budget: usize,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    compiler: Compiler,
    tiered_from: usize,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            limits: Limits::default(),
            plugin_limits: BTreeMap::new(),
            cache_dir: None,
            cache_key: None,
            memory_budget: 192 << 20,
            metrics: None,
            compiler: Compiler::default(),
            tiered_from: TIERED_FROM_BYTES,
        }
    }
}

impl RuntimeOptions {
    /// Default limits, no per-plugin limits, no cache, a 192 MiB memory budget.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ceilings of every plugin the operator did not single out.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Ceilings for the plugin in file `NAME.wasm`, over the host-wide ones.
    pub fn plugin_limits(mut self, name: impl Into<String>, limits: LimitOverrides) -> Self {
        self.plugin_limits.insert(name.into(), limits);
        self
    }

    /// The linear memory all plugin instances together may hold (default
    /// 192 MiB). A pass whose growth would go over it fails as out of memory.
    pub fn memory_budget(mut self, bytes: usize) -> Self {
        self.memory_budget = bytes;
        self
    }

    /// Records each plugin's instances, memory, traps and deadline hits in
    /// `metrics` (usually the store's: `store.metrics().clone()`).
    pub fn metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Keeps compiled plugins in `dir`, so a restart with unchanged plugins
    /// compiles nothing. Artifacts are sealed with a secret key, by default
    /// in `DIR.key` beside the directory ([`RuntimeOptions::cache_key`]).
    /// No plugin may be granted the directory or the key.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// The file holding the cache's sealing key: 32 random bytes, made
    /// owner-only on first use. Whoever can read it can make the host run
    /// native code of their choosing, so keep it where only this host's user
    /// reaches (`beehive run` keeps it beside the database).
    pub fn cache_key(mut self, file: impl Into<PathBuf>) -> Self {
        self.cache_key = Some(file.into());
        self
    }

    /// Which compilers make plugins' native code ([`Compiler::Tiered`] by
    /// default).
    pub fn compiler(mut self, compiler: Compiler) -> Self {
        self.compiler = compiler;
        self
    }

    /// Serves components of `bytes` or more from baseline code first under
    /// [`Compiler::Tiered`] (default 2 MiB). Only with `testing`: the tests
    /// tier up a small plugin, which compiles in a fraction of a second.
    #[cfg(feature = "testing")]
    pub fn tiered_from(mut self, bytes: usize) -> Self {
        self.tiered_from = bytes;
        self
    }

    /// The largest memory cap any plugin may get: the pool's slot size.
    fn largest_memory(&self) -> usize {
        self.plugin_limits
            .values()
            .filter_map(|l| l.memory)
            .fold(self.limits.memory, usize::max)
    }
}

/// Compiles and runs plugins: one wasmtime engine and linker per compiler.
pub struct Runtime {
    optimizing: Backend,
    /// Winch's engine; `None` under [`Compiler::Optimizing`].
    baseline: Option<Backend>,
    pub(super) ticker: Arc<Ticker>,
    options: RuntimeOptions,
    pub(super) budget: Arc<Budget>,
    cache: Option<cache::Cache>,
    compiled: std::sync::atomic::AtomicUsize,
    /// One compile at a time before serving: each already spreads over
    /// every core, and two at once would make a small plugin wait on a
    /// large one's share.
    compiling: tokio::sync::Semaphore,
    /// One optimising compile at a time behind baseline code, on threads of
    /// their own: such a compile may outlast its host, and a process that
    /// is stopping must not wait for it.
    optimizing_behind: Mutex<()>,
    logs: super::PluginLogs,
    store_grants: GrantsByFile,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("options", &self.options)
            .finish()
    }
}

impl Runtime {
    /// Puts the store grants of `path`'s policy in force for every loaded
    /// version of it, instances already running included: called as soon
    /// as a sync reads the policy, before anything it brings is compiled.
    pub(crate) fn revise_store_grants(&self, path: &Path, grants: &beehive_types::StoreGrants) {
        self.store_grants.revise(path, grants);
    }

    /// A runtime set up as `options` say.
    ///
    /// # Errors
    /// [`crate::Error::Internal`] when wasmtime cannot be set up.
    pub fn new(options: RuntimeOptions) -> crate::Result<Arc<Runtime>> {
        let internal = |e: wasmtime::Error| crate::Error::Internal(format!("wasmtime: {e}"));
        let optimizing = Backend::optimizing(options.largest_memory()).map_err(internal)?;
        let baseline = match options.compiler {
            Compiler::Optimizing => None,
            Compiler::Tiered | Compiler::Baseline => Some(Backend::baseline().map_err(internal)?),
        };
        let engines = std::iter::once(&optimizing)
            .chain(&baseline)
            .map(|backend| backend.engine.clone())
            .collect();
        let ticker = Ticker::start(engines).map_err(|e| {
            crate::Error::Internal(format!("cannot start the plugin deadline ticker: {e}"))
        })?;
        let cache = options.cache_dir.clone().map(|dir| {
            let key = options
                .cache_key
                .clone()
                .unwrap_or_else(|| cache::Cache::default_key_file(&dir));
            cache::Cache::new(dir, &key)
        });
        Ok(Arc::new(Runtime {
            optimizing,
            baseline,
            ticker,
            budget: Budget::new(options.memory_budget),
            options,
            cache,
            compiled: std::sync::atomic::AtomicUsize::new(0),
            compiling: tokio::sync::Semaphore::new(1),
            optimizing_behind: Mutex::new(()),
            logs: super::PluginLogs::default(),
            store_grants: GrantsByFile::default(),
        }))
    }

    /// Holds every optimising compile behind baseline code until the
    /// returned sender drops. Only with `testing`: a test sees baseline code
    /// serve, then the move to optimised code, however fast the compile.
    #[cfg(feature = "testing")]
    pub fn hold_optimizing(self: &Arc<Self>) -> std::sync::mpsc::Sender<()> {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (taken, is_taken) = std::sync::mpsc::channel();
        let runtime = self.clone();
        std::thread::spawn(move || {
            let _turn = lock(&runtime.optimizing_behind);
            let _ = taken.send(());
            // Returns when the sender drops.
            let _ = released.recv();
        });
        let _ = is_taken.recv();
        release
    }

    /// Linear memory held by every live plugin instance of this runtime.
    pub fn memory_in_use(&self) -> usize {
        self.budget.used()
    }

    /// The places no plugin may be granted: the compiled-code cache and its
    /// key, where a plugin could choose the native code the host runs.
    pub(crate) fn protected_paths(&self) -> Vec<PathBuf> {
        let Some(dir) = &self.options.cache_dir else {
            return Vec::new();
        };
        let key = self
            .options
            .cache_key
            .clone()
            .unwrap_or_else(|| cache::Cache::default_key_file(dir));
        vec![dir.clone(), key]
    }

    /// How many components this runtime has compiled before serving them
    /// (not taken from the cache; optimised code made behind baseline code
    /// is not counted).
    pub fn compiled_count(&self) -> usize {
        self.compiled.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Compiles the plugin in `path` and asks it what it reconciles, under
    /// `policy`'s grants ([`Policy::default`] grants nothing; a
    /// [`Directory`](crate::plugin::Directory) reads each plugin's policy file for it).
    ///
    /// # Errors
    /// A [`Error`] naming the file.
    pub async fn load(self: &Arc<Self>, path: &Path, policy: Policy) -> Result<Plugin, Error> {
        let bytes = operator_file::read(path, MAX_PLUGIN_BYTES).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let content_hash = hex(&Sha256::digest(&bytes));
        self.load_bytes(path, bytes, content_hash, policy).await
    }

    /// [`Runtime::load`] of bytes already read from `path`, whose
    /// SHA-256 in hex is `content_hash`.
    pub(super) async fn load_bytes(
        self: &Arc<Self>,
        path: &Path,
        bytes: Vec<u8>,
        content_hash: String,
        policy: Policy,
    ) -> Result<Plugin, Error> {
        let name = plugin_name(path);
        let mut ceiling = self
            .options
            .plugin_limits
            .get(&name)
            .copied()
            .unwrap_or_default()
            .over(self.options.limits);
        ceiling.http = policy.http.over(ceiling.http);
        let needs = super::shape::initial_memory(&bytes);
        if needs > ceiling.memory as u64 {
            return Err(Error::MemoryCap {
                path: path.to_path_buf(),
                needs,
                cap: ceiling.memory,
            });
        }
        let bytes = Arc::new(bytes);
        let (component, tier) = self.component(path, bytes.clone(), &content_hash).await?;
        let contract = |message: String| Error::Contract {
            path: path.to_path_buf(),
            message: one_line(&message),
        };
        let version = Contract::of_component(&component).ok_or_else(|| {
            contract(format!(
                "exports the controller interface of no contract version this host serves ({})",
                served()
            ))
        })?;
        let pre = self
            .link(&component, tier)
            .map_err(|e| contract(format!("{e:#}")))?;
        let code = CodeCell::new(Code {
            pre,
            contract: version,
            tier,
        });
        let metrics = self
            .options
            .metrics
            .as_ref()
            .map_or_else(PluginMetrics::default, |m| m.plugin(&name));
        let describing = Sandbox {
            name: name.into(),
            path: path.to_path_buf(),
            limits: ceiling,
            slots: Arc::new(tokio::sync::Semaphore::new(ceiling.concurrency.max(1))),
            code: code.clone(),
            runtime: self.clone(),
            store_grants: self.store_grants.for_load(path, &policy.store),
            http: http::HttpAccess::new(policy.http.allow.clone(), ceiling.http),
            policy: Arc::new(policy),
            metrics,
        };
        let mut registration = describe(&describing)
            .await
            .map_err(|error| with_world_hint(error, &component))?;
        if let Some(problem) = limits::registration_problem(&registration) {
            return Err(contract(format!("describe named {problem}")));
        }
        let (applied, cuts) = limits::clamp(&mut registration, ceiling);
        for cut in cuts {
            tracing::warn!(plugin = %describing.name, "the plugin asked for {cut}");
        }
        let sandbox = Arc::new(Sandbox {
            limits: applied,
            ..describing
        });
        let extras = Extras::for_plugin(&sandbox, &component, &registration, version)
            .await
            .map_err(contract)?;
        if let Some(spec) = &extras.schemas.spec {
            crate::validation::SpecSchema::parse(spec)
                .map_err(|e| contract(format!("its spec schema: {e}")))?;
        }
        if tier == Tier::Baseline && self.options.compiler == Compiler::Tiered {
            self.optimize_behind(path, bytes, content_hash.clone(), Arc::downgrade(&code));
        }
        Ok(Plugin {
            sandbox,
            version: super::short_hash(&content_hash).into(),
            content_hash,
            registration,
            idle: Mutex::new(Vec::new()),
            extras,
        })
    }
}

impl Runtime {
    /// The log lines of the plugins this runtime loads.
    pub fn logs(&self) -> &super::PluginLogs {
        &self.logs
    }

    /// Whether the cache likely holds `content_hash` compiled (by either
    /// compiler), so that a load of it takes milliseconds rather than a
    /// compile.
    pub(super) fn has_compiled(&self, content_hash: &str) -> bool {
        let Some(cache) = &self.cache else {
            return false;
        };
        std::iter::once(&self.optimizing)
            .chain(&self.baseline)
            .any(|backend| cache.holds(&backend.engine, content_hash))
    }

    /// The cached code for `content_hash`: optimised code, or, when the
    /// file would be compiled at the baseline tier first, baseline code
    /// (`plugins check` made it, or a host stopped before optimising).
    fn cached(&self, content_hash: &str, first: Tier) -> Option<(Component, Tier)> {
        let cache = self.cache.as_ref()?;
        if let Some(component) = cache.load(&self.optimizing.engine, content_hash) {
            return Some((component, Tier::Optimized));
        }
        let baseline = self.baseline.as_ref().filter(|_| first == Tier::Baseline)?;
        let component = cache.load(&baseline.engine, content_hash)?;
        Some((component, Tier::Baseline))
    }

    /// The backend of `tier`.
    fn backend(&self, tier: Tier) -> &Backend {
        match tier {
            Tier::Baseline => self.baseline.as_ref().unwrap_or(&self.optimizing),
            Tier::Optimized => &self.optimizing,
        }
    }

    /// `component` linked to what plugins may import, ready to instantiate.
    fn link(
        &self,
        component: &Component,
        tier: Tier,
    ) -> wasmtime::Result<InstancePre<PluginState>> {
        let linker: &Linker<PluginState> = &self.backend(tier).linker;
        linker.instantiate_pre(component)
    }

    /// The tier a file of `size` bytes that the cache does not hold is
    /// first compiled at.
    fn first_tier(&self, size: usize) -> Tier {
        match self.options.compiler {
            Compiler::Optimizing => Tier::Optimized,
            Compiler::Baseline => Tier::Baseline,
            Compiler::Tiered if size >= self.options.tiered_from => Tier::Baseline,
            Compiler::Tiered => Tier::Optimized,
        }
    }

    /// The compiled component and its tier: from the cache, or compiled
    /// (off the async workers: compiling is up to seconds of CPU) at the
    /// tier [`Runtime::first_tier`] picks, and then cached.
    async fn component(
        &self,
        path: &Path,
        bytes: Arc<Vec<u8>>,
        content_hash: &str,
    ) -> Result<(Component, Tier), Error> {
        let first = self.first_tier(bytes.len());
        if let Some(cached) = self.cached(content_hash, first) {
            return Ok(cached);
        }
        let not_a_component = |message: String| Error::NotAComponent {
            path: path.to_path_buf(),
            message: one_line(&message),
        };
        // Checked before compiling, so a file the host cannot serve is
        // refused in one line (naming the world it expects) and never
        // reaches the cache.
        let shape = super::Shape::of(&bytes).map_err(not_a_component)?;
        if let Some(problem) = shape.problem() {
            return Err(Error::Contract {
                path: path.to_path_buf(),
                message: problem,
            });
        }
        // Never closed, so acquiring cannot fail.
        let _turn = self.compiling.acquire().await;
        let mut tier = first;
        let mut compiled = self.compile_off_thread(path, bytes.clone(), tier).await;
        if let (Err(error), Tier::Baseline) = (&compiled, tier) {
            // Winch does not take every feature Cranelift does: the file
            // may still be served, later.
            tracing::info!(
                "the baseline compiler cannot take {}, compiling it optimised: {error}",
                path.display()
            );
            tier = Tier::Optimized;
            compiled = self.compile_off_thread(path, bytes, tier).await;
        }
        let component = compiled.map_err(not_a_component)?;
        self.compiled
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(cache) = &self.cache {
            cache.store(&component, content_hash);
        }
        Ok((component, tier))
    }

    /// Compiles `bytes` at `tier` on tokio's blocking threads.
    async fn compile_off_thread(
        &self,
        path: &Path,
        bytes: Arc<Vec<u8>>,
        tier: Tier,
    ) -> Result<Component, String> {
        let engine = self.backend(tier).engine.clone();
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || compile(&engine, &path, &bytes, tier))
            .await
            .map_err(|e| e.to_string())?
    }

    /// Starts Cranelift on `bytes` behind the baseline code in `code`, and
    /// puts its code in the cell when it is done, unless the version has
    /// been dropped by then. Failures leave the baseline code serving.
    fn optimize_behind(
        self: &Arc<Self>,
        path: &Path,
        bytes: Arc<Vec<u8>>,
        content_hash: String,
        code: Weak<CodeCell>,
    ) {
        let runtime = Arc::downgrade(self);
        let file = path.to_path_buf();
        let started = std::thread::Builder::new()
            .name("beehive-optimize".into())
            .spawn(move || {
                let path = file;
                let Some(runtime) = runtime.upgrade() else {
                    return;
                };
                let _turn = lock(&runtime.optimizing_behind);
                if code.strong_count() == 0 {
                    return;
                }
                let optimized = compile(&runtime.optimizing.engine, &path, &bytes, Tier::Optimized)
                    .and_then(|component| {
                        let pre = runtime
                            .link(&component, Tier::Optimized)
                            .map_err(|e| format!("{e:#}"))?;
                        Ok((component, pre))
                    });
                match optimized {
                    Ok((component, pre)) => {
                        if let Some(cache) = &runtime.cache {
                            cache.store(&component, &content_hash);
                            let baseline = runtime.backend(Tier::Baseline);
                            cache.remove(&baseline.engine, &content_hash);
                        }
                        if let Some(cell) = code.upgrade() {
                            // The same bytes: the same contract version.
                            let contract = cell.current().contract;
                            cell.replace(Code {
                                pre,
                                contract,
                                tier: Tier::Optimized,
                            });
                            tracing::info!("{} now runs its optimized code", path.display());
                        }
                    }
                    Err(error) => tracing::warn!(
                        "{} keeps running its baseline code: the optimizing compile failed: {error}",
                        path.display()
                    ),
                }
            });
        if let Err(error) = started {
            tracing::warn!(
                "{} keeps running its baseline code: cannot start the optimizing compile: {error}",
                path.display()
            );
        }
    }
}

/// Compiles `bytes` from `path` with `engine`, saying so in the log: a large
/// component takes seconds, and the operator should know why it does not
/// serve yet.
fn compile(engine: &Engine, path: &Path, bytes: &[u8], tier: Tier) -> Result<Component, String> {
    tracing::info!(
        "compiling {} ({:.1} MB, {tier} code)",
        path.display(),
        bytes.len() as f64 / 1e6
    );
    let started = std::time::Instant::now();
    let component = Component::new(engine, bytes).map_err(|e| format!("{e:#}"))?;
    tracing::info!(
        "compiled {} ({tier} code) in {:.1?}",
        path.display(),
        started.elapsed()
    );
    Ok(component)
}

/// Replaces `wasi:filesystem`'s `symlink-at` and `link-at` with calls that
/// always fail with `not-permitted`. A symlink a plugin leaves in its grant
/// is followed by every host tool that walks the directory (and by a later
/// open of the grant's path), so it is an escape waiting for someone else
/// to take it; a hard link can make a read-only file of one grant writable
/// through another.
pub(super) fn refuse_links(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi::filesystem::Descriptor;
    use wasmtime_wasi::p2::bindings::filesystem::types::{ErrorCode, PathFlags};

    type Refused = (Result<(), ErrorCode>,);
    linker.allow_shadowing(true);
    let mut types = linker.instance(WASI_FILESYSTEM_TYPES)?;
    types.func_wrap(
        "[method]descriptor.symlink-at",
        |_, _: (Resource<Descriptor>, String, String)| -> wasmtime::Result<Refused> {
            Ok((Err(ErrorCode::NotPermitted),))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.link-at",
        |_,
         _: (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )|
         -> wasmtime::Result<Refused> { Ok((Err(ErrorCode::NotPermitted),)) },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The `wasi:filesystem/types` interface as wasmtime-wasi defines it; guests
/// built against any earlier 0.2 release resolve to it.
const WASI_FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Asks a fresh instance what the plugin reconciles, under the same bounds
/// as a pass.
async fn describe(sandbox: &Sandbox) -> Result<Registration, Error> {
    let mut warm = sandbox.instantiate().await?;
    let called = sandbox
        .bounded(std::pin::pin!(warm.bindings.describe(&mut warm.store)))
        .await;
    called.map_err(|error| Error::Contract {
        path: sandbox.path.clone(),
        message: format!("describe failed: {}", sandbox.failure(&warm, &error, 0)),
    })
}

/// A failed `describe` of a component that imports no wasi:http, with the
/// likely cause: the Python and JavaScript SDKs reach HTTP through their
/// world's bindings, so a plugin built with one for a world without it
/// fails as it starts (a component written against the WIT alone may use
/// any world, and is served).
fn with_world_hint(error: Error, component: &Component) -> Error {
    let imports_http = component
        .component_type()
        .imports(component.engine())
        .any(|(name, _)| name.starts_with("wasi:http/"));
    match error {
        Error::Contract { path, message } if !imports_http => Error::Contract {
            path,
            message: format!(
                "{message} (it imports no wasi:http: if it was built with the Python or \
                 JavaScript SDK, build it for world plugin-with-http, or one of the \
                 plugin-with-http-and-... worlds)"
            ),
        },
        other => other,
    }
}

/// `text` with every run of whitespace, line breaks included, as one space:
/// the parser's messages can span lines, and a load failure is shown as one
/// log line and one row of `beehive plugins`.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `greeting` for `plugins/greeting.wasm`.
fn plugin_name(path: &Path) -> String {
    path.file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_over_several_lines_becomes_one() {
        let parser = "bad magic number - expected=[\n    0x0,\n    0x61,\n] (at offset 0x0)";
        assert_eq!(
            one_line(parser),
            "bad magic number - expected=[ 0x0, 0x61, ] (at offset 0x0)"
        );
    }
}
