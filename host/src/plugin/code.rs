//! Compiled code, and the two compilers that make it.
//!
//! wasmtime has two compilers: Cranelift optimises and takes 7–15 s for the
//! 16–19 MB component a Python or JavaScript plugin is; Winch, its baseline
//! compiler, emits code as it reads and takes 1–3 s for the same file, code
//! that runs a few times slower. Under [`Compiler::Tiered`] (the default) a
//! large plugin with no optimised artifact in the cache is served first from
//! Winch's code while Cranelift compiles behind it; when that is done, the
//! version's [`CodeCell`] takes the optimised code. Instances already made
//! finish the call they are in and are then dropped, so no pass fails and
//! none runs twice. Both tiers are cached; the baseline artifact only until
//! the optimised one is. Each compiler has its own engine (their settings
//! differ, and an engine compiles with one) and its own linker.

use std::sync::{Arc, Mutex};

use wasmtime::component::{InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Strategy};

use crate::plugin::contract::{self, Contract};
use crate::plugin::state::PluginState;
use crate::sync::lock;

/// Component instances the optimised engine's pool has room for, across
/// every plugin. Each plugin version holds at most its concurrency ceiling
/// of them.
const POOL_INSTANCES: u32 = 128;

/// Components at least this large are served from baseline code first under
/// [`Compiler::Tiered`]: below it Cranelift takes under a second or so, and
/// the second compile would cost more than it saves. Rust plugins are a few
/// hundred KB; Python and JavaScript ones are 16–19 MB.
pub(crate) const TIERED_FROM_BYTES: usize = 2 << 20;

/// Which of wasmtime's compilers turn plugins into native code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compiler {
    /// A large plugin (2 MiB or more: Python's and JavaScript's) that is not
    /// in the cache is served from baseline code in seconds, and moves to
    /// optimised code when Cranelift, compiling behind it, is done. Smaller
    /// plugins are compiled by Cranelift alone.
    #[default]
    Tiered,
    /// Cranelift alone: a large plugin serves later, at full speed from its
    /// first pass.
    Optimizing,
    /// Winch alone for whatever the cache does not hold: plugins serve
    /// soonest and are never optimised, so their passes stay slower.
    Baseline,
}

/// The code a plugin version runs: the optimised tier or the baseline one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// Winch's code: served while Cranelift's is being made.
    Baseline,
    /// Cranelift's code.
    Optimized,
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tier::Baseline => "baseline",
            Tier::Optimized => "optimized",
        })
    }
}

/// One compiler's engine, and the linker that binds what plugins import to it.
pub(crate) struct Backend {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<PluginState>,
}

impl Backend {
    /// Cranelift's engine. Pooling keeps instance memories and async stacks
    /// between passes instead of mapping fresh ones for each; the slots
    /// bound how many instances exist at once.
    pub(crate) fn optimizing(largest_memory: usize) -> wasmtime::Result<Backend> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(POOL_INSTANCES)
            .total_core_instances(POOL_INSTANCES * 8)
            .total_memories(POOL_INSTANCES * 2)
            .total_tables(POOL_INSTANCES * 2)
            .total_stacks(POOL_INSTANCES)
            .max_memory_size(largest_memory);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        Backend::with(&config)
    }

    /// Winch's engine. Its instances live for the seconds until the
    /// optimised code arrives, so they are mapped on demand rather than
    /// reserving a second pool; the memory cap and budget still hold, as
    /// the store's limiter enforces them.
    pub(crate) fn baseline() -> wasmtime::Result<Backend> {
        let mut config = Config::new();
        config.epoch_interruption(true).strategy(Strategy::Winch);
        Backend::with(&config)
    }

    fn with(config: &Config) -> wasmtime::Result<Backend> {
        let engine = Engine::new(config)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        super::runtime::refuse_links(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        contract::add_to_linker(&mut linker)?;
        Ok(Backend { engine, linker })
    }
}

/// A plugin version's code, linked and ready to instantiate.
pub(crate) struct Code {
    pub(crate) pre: InstancePre<PluginState>,
    /// The contract version it was built for.
    pub(crate) contract: Contract,
    pub(crate) tier: Tier,
}

impl Code {
    /// The engine the code was compiled for, which its stores must use.
    pub(crate) fn engine(&self) -> &Engine {
        self.pre.engine()
    }
}

/// The code a plugin version serves from now. Shared by the version's pass
/// sandbox and its call thread, so one replacement moves both.
pub(crate) struct CodeCell(Mutex<Arc<Code>>);

/// Cells are equal when they are the same cell: one plugin version's.
impl PartialEq for CodeCell {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for CodeCell {}

impl std::fmt::Debug for CodeCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CodeCell")
            .field(&self.current().tier)
            .finish()
    }
}

impl CodeCell {
    pub(crate) fn new(code: Code) -> Arc<CodeCell> {
        Arc::new(CodeCell(Mutex::new(Arc::new(code))))
    }

    /// The code new instances are made from.
    pub(crate) fn current(&self) -> Arc<Code> {
        lock(&self.0).clone()
    }

    /// Whether `code` is still what new instances are made from: an
    /// instance of replaced code is dropped rather than reused.
    pub(crate) fn is_current(&self, code: &Arc<Code>) -> bool {
        Arc::ptr_eq(&lock(&self.0), code)
    }

    /// Makes new instances from `code`.
    pub(crate) fn replace(&self, code: Code) {
        *lock(&self.0) = Arc::new(code);
    }
}
