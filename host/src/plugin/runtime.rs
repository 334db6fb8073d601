//! The plugin runtime: one wasmtime engine, linker, epoch ticker, memory
//! budget and compiled-code cache per process, and loading a plugin file
//! into a [`Plugin`]: compile (or take from the cache), check its memory and
//! contract, ask what it reconciles, clamp that under the operator's limits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::metrics::PluginMetrics;
use crate::operator_file::{self, MAX_PLUGIN_BYTES};
use crate::plugin::bindings::beehive::controller::types as wit;
use crate::plugin::clock::Ticker;
use crate::plugin::memory::Budget;
use crate::plugin::sandbox::Sandbox;
use crate::plugin::side_calls::Extras;
use crate::plugin::state::PluginState;
use crate::plugin::store_gate::GrantsByFile;
use crate::plugin::{Error, LimitOverrides, Limits, Plugin, Policy, bindings, cache, http, limits};

/// Component instances the pool has room for, across every plugin. Each
/// plugin version holds at most its concurrency ceiling of them.
const POOL_INSTANCES: u32 = 128;

/// How a [`Runtime`] is set up.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    limits: Limits,
    plugin_limits: BTreeMap<String, LimitOverrides>,
    cache_dir: Option<PathBuf>,
    cache_key: Option<PathBuf>,
    memory_budget: usize,
    metrics: Option<Arc<crate::metrics::Metrics>>,
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

    /// The largest memory cap any plugin may get: the pool's slot size.
    fn largest_memory(&self) -> usize {
        self.plugin_limits
            .values()
            .filter_map(|l| l.memory)
            .fold(self.limits.memory, usize::max)
    }
}

/// Compiles and runs plugins: one wasmtime engine and linker per host.
pub struct Runtime {
    pub(super) engine: Engine,
    linker: Linker<PluginState>,
    pub(super) ticker: Arc<Ticker>,
    options: RuntimeOptions,
    pub(super) budget: Arc<Budget>,
    cache: Option<cache::Cache>,
    compiled: std::sync::atomic::AtomicUsize,
    /// One compile at a time: each already spreads over every core, and
    /// two at once would make a small plugin wait on a large one's share.
    compiling: tokio::sync::Semaphore,
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
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Pooling keeps instance memories and async stacks between passes
        // instead of mapping fresh ones for each. Slots bound how many
        // instances exist at once; the idle pool holds at most one per worker.
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(POOL_INSTANCES)
            .total_core_instances(POOL_INSTANCES * 8)
            .total_memories(POOL_INSTANCES * 2)
            .total_tables(POOL_INSTANCES * 2)
            .total_stacks(POOL_INSTANCES)
            .max_memory_size(options.largest_memory());
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(internal)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(internal)?;
        refuse_links(&mut linker).map_err(internal)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(internal)?;
        bindings::Plugin::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |s| s)
            .map_err(internal)?;
        let ticker = Ticker::start(engine.clone()).map_err(|e| {
            crate::Error::Internal(format!("cannot start the plugin deadline ticker: {e}"))
        })?;
        let cache = options.cache_dir.clone().map(|dir| {
            let key = options
                .cache_key
                .clone()
                .unwrap_or_else(|| cache::Cache::default_key_file(&dir));
            cache::Cache::new(dir, &key, &engine)
        });
        Ok(Arc::new(Runtime {
            engine,
            linker,
            ticker,
            budget: Budget::new(options.memory_budget),
            options,
            cache,
            compiled: std::sync::atomic::AtomicUsize::new(0),
            compiling: tokio::sync::Semaphore::new(1),
            logs: super::PluginLogs::default(),
            store_grants: GrantsByFile::default(),
        }))
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

    /// How many components this runtime has compiled (not taken from the cache).
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
        let component = self.component(path, bytes, &content_hash).await?;
        let contract = |message: String| Error::Contract {
            path: path.to_path_buf(),
            message: one_line(&message),
        };
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| contract(format!("{e:#}")))?;
        let pre = bindings::PluginPre::new(instance_pre).map_err(|e| contract(format!("{e:#}")))?;
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
            pre,
            runtime: self.clone(),
            store_grants: self.store_grants.for_load(path, &policy.store),
            http: http::HttpAccess::new(policy.http.allow.clone(), ceiling.http),
            policy: Arc::new(policy),
            metrics,
        };
        let mut registration = describe(&describing)
            .await
            .map_err(|error| with_world_hint(error, &component, &self.engine))?;
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
        let extras = Extras::for_plugin(&sandbox, &component, &registration)
            .await
            .map_err(contract)?;
        if let Some(spec) = &extras.schemas.spec {
            crate::validation::SpecSchema::parse(spec)
                .map_err(|e| contract(format!("its spec schema: {e}")))?;
        }
        Ok(Plugin {
            sandbox,
            content_hash,
            registration,
            idle: Mutex::new(Vec::new()),
            extras,
        })
    }
}

impl Runtime {
    /// The compiled component: from the cache, or compiled (off the async
    /// workers: compiling is up to seconds of CPU) and then cached.
    /// The log lines of the plugins this runtime loads.
    pub fn logs(&self) -> &super::PluginLogs {
        &self.logs
    }

    /// Whether the cache likely holds `content_hash` compiled, so that a
    /// load of it takes milliseconds rather than a compile.
    pub(super) fn has_compiled(&self, content_hash: &str) -> bool {
        self.cache.as_ref().is_some_and(|c| c.holds(content_hash))
    }

    async fn component(
        &self,
        path: &Path,
        bytes: Vec<u8>,
        content_hash: &str,
    ) -> Result<Component, Error> {
        if let Some(component) = self
            .cache
            .as_ref()
            .and_then(|c| c.load(&self.engine, content_hash))
        {
            return Ok(component);
        }
        let engine = self.engine.clone();
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
        // A large component takes tens of seconds: the operator should
        // know why it does not serve yet.
        tracing::info!(
            "compiling {} ({:.1} MB)",
            path.display(),
            bytes.len() as f64 / 1e6
        );
        let started = std::time::Instant::now();
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &bytes))
            .await
            .map_err(|e| not_a_component(e.to_string()))?
            .map_err(|e| not_a_component(format!("{e:#}")))?;
        tracing::info!("compiled {} in {:.1?}", path.display(), started.elapsed());
        self.compiled
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(cache) = &self.cache {
            cache.store(&component, content_hash);
        }
        Ok(component)
    }
}

/// Replaces `wasi:filesystem`'s `symlink-at` and `link-at` with calls that
/// always fail with `not-permitted`. A symlink a plugin leaves in its grant
/// is followed by every host tool that walks the directory (and by a later
/// open of the grant's path), so it is an escape waiting for someone else
/// to take it; a hard link can make a read-only file of one grant writable
/// through another.
fn refuse_links(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
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
async fn describe(sandbox: &Sandbox) -> Result<wit::Registration, Error> {
    let mut warm = sandbox.instantiate().await?;
    let called = sandbox
        .bounded(std::pin::pin!(
            warm.bindings
                .beehive_controller_controller()
                .call_describe(&mut warm.store),
        ))
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
fn with_world_hint(error: Error, component: &Component, engine: &Engine) -> Error {
    let imports_http = component
        .component_type()
        .imports(engine)
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
