//! Controllers as WebAssembly components.
//!
//! A plugin is a component built against the WIT contract in `wit/`. The
//! [`PluginRuntime`] (one per host) compiles it, or loads the artifact it
//! cached for the same content and engine; a [`Plugin`] is one loaded
//! version, an implementation of the engine's [`Controller`]. Each pass runs
//! in a fresh store with a memory cap and a CPU deadline, and no ambient
//! authority: no files, sockets, environment or arguments. A trap, a
//! deadline, an out-of-memory or a malformed result fails that pass only.

mod bindings;
mod cache;
mod clock;
mod convert;
mod directory;
mod state;

pub use directory::{Change, Failure, PluginDirectory, Served};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimitsBuilder,
};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use crate::engine::{
    Controller, ControllerClient, ControllerOptions, ReconcileFuture, ReconcileResult,
};
use crate::object::{GroupKind, RawObject};
use bindings::beehive::controller::types as wit;
use clock::{PassClock, Ticker};
use state::{ControllerClientHandle, PluginState};

/// Component instances the pool has room for, across every plugin.
const POOL_INSTANCES: u32 = 128;

/// How much stderr an instance may collect. An instance that has used half
/// is retired, so a plugin's writes to stderr never fail for lack of room.
const STDERR_CAPACITY: usize = 64 * 1024;

/// Why a plugin could not be loaded. Each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The plugin file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a WebAssembly component.
    #[error("{path}: not a WebAssembly component: {message}")]
    NotAComponent {
        /// The plugin file.
        path: PathBuf,
        /// What wasmtime said.
        message: String,
    },
    /// The component does not satisfy the contract (missing or mistyped
    /// exports or imports), or its `describe` failed.
    #[error("{path}: does not satisfy the beehive:controller contract: {message}")]
    Contract {
        /// The plugin file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// Another plugin already reconciles the kind.
    #[error("{path}: {kind} is already reconciled by {other}")]
    KindClaimed {
        /// The plugin file.
        path: PathBuf,
        /// The kind.
        kind: String,
        /// The plugin that has it.
        other: String,
    },
    /// The directory cannot be watched for changes.
    #[error("{path}: cannot watch: {message}")]
    Watch {
        /// The plugin directory.
        path: PathBuf,
        /// What the watcher said.
        message: String,
    },
    /// The host refused the registration.
    #[error("{path}: cannot register: {source}")]
    Register {
        /// The plugin file.
        path: PathBuf,
        /// The host's error.
        #[source]
        source: crate::Error,
    },
}

/// Sandbox limits for plugin passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Time one pass may spend running guest code, not counting time blocked
    /// in host calls (default 10 s).
    pub pass_deadline: Duration,
    /// Linear memory one instance may grow to (default 64 MiB).
    pub memory: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            pass_deadline: Duration::from_secs(10),
            memory: 64 << 20,
        }
    }
}

/// The operator's limits for one plugin; what is unset falls back to the
/// plugin's own registration (deadline only) and then to the host's limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PluginLimits {
    /// The pass deadline for this plugin.
    pub pass_deadline: Option<Duration>,
    /// The memory cap for this plugin.
    pub memory: Option<usize>,
}

/// How a [`PluginRuntime`] is set up.
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    limits: Limits,
    plugin_limits: BTreeMap<String, PluginLimits>,
    cache_dir: Option<PathBuf>,
}

impl RuntimeOptions {
    /// Default limits, no per-plugin limits, no cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The limits of every plugin the operator did not single out.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Limits for the plugin in file `NAME.wasm`.
    pub fn plugin_limits(mut self, name: impl Into<String>, limits: PluginLimits) -> Self {
        self.plugin_limits.insert(name.into(), limits);
        self
    }

    /// Keeps compiled plugins in `dir`, so a restart with unchanged plugins
    /// compiles nothing.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
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
pub struct PluginRuntime {
    engine: Engine,
    linker: Linker<PluginState>,
    ticker: Arc<Ticker>,
    options: RuntimeOptions,
    cache: Option<cache::Cache>,
    compiled: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for PluginRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRuntime")
            .field("options", &self.options)
            .finish()
    }
}

