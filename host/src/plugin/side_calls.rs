//! Calls into a plugin outside its passes: conversions of its kind's older
//! documents (the `migrator` interface) and checks of specs about to be
//! written (the `schema` interface's `validate`).
//!
//! The store asks for both on paths that are synchronous, while guest calls
//! are async (they yield, and a wall clock cuts them). So each plugin
//! version that exports either gets a thread of its own with a small
//! runtime; a call is sent there and its caller waits for the answer. Every
//! call runs under the plugin's CPU deadline, wall-clock limit and memory
//! cap, on an instance with a slot of its own, so a call asked for during
//! one of the plugin's passes never waits for that pass's slot. The thread
//! keeps its instance from one call to the next, as the pass pool does: a
//! JavaScript or Python engine takes about a millisecond to instantiate,
//! more than its `validate` itself. A call that fails drops it.

use std::sync::Arc;
use std::sync::mpsc;

use wasmtime::component::{Component, ComponentExportIndex, ComponentType, Lift};

use crate::json::Json;
use crate::migration::Migrator;
use crate::plugin::contract::{Contract, v0_2::Registration};
use crate::plugin::sandbox::{Sandbox, Warm};
use crate::plugin::worth_keeping;
use crate::validation::{KindSchemas, SpecValidator, Violation};

/// The `violation` record (`schema.violation` in 0.1, `types.violation`
/// since): the same shape in every version.
#[derive(ComponentType, Lift, Clone, Debug)]
#[component(record)]
struct WitViolation {
    path: String,
    message: String,
}

/// Contract 0.1's `schema.schemas` record.
#[derive(ComponentType, Lift, Clone, Debug)]
#[component(record)]
struct WitSchemas {
    spec: Option<String>,
    status: Option<String>,
    validates: bool,
}

/// The most violations of one `validate` call the host keeps.
const MAX_VIOLATIONS: usize = 100;

/// One call, and where its answer goes.
enum Call {
    ConvertSpec { from: u32, raw: String },
    ConvertStatus { from: u32, raw: String },
    Validate { spec: String },
}

/// What a call answers.
enum Answer {
    Converted(String),
    Violations(Vec<Violation>),
}

struct Job {
    call: Call,
    reply: mpsc::SyncSender<Result<Answer, String>>,
}

/// Which functions the thread may call: those the plugin exports and the
/// host needs, and the interfaces that hold them in the plugin's contract
/// version. They are looked up by name on each instance, as an index
/// belongs to one compile and tiering replaces the code under the thread.
#[derive(Clone, Default)]
struct Exports {
    convert: bool,
    validate: bool,
    /// The interface of `convert-spec` and `convert-status`.
    migrator: String,
    /// The interface of `validate`.
    validator: String,
}

impl Exports {
    fn of(contract: Contract) -> Exports {
        let (migrator, validator) = match contract {
            Contract::V0_1 => ("migrator", "schema"),
            Contract::V0_2 => ("controller", "controller"),
        };
        Exports {
            convert: false,
            validate: false,
            migrator: contract.interface(migrator),
            validator: contract.interface(validator),
        }
    }
}

/// A plugin version's call thread.
pub(crate) struct SideCalls {
    jobs: mpsc::Sender<Job>,
}

/// What a plugin declares beyond its registration, and the callers the
/// host needs for it.
#[derive(Default)]
pub(crate) struct Extras {
    pub(crate) schemas: KindSchemas,
    pub(crate) migrator: Option<Arc<PluginMigrator>>,
    pub(crate) validator: Option<Arc<PluginValidator>>,
}

impl Extras {
    /// Reads what the plugin declares (its schemas, when it exports the
    /// schema interface) and starts its call thread if the host will call
    /// it outside passes.
    ///
    /// # Errors
    /// Why not: schema versions with no migrator, or `describe-schemas`
    /// failing.
    pub(crate) async fn for_plugin(
        sandbox: &Arc<Sandbox>,
        component: &Component,
        registration: &Registration,
        contract: Contract,
    ) -> Result<Extras, String> {
        let (spec_version, status_version) = (
            registration.spec_schema_version,
            registration.status_schema_version,
        );
        let versioned = spec_version != 0 || status_version != 0;
        let mut exports = Exports::of(contract);
        let mut schemas = KindSchemas::default();
        match contract {
            Contract::V0_1 => {
                if versioned {
                    exports.convert = export(component, &exports.migrator, "convert-spec")
                        .is_some()
                        && export(component, &exports.migrator, "convert-status").is_some();
                    if !exports.convert {
                        return Err(format!(
                            "declares schema versions (spec {spec_version}, status \
                             {status_version}) but exports no migrator: build it for the \
                             plugin-with-migrator world"
                        ));
                    }
                }
                if let Some(describe) = export(component, &exports.validator, "describe-schemas") {
                    let declared = describe_schemas(sandbox, &describe).await?;
                    schemas = KindSchemas {
                        spec: declared.spec,
                        status: declared.status,
                    };
                    if declared.validates {
                        exports.validate =
                            export(component, &exports.validator, "validate").is_some();
                        if !exports.validate {
                            return Err("says it validates but exports no validate".into());
                        }
                    }
                }
            }
            Contract::V0_2 => {
                if versioned && !registration.migrates {
                    return Err(format!(
                        "declares schema versions (spec {spec_version}, status \
                         {status_version}) but does not migrate: its registration must say \
                         `migrates` and its convert-spec and convert-status convert"
                    ));
                }
                exports.convert = versioned;
                exports.validate = registration.validates;
                schemas = KindSchemas {
                    spec: registration.spec_schema.clone(),
                    status: registration.status_schema.clone(),
                };
            }
        }
        let validates = exports.validate;
        let mut extras = Extras {
            schemas,
            ..Extras::default()
        };
        if !exports.convert && !validates {
            return Ok(extras);
        }
        let calls = Arc::new(SideCalls::start(sandbox, exports)?);
        if spec_version != 0 || status_version != 0 {
            extras.migrator = Some(Arc::new(PluginMigrator {
                spec_version,
                status_version,
                calls: calls.clone(),
            }));
        }
        if validates {
            extras.validator = Some(Arc::new(PluginValidator { calls }));
        }
        Ok(extras)
    }
}

