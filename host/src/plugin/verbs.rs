//! What each host call a plugin makes does, whichever contract version it
//! came through: the grant check, then the client call. Each version's
//! bindings (`contract/v0_1.rs`, `contract/v0_2.rs`) turn its own types into
//! these functions' arguments and their answers back into its types; what a
//! verb does is written here once.
//!
//! The adversary is the plugin: it names any kind and any object id it
//! likes, so a call by id is checked against the kind the id belongs to
//! (see [`StoreGate`](super::store_gate::StoreGate)).

use beehive_types::{ContractError, StoreVerb};
use wasmtime::component::Resource;

use crate::client::CreateOptions;
use crate::engine::ControllerClient;
use crate::event::{Event, EventFilter, EventSpec, EventType};
use crate::json::Json;
use crate::naming;
use crate::object::{Condition, GroupKind, Labels, ObjectId, ObjectRef, RawObject, Selector};
use crate::plugin::state::{ControllerClientHandle, KindClientHandle, PluginState};

/// The most objects one `list` call hands a plugin; it pages for more.
const MAX_PAGE: u32 = 500;

/// The most event runs one `list-events` call hands a plugin.
const MAX_EVENTS: u32 = 1000;

/// A host call's outcome: a trap (`Err`), or the contract's answer.
pub(crate) type Call<T> = wasmtime::Result<Result<T, ContractError>>;

/// A page of objects, and the id to continue after.
pub(crate) type Page = (Vec<RawObject>, Option<ObjectId>);

/// A host error as the contract carries it.
fn answer<T>(result: crate::Result<T>) -> Result<T, ContractError> {
    result.map_err(|e| e.contract())
}

/// A plugin's log line, at a level of the contract's.
pub(crate) fn log(state: &mut PluginState, level: tracing::Level, message: &str) {
    let object = match &state.pass {
        Some(pass) => format!("{}/{}", pass.group_kind(), state.object_name),
        None => String::new(),
    };
    let (plugin, object) = (&*state.plugin, object.as_str());
    // A plugin's line must never pass for the host's own.
    let message = naming::escape(message);
    match level {
        tracing::Level::TRACE => tracing::trace!(plugin, object, "{message}"),
        tracing::Level::DEBUG => tracing::debug!(plugin, object, "{message}"),
        tracing::Level::INFO => tracing::info!(plugin, object, "{message}"),
        tracing::Level::WARN => tracing::warn!(plugin, object, "{message}"),
        tracing::Level::ERROR => tracing::error!(plugin, object, "{message}"),
    }
    // Kept at the level the host logs at: lines the operator silenced
    // should not crowd out the ones they kept.
    if tracing::level_filters::LevelFilter::current() < level {
        return;
    }
    state.logs.record(super::LogLine {
        at: crate::object::Timestamp::now(),
        level: level.as_str(),
        plugin: plugin.to_string(),
        object: object.to_string(),
        message: message.into_owned(),
    });
}

/// The config value of `key`, if the operator gave one.
pub(crate) fn config_get(state: &PluginState, key: &str) -> Option<String> {
    state
        .policy
        .config
        .get(key)
        .map(|value| value.reveal().to_string())
}

/// Every config key the operator gave, sorted.
pub(crate) fn config_keys(state: &PluginState) -> Vec<String> {
    state.policy.config.keys().cloned().collect()
}

/// A new kind client. The constructor cannot return an error, so a
/// refusal traps the instance; the pass fails with its message.
pub(crate) fn new_kind_client(
    state: &mut PluginState,
    group: String,
    kind: String,
) -> wasmtime::Result<Resource<KindClientHandle>> {
    if let Some(problem) = naming::kind_problem(&group, &kind) {
        wasmtime::bail!("a kind client for an invalid kind: {problem}");
    }
    if state.kind_clients >= state.kind_client_limit {
        wasmtime::bail!(
            "holds more than {} kind clients at once",
            state.kind_client_limit
        );
    }
    let handle = state
        .table
        .push(KindClientHandle(GroupKind::new(group, kind)))?;
    state.kind_clients += 1;
    Ok(handle)
}

