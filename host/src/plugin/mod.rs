//! Controllers as WebAssembly components.
//!
//! A plugin is a component built against the WIT contract in `wit/`. The
//! [`PluginRuntime`] (one per host) compiles it, or loads the artifact it
//! cached for the same content and engine; a [`Plugin`] is one loaded
//! version, an implementation of the engine's [`Controller`]. Each pass runs
//! on an instance of its own (reused between passes) with a memory cap, a
//! CPU deadline, a wall-clock limit and a host-call budget, and no ambient
//! authority: no environment, arguments or sockets, and no files, HTTP hosts
//! or config but what the operator's policy for it grants ([`Policy`]). A trap, a
//! deadline, an out-of-memory or a malformed result fails that pass only, and
//! the instance it ran on is dropped. What a plugin asks for in its
//! registration is clamped under the operator's [`Limits`].

mod bindings;
mod cache;
mod clock;
mod convert;
mod directory;
mod http;
mod limits;
mod memory;
mod migrate;
mod policy;
mod sandbox;
mod state;

pub use directory::{Change, Failure, PluginDirectory, Served};
pub use http::{HostPattern, HttpLimits};
pub use limits::{Limits, PluginLimits};
pub use policy::{ConfigValue, FileGrant, HttpGrant, Policy};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::engine::{
    Controller, ControllerClient, ControllerOptions, ReconcileFuture, ReconcileResult,
};
use crate::event::EventSpec;
use crate::metrics::PluginMetrics;
use crate::object::{GroupKind, RawObject};
use crate::sync::lock;
use bindings::beehive::controller::types as wit;
use clock::Ticker;
use memory::Budget;
use migrate::PluginMigrator;
use sandbox::{STDERR_CAPACITY, Sandbox, Warm};
use state::{ControllerClientHandle, PluginState};

/// Component instances the pool has room for, across every plugin. Each
/// plugin version holds at most its concurrency ceiling of them.
const POOL_INSTANCES: u32 = 128;

