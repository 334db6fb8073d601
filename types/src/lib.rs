//! The vocabulary a Beehive host and its Rust plugins share.
//!
//! An object carries [`Meta`] (its identity, [`GroupKind`] and generations)
//! and points at others with [`ObjectRef`]s. A controller reports what it
//! observed as [`Condition`]s and [`EventSpec`]s, says what happens after a
//! pass with an [`Action`], and asks how often its kind is revisited with a
//! [`Cadence`]; a host call that fails says why with a [`ContractError`].
//! Those types mean the same thing whether the controller is
//! embedded in a Rust application (the `beehive` crate) or runs as a plugin
//! (the `beehive-guest` SDK), so both re-export them from here and neither
//! can drift from the other. Nothing in this crate touches the store or a
//! runtime: it builds for `wasm32-wasip2` as well as for the host.

mod action;
mod cadence;
mod condition;
mod contract_error;
mod event;
mod labels;
mod object;
mod store_grants;
mod time;
mod violation;

pub use action::{Action, Verdict};
pub use cadence::Cadence;
pub use condition::{Condition, ConditionStatus};
pub use contract_error::ContractError;
pub use event::{EventSpec, EventType};
pub use labels::{
    Labels, MAX_LABELS, Requirement, Selector, SelectorError, label_problem, labels_problem,
};
pub use object::{GroupKind, Meta, ObjectId, ObjectRef};
pub use store_grants::{
    KindPattern, NOT_GRANTED_PREFIX, StoreGrants, StoreVerb, not_granted_message, parse_not_granted,
};
pub use time::Timestamp;
pub use violation::Violation;