pub(crate) fn drop_kind_client(
    state: &mut PluginState,
    handle: Resource<KindClientHandle>,
) -> wasmtime::Result<()> {
    state.table.delete(handle)?;
    state.kind_clients = state.kind_clients.saturating_sub(1);
    Ok(())
}

/// Runs a kind-client call on the client its checks handed over, or
/// answers the refusal.
macro_rules! with_client {
    ($checked:expr, |$client:ident| $body:expr) => {{
        match $checked? {
            Ok($client) => $body,
            Err(error) => Ok(Err(error)),
        }
    }};
}

/// What a create, get-or-create or create-or-update writes.
pub(crate) struct NewObject {
    pub(crate) name: String,
    pub(crate) spec: String,
    pub(crate) owner: Option<ObjectId>,
    pub(crate) finalizers: Vec<String>,
    /// `None` leaves the labels of an object that exists as they are.
    pub(crate) labels: Option<Labels>,
}

impl NewObject {
    fn parts(self) -> crate::Result<(String, Json, CreateOptions)> {
        let mut options = CreateOptions::new().finalizers(self.finalizers);
        if let Some(owner) = self.owner {
            options = options.owner(owner);
        }
        if let Some(labels) = self.labels {
            options = options.labels(labels);
        }
        Ok((self.name, Json::parse(&self.spec)?, options))
    }
}

/// How a put treats an object that exists.
#[derive(Clone, Copy)]
pub(crate) enum Put {
    /// Creates; an object of the name is an error.
    Create,
    /// Returns the object that exists as it is.
    GetOrCreate,
    /// Updates the object that exists.
    CreateOrUpdate,
}

/// A create in one of its three forms: the object, and whether this call
/// created it.
pub(crate) async fn put(
    state: &mut PluginState,
    handle: &Resource<KindClientHandle>,
    put: Put,
    new: NewObject,
) -> Call<(RawObject, bool)> {
    with_client!(state.writing(handle, new.owner), |client| Ok(answer(
        async {
            let (name, spec, options) = new.parts()?;
            match put {
                Put::Create => Ok((client.create(&name, spec, options).await?, true)),
                Put::GetOrCreate => client.get_or_create(&name, spec, options).await,
                Put::CreateOrUpdate => client.create_or_update(&name, spec, options).await,
            }
        }
        .await
    )))
}

/// Which object a call by id or by name is about.
pub(crate) enum Target {
    Id(ObjectId),
    Name(String),
}

pub(crate) fn get(
    state: &mut PluginState,
    handle: &Resource<KindClientHandle>,
    target: Target,
) -> Call<RawObject> {
    with_client!(state.kind(handle, StoreVerb::Read), |client| Ok(answer(
        match target {
            Target::Id(id) => client.get(id),
            Target::Name(name) => client.get_by_name(&name),
        }
    )))
}

/// A page of the kind's objects after `after`, those `selector` matches
/// when it is given.
pub(crate) fn list(
    state: &mut PluginState,
    handle: &Resource<KindClientHandle>,
    after: Option<ObjectId>,
    limit: u32,
    selector: Option<&str>,
) -> Call<Page> {
    if limit == 0 {
        return Ok(Ok((Vec::new(), None)));
    }
    let limit = limit.min(MAX_PAGE) as usize;
    let selector = match selector.map(Selector::parse).transpose() {
        Ok(selector) => selector,
        Err(error) => {
            return Ok(Err(ContractError::InvalidOption(format!(
                "the selector {:?}: {error}",
                selector.unwrap_or_default()
            ))));
        }
    };
    with_client!(state.kind(handle, StoreVerb::Read), |client| Ok(answer(
        match &selector {
            Some(selector) => client.list_selected_page(selector, after, limit),
            None => client.list_page(after, limit),
        }
    )))
}

