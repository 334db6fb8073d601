//! The component side: the adapter that exports a [`Controller`] through the
//! generated bindings, and the host-backed clients.

use std::cell::OnceCell;
use std::marker::PhantomData;
use std::time::Duration;

use crate::bindings::beehive::controller::host;
use crate::bindings::beehive::controller::types as wit;
use crate::bindings::exports::beehive::controller::controller::Guest;
use crate::client::{Client, ControllerClient, CreateOptions, IfHeld, KindClient};
use crate::types::{
    Action, Condition, ConditionStatus, Error, EventSpec, EventType, GroupKind, Meta, Object,
    ObjectId, ObjectRef, RawObject, Result, Timestamp, Verdict,
};
use crate::{Controller, Level};

std::thread_local! {
    /// The kind this component reconciles: the objects a pass is handed
    /// do not carry it (contract 0.2 implies it), and asking the
    /// controller's registration on every pass would cost more than the
    /// pass's own decoding.
    static OWN_KIND: OnceCell<GroupKind> = const { OnceCell::new() };
}

/// The kind of controller `C`, read from its registration once.
fn own_kind<C: Controller>() -> GroupKind {
    OWN_KIND.with(|kind| {
        kind.get_or_init(|| {
            let registration = C::registration();
            GroupKind::new(registration.group, registration.kind)
        })
        .clone()
    })
}

/// Access to the plugin's one controller instance, which `export!` keeps in a
/// thread-local of the plugin's crate.
pub trait Instance: 'static {
    /// The controller type.
    type Controller: Controller;
    /// Runs `work` with the instance.
    fn with<R>(work: impl FnOnce(&Self::Controller) -> R) -> R;
}

/// Implements the exported interface for the controller behind `I`.
pub struct Adapter<I>(PhantomData<I>);

impl<I: Instance> Guest for Adapter<I> {
    fn describe() -> wit::Registration {
        let r = <I::Controller as Controller>::registration();
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
        wit::Registration {
            group: r.group,
            kind: r.kind,
            finalizers: r.finalizers,
            concurrency: r.concurrency,
            owed_pass_interval_ms: ms(r.cadence.owed_pass_interval),
            full_pass_interval_ms: ms(r.cadence.full_pass_interval),
            individual_pass_interval_ms: ms(r.cadence.individual_pass_interval),
            startup_full_pass: r.cadence.startup_full_pass,
            max_retry_interval_ms: ms(r.cadence.max_retry_interval),
            // The SDK exports converters for every plugin; they convert
            // only when the kind is versioned (the defaults refuse).
            migrates: r.spec_schema_version != 0 || r.status_schema_version != 0,
            spec_schema_version: r.spec_schema_version,
            status_schema_version: r.status_schema_version,
            pass_deadline_ms: ms(r.pass_deadline),
            spec_schema: r.spec_schema,
            status_schema: r.status_schema,
            validates: r.validates,
        }
    }

    fn reconcile(object: wit::Object, client: &host::ControllerClient) -> wit::ReconcileResult {
        let raw = raw_object(object, own_kind::<I::Controller>());
        let host_client = HostClient(client);
        // The metadata moves into the typed object: a pass copies nothing
        // it does not have to.
        let result = match Object::documents(&raw) {
            Ok((spec, status)) => {
                let object = Object {
                    meta: raw.meta,
                    spec,
                    status,
                };
                let client = Client::new(&host_client);
                I::with(|controller| match controller.reconcile(&client, &object) {
                    Ok(action) => action,
                    Err(error) => controller.error_policy(&object, &error),
                })
            }
            Err(error) => quarantine(&host_client, &raw, &error),
        };
        let (verdict, requeue_after) = result.into_parts();
        wit::ReconcileResult {
            verdict: match verdict {
                Verdict::Settled => wit::Verdict::Settled,
                Verdict::Unsettled => wit::Verdict::Unsettled,
                Verdict::Failed(message) => wit::Verdict::Failed(message),
            },
            requeue_after_ms: requeue_after.map(|d| d.as_millis() as u64),
        }
    }

