//! What every instance of one plugin version is made from and runs under:
//! the pre-instantiated component, the limits, the instance slots, and the
//! bounded call that every entry into the guest goes through.

use std::path::PathBuf;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use wasmtime::Store;
use wasmtime::component::Instance;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::metrics::{Held, PluginMetrics};
use crate::plugin::clock::{self, PassClock};
use crate::plugin::code::{Code, CodeCell};
use crate::plugin::contract::Bindings;
use crate::plugin::http::{HttpAccess, HttpGate};
use crate::plugin::memory::MemoryLimiter;
use crate::plugin::state::PluginState;
use crate::plugin::store_gate::{GrantsInForce, StoreGate};
use crate::plugin::{Error, FileGrant, Limits, Policy, Runtime};

/// How much stderr an instance may collect. An instance that has used half
/// is retired, so a plugin's writes to stderr never fail for lack of room.
pub(crate) const STDERR_CAPACITY: usize = 64 * 1024;

/// One plugin version's sandbox.
#[derive(Clone)]
pub(crate) struct Sandbox {
    pub(crate) name: Arc<str>,
    pub(crate) path: PathBuf,
    pub(crate) limits: Limits,
    /// One permit per instance this version may have at once: its share of
    /// the pool, so no plugin can take every slot.
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
    /// The code new instances are made from, which tiering may replace.
    pub(crate) code: Arc<CodeCell>,
    pub(crate) runtime: Arc<Runtime>,
    /// The store grants in force for the file, which a changed policy
    /// replaces under instances already running.
    pub(crate) store_grants: Arc<GrantsInForce>,
    /// What the operator granted beyond the sandbox.
    pub(crate) policy: Arc<Policy>,
    /// The hosts it may reach, under its HTTP limits.
    pub(crate) http: Arc<HttpAccess>,
    pub(crate) metrics: PluginMetrics,
}

/// A live instance and its store, holding one of its plugin's slots.
pub(crate) struct Warm {
    pub(crate) store: Store<PluginState>,
    pub(crate) bindings: Bindings,
    pub(crate) instance: Instance,
    /// The code it was made from: once replaced, the instance is not reused.
    pub(crate) code: Arc<Code>,
    _slot: tokio::sync::OwnedSemaphorePermit,
    /// Counted in `beehive_plugin_instances` while it lives.
    _counted: Held,
}

/// Why a call into a plugin did not return a result.
pub(crate) enum CallError {
    /// The guest trapped, ran out of its CPU deadline, or a host call failed.
    Failed(wasmtime::Error),
    /// The call was still running at the wall-clock limit and was cancelled.
    TimedOut(Duration),
}

