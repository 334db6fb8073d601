//! What a plugin's store holds, and the grant checks its host calls pass.

use std::sync::Arc;

use beehive_types::StoreVerb;

use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use beehive_types::ContractError;

use crate::client::RawClient;
use crate::engine::ControllerClient;
use crate::object::{GroupKind, ObjectId};
use crate::plugin::Policy;
use crate::plugin::clock::PassClock;
use crate::plugin::http::HttpGate;
use crate::plugin::memory::MemoryLimiter;
use crate::plugin::store_gate::StoreGate;

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

impl PluginState {
    fn pass_client(&self) -> Result<&ControllerClient, ContractError> {
        self.pass.as_ref().ok_or(ContractError::ReconcileReturned)
    }

    /// The kind client behind `handle`, joined to the current pass, once
    /// the plugin may `verb` its kind.
    pub(crate) fn kind(
        &mut self,
        handle: &Resource<KindClientHandle>,
        verb: StoreVerb,
    ) -> wasmtime::Result<Result<RawClient, ContractError>> {
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
    pub(crate) fn granted(
        &mut self,
        pass: &ControllerClient,
        kind: &GroupKind,
        verb: StoreVerb,
    ) -> Result<(), ContractError> {
        self.store_gate.check(pass.group_kind(), kind, verb)
    }

    /// Whether the plugin may `verb` object `id`, whatever kind it is: calls
    /// by id reach any kind, so the kind checked is the object's own. An id
    /// that names nothing passes: the call itself then says so.
    pub(crate) fn granted_on(
        &mut self,
        client: &RawClient,
        id: ObjectId,
        verb: StoreVerb,
    ) -> Result<(), ContractError> {
        let pass = self.pass_client()?.clone();
        match client.kind_of(id).map_err(|e| e.contract())? {
            Some(kind) => self.granted(&pass, &kind, verb),
            None => Ok(()),
        }
    }

    /// A kind-client call about object `id` (its edges, its events): the
    /// handle's client, once the plugin may read `id`'s kind.
    pub(crate) fn reading(
        &mut self,
        handle: &Resource<KindClientHandle>,
        id: ObjectId,
    ) -> wasmtime::Result<Result<RawClient, ContractError>> {
        let client = match self.kind(handle, StoreVerb::Read)? {
            Ok(client) => client,
            Err(error) => return Ok(Err(error)),
        };
        Ok(self
            .granted_on(&client, id, StoreVerb::Read)
            .map(|()| client))
    }

    /// A kind-client write, with the owner it names checked for read.
    pub(crate) fn writing(
        &mut self,
        handle: &Resource<KindClientHandle>,
        owner: Option<ObjectId>,
    ) -> wasmtime::Result<Result<RawClient, ContractError>> {
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