    fn convert_spec(from_version: u32, raw: String) -> std::result::Result<String, String> {
        convert(&raw, |value| {
            I::Controller::convert_spec(from_version, value)
        })
    }

    fn convert_status(from_version: u32, raw: String) -> std::result::Result<String, String> {
        convert(&raw, |value| {
            I::Controller::convert_status(from_version, value)
        })
    }

    fn validate(spec: String) -> Vec<wit::Violation> {
        let violations = match serde_json::from_str(&spec) {
            Ok(spec) => I::with(|controller| controller.validate(&spec)),
            Err(error) => vec![crate::Violation::new("spec", error.to_string())],
        };
        violations
            .into_iter()
            .map(|v| wit::Violation {
                path: v.path,
                message: v.message,
            })
            .collect()
    }
}

/// The decode policy shared with the host's native controllers: an object
/// whose documents do not fit gets a `DecodeFailed` Warning event (the host
/// logs it once per generation and counts the object as failing) and comes
/// back on the owed-pass cadence instead of spinning on the backoff ladder.
fn quarantine(client: &HostClient<'_>, raw: &RawObject, error: &Error) -> Action {
    let event = EventSpec::warning("DecodeFailed").message(error.to_string());
    if let Err(failed) = client.add_event(event) {
        log(
            Level::Warn,
            &format!("cannot record DecodeFailed on {}: {failed}", raw.meta.name),
        );
    }
    Action::unsettled()
}

/// Runs a converter over JSON text.
fn convert(
    raw: &str,
    converter: impl FnOnce(serde_json::Value) -> std::result::Result<serde_json::Value, String>,
) -> std::result::Result<String, String> {
    let value = serde_json::from_str(raw).map_err(|e| format!("not JSON: {e}"))?;
    converter(value).map(|converted| converted.to_string())
}

pub(crate) fn log(level: Level, message: &str) {
    let level = match level {
        Level::Trace => host::Level::Trace,
        Level::Debug => host::Level::Debug,
        Level::Info => host::Level::Info,
        Level::Warn => host::Level::Warn,
        Level::Error => host::Level::Error,
    };
    host::log(level, message);
}

struct HostClient<'a>(&'a host::ControllerClient);

impl ControllerClient for HostClient<'_> {
    fn update_status_json(&self, status: String) -> Result<()> {
        self.0.update_status(&status).map_err(error)
    }

    fn set_conditions(&self, conditions: Vec<Condition>) -> Result<()> {
        let conditions: Vec<wit::Condition> = conditions.into_iter().map(wit_condition).collect();
        self.0.set_conditions(&conditions).map_err(error)
    }

    fn delete_condition(&self, type_: &str) -> Result<()> {
        self.0.delete_condition(type_).map_err(error)
    }

    fn add_event(&self, event: EventSpec) -> Result<()> {
        let event = wit::EventSpec {
            category: event.category,
            event_type: match event.type_ {
                EventType::Normal => wit::EventType::Normal,
                EventType::Warning => wit::EventType::Warning,
            },
            reason: event.reason,
            message: event.message,
            detail: event.detail.map(|detail| detail.to_string()),
        };
        self.0.add_event(&event).map_err(error)
    }

    fn add_finalizer(&self, finalizer: &str) -> Result<()> {
        self.0.add_finalizer(finalizer).map_err(error)
    }

    fn delete_finalizer(&self, finalizer: &str) -> Result<()> {
        self.0.delete_finalizer(finalizer).map_err(error)
    }

    fn add_dependency(&self, target: ObjectId) -> Result<()> {
        self.0.add_dependency(target).map_err(error)
    }

    fn delete_dependency(&self, target: ObjectId) -> Result<()> {
        self.0.delete_dependency(target).map_err(error)
    }

    fn has_incoming_edges(&self) -> Result<bool> {
        self.0.has_incoming_edges().map_err(error)
    }

    fn owner(&self) -> Result<Option<ObjectRef>> {
        Ok(self.0.get_owner().map_err(error)?.map(object_ref))
    }

    fn dependencies(&self) -> Result<Vec<ObjectRef>> {
        Ok(self
            .0
            .list_dependencies()
            .map_err(error)?
            .into_iter()
            .map(object_ref)
            .collect())
    }

    fn dependents(&self) -> Result<Vec<ObjectRef>> {
        Ok(self
            .0
            .list_dependents()
            .map_err(error)?
            .into_iter()
            .map(object_ref)
            .collect())
    }

    fn owned(&self) -> Result<Vec<ObjectRef>> {
        Ok(self
            .0
            .list_owned()
            .map_err(error)?
            .into_iter()
            .map(object_ref)
            .collect())
    }

    fn begin(&self) -> Result<()> {
        self.0.begin().map_err(error)
    }

    fn commit(&self) -> Result<()> {
        self.0.commit().map_err(error)
    }

    fn rollback(&self) -> Result<()> {
        self.0.rollback().map_err(error)
    }

    fn kind_client(&self, group: &str, kind: &str) -> Box<dyn KindClient> {
        Box::new(HostKindClient {
            client: host::KindClient::new(group, kind),
            group_kind: GroupKind::new(group, kind),
        })
    }
}

