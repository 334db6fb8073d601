//! A plugin's migrator: the `migrator` interface of a component built for
//! the `plugin-with-migrator` world, called to upgrade its kind's older
//! specs and statuses.
//!
//! [`Migrator`] is called on read paths, which are synchronous, while guest
//! calls are async (they yield, and a wall clock cuts them). So each plugin
//! version with a migrator gets a thread of its own with a small runtime;
//! a conversion is sent there and its caller waits for the answer. Every
//! call runs on a fresh instance under the plugin's CPU deadline and
//! wall-clock limit, with a slot of its own, so a conversion asked for
//! during one of the plugin's passes never waits for that pass's slot.

use std::sync::Arc;
use std::sync::mpsc;

use wasmtime::component::{Component, ComponentExportIndex};

use crate::json::Json;
use crate::migration::Migrator;
use crate::plugin::bindings::beehive::controller::types as wit;
use crate::plugin::sandbox::Sandbox;

/// The migrator interface's name in the contract.
const INTERFACE: &str = "beehive:controller/migrator@0.1.0";

/// Which document a conversion is for.
#[derive(Clone, Copy, Debug)]
enum Document {
    Spec,
    Status,
}

/// One conversion, and where its answer goes.
struct Job {
    document: Document,
    from: u32,
    raw: String,
    reply: mpsc::SyncSender<Result<String, String>>,
}

/// Where the two converters are in the component.
#[derive(Clone)]
struct Converters {
    spec: ComponentExportIndex,
    status: ComponentExportIndex,
}

/// A plugin's migrator, as the host's [`Migrator`].
pub(crate) struct PluginMigrator {
    spec_version: u32,
    status_version: u32,
    jobs: mpsc::Sender<Job>,
}

impl PluginMigrator {
    /// The migrator of a plugin that declares schema versions; `None` for
    /// one that declares none.
    ///
    /// # Errors
    /// Why not, when the plugin declares versions but exports no migrator.
    pub(crate) fn for_plugin(
        sandbox: &Arc<Sandbox>,
        component: &Component,
        registration: &wit::Registration,
    ) -> Result<Option<PluginMigrator>, String> {
        let (spec_version, status_version) = (
            registration.spec_schema_version,
            registration.status_schema_version,
        );
        if spec_version == 0 && status_version == 0 {
            return Ok(None);
        }
        let converters = component
            .get_export_index(None, INTERFACE)
            .and_then(|interface| {
                Some(Converters {
                    spec: component.get_export_index(Some(&interface), "convert-spec")?,
                    status: component.get_export_index(Some(&interface), "convert-status")?,
                })
            })
            .ok_or_else(|| {
                format!(
                    "declares schema versions (spec {spec_version}, status {status_version}) \
                     but exports no migrator: build it for the plugin-with-migrator world"
                )
            })?;
        // Its own slot: a conversion may be asked for while the plugin's
        // passes hold every one of theirs.
        let converting = Arc::new(Sandbox {
            slots: Arc::new(tokio::sync::Semaphore::new(1)),
            ..Sandbox::clone(sandbox)
        });
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("beehive-migrate-{}", sandbox.name))
            .spawn(move || serve(&converting, &converters, &queue))
            .map_err(|e| format!("cannot start its migrator: {e}"))?;
        Ok(Some(PluginMigrator {
            spec_version,
            status_version,
            jobs,
        }))
    }

    /// Sends one conversion to the migrator's thread and waits for it.
    fn convert(&self, document: Document, from: u32, raw: Json) -> Result<Json, String> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job {
            document,
            from,
            raw: raw.into_string(),
            reply,
        };
        self.jobs
            .send(job)
            .map_err(|_| "the plugin's migrator has stopped".to_string())?;
        let text = wait_for(&answer)?;
        Json::parse(&text).map_err(|e| format!("the converted document: {e}"))
    }
}

/// Waits for an answer without holding up the other tasks of a
/// multi-threaded runtime this thread may belong to.
fn wait_for(answer: &mpsc::Receiver<Result<String, String>>) -> Result<String, String> {
    let receive = || {
        answer
            .recv()
            .unwrap_or_else(|_| Err("the plugin's migrator stopped mid-call".into()))
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(receive)
        }
        _ => receive(),
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
        self.convert(Document::Spec, from, spec)
    }

    fn convert_status(&self, from: u32, status: Json) -> Result<Json, String> {
        self.convert(Document::Status, from, status)
    }
}

/// The migrator thread: one conversion at a time until the migrator is
/// dropped.
fn serve(sandbox: &Sandbox, converters: &Converters, queue: &mpsc::Receiver<Job>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(plugin = &*sandbox.name, %error, "cannot run the plugin's migrator");
            return;
        }
    };
    while let Ok(job) = queue.recv() {
        let answer = runtime.block_on(run(sandbox, converters, &job));
        // The caller may have gone; nothing to tell it then.
        let _ = job.reply.send(answer);
    }
}

/// One conversion on a fresh instance, bounded like a pass.
async fn run(sandbox: &Sandbox, converters: &Converters, job: &Job) -> Result<String, String> {
    let mut warm = sandbox.instantiate().await.map_err(|e| e.to_string())?;
    let index = match job.document {
        Document::Spec => &converters.spec,
        Document::Status => &converters.status,
    };
    let converter = warm
        .instance
        .get_typed_func::<(u32, &str), (Result<String, String>,)>(&mut warm.store, index)
        .map_err(|e| format!("plugin {}: its converter does not fit: {e:#}", sandbox.name))?;
    let called = sandbox
        .bounded(converter.call_async(&mut warm.store, (job.from, job.raw.as_str())))
        .await;
    match called {
        Ok((converted,)) => converted.map_err(|why| format!("plugin {}: {why}", sandbox.name)),
        Err(error) => Err(sandbox.failure(&warm, &error, 0)),
    }
}
