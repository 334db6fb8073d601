//! What a plugin's store holds, and the host functions the plugin imports.

use std::sync::Arc;

use beehive_types::StoreVerb;

use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::client::{CreateOptions, RawClient};
use crate::engine::ControllerClient;
use crate::event::EventFilter;
use crate::json::Json;
use crate::naming;
use crate::object::{GroupKind, ObjectId};
use crate::plugin::Policy;
use crate::plugin::bindings::beehive::controller::config;
use crate::plugin::bindings::beehive::controller::host::{self, Level};
use crate::plugin::bindings::beehive::controller::types as wit;
use crate::plugin::clock::PassClock;
use crate::plugin::convert::{self, ToWit};
use crate::plugin::http::HttpGate;
use crate::plugin::memory::MemoryLimiter;
use crate::plugin::store_gate::StoreGate;

/// The most objects one `list` call hands a plugin; it pages for more.
const MAX_PAGE: u32 = 500;

/// The most event runs one `list-events` call hands a plugin.
const MAX_EVENTS: u32 = 1000;

/// The controller client lent to the plugin for one pass.
pub struct ControllerClientHandle(pub(crate) ControllerClient);

/// A kind client the plugin made; it acts inside whichever pass is running.
pub struct KindClientHandle(pub(crate) GroupKind);

/// The data of one plugin store.
pub(crate) struct PluginState {
    /// WASI as the plugin sees it: its granted directories, no environment
    /// or sockets, stdout discarded and stderr captured.
    pub(crate) wasi: WasiCtx,
    /// The client handles the plugin holds.
    pub(crate) table: ResourceTable,
    /// The instance's linear memory against its cap.
    pub(crate) memory: MemoryLimiter,
    /// What the plugin wrote to stderr (bounded), quoted when a pass fails.
    pub(crate) stderr: MemoryOutputPipe,
    /// The plugin's name, for logs and events.
    pub(crate) plugin: Arc<str>,
    /// Where its log lines are kept for `beehive logs`.
    pub(crate) logs: super::PluginLogs,
    /// The pass running now, if any.
    pub(crate) pass: Option<ControllerClient>,
    /// The name of the object of the pass running now, for the plugin's log
    /// lines. Kept as the name alone, in a buffer reused from pass to pass:
    /// a label formatted for every pass cost more than most plugins log.
    pub(crate) object_name: String,
    /// Guest time against the pass deadline.
    pub(crate) clock: PassClock,
    /// Kind-client handles the instance holds now, and how many it may.
    pub(crate) kind_clients: usize,
    pub(crate) kind_client_limit: usize,
    /// What the operator granted, config values included.
    pub(crate) policy: Arc<Policy>,
    /// wasi-http's own state for the plugin's outbound requests.
    pub(crate) http: WasiHttpCtx,
    /// The grant check and bounds of outbound requests.
    pub(crate) http_gate: HttpGate,
    /// The grant check of store calls on kinds other than its own.
    pub(crate) store_gate: StoreGate,
}

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_gate,
        }
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

type HostResult<T> = wasmtime::Result<Result<T, wit::Error>>;

/// A host call's answer in the contract's terms.
fn reply<T: ToWit>(result: crate::Result<T>) -> HostResult<T::Wit> {
    Ok(result.map(|value| value.to_wit()).map_err(convert::error))
}

impl PluginState {
    fn pass_client(&self) -> Result<&ControllerClient, wit::Error> {
        self.pass.as_ref().ok_or(wit::Error::ReconcileReturned)
    }

    fn controller(
        &self,
        handle: &Resource<ControllerClientHandle>,
    ) -> wasmtime::Result<ControllerClient> {
        Ok(self.table.get(handle)?.0.clone())
    }

    /// The kind client behind `handle`, joined to the current pass, once
    /// the plugin may `verb` its kind.
    fn kind(
        &mut self,
        handle: &Resource<KindClientHandle>,
        verb: StoreVerb,
    ) -> wasmtime::Result<Result<RawClient, wit::Error>> {
        let group_kind = self.table.get(handle)?.0.clone();
        let pass = match self.pass_client() {
            Ok(pass) => pass.clone(),
            Err(error) => return Ok(Err(error)),
        };
        Ok(self
            .granted(&pass, &group_kind, verb)
            .map(|()| pass.kind_client(group_kind)))
    }

    /// Whether the plugin whose pass is `pass` may `verb` objects of `kind`.
    fn granted(
        &mut self,
        pass: &ControllerClient,
        kind: &GroupKind,
        verb: StoreVerb,
    ) -> Result<(), wit::Error> {
        self.store_gate
            .check(pass.group_kind(), kind, verb)
            .map_err(convert::contract_error)
    }