impl PluginRuntime {
    /// A runtime set up as `options` say.
    ///
    /// # Errors
    /// [`crate::Error::Internal`] when wasmtime cannot be set up.
    pub fn new(options: RuntimeOptions) -> crate::Result<Arc<PluginRuntime>> {
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
        bindings::Plugin::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |s| s)
            .map_err(internal)?;
        let ticker = Ticker::start(engine.clone());
        let cache = options
            .cache_dir
            .clone()
            .map(|dir| cache::Cache::new(dir, &engine));
        Ok(Arc::new(PluginRuntime {
            engine,
            linker,
            ticker,
            options,
            cache,
            compiled: std::sync::atomic::AtomicUsize::new(0),
        }))
    }

    /// How many components this runtime has compiled (not taken from the cache).
    pub fn compiled_count(&self) -> usize {
        self.compiled.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Compiles the plugin in `path` and asks it what it reconciles.
    ///
    /// # Errors
    /// A [`PluginError`] naming the file.
    pub async fn load(self: &Arc<Self>, path: &Path) -> Result<Plugin, PluginError> {
        let bytes = std::fs::read(path).map_err(|source| PluginError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let content_hash = hex(&Sha256::digest(&bytes));
        self.load_bytes(path, bytes, content_hash).await
    }

    /// [`PluginRuntime::load`] of bytes already read from `path`, whose
    /// SHA-256 in hex is `content_hash`.
    async fn load_bytes(
        self: &Arc<Self>,
        path: &Path,
        bytes: Vec<u8>,
        content_hash: String,
    ) -> Result<Plugin, PluginError> {
        let component = self.component(path, bytes, &content_hash).await?;
        let contract = |message: String| PluginError::Contract {
            path: path.to_path_buf(),
            message,
        };
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| contract(format!("{e:#}")))?;
        let pre = bindings::PluginPre::new(instance_pre).map_err(|e| contract(format!("{e:#}")))?;
        let name = plugin_name(path);
        let operator = self
            .options
            .plugin_limits
            .get(&name)
            .copied()
            .unwrap_or_default();
        let mut plugin = Plugin {
            name: name.into(),
            path: path.to_path_buf(),
            content_hash,
            registration: empty_registration(),
            limits: Limits {
                pass_deadline: operator
                    .pass_deadline
                    .unwrap_or(self.options.limits.pass_deadline),
                memory: operator.memory.unwrap_or(self.options.limits.memory),
            },
            pre,
            runtime: self.clone(),
            idle: Mutex::new(Vec::new()),
        };
        let mut store = plugin.store(None, String::new());
        let instance = plugin
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| contract(format!("{e:#}")))?;
        plugin.registration = instance
            .beehive_controller_controller()
            .call_describe(&mut store)
            .await
            .map_err(|e| contract(format!("describe failed: {e:#}")))?;
        if plugin.registration.kind.is_empty() {
            return Err(contract("describe named no kind".into()));
        }
        if let (None, Some(ms)) = (operator.pass_deadline, plugin.registration.pass_deadline_ms) {
            plugin.limits.pass_deadline = Duration::from_millis(ms);
        }
        Ok(plugin)
    }
}

impl PluginRuntime {
    /// The compiled component: from the cache, or compiled (off the async
    /// workers: compiling is up to seconds of CPU) and then cached.
    async fn component(
        &self,
        path: &Path,
        bytes: Vec<u8>,
        content_hash: &str,
    ) -> Result<Component, PluginError> {
        if let Some(component) = self
            .cache
            .as_ref()
            .and_then(|c| c.load(&self.engine, content_hash))
        {
            return Ok(component);
        }
        let engine = self.engine.clone();
        let not_a_component = |message: String| PluginError::NotAComponent {
            path: path.to_path_buf(),
            message,
        };
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &bytes))
            .await
            .map_err(|e| not_a_component(e.to_string()))?
            .map_err(|e| not_a_component(format!("{e:#}")))?;
        self.compiled
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(cache) = &self.cache {
            cache.store(&component, content_hash);
        }
        Ok(component)
    }
}

