//! Controllers as WebAssembly components.
//!
//! A plugin is a component built against the WIT contract in `wit/`. The
//! [`Runtime`] (one per host) compiles it, or loads the artifact it
//! cached for the same content and engine; a [`Plugin`] is one loaded
//! version, an implementation of the engine's [`Controller`]. Each pass runs
//! on an instance of its own (reused between passes) with a memory cap, a
//! CPU deadline, a wall-clock limit and a host-call budget, and no ambient
//! authority: no environment, arguments or sockets, and no files, HTTP hosts
//! or config but what the operator's policy for it grants ([`Policy`]). A trap, a
//! deadline, an out-of-memory or a malformed result fails that pass only, and
//! the instance it ran on is dropped. What a plugin asks for in its
//! registration is clamped under the operator's [`Limits`].

mod cache;
mod clock;
mod code;
mod contract;
mod cosign;
mod directory;
mod error;
mod granted_dir;
mod http;
mod limits;
mod logs;
mod memory;
mod policy;
mod runtime;
mod sandbox;
mod shape;
mod side_calls;
mod state;
mod store_gate;
mod trust;
mod verbs;

pub use crate::operator_file::{MAX_PLUGIN_BYTES, MAX_POLICY_BYTES};
pub use beehive_types::{ContractError, KindPattern, StoreGrants, StoreVerb};
pub use code::{Compiler, Tier};
pub use contract::Contract;
pub use directory::{Change, Directory, LoadFailure, Loading, Served};
pub use error::Error;
pub use http::{HostPattern, HttpLimits};
pub use limits::{LimitOverrides, Limits};
pub use logs::{LogLine, PluginLogs};
pub use policy::{ConfigValue, FileGrant, HttpGrant, Policy, TrustOverride};
pub(crate) use runtime::hex;
pub use runtime::{Runtime, RuntimeOptions};
pub use shape::{Language, Shape, initial_memory};
pub use trust::{Signer, TRUST_FILE, Trust, cosign_signature_of, signature_of};

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::engine::{Action, Controller, ControllerClient, ControllerOptions};
use crate::event::EventSpec;
use crate::object::{GroupKind, RawObject};
use crate::sync::lock;
use contract::{PassResult, Verdict};
use sandbox::{STDERR_CAPACITY, Sandbox, Warm};
use side_calls::Extras;
use state::ControllerClientHandle;

/// An instance whose linear memory is above this after a pass is dropped
/// rather than kept for the next one, so memory a pass touched once goes
/// back to the host.
const IDLE_MEMORY: usize = 32 << 20;

/// What a plugin registered, as [`Plugin::registration`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Registration {
    /// The kind it reconciles.
    pub group_kind: GroupKind,
    /// The finalizers it clears.
    pub finalizers: Vec<String>,
    /// The passes at once it asked for, if any (under the ceiling).
    pub concurrency: Option<u32>,
    /// The cadences it asked for (under the operator's floor); unset ones
    /// come from the host.
    pub cadence: crate::engine::Cadence,
    /// The schema version its specs are written at.
    pub spec_version: u32,
    /// The schema version its statuses are written at.
    pub status_version: u32,
    /// Whether it declares a JSON Schema for its specs.
    pub spec_schema: bool,
    /// Whether it declares a JSON Schema for its statuses.
    pub status_schema: bool,
    /// Whether it migrates stored documents of older versions.
    pub migrates: bool,
    /// Whether it checks specs beyond the schema (`validate`).
    pub validates: bool,
}

