//! Conversions between the host's types and the contract's.

use crate::error::Error;
use crate::event::{Event, EventSpec, EventType};
use crate::json::Json;
use crate::object::{Condition, ConditionStatus, ObjectRef, RawObject, Timestamp};
use crate::plugin::bindings::beehive::controller::types as wit;

/// A host value as the contract hands it to a plugin.
pub(crate) trait ToWit {
    /// The contract's type for it.
    type Wit;

    fn to_wit(&self) -> Self::Wit;
}

impl ToWit for RawObject {
    type Wit = wit::ObjectResult;

    fn to_wit(&self) -> wit::ObjectResult {
        object(self)
    }
}

impl ToWit for ObjectRef {
    type Wit = wit::ObjectRef;

    fn to_wit(&self) -> wit::ObjectRef {
        wit::ObjectRef {
            id: self.id,
            group: self.group_kind.group.clone(),
            kind: self.group_kind.kind.clone(),
        }
    }
}

impl ToWit for Event {
    type Wit = wit::Event;

    fn to_wit(&self) -> wit::Event {
        wit::Event {
            id: self.id,
            object_id: self.object_id,
            category: self.category.clone(),
            event_type: match self.type_ {
                EventType::Normal => wit::EventType::Normal,
                EventType::Warning => wit::EventType::Warning,
            },
            reason: self.reason.clone(),
            message: self.message.clone(),
            detail: self.detail.as_ref().map(|d| d.as_str().to_string()),
            count: self.count,
            first_at_ms: self.first_at.as_millis(),
            last_at_ms: self.last_at.as_millis(),
            resource_version: self.resource_version,
        }
    }
}

impl<T: ToWit> ToWit for Vec<T> {
    type Wit = Vec<T::Wit>;

    fn to_wit(&self) -> Vec<T::Wit> {
        self.iter().map(T::to_wit).collect()
    }
}

impl<T: ToWit> ToWit for Option<T> {
    type Wit = Option<T::Wit>;

    fn to_wit(&self) -> Option<T::Wit> {
        self.as_ref().map(T::to_wit)
    }
}

/// What `get-or-create` and `create-or-update` answer: the object, and
/// whether this call created it.
impl<T: ToWit> ToWit for (T, bool) {
    type Wit = (T::Wit, bool);

    fn to_wit(&self) -> (T::Wit, bool) {
        (self.0.to_wit(), self.1)
    }
}

/// Values the contract carries as they are.
macro_rules! as_is {
    ($($type:ty),*) => {$(
        impl ToWit for $type {
            type Wit = $type;

            fn to_wit(&self) -> $type {
                *self
            }
        }
    )*};
}

as_is!((), bool);

pub(crate) fn object(raw: &RawObject) -> wit::ObjectResult {
    let meta = &raw.meta;
    wit::ObjectResult {
        id: meta.id,
        group: meta.group_kind.group.clone(),
        kind: meta.group_kind.kind.clone(),
        name: meta.name.clone(),
        spec: raw.spec.as_str().to_string(),
        status: raw.status.as_ref().map(|s| s.as_str().to_string()),
        generation: meta.generation,
        observed_generation: meta.observed_generation,
        observed_at_ms: meta.observed_at.map(Timestamp::as_millis),
        resource_version: meta.resource_version,
        deletion_requested_at_ms: meta.deletion_requested_at.map(Timestamp::as_millis),
        finalizers: meta.finalizers.clone(),
        conditions: meta.conditions.iter().map(condition).collect(),
        created_at_ms: meta.created_at.as_millis(),
        updated_at_ms: meta.updated_at.as_millis(),
    }
}

/// The lists of an object a pass hands to the guest, borrowed from it, for
/// [`ObjectLists::param`]: a pass lends the object rather than copying it,
/// so nothing is copied but into the guest's memory.
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