/// One loaded version of a plugin.
pub struct Plugin {
    name: Arc<str>,
    path: PathBuf,
    content_hash: String,
    registration: wit::Registration,
    limits: Limits,
    pre: bindings::PluginPre<PluginState>,
    runtime: Arc<PluginRuntime>,
    /// Instances between passes, reused so a pass pays no instantiation and
    /// a plugin's globals (a kind client it keeps) live on. There are never
    /// more than the kind's workers; a trapped instance is never put back.
    idle: Mutex<Vec<Warm>>,
}

/// A live instance and its store.
struct Warm {
    store: Store<PluginState>,
    instance: bindings::Plugin,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("kind", &self.group_kind())
            .field("content_hash", &self.content_hash)
            .finish()
    }
}

impl Plugin {
    /// The kind it reconciles.
    pub fn group_kind(&self) -> GroupKind {
        GroupKind::new(
            self.registration.group.clone(),
            self.registration.kind.clone(),
        )
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SHA-256 of the file's bytes, in hex: which version this is.
    pub fn content_hash(&self) -> &str {
        &self.content_hash
    }

    /// How the plugin asked to be driven, as registration options.
    pub fn controller_options(&self) -> ControllerOptions {
        let r = &self.registration;
        let ms = Duration::from_millis;
        let mut options = ControllerOptions::new()
            .finalizers(r.finalizers.clone())
            .source(
                self.path.display().to_string(),
                Some(self.content_hash.clone()),
            );
        if let Some(n) = r.concurrency {
            options = options.concurrency(n as usize);
        }
        if let Some(d) = r.owed_pass_interval_ms {
            options = options.owed_pass_interval(ms(d));
        }
        if let Some(d) = r.full_pass_interval_ms {
            options = options.full_pass_interval(ms(d));
        }
        if let Some(d) = r.individual_pass_interval_ms {
            options = options.individual_pass_interval(ms(d));
        }
        if let Some(on) = r.startup_full_pass {
            options = options.startup_full_pass(on);
        }
        if let Some(d) = r.max_retry_interval_ms {
            options = options.max_retry_interval(ms(d));
        }
        options
    }

    /// The limits its passes run under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The plugin's name: its file name without `.wasm`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A fresh sandbox: no preopened files, no sockets, no environment, no
    /// arguments; stderr captured in memory; memory capped.
    fn store(&self, pass: Option<ControllerClient>, object: String) -> Store<PluginState> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let wasi = WasiCtxBuilder::new().stderr(stderr.clone()).build();
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.limits.memory)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(
            &self.runtime.engine,
            PluginState {
                wasi,
                table: wasmtime::component::ResourceTable::new(),
                limits,
                stderr,
                plugin: self.name.clone(),
                pass,
                object,
                clock: PassClock::new(self.limits.pass_deadline),
            },
        );
        store.limiter(|state| &mut state.limits);
        clock::install(&mut store);
        store.set_epoch_deadline(clock::ticks(self.limits.pass_deadline));
        store
    }

    /// An idle instance, or a new one.
    async fn warm(&self) -> wasmtime::Result<Warm> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match idle {
            Some(warm) => Ok(warm),
            None => self.warm_new().await,
        }
    }

    async fn warm_new(&self) -> wasmtime::Result<Warm> {
        let mut store = self.store(None, String::new());
        let instance = self.pre.instantiate_async(&mut store).await?;
        Ok(Warm { store, instance })
    }

    /// Instantiates `count` instances ahead of the first passes, so they pay
    /// no instantiation. Instances beyond the kind's workers stay idle.
    ///
    /// # Errors
    /// [`PluginError::Contract`] when an instance cannot be made (the pool is
    /// out of slots, or the plugin traps while starting).
    pub async fn prewarm(&self, count: usize) -> Result<(), PluginError> {
        for _ in 0..count {
            let warm = self.warm_new().await.map_err(|e| PluginError::Contract {
                path: self.path.clone(),
                message: format!("cannot instantiate: {e:#}"),
            })?;
            self.idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(warm);
        }
        Ok(())
    }

    async fn run(&self, client: &ControllerClient, object: &RawObject) -> ReconcileResult {
        let label = object.meta.label();
        let _ticking = self.runtime.ticker.running();
        let mut warm = match self.warm().await {
            Ok(warm) => warm,
            Err(error) => {
                return ReconcileResult::invalid(plugin_failure(&self.name, &error, ""));
            }
        };
        let stderr_before = warm.store.data().stderr.contents().len();
        let state = warm.store.data_mut();
        state.pass = Some(client.clone());
        state.object = label.clone();
        state.clock.restart(self.limits.pass_deadline);
        warm.store
            .set_epoch_deadline(clock::ticks(self.limits.pass_deadline));
        let outcome = async {
            let handle = warm
                .store
                .data_mut()
                .table
                .push(ControllerClientHandle(client.clone()))?;
            let borrowed = wasmtime::component::Resource::new_borrow(handle.rep());
            let result = warm
                .instance
                .beehive_controller_controller()
                .call_reconcile(&mut warm.store, &convert::object(object), borrowed)
                .await?;
            warm.store.data_mut().table.delete(handle)?;
            wasmtime::Result::Ok(result)
        }
        .await;
        warm.store.data_mut().pass = None;
        match outcome {
            Ok(result) => {
                if warm.store.data().stderr.contents().len() < STDERR_CAPACITY / 2 {
                    self.idle
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(warm);
                }
                reconcile_result(&self.name, result)
            }
            Err(error) => {
                // A trapped instance cannot be entered again: it is dropped.
                let contents = warm.store.data().stderr.contents();
                let stderr = String::from_utf8_lossy(&contents[stderr_before..]).into_owned();
                tracing::warn!(plugin = &*self.name, object = %label, %stderr, "plugin pass failed: {error:#}");
                ReconcileResult::invalid(plugin_failure(&self.name, &error, &stderr))
            }
        }
    }
}