/// One loaded version of a plugin.
pub struct Plugin {
    pub(super) sandbox: Arc<Sandbox>,
    pub(super) content_hash: String,
    /// The hash's first 12 digits: the version its passes' spans name.
    pub(super) version: Arc<str>,
    pub(super) registration: contract::v0_2::Registration,
    /// Instances between passes, reused so a pass pays no instantiation and
    /// a plugin's globals (a kind client it keeps) live on. There are never
    /// more than the kind's workers; a trapped instance is never put back.
    pub(super) idle: Mutex<Vec<Warm>>,
    /// Its kind's schemas, and its migrator and validator when it has them.
    pub(super) extras: Extras,
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
    /// clamped under the operator's ceilings; with its schemas, migrator
    /// and validator, if it has them.
    pub fn controller_options(&self) -> ControllerOptions {
        let r = &self.registration;
        let mut options = ControllerOptions::new()
            .finalizers(r.finalizers.clone())
            .source(
                self.sandbox.path.display().to_string(),
                Some(self.content_hash.clone()),
            )
            .cadence(limits::cadence(r));
        if let Some(n) = r.concurrency {
            options = options.concurrency(n as usize);
        }
        if let Some(migrator) = &self.extras.migrator {
            options = options.shared_migrator(migrator.clone());
        }
        if let Some(validator) = &self.extras.validator {
            options = options.validator(validator.clone());
        }
        options.schemas(self.extras.schemas.clone())
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

    /// What it asked for when it registered, after the operator's ceilings:
    /// what `beehive plugins check` prints.
    pub fn registration(&self) -> Registration {
        let r = &self.registration;
        Registration {
            group_kind: self.group_kind(),
            finalizers: r.finalizers.clone(),
            concurrency: r.concurrency,
            cadence: limits::cadence(r),
            spec_version: r.spec_schema_version,
            status_version: r.status_schema_version,
            spec_schema: self.extras.schemas.spec.is_some(),
            status_schema: self.extras.schemas.status.is_some(),
            migrates: self.extras.migrator.is_some(),
            validates: self.extras.validator.is_some(),
        }
    }

    /// The code its passes run now: baseline code until the optimised code
    /// made behind it is ready ([`Compiler::Tiered`]).
    pub fn tier(&self) -> Tier {
        self.sandbox.code.current().tier
    }

    /// An idle instance of the current code, or a new one.
    async fn warm(&self) -> Result<Warm, Error> {
        loop {
            let idle = lock(&self.idle).pop();
            match idle {
                Some(warm) if self.sandbox.is_current(&warm) => return Ok(warm),
                // Made from code since replaced: dropped, giving its slot back.
                Some(_) => continue,
                // Boxed: instantiating is rare, and its future is large enough
                // that every pass's future, which moves whole, would carry it.
                None => return Box::pin(self.sandbox.instantiate()).await,
            }
        }
    }

    /// Instantiates up to `count` more instances ahead of the first passes,
    /// so they pay no instantiation; never more than the plugin's slots
    /// left free. Instances beyond the kind's workers stay idle.
    ///
    /// # Errors
    /// [`Error::Contract`] when an instance cannot be made (the plugin
    /// traps while starting), [`Error::Busy`] when the pool is full.
    // Only with `testing`: the benchmarks measure an instance's memory
    // through it; a host fills its pool by running passes and has no use
    // for it.
    #[cfg(feature = "testing")]
    pub async fn prewarm(&self, count: usize) -> Result<(), Error> {
        for _ in 0..count.min(self.sandbox.slots.available_permits()) {
            let warm = self.sandbox.instantiate().await?;
            lock(&self.idle).push(warm);
        }
        Ok(())
    }

    async fn run(&self, client: &ControllerClient, object: &RawObject) -> Action {
        tracing::Span::current().record("version", &*self.version);
        if let Some(span) = client.span() {
            span.set("beehive.plugin", &self.sandbox.name);
            span.set("beehive.plugin.version", &self.version);
        }
        let mut warm = match self.warm().await {
            Ok(warm) => warm,
            Err(error) => return Action::backoff(error.to_string()),
        };
        let stderr_before = warm.store.data().stderr.contents().len();
        let state = warm.store.data_mut();
        state.pass = Some(client.clone());
        state.object_name.clear();
        state.object_name.push_str(&object.meta.name);
        // Denials outside a pass (while starting) were logged; events are
        // for this pass's own.
        state.http_gate.take_denials();
        state.http_gate.pass_span = client.span().cloned();
        state.store_gate.take_denials();
        self.sandbox.restart_clock(&mut warm);
        let handle = match warm
            .store
            .data_mut()
            .table
            .push(ControllerClientHandle(client.clone()))
        {
            Ok(handle) => handle,
            Err(error) => {
                return Action::backoff(format!("plugin {}: {error}", self.sandbox.name));
            }
        };
        let borrowed = wasmtime::component::Resource::new_borrow(handle.rep());
        let called = self
            .sandbox
            .bounded(std::pin::pin!(warm.bindings.reconcile(
                &mut warm.store,
                object,
                borrowed
            )))
            .await;
        warm.store.data_mut().pass = None;
        let state = warm.store.data_mut();
        state.http_gate.pass_span = None;
        let denied = state.http_gate.take_denials();
        let store_denied = state.store_gate.take_denials();
        if !denied.is_empty() || !store_denied.is_empty() {
            // Boxed for the same reason as instantiating: most passes are
            // denied nothing.
            let policy = Policy::file_of(&self.sandbox.path);
            Box::pin(record_denials(client, &policy, denied, store_denied)).await;
        }
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
                Action::backoff(why)
            }
        }
    }

    /// Puts an instance back for the next pass, unless it has collected a
    /// lot of stderr or memory: then it is dropped and gives both back.
    fn keep_idle(&self, warm: Warm) {
        if self.sandbox.is_current(&warm) && worth_keeping(&warm, &self.sandbox.name) {
            lock(&self.idle).push(warm);
        }
    }
}