    /// Whether the plugin may `verb` object `id`, whatever kind it is: calls
    /// by id reach any kind, so the kind checked is the object's own. An id
    /// that names nothing passes: the call itself then says so.
    fn granted_on(
        &mut self,
        client: &RawClient,
        id: ObjectId,
        verb: StoreVerb,
    ) -> Result<(), wit::Error> {
        let pass = self.pass_client()?.clone();
        match client.kind_of(id).map_err(convert::error)? {
            Some(kind) => self.granted(&pass, &kind, verb),
            None => Ok(()),
        }
    }

    /// A kind-client call about object `id` (its edges, its events): the
    /// handle's client, once the plugin may read `id`'s kind.
    fn reading(
        &mut self,
        handle: &Resource<KindClientHandle>,
        id: ObjectId,
    ) -> wasmtime::Result<Result<RawClient, wit::Error>> {
        let client = match self.kind(handle, StoreVerb::Read)? {
            Ok(client) => client,
            Err(error) => return Ok(Err(error)),
        };
        Ok(self
            .granted_on(&client, id, StoreVerb::Read)
            .map(|()| client))
    }

    /// A kind-client write, with the owner it names checked for read.
    fn writing(
        &mut self,
        handle: &Resource<KindClientHandle>,
        owner: Option<ObjectId>,
    ) -> wasmtime::Result<Result<RawClient, wit::Error>> {
        let client = match self.kind(handle, StoreVerb::Write)? {
            Ok(client) => client,
            Err(error) => return Ok(Err(error)),
        };
        let owner_granted = match owner {
            Some(owner) => self.granted_on(&client, owner, StoreVerb::Read),
            None => Ok(()),
        };
        Ok(owner_granted.map(|()| client))
    }
}

fn options(options: wit::CreateOptions) -> CreateOptions {
    let mut converted = CreateOptions::new().finalizers(options.finalizers);
    if let Some(owner) = options.owner {
        converted = converted.owner(owner);
    }
    converted
}

impl wit::Host for PluginState {}

impl config::Host for PluginState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self
            .policy
            .config
            .get(&key)
            .map(|value| value.reveal().to_string()))
    }

    async fn keys(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(self.policy.config.keys().cloned().collect())
    }
}

impl host::Host for PluginState {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let object = match &self.pass {
            Some(pass) => format!("{}/{}", pass.group_kind(), self.object_name),
            None => String::new(),
        };
        let (plugin, object) = (&*self.plugin, object.as_str());
        // A plugin's line must never pass for the host's own.
        let message = naming::escape(&message);
        let (filter, level) = match level {
            Level::Trace => {
                tracing::trace!(plugin, object, "{message}");
                (tracing::Level::TRACE, "TRACE")
            }
            Level::Debug => {
                tracing::debug!(plugin, object, "{message}");
                (tracing::Level::DEBUG, "DEBUG")
            }
            Level::Info => {
                tracing::info!(plugin, object, "{message}");
                (tracing::Level::INFO, "INFO")
            }
            Level::Warn => {
                tracing::warn!(plugin, object, "{message}");
                (tracing::Level::WARN, "WARN")
            }
            Level::Error => {
                tracing::error!(plugin, object, "{message}");
                (tracing::Level::ERROR, "ERROR")
            }
        };
        // Kept at the level the host logs at: lines the operator silenced
        // should not crowd out the ones they kept.
        if tracing::level_filters::LevelFilter::current() < filter {
            return Ok(());
        }
        self.logs.record(super::LogLine {
            at: crate::object::Timestamp::now(),
            level,
            plugin: plugin.to_string(),
            object: object.to_string(),
            message: message.into_owned(),
        });
        Ok(())
    }
}

/// Runs a kind-client call: the handle's client, joined to the pass, or
/// `reconcile-returned` outside one.
macro_rules! with_kind {
    ($checked:expr, |$client:ident| $body:expr) => {{
        match $checked? {
            Ok($client) => $body,
            Err(error) => Ok(Err(error)),
        }
    }};
}

impl host::HostKindClient for PluginState {
    async fn new(
        &mut self,
        group: String,
        kind: String,
    ) -> wasmtime::Result<Resource<KindClientHandle>> {
        // The constructor cannot return an error, so a refusal traps the
        // instance; the pass fails with this message.
        if let Some(problem) = naming::kind_problem(&group, &kind) {
            wasmtime::bail!("a kind client for an invalid kind: {problem}");
        }
        if self.kind_clients >= self.kind_client_limit {
            wasmtime::bail!(
                "holds more than {} kind clients at once",
                self.kind_client_limit
            );
        }
        let handle = self
            .table
            .push(KindClientHandle(GroupKind::new(group, kind)))?;
        self.kind_clients += 1;
        Ok(handle)
    }