/// A condition of an object a pass hands to the guest, borrowed.
fn condition_param(c: &Condition) -> wit::ConditionParam<'_> {
    wit::ConditionParam {
        type_: &c.type_,
        status: match c.status {
            ConditionStatus::True => wit::ConditionStatus::IsTrue,
            ConditionStatus::False => wit::ConditionStatus::IsFalse,
            ConditionStatus::Unknown => wit::ConditionStatus::Unknown,
        },
        reason: &c.reason,
        message: &c.message,
        liveness: c.liveness,
        unconfirmed: c.unconfirmed,
        transitioned_at_ms: c.transitioned_at.as_millis(),
        updated_at_ms: c.updated_at.as_millis(),
    }
}

pub(crate) fn condition(c: &Condition) -> wit::ConditionResult {
    wit::ConditionResult {
        type_: c.type_.clone(),
        status: match c.status {
            ConditionStatus::True => wit::ConditionStatus::IsTrue,
            ConditionStatus::False => wit::ConditionStatus::IsFalse,
            ConditionStatus::Unknown => wit::ConditionStatus::Unknown,
        },
        reason: c.reason.clone(),
        message: c.message.clone(),
        liveness: c.liveness,
        unconfirmed: c.unconfirmed,
        transitioned_at_ms: c.transitioned_at.as_millis(),
        updated_at_ms: c.updated_at.as_millis(),
    }
}

pub(crate) fn host_condition(c: wit::ConditionResult) -> Condition {
    let status = match c.status {
        wit::ConditionStatus::IsTrue => ConditionStatus::True,
        wit::ConditionStatus::IsFalse => ConditionStatus::False,
        wit::ConditionStatus::Unknown => ConditionStatus::Unknown,
    };
    Condition::new(c.type_, status)
        .reason(c.reason)
        .message(c.message)
        .liveness(c.liveness)
}

pub(crate) fn event_spec(e: wit::EventSpec) -> Result<EventSpec, Error> {
    let detail = match e.detail {
        Some(text) => Some(Json::parse(&text)?.to_value()),
        None => None,
    };
    Ok(EventSpec {
        category: e.category,
        type_: match e.event_type {
            wit::EventType::Normal => EventType::Normal,
            wit::EventType::Warning => EventType::Warning,
        },
        reason: e.reason,
        message: e.message,
        detail,
    })
}

/// The contract's error for a host error, in the bindings' type.
pub(crate) fn error(e: Error) -> wit::Error {
    contract_error(e.contract())
}

/// The contract's error, in the bindings' type.
pub(crate) fn contract_error(e: beehive_types::ContractError) -> wit::Error {
    use beehive_types::ContractError as C;
    use wit::Error as W;
    match e {
        C::NotFound(m) => W::NotFound(m),
        C::NameTaken(m) => W::NameTaken(m),
        C::DeletionPending(m) => W::DeletionPending(m),
        C::InvalidName => W::InvalidName,
        C::WrongKind(m) => W::WrongKind(m),
        C::InvalidOption(m) => W::InvalidOption(m),
        C::InvalidDocument(m) => W::InvalidDocument(m),
        C::Decode(m) => W::Decode(m),
        C::NotLoaded(m) => W::NotLoaded(m),
        C::DuplicateConditionType(m) => W::DuplicateConditionType(m),
        C::InvalidCondition(m) => W::InvalidCondition(m),
        C::InvalidResult(m) => W::InvalidResult(m),
        C::ReconcileReturned => W::ReconcileReturned,
        C::NoController(m) => W::NoController(m),
        C::StoreInUse(m) => W::StoreInUse(m),
        C::DependencyCycle(cycle) => W::DependencyCycle(cycle),
        C::TransactionTimedOut => W::TransactionTimedOut,
        C::NoTransaction => W::NoTransaction,
        C::ConcurrentNestedTransaction => W::ConcurrentNestedTransaction,
        C::StaleTransaction => W::StaleTransaction,
        C::SchemaVersionDowngrade(m) => W::SchemaVersionDowngrade(m),
        C::WatchTooOld => W::WatchTooOld,
        C::WatchTooNew => W::WatchTooNew,
        C::Stopped => W::Stopped,
        denied @ C::NotGranted { .. } => W::Other(denied.to_string()),
        C::Other(m) => W::Other(m),
    }
}