/// `function` of `interface`, if the component exports it.
fn export(component: &Component, interface: &str, function: &str) -> Option<ComponentExportIndex> {
    let interface = component.get_export_index(None, interface)?;
    component.get_export_index(Some(&interface), function)
}

/// `function` of `interface`, if `warm`'s instance exports it.
fn instance_export(
    warm: &mut Warm,
    interface: &str,
    function: &str,
) -> Option<ComponentExportIndex> {
    let interface = warm
        .instance
        .get_export_index(&mut warm.store, None, interface)?;
    warm.instance
        .get_export_index(&mut warm.store, Some(&interface), function)
}

/// Calls `describe-schemas` on a fresh instance, bounded like a pass.
async fn describe_schemas(
    sandbox: &Sandbox,
    index: &ComponentExportIndex,
) -> Result<WitSchemas, String> {
    let mut warm = sandbox.instantiate().await.map_err(|e| e.to_string())?;
    let describe = warm
        .instance
        .get_typed_func::<(), (WitSchemas,)>(&mut warm.store, index)
        .map_err(|e| format!("its describe-schemas does not fit: {e:#}"))?;
    let called = sandbox
        .bounded(std::pin::pin!(describe.call_async(&mut warm.store, ())))
        .await;
    match called {
        Ok((schemas,)) => Ok(schemas),
        Err(error) => Err(format!(
            "describe-schemas failed: {}",
            sandbox.failure(&warm, &error, 0)
        )),
    }
}

impl SideCalls {
    fn start(sandbox: &Arc<Sandbox>, exports: Exports) -> Result<SideCalls, String> {
        // Its own slot: a call may be asked for while the plugin's passes
        // hold every one of theirs.
        let own = Arc::new(Sandbox {
            slots: Arc::new(tokio::sync::Semaphore::new(1)),
            ..Sandbox::clone(sandbox)
        });
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("beehive-calls-{}", sandbox.name))
            .spawn(move || serve(&own, &exports, &queue))
            .map_err(|e| format!("cannot start its call thread: {e}"))?;
        Ok(SideCalls { jobs })
    }

    /// Sends one call to the thread and waits for its answer.
    fn call(&self, call: Call) -> Result<Answer, String> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.jobs
            .send(Job { call, reply })
            .map_err(|_| "the plugin's call thread has stopped".to_string())?;
        wait_for(&answer)
    }
}

/// Waits for an answer without holding up the other tasks of a
/// multi-threaded runtime this thread may belong to.
fn wait_for(answer: &mpsc::Receiver<Result<Answer, String>>) -> Result<Answer, String> {
    let receive = || {
        answer
            .recv()
            .unwrap_or_else(|_| Err("the plugin's call thread stopped mid-call".into()))
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(receive)
        }
        _ => receive(),
    }
}

/// A plugin's migrator, as the host's [`Migrator`].
pub(crate) struct PluginMigrator {
    spec_version: u32,
    status_version: u32,
    calls: Arc<SideCalls>,
}

impl PluginMigrator {
    fn convert(&self, call: Call) -> Result<Json, String> {
        match self.calls.call(call)? {
            Answer::Converted(text) => {
                Json::parse(&text).map_err(|e| format!("the converted document: {e}"))
            }
            Answer::Violations(_) => Err("the plugin's call thread answered out of turn".into()),
        }
    }
}

impl Migrator for PluginMigrator {
    fn spec_version(&self) -> u32 {
        self.spec_version
    }

    fn status_version(&self) -> u32 {
        self.status_version
    }

    fn convert_spec(&self, from: u32, spec: Json) -> Result<Json, String> {
        let raw = spec.into_string();
        self.convert(Call::ConvertSpec { from, raw })
    }

    fn convert_status(&self, from: u32, status: Json) -> Result<Json, String> {
        let raw = status.into_string();
        self.convert(Call::ConvertStatus { from, raw })
    }
}