/// A one-line account of why a plugin's pass failed.
fn plugin_failure(name: &str, error: &wasmtime::Error, stderr: &str) -> String {
    let why = match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => "exceeded its CPU deadline".to_string(),
        Some(trap) => format!("trapped: {trap}"),
        None => format!("{error:#}"),
    };
    let said = stderr_summary(stderr);
    if said.is_empty() {
        format!("plugin {name} {why}")
    } else {
        format!("plugin {name} {why} (stderr: {said})")
    }
}

/// The gist of a plugin's stderr on one line: its lines joined, without
/// Rust's backtrace hint, cut to the last few hundred characters.
fn stderr_summary(stderr: &str) -> String {
    const KEEP: usize = 300;
    let joined = stderr
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("note: run with"))
        .collect::<Vec<_>>()
        .join(" | ");
    match joined.char_indices().rev().nth(KEEP) {
        Some((cut, _)) => format!("…{}", &joined[cut..]),
        None => joined,
    }
}

/// The longest requeue delay a plugin may ask for; more is a malformed result.
const MAX_REQUEUE: Duration = Duration::from_secs(366 * 24 * 60 * 60);

fn reconcile_result(name: &str, result: wit::ReconcileResult) -> ReconcileResult {
    let base = match result.verdict {
        wit::Verdict::Settled => ReconcileResult::settled(),
        wit::Verdict::Unsettled => ReconcileResult::unsettled(),
        wit::Verdict::Failed(message) => return ReconcileResult::fail(message),
    };
    match result.requeue_after_ms.map(Duration::from_millis) {
        Some(delay) if delay > MAX_REQUEUE => ReconcileResult::invalid(format!(
            "plugin {name} returned a malformed result: a requeue delay of {delay:?}"
        )),
        Some(delay) => base.requeue_after(delay),
        None => base,
    }
}

impl Controller for Plugin {
    fn reconcile<'a>(
        &'a self,
        client: &'a ControllerClient,
        object: &'a RawObject,
    ) -> ReconcileFuture<'a> {
        Box::pin(self.run(client, object))
    }
}

fn empty_registration() -> wit::Registration {
    wit::Registration {
        group: String::new(),
        kind: String::new(),
        finalizers: Vec::new(),
        concurrency: None,
        owed_pass_interval_ms: None,
        full_pass_interval_ms: None,
        individual_pass_interval_ms: None,
        startup_full_pass: None,
        max_retry_interval_ms: None,
        spec_schema_version: 0,
        status_schema_version: 0,
        pass_deadline_ms: None,
    }
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