pub(crate) async fn update(
    state: &mut PluginState,
    handle: &Resource<KindClientHandle>,
    target: Target,
    spec: String,
) -> Call<RawObject> {
    with_client!(state.writing(handle, None), |client| Ok(answer(
        async {
            let spec = Json::parse(&spec)?;
            match target {
                Target::Id(id) => client.update(id, spec).await,
                Target::Name(name) => client.update_by_name(&name, spec).await,
            }
        }
        .await
    )))
}

pub(crate) async fn delete(
    state: &mut PluginState,
    handle: &Resource<KindClientHandle>,
    target: Target,
) -> Call<()> {
    with_client!(state.writing(handle, None), |client| Ok(answer(
        match target {
            Target::Id(id) => client.delete(id).await,
            Target::Name(name) => client.delete_by_name(&name).await,
        }
    )))
}

/// Which edges of an object a call lists.
#[derive(Clone, Copy)]
pub(crate) enum Edges {
    Dependencies,
    Dependents,
    Owned,
}

pub(crate) fn owner_of(
    state: &mut PluginState,
    handle: &Resource<KindClientHandle>,
    id: ObjectId,
) -> Call<Option<ObjectRef>> {
    with_client!(state.reading(handle, id), |client| Ok(answer(
        client.get_owner(id)
    )))
}

pub(crate) fn edges_of(
    state: &mut PluginState,
    handle: &Resource<KindClientHandle>,
    id: ObjectId,
    edges: Edges,
) -> Call<Vec<ObjectRef>> {
    with_client!(state.reading(handle, id), |client| Ok(answer(
        match edges {
            Edges::Dependencies => client.list_dependencies(id),
            Edges::Dependents => client.list_dependents(id),
            Edges::Owned => client.list_owned(id),
        }
    )))
}

pub(crate) fn owned_objects(
    state: &mut PluginState,
    handle: &Resource<KindClientHandle>,
    owner: ObjectId,
) -> Call<Vec<RawObject>> {
    // The owner is read too: the answer says what it owns.
    with_client!(state.reading(handle, owner), |client| Ok(answer(
        client.list_owned_objects(owner)
    )))
}

pub(crate) fn events(
    state: &mut PluginState,
    handle: &Resource<KindClientHandle>,
    id: ObjectId,
    category: Option<String>,
    limit: Option<u32>,
) -> Call<Vec<Event>> {
    with_client!(state.reading(handle, id), |client| {
        let mut filter = EventFilter::all();
        if let Some(category) = category {
            filter = filter.category(category);
        }
        // Unbounded, a long timeline would be copied whole into the host
        // and then the guest.
        filter = filter.limit(limit.unwrap_or(MAX_EVENTS).min(MAX_EVENTS) as usize);
        Ok(answer(client.list_events(id, &filter)))
    })
}

/// The pass client behind a controller-client handle.
pub(crate) fn pass_client(
    state: &PluginState,
    handle: &Resource<ControllerClientHandle>,
) -> wasmtime::Result<ControllerClient> {
    Ok(state.table.get(handle)?.0.clone())
}

/// A write of the pass's outcome on its own object.
pub(crate) enum Outcome {
    Status(String),
    Conditions(Vec<Condition>),
    DeleteCondition(String),
    Event(EventSpec),
    AddFinalizer(String),
    DeleteFinalizer(String),
    DeleteDependency(ObjectId),
}

pub(crate) async fn write_outcome(
    state: &mut PluginState,
    handle: &Resource<ControllerClientHandle>,
    outcome: Outcome,
) -> Call<()> {
    let client = pass_client(state, handle)?;
    Ok(answer(match outcome {
        Outcome::Status(status) => {
            async { client.update_status_json(Json::parse(&status)?).await }.await
        }
        Outcome::Conditions(conditions) => client.set_conditions(conditions).await,
        Outcome::DeleteCondition(type_) => client.delete_condition(&type_).await,
        Outcome::Event(event) => client.add_event(event).await,
        Outcome::AddFinalizer(finalizer) => client.add_finalizer(&finalizer).await,
        Outcome::DeleteFinalizer(finalizer) => client.delete_finalizer(&finalizer).await,
        Outcome::DeleteDependency(target) => client.delete_dependency(target).await,
    }))
}