/// An instance whose linear memory is above this after a pass is dropped
/// rather than kept for the next one, so memory a pass touched once goes
/// back to the host.
const IDLE_MEMORY: usize = 32 << 20;

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
    /// The pool of instances was full when the plugin was loaded: other
    /// plugins' passes held every slot. Transient; the load is retried.
    #[error("{path}: cannot instantiate now: {message}")]
    Busy {
        /// The plugin file.
        path: PathBuf,
        /// What wasmtime said.
        message: String,
    },
    /// The plugin's policy file (`NAME.toml`) cannot be read or is wrong;
    /// the plugin is not loaded under a policy nobody meant.
    #[error("{path}: {message}")]
    Policy {
        /// The policy file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The plugin needs more linear memory at start than its cap allows.
    #[error(
        "{path}: needs {} of linear memory at start, more than its cap of {} \
         (raise it with --plugin-memory or --plugin-memory-for NAME=SIZE)",
        mib(*needs),
        mib(*cap as u64)
    )]
    MemoryCap {
        /// The plugin file.
        path: PathBuf,
        /// The bytes its memories start with.
        needs: u64,
        /// The cap that applies to it.
        cap: usize,
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

impl PluginError {
    /// Whether the same file may load if tried again later, unchanged.
    pub fn is_transient(&self) -> bool {
        matches!(self, PluginError::Busy { .. })
    }
}

/// How a [`PluginRuntime`] is set up.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    limits: Limits,
    plugin_limits: BTreeMap<String, PluginLimits>,
    cache_dir: Option<PathBuf>,
    memory_budget: usize,
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            limits: Limits::default(),
            plugin_limits: BTreeMap::new(),
            cache_dir: None,
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
    pub fn plugin_limits(mut self, name: impl Into<String>, limits: PluginLimits) -> Self {
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
    budget: Arc<Budget>,
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
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(internal)?;
        bindings::Plugin::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |s| s)
            .map_err(internal)?;
        let ticker = Ticker::start(engine.clone()).map_err(|e| {
            crate::Error::Internal(format!("cannot start the plugin deadline ticker: {e}"))
        })?;
        let cache = options
            .cache_dir
            .clone()
            .map(|dir| cache::Cache::new(dir, &engine));
        Ok(Arc::new(PluginRuntime {
            engine,
            linker,
            ticker,
            budget: Budget::new(options.memory_budget),
            options,
            cache,
            compiled: std::sync::atomic::AtomicUsize::new(0),
        }))
    }

    /// Linear memory held by every live plugin instance of this runtime.
    pub fn memory_in_use(&self) -> usize {
        self.budget.used()
    }

    /// How many components this runtime has compiled (not taken from the cache).
    pub fn compiled_count(&self) -> usize {
        self.compiled.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Compiles the plugin in `path` and asks it what it reconciles, under
    /// `policy`'s grants ([`Policy::default`] grants nothing; a
    /// [`PluginDirectory`] reads each plugin's policy file for it).
    ///
    /// # Errors
    /// A [`PluginError`] naming the file.
    pub async fn load(
        self: &Arc<Self>,
        path: &Path,
        policy: Policy,
    ) -> Result<Plugin, PluginError> {
        let bytes = std::fs::read(path).map_err(|source| PluginError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let content_hash = hex(&Sha256::digest(&bytes));
        self.load_bytes(path, bytes, content_hash, policy).await
    }

    /// [`PluginRuntime::load`] of bytes already read from `path`, whose
    /// SHA-256 in hex is `content_hash`.
    async fn load_bytes(
        self: &Arc<Self>,
        path: &Path,
        bytes: Vec<u8>,
        content_hash: String,
        policy: Policy,
    ) -> Result<Plugin, PluginError> {
        let name = plugin_name(path);
        let mut ceiling = self
            .options
            .plugin_limits
            .get(&name)
            .copied()
            .unwrap_or_default()
            .over(self.options.limits);
        ceiling.http = policy.http.over(ceiling.http);
        let needs = initial_memory(&bytes);
        if needs > ceiling.memory as u64 {
            return Err(PluginError::MemoryCap {
                path: path.to_path_buf(),
                needs,
                cap: ceiling.memory,
            });
        }
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
            http: http::HttpAccess::new(policy.http.allow.clone(), ceiling.http),
            policy: Arc::new(policy),
            metrics,
        };
        let mut registration = describe(&describing).await?;
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
        let migrator = PluginMigrator::for_plugin(&sandbox, &component, &registration)
            .map_err(contract)?
            .map(Arc::new);
        Ok(Plugin {
            sandbox,
            content_hash,
            registration,
            idle: Mutex::new(Vec::new()),
            migrator,
        })
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
    sandbox: Arc<Sandbox>,
    content_hash: String,
    registration: wit::Registration,
    /// Instances between passes, reused so a pass pays no instantiation and
    /// a plugin's globals (a kind client it keeps) live on. There are never
    /// more than the kind's workers; a trapped instance is never put back.
    idle: Mutex<Vec<Warm>>,
    /// Converts the kind's older documents, when the plugin declares schema
    /// versions and exports the migrator.
    migrator: Option<Arc<PluginMigrator>>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.sandbox.path)
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
        &self.sandbox.path
    }

    /// The SHA-256 of the file's bytes, in hex: which version this is.
    pub fn content_hash(&self) -> &str {
        &self.content_hash
    }

    /// How the plugin asked to be driven, as registration options, already
    /// clamped under the operator's ceilings; with its migrator, if it has
    /// one.
    pub fn controller_options(&self) -> ControllerOptions {
        let r = &self.registration;
        let ms = Duration::from_millis;
        let mut options = ControllerOptions::new()
            .finalizers(r.finalizers.clone())
            .source(
                self.sandbox.path.display().to_string(),
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
        if let Some(migrator) = &self.migrator {
            options = options.shared_migrator(migrator.clone());
        }
        options
    }

    /// The limits its passes run under: the operator's ceilings, with what
    /// the plugin asked for where it asked for less.
    pub fn limits(&self) -> Limits {
        self.sandbox.limits
    }

    /// The passes at once its kind runs: what it asked for (already under
    /// the ceiling), or `host_default` under the ceiling when it asked for
    /// nothing.
    pub fn workers(&self, host_default: usize) -> usize {
        match self.registration.concurrency {
            Some(asked) => asked as usize,
            None => host_default.clamp(1, self.sandbox.limits.concurrency.max(1)),
        }
    }

    /// What the operator granted it beyond the sandbox.
    pub fn policy(&self) -> &Policy {
        &self.sandbox.policy
    }

    /// The plugin's name: its file name without `.wasm`.
    pub fn name(&self) -> &str {
        &self.sandbox.name
    }

    /// The schema versions its documents are written at (spec, status);
    /// (0, 0) for a plugin that does not version its kind.
    pub fn schema_versions(&self) -> (u32, u32) {
        (
            self.registration.spec_schema_version,
            self.registration.status_schema_version,
        )
    }

    /// An idle instance, or a new one.
    async fn warm(&self) -> Result<Warm, PluginError> {
        let idle = lock(&self.idle).pop();
        match idle {
            Some(warm) => Ok(warm),
            None => self.sandbox.instantiate().await,
        }
    }

    /// Instantiates up to `count` more instances ahead of the first passes,
    /// so they pay no instantiation; never more than the plugin's slots
    /// left free. Instances beyond the kind's workers stay idle.
    ///
    /// # Errors
    /// [`PluginError::Contract`] when an instance cannot be made (the plugin
    /// traps while starting), [`PluginError::Busy`] when the pool is full.
    pub async fn prewarm(&self, count: usize) -> Result<(), PluginError> {
        for _ in 0..count.min(self.sandbox.slots.available_permits()) {
            let warm = self.sandbox.instantiate().await?;
            lock(&self.idle).push(warm);
        }
        Ok(())
    }

    async fn run(&self, client: &ControllerClient, object: &RawObject) -> ReconcileResult {
        tracing::Span::current().record("version", short_hash(&self.content_hash));
        let mut warm = match self.warm().await {
            Ok(warm) => warm,
            Err(error) => return ReconcileResult::invalid(error.to_string()),
        };
        let stderr_before = warm.store.data().stderr.contents().len();
        let state = warm.store.data_mut();
        state.pass = Some(client.clone());
        state.object = object.meta.label();
        // Denials outside a pass (while starting) were logged; events are
        // for this pass's own.
        state.http_gate.take_denials();
        self.sandbox.restart_clock(&mut warm);
        let handle = match warm
            .store
            .data_mut()
            .table
            .push(ControllerClientHandle(client.clone()))
        {
            Ok(handle) => handle,
            Err(error) => {
                return ReconcileResult::invalid(format!("plugin {}: {error}", self.sandbox.name));
            }
        };
        let borrowed = wasmtime::component::Resource::new_borrow(handle.rep());
        let called = self
            .sandbox
            .bounded(
                warm.bindings
                    .beehive_controller_controller()
                    .call_reconcile(&mut warm.store, &convert::object(object), borrowed),
            )
            .await;
        warm.store.data_mut().pass = None;
        let denied = warm.store.data_mut().http_gate.take_denials();
        record_denials(client, denied).await;
        match called {
            Ok(result) => {
                let _ = warm.store.data_mut().table.delete(handle);
                self.keep_idle(warm);
                reconcile_result(&self.sandbox.name, result)
            }
            // The instance is dropped here: a trapped one cannot be entered
            // again, and one cut mid-call is in no known state.
            Err(error) => {
                self.sandbox.count_failure(&error);
                let why = self.sandbox.failure(&warm, &error, stderr_before);
                tracing::warn!(plugin = &*self.sandbox.name, object = %object.meta.label(), "plugin pass failed: {why}");
                ReconcileResult::invalid(why)
            }
        }
    }

    /// Puts an instance back for the next pass, unless it has collected a
    /// lot of stderr or memory: then it is dropped and gives both back.
    fn keep_idle(&self, warm: Warm) {
        let state = warm.store.data();
        if state.stderr.contents().len() >= STDERR_CAPACITY / 2 || state.memory.used() > IDLE_MEMORY
        {
            return;
        }
        lock(&self.idle).push(warm);
    }
}