impl Sandbox {
    /// A fresh store: no sockets, no environment, no arguments, no files
    /// but the directories the policy grants and no HTTP but to the hosts it
    /// grants; stderr captured in
    /// memory; memory capped and charged to the runtime's budget.
    fn store(&self, code: &Code) -> Result<Store<PluginState>, Error> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stderr(stderr.clone());
        for grant in &self.policy.files {
            self.preopen(&mut wasi, grant)?;
        }
        let wasi = wasi.build();
        let mut store = Store::new(
            code.engine(),
            PluginState {
                wasi,
                table: wasmtime::component::ResourceTable::new(),
                memory: MemoryLimiter::new(self.limits.memory, self.runtime.budget.clone())
                    .reporting_to(self.metrics.memory.clone()),
                stderr,
                plugin: self.name.clone(),
                logs: self.runtime.logs().clone(),
                pass: None,
                object_name: String::new(),
                clock: PassClock::new(self.limits.pass_deadline, self.limits.host_calls_per_pass),
                kind_clients: 0,
                kind_client_limit: self.limits.kind_clients,
                policy: self.policy.clone(),
                http: wasmtime_wasi_http::WasiHttpCtx::new(),
                http_gate: HttpGate::new(self.name.clone(), self.http.clone()),
                store_gate: StoreGate::new(
                    self.name.clone(),
                    self.store_grants.clone(),
                    self.metrics.denials.clone(),
                ),
            },
        );
        store.limiter(|state| &mut state.memory);
        clock::install(&mut store);
        store.set_epoch_deadline(1);
        Ok(store)
    }

    /// Gives the instance the directory `grant` holds, once its path still
    /// leads there: a grant moved or replaced since its policy was checked
    /// refuses the instance, and says so in the log as well as the pass's
    /// event.
    fn preopen(&self, wasi: &mut WasiCtxBuilder, grant: &FileGrant) -> Result<(), Error> {
        let refused = |message: String| {
            let policy = Policy::file_of(&self.path);
            tracing::error!(
                plugin = &*self.name,
                policy = %policy.display(),
                "refusing a new instance: files.{:?}: {message}",
                grant.guest_path
            );
            Error::Policy {
                path: policy,
                message: format!("files.{:?}: {message}", grant.guest_path),
            }
        };
        grant.handle.still_at(&grant.host_path).map_err(|why| {
            refused(format!(
                "{why}; the policy is checked again when its file changes"
            ))
        })?;
        let perms = if grant.read_only {
            FsPerms::ReadOnly
        } else {
            FsPerms::ReadWrite
        };
        wasi.preopened_dir(grant.handle.reopen_path(), &grant.guest_path, perms)
            .map_err(|e| refused(format!("cannot open {}: {e:#}", grant.host_path.display())))?;
        Ok(())
    }

    /// Whether `warm` was made from the code this version serves now.
    pub(crate) fn is_current(&self, warm: &Warm) -> bool {
        self.code.is_current(&warm.code)
    }

    /// Restarts `warm`'s clock for a new call into the guest.
    pub(crate) fn restart_clock(&self, warm: &mut Warm) {
        warm.store
            .data_mut()
            .clock
            .restart(self.limits.pass_deadline, self.limits.host_calls_per_pass);
        warm.store.set_epoch_deadline(1);
    }

    /// Runs `call` under the CPU deadline (the store's clock, which must be
    /// restarted first) and the wall-clock limit. A call cut by the wall
    /// clock is dropped mid-flight: its instance must not be used again.
    ///
    /// The call comes pinned by the caller: a call's future is large, and
    /// pinning it here would copy it into this future a second time.
    pub(crate) async fn bounded<T>(
        &self,
        mut call: std::pin::Pin<&mut impl std::future::Future<Output = wasmtime::Result<T>>>,
    ) -> Result<T, CallError> {
        let _ticking = self.runtime.ticker.running();
        let wall = self.limits.pass_wall_limit;
        let started = std::time::Instant::now();
        // Most calls finish in their first poll: the guest runs to its end
        // without waiting on the host. Arming the wall-clock timer only for
        // a call that waits spares every quick pass two trips through the
        // runtime's shared timer (a tenth of a quick pass). The first poll
        // is itself bounded: the CPU deadline yields the guest each tick.
        let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        let result = match first {
            Poll::Ready(result) => Ok(result),
            Poll::Pending => {
                let left = wall.saturating_sub(started.elapsed());
                tokio::time::timeout(left, call).await
            }
        };
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(CallError::Failed(error)),
            Err(_) => Err(CallError::TimedOut(wall)),
        }
    }

    /// A new instance, once this version has a free slot. Instantiating runs
    /// the guest's start code, so it is bounded like a pass.
    pub(crate) async fn instantiate(&self) -> Result<Warm, Error> {
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Busy {
                path: self.path.clone(),
                message: "the plugin is being dropped".into(),
            })?;
        let code = self.code.current();
        let mut store = self.store(&code)?;
        let instantiated = self
            .bounded(std::pin::pin!(async {
                let instance = code.pre.instantiate_async(&mut store).await?;
                let bindings = Bindings::new(code.contract, &mut store, &instance)?;
                Ok((instance, bindings))
            }))
            .await;
        let (instance, bindings) = instantiated.map_err(|error| match error {
            CallError::Failed(e) if e.is::<wasmtime::PoolConcurrencyLimitError>() => Error::Busy {
                path: self.path.clone(),
                message: format!("{e:#}"),
            },
            CallError::Failed(e) => Error::Contract {
                path: self.path.clone(),
                message: format!("cannot instantiate: {}", describe_error(&e, &store)),
            },
            CallError::TimedOut(wall) => Error::Contract {
                path: self.path.clone(),
                message: format!("cannot instantiate: still starting after {wall:?}"),
            },
        })?;
        Ok(Warm {
            store,
            bindings,
            instance,
            code,
            _slot: slot,
            _counted: Held::new(&self.metrics.instances),
        })
    }

    /// Counts a failed call: a deadline hit (CPU or wall clock), or a trap.
    pub(crate) fn count_failure(&self, error: &CallError) {
        let deadline = match error {
            CallError::TimedOut(_) => true,
            CallError::Failed(e) => {
                matches!(
                    e.downcast_ref::<wasmtime::Trap>(),
                    Some(wasmtime::Trap::Interrupt)
                )
            }
        };
        if deadline {
            self.metrics.deadline_hits.inc();
        } else {
            self.metrics.traps.inc();
        }
    }

    /// A one-line account of why a call failed, with what the plugin wrote
    /// to stderr since `stderr_before`.
    pub(crate) fn failure(&self, warm: &Warm, error: &CallError, stderr_before: usize) -> String {
        let contents = warm.store.data().stderr.contents();
        let stderr = String::from_utf8_lossy(&contents[stderr_before.min(contents.len())..]);
        let why = match error {
            CallError::Failed(e) => describe_error(e, &warm.store),
            CallError::TimedOut(wall) => format!(
                "exceeded its wall-clock limit of {wall:?} (host calls included) and was cancelled"
            ),
        };
        let said = stderr_summary(&stderr);
        if said.is_empty() {
            format!("plugin {} {why}", self.name)
        } else {
            format!("plugin {} {why} (stderr: {said})", self.name)
        }
    }
}

/// What went wrong in a call, in words.
fn describe_error(error: &wasmtime::Error, store: &Store<PluginState>) -> String {
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => format!(
            "exceeded its CPU deadline of {:?}",
            store.data().clock.deadline()
        ),
        Some(trap) => format!("trapped: {trap}"),
        None => crate::naming::escape(&without_backtrace(error)).into_owned(),
    }
}

/// An error's chain of causes without the wasm backtrace wasmtime attaches
/// as context: the limit's own sentence leads the event, and the backtrace
/// (kilobytes of frames an operator cannot act on) goes to the debug log.
fn without_backtrace(error: &wasmtime::Error) -> String {
    let Some(backtrace) = error.downcast_ref::<wasmtime::WasmBacktrace>() else {
        return format!("{error:#}");
    };
    let backtrace = backtrace.to_string();
    tracing::debug!(%backtrace, "wasm backtrace of a failed call");
    error
        .chain()
        .map(|cause| cause.to_string())
        .filter(|cause| *cause != backtrace)
        .collect::<Vec<_>>()
        .join(": ")
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