/// Whether an instance that finished a call cleanly may serve the next:
/// not once it has collected a lot of stderr or memory, which dropping it
/// gives back.
pub(crate) fn worth_keeping(warm: &Warm, plugin: &str) -> bool {
    let state = warm.store.data();
    let keep =
        state.stderr.contents().len() < STDERR_CAPACITY / 2 && state.memory.used() <= IDLE_MEMORY;
    if !keep {
        tracing::debug!(
            plugin,
            memory = state.memory.used(),
            stderr = state.stderr.contents().len(),
            "instance retired after its call"
        );
    }
    keep
}

/// Records a Warning event on the object for each destination and each
/// store kind and verb its pass was denied, so the refusal shows where the
/// operator looks.
async fn record_denials(
    client: &ControllerClient,
    policy: &Path,
    denied: Vec<String>,
    store_denied: Vec<(GroupKind, StoreVerb)>,
) {
    let http = denied.into_iter().map(|destination| {
        EventSpec::warning("HttpRequestDenied").message(format!(
            "an outbound request to {destination} was denied: the plugin's policy does not grant it"
        ))
    });
    let store = store_denied.into_iter().map(|(kind, verb)| {
        EventSpec::warning("StoreAccessDenied").message(format!(
            "the plugin was denied {verb} on {kind}: its policy's [store] section does not \
             grant it; to grant it, add `{verb} = ['{kind}']` under `[store]` in {} (or \
             the kind to the list there)",
            policy.display()
        ))
    });
    for event in http.chain(store) {
        if let Err(error) = client.add_event(event).await {
            tracing::warn!("cannot record a denial: {error}");
        }
    }
}

/// The longest requeue delay a plugin may ask for; more is a malformed result.
const MAX_REQUEUE: Duration = Duration::from_secs(366 * 24 * 60 * 60);

fn reconcile_result(name: &str, result: PassResult) -> Action {
    let base = match result.verdict {
        Verdict::Settled => Action::settled(),
        Verdict::Unsettled => Action::unsettled(),
        Verdict::Failed(message) => return Action::backoff(message),
    };
    match result.requeue_after_ms.map(Duration::from_millis) {
        Some(delay) if delay > MAX_REQUEUE => Action::backoff(format!(
            "plugin {name} returned a malformed result: a requeue delay of {delay:?}"
        )),
        Some(delay) => base.requeue_after(delay),
        None => base,
    }
}

/// A plugin takes its objects as stored: the component decodes them.
impl Controller for Plugin {
    type Spec = crate::Json;
    type Status = crate::Json;

    async fn reconcile(
        &self,
        client: &ControllerClient,
        object: &RawObject,
    ) -> crate::Result<Action> {
        Ok(self.run(client, object).await)
    }
}

/// The first twelve hex digits of a content hash, as logs show versions.
fn short_hash(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