/// Records a Warning event on the object for each destination its pass was
/// denied, so the refusal shows where the operator looks.
async fn record_denials(client: &ControllerClient, denied: Vec<String>) {
    for destination in denied {
        let event = EventSpec::warning("HttpRequestDenied").message(format!(
            "an outbound request to {destination} was denied: the plugin's policy does not grant it"
        ));
        if let Err(error) = client.add_event(event).await {
            tracing::warn!(destination, "cannot record the denied request: {error}");
        }
    }
}

/// Asks a fresh instance what the plugin reconciles, under the same bounds
/// as a pass.
async fn describe(sandbox: &Sandbox) -> Result<wit::Registration, PluginError> {
    let mut warm = sandbox.instantiate().await?;
    let called = sandbox
        .bounded(
            warm.bindings
                .beehive_controller_controller()
                .call_describe(&mut warm.store),
        )
        .await;
    called.map_err(|error| PluginError::Contract {
        path: sandbox.path.clone(),
        message: format!("describe failed: {}", sandbox.failure(&warm, &error, 0)),
    })
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

/// `greeting` for `plugins/greeting.wasm`.
fn plugin_name(path: &Path) -> String {
    path.file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The most bytes any memory of the component starts with (nested core
/// modules included); 0 for bytes that do not parse, which compiling then
/// reports.
fn initial_memory(bytes: &[u8]) -> u64 {
    let mut largest = 0;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(wasmparser::Payload::MemorySection(memories)) = payload else {
            continue;
        };
        for memory in memories.into_iter().flatten() {
            let page = 1u64 << memory.page_size_log2.unwrap_or(16);
            largest = largest.max(memory.initial.saturating_mul(page));
        }
    }
    largest
}

/// The first twelve hex digits of a content hash, as logs show versions.
fn short_hash(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// `bytes` in MiB, one decimal.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