    async fn create(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
        spec: String,
        opts: wit::CreateOptions,
    ) -> HostResult<wit::ObjectResult> {
        with_kind!(self.writing(&handle, opts.owner), |client| reply(
            async {
                client
                    .create(&name, Json::parse(&spec)?, options(opts))
                    .await
            }
            .await
        ))
    }

    async fn get_or_create(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
        spec: String,
        opts: wit::CreateOptions,
    ) -> HostResult<(wit::ObjectResult, bool)> {
        with_kind!(self.writing(&handle, opts.owner), |client| reply(
            async {
                let spec = Json::parse(&spec)?;
                client.get_or_create(&name, spec, options(opts)).await
            }
            .await
        ))
    }

    async fn create_or_update(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
        spec: String,
        opts: wit::CreateOptions,
    ) -> HostResult<(wit::ObjectResult, bool)> {
        with_kind!(self.writing(&handle, opts.owner), |client| reply(
            async {
                let spec = Json::parse(&spec)?;
                client.create_or_update(&name, spec, options(opts)).await
            }
            .await
        ))
    }

    async fn get(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<wit::ObjectResult> {
        with_kind!(self.kind(&handle, StoreVerb::Read), |client| reply(
            client.get(id)
        ))
    }

    async fn get_by_name(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
    ) -> HostResult<wit::ObjectResult> {
        with_kind!(self.kind(&handle, StoreVerb::Read), |client| reply(
            client.get_by_name(&name)
        ))
    }

    async fn list(
        &mut self,
        handle: Resource<KindClientHandle>,
        after: Option<ObjectId>,
        limit: u32,
    ) -> HostResult<wit::Page> {
        with_kind!(self.kind(&handle, StoreVerb::Read), |client| {
            let page = client.list_page(after, limit.min(MAX_PAGE) as usize);
            Ok(page
                .map(|(objects, next)| wit::Page {
                    objects: objects.to_wit(),
                    next,
                })
                .map_err(convert::error))
        })
    }

    async fn update(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
        spec: String,
    ) -> HostResult<wit::ObjectResult> {
        with_kind!(self.writing(&handle, None), |client| reply(
            async { client.update(id, Json::parse(&spec)?).await }.await
        ))
    }

    async fn update_by_name(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
        spec: String,
    ) -> HostResult<wit::ObjectResult> {
        with_kind!(self.writing(&handle, None), |client| reply(
            async { client.update_by_name(&name, Json::parse(&spec)?).await }.await
        ))
    }

    async fn delete(&mut self, handle: Resource<KindClientHandle>, id: ObjectId) -> HostResult<()> {
        with_kind!(self.writing(&handle, None), |client| reply(
            client.delete(id).await
        ))
    }

    async fn delete_by_name(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
    ) -> HostResult<()> {
        with_kind!(self.writing(&handle, None), |client| reply(
            client.delete_by_name(&name).await
        ))
    }

    async fn get_owner(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<Option<wit::ObjectRef>> {
        with_kind!(self.reading(&handle, id), |client| reply(
            client.get_owner(id)
        ))
    }

    async fn list_dependencies(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<Vec<wit::ObjectRef>> {
        with_kind!(self.reading(&handle, id), |client| reply(
            client.list_dependencies(id)
        ))
    }

    async fn list_dependents(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<Vec<wit::ObjectRef>> {
        with_kind!(self.reading(&handle, id), |client| reply(
            client.list_dependents(id)
        ))
    }

    async fn list_owned(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<Vec<wit::ObjectRef>> {
        with_kind!(self.reading(&handle, id), |client| reply(
            client.list_owned(id)
        ))
    }

    async fn list_owned_objects(
        &mut self,
        handle: Resource<KindClientHandle>,
        owner: ObjectId,
    ) -> HostResult<Vec<wit::ObjectResult>> {
        // The owner is read too: the answer says what it owns.
        with_kind!(self.reading(&handle, owner), |client| reply(
            client.list_owned_objects(owner)
        ))
    }

    async fn list_events(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
        category: Option<String>,
        limit: Option<u32>,
    ) -> HostResult<Vec<wit::Event>> {
        with_kind!(self.reading(&handle, id), |client| {
            let mut filter = EventFilter::all();
            if let Some(category) = category {
                filter = filter.category(category);
            }
            // Unbounded, a long timeline would be copied whole into the
            // host and then the guest.
            filter = filter.limit(limit.unwrap_or(MAX_EVENTS).min(MAX_EVENTS) as usize);
            reply(client.list_events(id, &filter))
        })
    }

    async fn drop(&mut self, handle: Resource<KindClientHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        self.kind_clients = self.kind_clients.saturating_sub(1);
        Ok(())
    }
}

impl host::HostControllerClient for PluginState {
    async fn update_status(
        &mut self,
        handle: Resource<ControllerClientHandle>,
        status: String,
    ) -> HostResult<()> {
        let client = self.controller(&handle)?;
        reply(async { client.update_status_json(Json::parse(&status)?).await }.await)
    }

    async fn set_condition(
        &mut self,
        handle: Resource<ControllerClientHandle>,
        condition: wit::ConditionResult,
    ) -> HostResult<()> {
        let condition = convert::host_condition(condition);
        reply(self.controller(&handle)?.set_condition(condition).await)
    }

    async fn set_conditions(
        &mut self,
        handle: Resource<ControllerClientHandle>,
        conditions: Vec<wit::ConditionResult>,
    ) -> HostResult<()> {
        let conditions = conditions.into_iter().map(convert::host_condition);
        reply(
            self.controller(&handle)?
                .set_conditions(conditions.collect())
                .await,
        )
    }

    async fn delete_condition(
        &mut self,
        handle: Resource<ControllerClientHandle>,
        type_: String,
    ) -> HostResult<()> {
        reply(self.controller(&handle)?.delete_condition(&type_).await)
    }

    async fn add_event(
        &mut self,
        handle: Resource<ControllerClientHandle>,
        event: wit::EventSpec,
    ) -> HostResult<()> {
        let client = self.controller(&handle)?;
        reply(async { client.add_event(convert::event_spec(event)?).await }.await)
    }

    async fn add_finalizer(
        &mut self,
        handle: Resource<ControllerClientHandle>,
        finalizer: String,
    ) -> HostResult<()> {
        reply(self.controller(&handle)?.add_finalizer(&finalizer).await)
    }

    async fn delete_finalizer(
        &mut self,
        handle: Resource<ControllerClientHandle>,
        finalizer: String,
    ) -> HostResult<()> {
        reply(self.controller(&handle)?.delete_finalizer(&finalizer).await)
    }

    async fn add_dependency(
        &mut self,
        handle: Resource<ControllerClientHandle>,
        target: ObjectId,
    ) -> HostResult<()> {
        let client = self.controller(&handle)?;
        // Depending on an object reads it: its kind must be granted.
        let own = client.kind_client(client.group_kind().clone());
        if let Err(denied) = self.granted_on(&own, target, StoreVerb::Read) {
            return Ok(Err(denied));
        }
        reply(client.add_dependency(target).await)
    }

    async fn delete_dependency(
        &mut self,
        handle: Resource<ControllerClientHandle>,
        target: ObjectId,
    ) -> HostResult<()> {
        reply(self.controller(&handle)?.delete_dependency(target).await)
    }

    async fn has_incoming_edges(
        &mut self,
        handle: Resource<ControllerClientHandle>,
    ) -> HostResult<bool> {
        reply(self.controller(&handle)?.has_incoming_edges())
    }

    async fn get_owner(
        &mut self,
        handle: Resource<ControllerClientHandle>,
    ) -> HostResult<Option<wit::ObjectRef>> {
        reply(self.controller(&handle)?.get_owner())
    }

    async fn list_dependencies(
        &mut self,
        handle: Resource<ControllerClientHandle>,
    ) -> HostResult<Vec<wit::ObjectRef>> {
        reply(self.controller(&handle)?.list_dependencies())
    }

    async fn list_dependents(
        &mut self,
        handle: Resource<ControllerClientHandle>,
    ) -> HostResult<Vec<wit::ObjectRef>> {
        reply(self.controller(&handle)?.list_dependents())
    }

    async fn list_owned(
        &mut self,
        handle: Resource<ControllerClientHandle>,
    ) -> HostResult<Vec<wit::ObjectRef>> {
        reply(self.controller(&handle)?.list_owned())
    }

    async fn begin(&mut self, handle: Resource<ControllerClientHandle>) -> HostResult<()> {
        reply(self.controller(&handle)?.begin().await)
    }

    async fn commit(&mut self, handle: Resource<ControllerClientHandle>) -> HostResult<()> {
        reply(self.controller(&handle)?.commit().await)
    }

    async fn rollback(&mut self, handle: Resource<ControllerClientHandle>) -> HostResult<()> {
        reply(self.controller(&handle)?.rollback().await)
    }

    async fn drop(&mut self, handle: Resource<ControllerClientHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}