/// A kind client, and its kind: the objects it reads do not carry it.
struct HostKindClient {
    client: host::KindClient,
    group_kind: GroupKind,
}

impl HostKindClient {
    fn object(&self, object: wit::Object) -> RawObject {
        raw_object(object, self.group_kind.clone())
    }
}

fn options(options: CreateOptions) -> wit::CreateOptions {
    wit::CreateOptions {
        owner: options.owner,
        finalizers: options.finalizers,
        labels: options.labels.map(|labels| {
            labels
                .into_iter()
                .map(|(key, value)| wit::Label { key, value })
                .collect()
        }),
    }
}

impl KindClient for HostKindClient {
    fn create(&self, name: &str, spec: String, opts: CreateOptions) -> Result<RawObject> {
        let created = self.client.create(name, &spec, &options(opts));
        created.map(|o| self.object(o)).map_err(error)
    }

    fn put(
        &self,
        name: &str,
        spec: String,
        opts: CreateOptions,
        if_held: IfHeld,
    ) -> Result<(RawObject, bool)> {
        let opts = options(opts);
        let put = match if_held {
            IfHeld::Keep => self.client.get_or_create(name, &spec, &opts),
            IfHeld::Update => self.client.create_or_update(name, &spec, &opts),
        };
        let (object, created) = put.map_err(error)?;
        Ok((self.object(object), created))
    }

    fn get(&self, id: ObjectId) -> Result<RawObject> {
        self.client.get(id).map(|o| self.object(o)).map_err(error)
    }

    fn get_by_name(&self, name: &str) -> Result<RawObject> {
        let found = self.client.get_by_name(name);
        found.map(|o| self.object(o)).map_err(error)
    }

    fn list(
        &self,
        after: Option<ObjectId>,
        limit: u32,
        selector: Option<&str>,
    ) -> Result<(Vec<RawObject>, Option<ObjectId>)> {
        let page = self.client.list(after, limit, selector).map_err(error)?;
        let objects = page.objects.into_iter().map(|o| self.object(o));
        Ok((objects.collect(), page.next))
    }

    fn update(&self, id: ObjectId, spec: String) -> Result<RawObject> {
        let updated = self.client.update(id, &spec);
        updated.map(|o| self.object(o)).map_err(error)
    }

    fn delete(&self, id: ObjectId) -> Result<()> {
        self.client.delete(id).map_err(error)
    }

    fn delete_by_name(&self, name: &str) -> Result<()> {
        self.client.delete_by_name(name).map_err(error)
    }

    fn list_owned_objects(&self, owner: ObjectId) -> Result<Vec<RawObject>> {
        let owned = self.client.list_owned_objects(owner).map_err(error)?;
        Ok(owned.into_iter().map(|o| self.object(o)).collect())
    }
}