/// Sets one condition: kept apart from [`Outcome::Conditions`], as the
/// engine merges one condition into the set rather than replacing it.
pub(crate) async fn set_condition(
    state: &mut PluginState,
    handle: &Resource<ControllerClientHandle>,
    condition: Condition,
) -> Call<()> {
    Ok(answer(
        pass_client(state, handle)?.set_condition(condition).await,
    ))
}

pub(crate) async fn add_dependency(
    state: &mut PluginState,
    handle: &Resource<ControllerClientHandle>,
    target: ObjectId,
) -> Call<()> {
    let client = pass_client(state, handle)?;
    // Depending on an object reads it: its kind must be granted.
    let own = client.kind_client(client.group_kind().clone());
    if let Err(denied) = state.granted_on(&own, target, StoreVerb::Read) {
        return Ok(Err(denied));
    }
    Ok(answer(client.add_dependency(target).await))
}

pub(crate) fn has_incoming_edges(
    state: &PluginState,
    handle: &Resource<ControllerClientHandle>,
) -> Call<bool> {
    Ok(answer(pass_client(state, handle)?.has_incoming_edges()))
}

pub(crate) fn own_owner(
    state: &PluginState,
    handle: &Resource<ControllerClientHandle>,
) -> Call<Option<ObjectRef>> {
    Ok(answer(pass_client(state, handle)?.get_owner()))
}

pub(crate) fn own_edges(
    state: &PluginState,
    handle: &Resource<ControllerClientHandle>,
    edges: Edges,
) -> Call<Vec<ObjectRef>> {
    let client = pass_client(state, handle)?;
    Ok(answer(match edges {
        Edges::Dependencies => client.list_dependencies(),
        Edges::Dependents => client.list_dependents(),
        Edges::Owned => client.list_owned(),
    }))
}

/// A step of the pass's transaction stack.
#[derive(Clone, Copy)]
pub(crate) enum Frame {
    Begin,
    Commit,
    Rollback,
}

pub(crate) async fn frame(
    state: &mut PluginState,
    handle: &Resource<ControllerClientHandle>,
    frame: Frame,
) -> Call<()> {
    let client = pass_client(state, handle)?;
    Ok(answer(match frame {
        Frame::Begin => client.begin().await,
        Frame::Commit => client.commit().await,
        Frame::Rollback => client.rollback().await,
    }))
}

pub(crate) fn drop_controller_client(
    state: &mut PluginState,
    handle: Resource<ControllerClientHandle>,
) -> wasmtime::Result<()> {
    state.table.delete(handle)?;
    Ok(())
}

/// An event a plugin records, its detail as JSON text.
pub(crate) fn event_spec(
    category: String,
    warning: bool,
    reason: String,
    message: String,
    detail: Option<String>,
) -> Result<EventSpec, ContractError> {
    let detail = match detail {
        Some(text) => Some(answer(Json::parse(&text))?.to_value()),
        None => None,
    };
    Ok(EventSpec {
        category,
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason,
        message,
        detail,
    })
}

/// Labels as a plugin hands them over; a key given twice is refused rather
/// than one of its values silently kept.
pub(crate) fn labels(
    pairs: impl IntoIterator<Item = (String, String)>,
) -> Result<Labels, ContractError> {
    let mut labels = Labels::new();
    for (key, value) in pairs {
        if labels.insert(key.clone(), value).is_some() {
            return Err(ContractError::InvalidOption(format!(
                "the label key {key:?} is given twice"
            )));
        }
    }
    Ok(labels)
}
