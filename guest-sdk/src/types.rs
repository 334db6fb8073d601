//! The values a plugin works with, as plain Rust: the same on the host target
//! (for tests with the fake client) and inside a component.

use std::time::Duration;

use serde::de::DeserializeOwned;

/// Every way a host call can fail (the contract's `error`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // Each variant is the host's error of the same name.
pub enum Error {
    NotFound(String),
    NameTaken(String),
    DeletionPending(String),
    InvalidName,
    WrongKind(String),
    InvalidOption(String),
    InvalidDocument(String),
    Decode(String),
    NotLoaded(String),
    DuplicateConditionType(String),
    InvalidCondition(String),
    InvalidResult(String),
    ReconcileReturned,
    NoController(String),
    StoreInUse(String),
    DependencyCycle(Vec<String>),
    TransactionTimedOut,
    NoTransaction,
    ConcurrentNestedTransaction,
    StaleTransaction,
    SchemaVersionDowngrade(String),
    WatchTooOld,
    WatchTooNew,
    Stopped,
    Other(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NotFound(what) => write!(f, "not found: {what}"),
            Error::NameTaken(name) => write!(f, "the name is taken: {name}"),
            Error::DeletionPending(what) => write!(f, "being deleted: {what}"),
            Error::InvalidName => write!(f, "invalid name"),
            Error::WrongKind(why) => write!(f, "wrong kind: {why}"),
            Error::InvalidOption(why) => write!(f, "invalid option: {why}"),
            Error::InvalidDocument(why) => write!(f, "invalid document: {why}"),
            Error::Decode(why) => write!(f, "does not decode: {why}"),
            Error::NotLoaded(what) => write!(f, "not loaded: {what}"),
            Error::DuplicateConditionType(type_) => {
                write!(f, "condition type {type_} given twice")
            }
            Error::InvalidCondition(why) => write!(f, "invalid condition: {why}"),
            Error::InvalidResult(why) => write!(f, "invalid result: {why}"),
            Error::ReconcileReturned => {
                write!(f, "the pass has returned; its client cannot be used")
            }
            Error::NoController(kind) => write!(f, "no controller reconciles {kind}"),
            Error::StoreInUse(why) => write!(f, "the store is in use: {why}"),
            Error::DependencyCycle(cycle) => write!(f, "dependency cycle: {}", cycle.join(" → ")),
            Error::TransactionTimedOut => write!(f, "the transaction timed out"),
            Error::NoTransaction => write!(f, "no transaction is open"),
            Error::ConcurrentNestedTransaction => {
                write!(f, "a nested transaction is already open")
            }
            Error::StaleTransaction => write!(f, "the transaction is stale"),
            Error::SchemaVersionDowngrade(why) => write!(f, "schema version downgrade: {why}"),
            Error::WatchTooOld => write!(f, "the watch position is too old"),
            Error::WatchTooNew => write!(f, "the watch position is in the future"),
            Error::Stopped => write!(f, "the host is stopping"),
            Error::Other(message) => write!(f, "{message}"),
        }
    }
}

impl Error {
    /// An error of the plugin's own, with `message`.
    pub fn msg(message: impl std::fmt::Display) -> Error {
        Error::Other(message.to_string())
    }
}

impl From<crate::http::HttpError> for Error {
    fn from(error: crate::http::HttpError) -> Error {
        Error::Other(format!("HTTP: {error}"))
    }
}

impl From<std::io::Error> for Error {
    fn from(error: std::io::Error) -> Error {
        Error::Other(error.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Error {
        Error::InvalidDocument(error.to_string())
    }
}

impl std::error::Error for Error {}

/// The result type of the SDK.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use beehive_types::{
    Action, Cadence, Condition, ConditionStatus, EventSpec, EventType, GroupKind, Meta, ObjectId,
    ObjectRef, Timestamp, Verdict,
};

/// An object as the untyped interface carries it: spec and status as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RawObject {
    /// Identity and metadata.
    pub meta: Meta,
    /// The spec, JSON text.
    pub spec: String,
    /// The status, JSON text.
    pub status: Option<String>,
}