/// A plugin's `validate`, as the host's [`SpecValidator`].
pub(crate) struct PluginValidator {
    calls: Arc<SideCalls>,
}

impl SpecValidator for PluginValidator {
    fn validate(&self, spec: &Json) -> Result<Vec<Violation>, String> {
        let spec = spec.as_str().to_string();
        match self.calls.call(Call::Validate { spec })? {
            Answer::Violations(violations) => Ok(violations),
            Answer::Converted(_) => Err("the plugin's call thread answered out of turn".into()),
        }
    }
}

/// The call thread: one call at a time until every caller is dropped.
fn serve(sandbox: &Sandbox, exports: &Exports, queue: &mpsc::Receiver<Job>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(plugin = &*sandbox.name, %error, "cannot run the plugin's call thread");
            return;
        }
    };
    let mut kept: Option<Warm> = None;
    while let Ok(job) = queue.recv() {
        let answer = runtime.block_on(async {
            let mut warm = match kept.take() {
                Some(warm) if sandbox.is_current(&warm) => warm,
                _ => sandbox.instantiate().await.map_err(|e| e.to_string())?,
            };
            sandbox.restart_clock(&mut warm);
            let answer = run(sandbox, exports, &job.call, &mut warm).await;
            match answer {
                Err(CallFailed::Trapped(why)) => Err(why),
                answer => {
                    if worth_keeping(&warm, &sandbox.name) {
                        kept = Some(warm);
                    }
                    answer.map_err(CallFailed::into_message)
                }
            }
        });
        // The caller may have gone; nothing to tell it then.
        let _ = job.reply.send(answer);
    }
}

/// Why a call gave no answer.
enum CallFailed {
    /// The plugin answered with an error, or does not export the function:
    /// its instance is fine.
    Refused(String),
    /// The call trapped or was cut by a limit: its instance is in no known
    /// state and is dropped.
    Trapped(String),
}

impl CallFailed {
    fn into_message(self) -> String {
        match self {
            CallFailed::Refused(why) | CallFailed::Trapped(why) => why,
        }
    }
}

/// One call on `warm`, bounded like a pass.
async fn run(
    sandbox: &Sandbox,
    exports: &Exports,
    call: &Call,
    warm: &mut Warm,
) -> Result<Answer, CallFailed> {
    let missing = || {
        CallFailed::Refused(format!(
            "plugin {}: the function is not exported",
            sandbox.name
        ))
    };
    let unfit = |e: wasmtime::Error| {
        CallFailed::Refused(format!(
            "plugin {}: its export does not fit: {e:#}",
            sandbox.name
        ))
    };
    let (converter, from, raw) = match call {
        Call::ConvertSpec { from, raw } => ("convert-spec", *from, raw),
        Call::ConvertStatus { from, raw } => ("convert-status", *from, raw),
        Call::Validate { spec } => {
            let index = exports
                .validate
                .then(|| instance_export(warm, &exports.validator, "validate"))
                .flatten()
                .ok_or_else(missing)?;
            let validate = warm
                .instance
                .get_typed_func::<(&str,), (Vec<WitViolation>,)>(&mut warm.store, &index)
                .map_err(unfit)?;
            let called = sandbox
                .bounded(std::pin::pin!(
                    validate.call_async(&mut warm.store, (spec.as_str(),))
                ))
                .await;
            return match called {
                Ok((violations,)) => Ok(Answer::Violations(
                    violations
                        .into_iter()
                        .take(MAX_VIOLATIONS)
                        .map(violation)
                        .collect(),
                )),
                Err(error) => Err(CallFailed::Trapped(sandbox.failure(warm, &error, 0))),
            };
        }
    };
    let index = exports
        .convert
        .then(|| instance_export(warm, &exports.migrator, converter))
        .flatten()
        .ok_or_else(missing)?;
    let convert = warm
        .instance
        .get_typed_func::<(u32, &str), (Result<String, String>,)>(&mut warm.store, &index)
        .map_err(unfit)?;
    let called = sandbox
        .bounded(std::pin::pin!(
            convert.call_async(&mut warm.store, (from, raw.as_str()))
        ))
        .await;
    match called {
        Ok((converted,)) => converted
            .map(Answer::Converted)
            .map_err(|why| CallFailed::Refused(format!("plugin {}: {why}", sandbox.name))),
        Err(error) => Err(CallFailed::Trapped(sandbox.failure(warm, &error, 0))),
    }
}

/// A violation as the plugin reported it, bounded and with control and
/// bidi characters escaped: a plugin's text ends up in an error a person
/// reads on a terminal.
fn violation(reported: WitViolation) -> Violation {
    const MAX_TEXT: usize = 1024;
    let bounded = |text: String| {
        let mut text = crate::naming::escape(&text).into_owned();
        if text.len() > MAX_TEXT {
            let mut end = MAX_TEXT;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push('…');
        }
        text
    };
    Violation {
        path: bounded(reported.path),
        message: bounded(reported.message),
    }
}
