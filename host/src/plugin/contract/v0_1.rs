//! Contract 0.1 (`host/wit-0.1`), as plugins built before 0.2 speak
//! it. A 0.1 plugin sees no labels, and keeps the ones an object has: its
//! creates carry none, so a create-or-update leaves them as they are. A
//! store denial crosses as `other`, with the message naming the policy
//! line, as 0.1 has no variant for it.

use wasmtime::component::Resource;

use crate::object::{ObjectId, RawObject, Timestamp};
use crate::plugin::state::{ControllerClientHandle, KindClientHandle, PluginState};
use crate::plugin::verbs::{self, Edges, Frame, NewObject, Outcome, Put, Target};

wasmtime::component::bindgen!({
    path: "wit-0.1",
    world: "plugin",
    // Host calls reach the store, which is async; trappable so a host-side
    // failure (a missing resource) can end the call.
    imports: { default: async | trappable },
    exports: { default: async },
    ownership: Borrowing { duplicate_if_necessary: true },
    with: {
        "beehive:controller/host.kind-client": crate::plugin::state::KindClientHandle,
        "beehive:controller/host.controller-client": crate::plugin::state::ControllerClientHandle,
    },
});

use self::beehive::controller::config;
use self::beehive::controller::host;
use self::beehive::controller::types as wit;

shared_contract!(not_granted: wit::Error::Other);

/// 0.1's registration in the newest version's record: its schemas, and
/// whether it migrates and validates, are read from its optional
/// interfaces after it loads.
pub(crate) fn registration(r: wit::Registration) -> super::v0_2::Registration {
    super::v0_2::Registration {
        group: r.group,
        kind: r.kind,
        finalizers: r.finalizers,
        concurrency: r.concurrency,
        owed_pass_interval_ms: r.owed_pass_interval_ms,
        full_pass_interval_ms: r.full_pass_interval_ms,
        individual_pass_interval_ms: r.individual_pass_interval_ms,
        startup_full_pass: r.startup_full_pass,
        max_retry_interval_ms: r.max_retry_interval_ms,
        spec_schema_version: r.spec_schema_version,
        status_schema_version: r.status_schema_version,
        pass_deadline_ms: r.pass_deadline_ms,
        spec_schema: None,
        status_schema: None,
        validates: false,
        migrates: false,
    }
}

impl ToWit for RawObject {
    type Wit = wit::ObjectResult;

    fn to_wit(&self) -> wit::ObjectResult {
        let meta = &self.meta;
        wit::ObjectResult {
            id: meta.id,
            group: meta.group_kind.group.clone(),
            kind: meta.group_kind.kind.clone(),
            name: meta.name.clone(),
            spec: self.spec.as_str().to_string(),
            status: self.status.as_ref().map(|s| s.as_str().to_string()),
            generation: meta.generation,
            observed_generation: meta.observed_generation,
            observed_at_ms: meta.observed_at.map(Timestamp::as_millis),
            resource_version: meta.resource_version,
            deletion_requested_at_ms: meta.deletion_requested_at.map(Timestamp::as_millis),
            finalizers: meta.finalizers.clone(),
            conditions: meta.conditions.iter().map(condition_result).collect(),
            created_at_ms: meta.created_at.as_millis(),
            updated_at_ms: meta.updated_at.as_millis(),
        }
    }
}

/// The lists of an object a pass lends the guest, borrowed from it, for
/// [`ObjectLists::param`]: nothing is copied but into the guest's memory.
pub(crate) struct ObjectLists<'a> {
    finalizers: Vec<&'a str>,
    conditions: Vec<wit::ConditionParam<'a>>,
}

impl<'a> ObjectLists<'a> {
    pub(crate) fn of(raw: &'a RawObject) -> Self {
        ObjectLists {
            finalizers: raw.meta.finalizers.iter().map(String::as_str).collect(),
            conditions: raw.meta.conditions.iter().map(condition_param).collect(),
        }
    }

    /// `raw` (the object these lists came from) as the guest's parameter.
    pub(crate) fn param(&'a self, raw: &'a RawObject) -> wit::ObjectParam<'a> {
        let meta = &raw.meta;
        wit::ObjectParam {
            id: meta.id,
            group: &meta.group_kind.group,
            kind: &meta.group_kind.kind,
            name: &meta.name,
            spec: raw.spec.as_str(),
            status: raw.status.as_ref().map(|s| s.as_str()),
            generation: meta.generation,
            observed_generation: meta.observed_generation,
            observed_at_ms: meta.observed_at.map(Timestamp::as_millis),
            resource_version: meta.resource_version,
            deletion_requested_at_ms: meta.deletion_requested_at.map(Timestamp::as_millis),
            finalizers: &self.finalizers,
            conditions: &self.conditions,
            created_at_ms: meta.created_at.as_millis(),
            updated_at_ms: meta.updated_at.as_millis(),
        }
    }
}