/// An object with decoded spec and status.
#[derive(Clone, Debug, PartialEq)]
pub struct Object<Spec, Status> {
    /// Identity and metadata.
    pub meta: Meta,
    /// The desired state.
    pub spec: Spec,
    /// The observed state, once reported.
    pub status: Option<Status>,
}

impl<Spec, Status> Object<Spec, Status> {
    /// An object named `name` with `spec` and no status yet, as a unit test
    /// hands one to `reconcile`; the rest of its metadata is zero.
    pub fn new(name: impl Into<String>, spec: Spec) -> Self {
        Object {
            meta: Meta {
                name: name.into(),
                ..Meta::default()
            },
            spec,
            status: None,
        }
    }
}

impl<Spec: DeserializeOwned, Status: DeserializeOwned> Object<Spec, Status> {
    /// Decodes an untyped object.
    ///
    /// # Errors
    /// [`Error::Decode`] when the spec or status does not fit.
    pub fn decode(raw: &RawObject) -> Result<Self> {
        let spec = serde_json::from_str(&raw.spec)
            .map_err(|e| Error::Decode(format!("spec of {}: {e}", raw.meta.name)))?;
        let status = match &raw.status {
            Some(text) => Some(
                serde_json::from_str(text)
                    .map_err(|e| Error::Decode(format!("status of {}: {e}", raw.meta.name)))?,
            ),
            None => None,
        };
        Ok(Object {
            meta: raw.meta.clone(),
            spec,
            status,
        })
    }
}

/// What a plugin reconciles and how it wants to be driven.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Registration {
    /// The group (`""` for the core group).
    pub group: String,
    /// The kind.
    pub kind: String,
    /// Finalizers this controller owns.
    pub finalizers: Vec<String>,
    /// Passes at once (host default 1).
    pub concurrency: Option<u32>,
    /// When objects get passes besides the ones their writes push; unset
    /// values take the host's.
    pub cadence: Cadence,
    /// The spec schema version written.
    pub spec_schema_version: u32,
    /// The status schema version written.
    pub status_schema_version: u32,
    /// The CPU time one pass may spend in the plugin.
    pub pass_deadline: Option<Duration>,
}

impl Registration {
    /// A registration for `kind` in `group`.
    pub fn new(group: impl Into<String>, kind: impl Into<String>) -> Self {
        Registration {
            group: group.into(),
            kind: kind.into(),
            ..Default::default()
        }
    }

    /// Finalizers this controller owns.
    pub fn finalizers<I: IntoIterator<Item = S>, S: Into<String>>(mut self, finalizers: I) -> Self {
        self.finalizers = finalizers.into_iter().map(Into::into).collect();
        self
    }

    /// The CPU time one pass may spend in the plugin.
    pub fn pass_deadline(mut self, deadline: Duration) -> Self {
        self.pass_deadline = Some(deadline);
        self
    }

    /// The schema versions this release writes its specs and statuses at;
    /// older stored documents are upgraded through
    /// [`crate::Controller::convert_spec`] and
    /// [`crate::Controller::convert_status`] before a pass sees them.
    pub fn schema_versions(mut self, spec: u32, status: u32) -> Self {
        self.spec_schema_version = spec;
        self.status_schema_version = status;
        self
    }

    /// Passes at once.
    pub fn concurrency(mut self, workers: u32) -> Self {
        self.concurrency = Some(workers);
        self
    }

    /// The cadence this kind asks for. The operator's limits are a ceiling:
    /// a cadence faster than the host allows is slowed to it, and a zero
    /// owed-pass interval or backoff cap is refused at load.
    ///
    /// ```
    /// use beehive_guest::{Cadence, Registration};
    ///
    /// let registration = Registration::new("example.dev", "Connection")
    ///     .cadence(Cadence::new().startup_full_pass(true));
    /// assert_eq!(registration.cadence.startup_full_pass, Some(true));
    /// ```
    pub fn cadence(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
}
