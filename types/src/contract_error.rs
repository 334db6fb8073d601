use crate::GroupKind;
use crate::store_grants::{StoreVerb, not_granted_message, parse_not_granted};

/// Every way a host call can fail, as the contract's `error` variant names
/// it: what a plugin's calls return (the guest SDK's `Error`), and what the
/// host tells a plugin its own richer error was (`beehive::Error::contract`).
/// Each case carries the host's message where the contract gives it one.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // Each variant is the host's error of the same name.
pub enum ContractError {
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
    /// The plugin's policy grants no `verb` on `kind` (its `[store]`
    /// section). Crosses the contract as `other`, with the message
    /// [`crate::not_granted_message`] writes.
    NotGranted {
        kind: GroupKind,
        verb: StoreVerb,
    },
    Other(String),
}

impl std::fmt::Display for ContractError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContractError::NotFound(what) => write!(f, "not found: {what}"),
            ContractError::NameTaken(name) => write!(f, "the name is taken: {name}"),
            ContractError::DeletionPending(what) => write!(f, "being deleted: {what}"),
            ContractError::InvalidName => write!(f, "invalid name"),
            ContractError::WrongKind(why) => write!(f, "wrong kind: {why}"),
            ContractError::InvalidOption(why) => write!(f, "invalid option: {why}"),
            ContractError::InvalidDocument(why) => write!(f, "invalid document: {why}"),
            ContractError::Decode(why) => write!(f, "does not decode: {why}"),
            ContractError::NotLoaded(what) => write!(f, "not loaded: {what}"),
            ContractError::DuplicateConditionType(type_) => {
                write!(f, "condition type {type_} given twice")
            }
            ContractError::InvalidCondition(why) => write!(f, "invalid condition: {why}"),
            ContractError::InvalidResult(why) => write!(f, "invalid result: {why}"),
            ContractError::ReconcileReturned => {
                write!(f, "the pass has returned; its client cannot be used")
            }
            ContractError::NoController(kind) => write!(f, "no controller reconciles {kind}"),
            ContractError::StoreInUse(why) => write!(f, "the store is in use: {why}"),
            ContractError::DependencyCycle(cycle) => {
                write!(f, "dependency cycle: {}", cycle.join(" → "))
            }
            ContractError::TransactionTimedOut => write!(f, "the transaction timed out"),
            ContractError::NoTransaction => write!(f, "no transaction is open"),
            ContractError::ConcurrentNestedTransaction => {
                write!(f, "a nested transaction is already open")
            }
            ContractError::StaleTransaction => write!(f, "the transaction is stale"),
            ContractError::SchemaVersionDowngrade(why) => {
                write!(f, "schema version downgrade: {why}")
            }
            ContractError::WatchTooOld => write!(f, "the watch position is too old"),
            ContractError::WatchTooNew => write!(f, "the watch position is in the future"),
            ContractError::Stopped => write!(f, "the host is stopping"),
            ContractError::NotGranted { kind, verb } => {
                f.write_str(&not_granted_message(kind, *verb))
            }
            ContractError::Other(message) => write!(f, "{message}"),
        }
    }
}

impl ContractError {
    /// An error of the plugin's own, with `message`.
    pub fn msg(message: impl std::fmt::Display) -> ContractError {
        ContractError::Other(message.to_string())
    }

    /// The error the contract's `other(message)` stands for: a denial when
    /// the message is one, else [`ContractError::Other`].
    pub fn from_other(message: String) -> ContractError {
        match parse_not_granted(&message) {
            Some((kind, verb)) => ContractError::NotGranted { kind, verb },
            None => ContractError::Other(message),
        }
    }
}

impl From<std::io::Error> for ContractError {
    fn from(error: std::io::Error) -> ContractError {
        ContractError::Other(error.to_string())
    }
}

impl From<serde_json::Error> for ContractError {
    fn from(error: serde_json::Error) -> ContractError {
        ContractError::InvalidDocument(error.to_string())
    }
}

impl std::error::Error for ContractError {}