/// What a 0.1 create writes: no labels, so an object's are kept.
fn new_object(name: String, spec: String, options: wit::CreateOptions) -> NewObject {
    NewObject {
        name,
        spec,
        owner: options.owner,
        finalizers: options.finalizers,
        labels: None,
    }
}

impl host::HostKindClient for PluginState {
    async fn new(
        &mut self,
        group: String,
        kind: String,
    ) -> wasmtime::Result<Resource<KindClientHandle>> {
        verbs::new_kind_client(self, group, kind)
    }

    async fn create(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
        spec: String,
        options: wit::CreateOptions,
    ) -> HostResult<wit::ObjectResult> {
        let new = new_object(name, spec, options);
        let created = verbs::put(self, &handle, Put::Create, new).await;
        reply(created.map(|answer| answer.map(|(object, _)| object)))
    }

    async fn get_or_create(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
        spec: String,
        options: wit::CreateOptions,
    ) -> HostResult<(wit::ObjectResult, bool)> {
        let new = new_object(name, spec, options);
        reply(verbs::put(self, &handle, Put::GetOrCreate, new).await)
    }

    async fn create_or_update(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
        spec: String,
        options: wit::CreateOptions,
    ) -> HostResult<(wit::ObjectResult, bool)> {
        let new = new_object(name, spec, options);
        reply(verbs::put(self, &handle, Put::CreateOrUpdate, new).await)
    }

    async fn get(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<wit::ObjectResult> {
        reply(verbs::get(self, &handle, Target::Id(id)))
    }

    async fn get_by_name(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
    ) -> HostResult<wit::ObjectResult> {
        reply(verbs::get(self, &handle, Target::Name(name)))
    }

    async fn list(
        &mut self,
        handle: Resource<KindClientHandle>,
        after: Option<ObjectId>,
        limit: u32,
    ) -> HostResult<wit::Page> {
        let page = verbs::list(self, &handle, after, limit, None)?;
        Ok(page
            .map(|(objects, next)| wit::Page {
                objects: objects.to_wit(),
                next,
            })
            .map_err(error))
    }

    async fn update(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
        spec: String,
    ) -> HostResult<wit::ObjectResult> {
        reply(verbs::update(self, &handle, Target::Id(id), spec).await)
    }

    async fn update_by_name(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
        spec: String,
    ) -> HostResult<wit::ObjectResult> {
        reply(verbs::update(self, &handle, Target::Name(name), spec).await)
    }

    async fn delete(&mut self, handle: Resource<KindClientHandle>, id: ObjectId) -> HostResult<()> {
        reply(verbs::delete(self, &handle, Target::Id(id)).await)
    }

    async fn delete_by_name(
        &mut self,
        handle: Resource<KindClientHandle>,
        name: String,
    ) -> HostResult<()> {
        reply(verbs::delete(self, &handle, Target::Name(name)).await)
    }

    async fn get_owner(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<Option<wit::ObjectRef>> {
        reply(verbs::owner_of(self, &handle, id))
    }

    async fn list_dependencies(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<Vec<wit::ObjectRef>> {
        reply(verbs::edges_of(self, &handle, id, Edges::Dependencies))
    }

    async fn list_dependents(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<Vec<wit::ObjectRef>> {
        reply(verbs::edges_of(self, &handle, id, Edges::Dependents))
    }

    async fn list_owned(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
    ) -> HostResult<Vec<wit::ObjectRef>> {
        reply(verbs::edges_of(self, &handle, id, Edges::Owned))
    }

    async fn list_owned_objects(
        &mut self,
        handle: Resource<KindClientHandle>,
        owner: ObjectId,
    ) -> HostResult<Vec<wit::ObjectResult>> {
        reply(verbs::owned_objects(self, &handle, owner))
    }

    async fn list_events(
        &mut self,
        handle: Resource<KindClientHandle>,
        id: ObjectId,
        category: Option<String>,
        limit: Option<u32>,
    ) -> HostResult<Vec<wit::Event>> {
        reply(verbs::events(self, &handle, id, category, limit))
    }

    async fn drop(&mut self, handle: Resource<KindClientHandle>) -> wasmtime::Result<()> {
        verbs::drop_kind_client(self, handle)
    }
}