/// An object as the host handed it, of `group_kind` (which 0.2 does not
/// carry); an absent list is an empty one.
fn raw_object(object: wit::Object, group_kind: GroupKind) -> RawObject {
    RawObject {
        meta: Meta {
            id: object.id,
            group_kind,
            name: object.name,
            generation: object.generation,
            observed_generation: object.observed_generation,
            observed_at: object.observed_at_ms.map(Timestamp::from_millis),
            resource_version: object.resource_version,
            deletion_requested_at: object.deletion_requested_at_ms.map(Timestamp::from_millis),
            finalizers: object.finalizers.unwrap_or_default(),
            conditions: object
                .conditions
                .unwrap_or_default()
                .into_iter()
                .map(condition)
                .collect(),
            labels: object
                .labels
                .unwrap_or_default()
                .into_iter()
                .map(|label| (label.key, label.value))
                .collect(),
            created_at: Timestamp::from_millis(object.created_at_ms),
            updated_at: Timestamp::from_millis(object.updated_at_ms),
        },
        spec: object.spec,
        status: object.status,
    }
}

fn condition(c: wit::Condition) -> Condition {
    Condition {
        type_: c.type_,
        status: match c.status {
            wit::ConditionStatus::IsTrue => ConditionStatus::True,
            wit::ConditionStatus::IsFalse => ConditionStatus::False,
            wit::ConditionStatus::Unknown => ConditionStatus::Unknown,
        },
        reason: c.reason,
        message: c.message,
        liveness: c.liveness,
        unconfirmed: c.unconfirmed,
        transitioned_at: Timestamp::from_millis(c.transitioned_at_ms),
        updated_at: Timestamp::from_millis(c.updated_at_ms),
    }
}

fn wit_condition(c: Condition) -> wit::Condition {
    wit::Condition {
        type_: c.type_,
        status: match c.status {
            ConditionStatus::True => wit::ConditionStatus::IsTrue,
            ConditionStatus::False => wit::ConditionStatus::IsFalse,
            ConditionStatus::Unknown => wit::ConditionStatus::Unknown,
        },
        reason: c.reason,
        message: c.message,
        liveness: c.liveness,
        unconfirmed: c.unconfirmed,
        transitioned_at_ms: c.transitioned_at.as_millis(),
        updated_at_ms: c.updated_at.as_millis(),
    }
}

fn object_ref(r: wit::ObjectRef) -> ObjectRef {
    ObjectRef {
        id: r.id,
        group_kind: GroupKind::new(r.group, r.kind),
    }
}

fn error(e: wit::Error) -> Error {
    use wit::Error as W;
    match e {
        W::NotFound(m) => Error::NotFound(m),
        W::NameTaken(m) => Error::NameTaken(m),
        W::DeletionPending(m) => Error::DeletionPending(m),
        W::InvalidName => Error::InvalidName,
        W::WrongKind(m) => Error::WrongKind(m),
        W::InvalidOption(m) => Error::InvalidOption(m),
        W::InvalidDocument(m) => Error::InvalidDocument(m),
        W::Decode(m) => Error::Decode(m),
        W::NotLoaded(m) => Error::NotLoaded(m),
        W::DuplicateConditionType(m) => Error::DuplicateConditionType(m),
        W::InvalidCondition(m) => Error::InvalidCondition(m),
        W::InvalidResult(m) => Error::InvalidResult(m),
        W::ReconcileReturned => Error::ReconcileReturned,
        W::NoController(m) => Error::NoController(m),
        W::StoreInUse(m) => Error::StoreInUse(m),
        W::DependencyCycle(cycle) => Error::DependencyCycle(cycle),
        W::TransactionTimedOut => Error::TransactionTimedOut,
        W::NoTransaction => Error::NoTransaction,
        W::ConcurrentNestedTransaction => Error::ConcurrentNestedTransaction,
        W::StaleTransaction => Error::StaleTransaction,
        W::SchemaVersionDowngrade(m) => Error::SchemaVersionDowngrade(m),
        W::WatchTooOld => Error::WatchTooOld,
        W::WatchTooNew => Error::WatchTooNew,
        W::Stopped => Error::Stopped,
        // The message names the kind and verb; parsed back into them.
        W::NotGranted(m) | W::Other(m) => Error::from_other(m),
    }
}
