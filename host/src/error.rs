//! The one error type of the library.
//!
//! Every variant a caller is expected to branch on is a sentinel named after
//! the condition, matchable with `matches!(err, Error::NotFound { .. })`; the
//! payload is context for the message, not something to parse.

use crate::object::ObjectId;
use beehive_types::ContractError;

/// Everything that can go wrong in Beehive.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No object matches: a missing id, an id of another kind on a read, or a
    /// name nothing of this kind holds.
    #[error("not found: {what}")]
    NotFound {
        /// What was looked for, e.g. `Cluster/prod` or `object 42`.
        what: String,
    },

    /// The name is already held by a live or a deletion-pending row of the kind.
    #[error("name taken: {kind} {name:?} already exists")]
    NameTaken {
        /// The kind, written `Kind` or `Kind.group`.
        kind: String,
        /// The name that is held.
        name: String,
    },

    /// The object is being deleted, so its spec can no longer be written; the
    /// name stays held until garbage collection removes the row.
    #[error("deletion pending: {what} is being deleted")]
    DeletionPending {
        /// The object, e.g. `Cluster/prod`.
        what: String,
    },

    /// A name or kind breaks the naming policy (empty, too long, control
    /// characters; see [`crate::naming`]). The payload says which rule.
    #[error("invalid name: {0}")]
    InvalidName(String),

    /// A spec, status or event detail is larger than
    /// [`crate::naming::MAX_DOCUMENT_BYTES`]; nothing was written.
    #[error("document too large: {0}")]
    DocumentTooLarge(String),

    /// An id-keyed write addressed an object of another kind.
    #[error("wrong kind: object {id} is a {actual}, not a {expected}")]
    WrongKind {
        /// The id that was addressed.
        id: ObjectId,
        /// The kind the client is for.
        expected: String,
        /// The kind the object actually is.
        actual: String,
    },

    /// An option value has no meaning (a non-positive interval, an empty
    /// finalizer, an owner that does not exist).
    #[error("invalid option: {0}")]
    InvalidOption(String),

    /// A spec or status is not acceptable: not JSON, or not a JSON object.
    #[error("invalid document: {0}")]
    InvalidDocument(String),

    /// A stored or written document does not decode into the caller's type.
    /// On a write, nothing was committed.
    #[error("decode: {what} does not decode: {source}")]
    Decode {
        /// What failed to decode, e.g. `spec of Cluster/prod`.
        what: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },

    /// A spec breaks its kind's rules (the schema its controller declares,
    /// or the controller's own validator); nothing was written.
    #[error(
        "invalid spec of {what}: {}",
        crate::validation::violations_line(violations)
    )]
    Invalid {
        /// The object, e.g. `Greeting.example.dev/bad`.
        what: String,
        /// Each rule broken, with where.
        violations: Vec<crate::validation::Violation>,
    },

    /// The kind's validator could not check a spec (it trapped, ran out of
    /// time or memory, or is gone); nothing was written.
    #[error("validator failed for {what}: {message}")]
    ValidatorFailed {
        /// The object, e.g. `Service.example.dev/web`.
        what: String,
        /// Why.
        message: String,
    },

    /// One `set_conditions` call named the same condition type twice; nothing
    /// was written.
    #[error("duplicate condition type: {0:?} appears twice in one call")]
    DuplicateConditionType(String),

    /// A condition cannot be stored (an empty type); nothing was written.
    #[error("invalid condition: {0}")]
    InvalidCondition(String),

    /// A secondary lookup was read from an object whose read did not ask for it.
    #[error("not loaded: the {0} relation was not requested on this read")]
    NotLoaded(&'static str),

    /// A stored spec or status cannot be upgraded to this build's schema
    /// version: written by a newer build, or its migrator failed.
    #[error("cannot migrate {what}: {message}")]
    Migration {
        /// What failed, e.g. `spec of Cluster/prod`.
        what: String,
        /// Why.
        message: String,
    },

    /// A write would lower a document's schema version: the stored spec or
    /// status was written by a build that knows a newer version of the kind
    /// than this writer (one without the kind's migrator, or an older
    /// build). Nothing was written; identical bytes are never refused.
    #[error(
        "schema version downgrade: the {document} of {what} is at version {stored}; this writer knows version {writer}"
    )]
    SchemaVersionDowngrade {
        /// The object, e.g. `Cluster/prod`.
        what: String,
        /// `spec` or `status`.
        document: &'static str,
        /// The version stored.
        stored: i64,
        /// The version this writer would have written.
        writer: i64,
    },

    /// A spec names a schema version above the one its kind's plugin
    /// knows; nothing was written.
    #[error(
        "spec version too new: {what} is written at spec version {version}; its plugin knows up to {current}"
    )]
    SpecVersionTooNew {
        /// The object, e.g. `Greeting.example.dev/ada`.
        what: String,
        /// The version it names.
        version: i64,
        /// The newest version the kind's plugin reads.
        current: i64,
    },

    /// The host a watch was opened through has stopped: the stream ended
    /// with it. Open a new watch on a running host, or on the store.
    #[error("stopped: the host this watch was opened through has stopped")]
    Stopped,

    /// A watch's unread log entries were trimmed by retention: it cannot
    /// continue truthfully. Subscribe again for a fresh snapshot.
    #[error("watch too old: {kind}'s write log was trimmed past this watch's position")]
    WatchTooOld {
        /// The watched kind.
        kind: String,
    },

    /// A watch resumed from a position above everything the log has held:
    /// the position came from another store (a restored backup, a swapped
    /// file). Subscribe again without resuming.
    #[error("watch too new: the resume position is above {kind}'s write log")]
    WatchTooNew {
        /// The watched kind.
        kind: String,
    },

    /// A file given as a backup is not a whole one: its checksum file is
    /// missing or does not match, or SQLite finds it damaged.
    #[error("invalid backup: {0}")]
    InvalidBackup(String),

    /// The database was written by a newer build than this one.
    #[error(
        "schema too new: the database is at version {found}, this build knows up to {supported}"
    )]
    SchemaTooNew {
        /// The database's `user_version`.
        found: i64,
        /// The newest migration this build has.
        supported: i64,
    },

    /// A [`ControllerClient`](crate::ControllerClient) was used after the
    /// pass it was handed to had returned.
    #[error("reconcile returned: this controller client's pass is over")]
    ReconcileReturned,

    /// The kind has no controller registered in this host.
    #[error("no controller: nothing reconciles {0}")]
    NoController(String),

    /// Another host is already running over this database in this process.
    #[error("store in use: a host is already running over {0}")]
    StoreInUse(String),

    /// The host was started before, or has stopped; a host is one-shot.
    #[error("host already started: a host starts once")]
    AlreadyStarted,

    /// Stopping took longer than the caller allowed; the loops were cancelled
    /// and are ending.
    #[error("stop timed out: passes were still running after {0:?}")]
    StopTimedOut(std::time::Duration),

    /// A dependency edge would close a cycle; nothing was written. The cycle
    /// starts and ends at the object that declared the edge.
    #[error("dependency cycle: {}", cycle.join(" → "))]
    DependencyCycle {
        /// The objects on the cycle, as `Kind/name`.
        cycle: Vec<String>,
    },

    /// A transaction was held past its hold limit and was rolled back.
    #[error("transaction timed out: it was held past its limit and rolled back")]
    TransactionTimedOut,

    /// A commit or rollback with no transaction open.
    #[error("no transaction: there is no open transaction to end")]
    NoTransaction,

    /// The transaction carrying a write failed to commit; nothing was written.
    #[error("commit failed: {0}")]
    CommitFailed(String),

    /// This host's tenure on a PostgreSQL store ended (its lease expired or
    /// was taken over), so the database refused its commit: nothing was
    /// written, and the lease's new holder takes the same call.
    #[error("commit failed: {0}")]
    LeaseLost(String),

    /// A controller's own failure, made with [`Error::msg`]; nothing in
    /// Beehive returns it.
    #[error("{0}")]
    Controller(String),

    /// A broken invariant inside Beehive: a bug, reported instead of a panic.
    #[error("internal error: {0}")]
    Internal(String),

    /// The database reported an error. Its text is in this error's own
    /// message, not repeated as a source, so an error chain prints it once;
    /// the database library's own error type stays out of this API.
    #[error("{backend}: {message}")]
    Database {
        /// Which database: `sqlite` or `postgres`.
        backend: &'static str,
        /// What it said.
        message: String,
    },

    /// The database could not be reached, or went away during the call: a
    /// restart, a cut network, a connection ended from the server's side.
    /// The same call made again once the database answers may succeed. A
    /// write whose connection was lost at its COMMIT may or may not have
    /// committed: a create-or-update is safe to repeat; a create or a
    /// delete repeated may meet its own earlier effect.
    #[error("{backend}: {message}")]
    Unavailable {
        /// Which database: `postgres` (SQLite's file is always there).
        backend: &'static str,
        /// What went wrong, as the connection saw it.
        message: String,
    },

    /// A file-system operation failed (its text in the message, as above).
    #[error("io: {message}")]
    Io {
        /// The kind of failure, to match on.
        kind: std::io::ErrorKind,
        /// What the operating system said.
        message: String,
    },
}

impl From<std::io::Error> for Error {
    fn from(error: std::io::Error) -> Self {
        Error::Io {
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

/// The result type of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A failure of a controller's own, with `message`: what `reconcile`
    /// returns when something outside the store stopped the pass.
    pub fn msg(message: impl std::fmt::Display) -> Error {
        Error::Controller(message.to_string())
    }

    /// The case of the plugin contract's error this is, as a plugin is told
    /// it: the cases both sides name, with this error's message; what the
    /// contract has no case for (database and I/O failures among them) is
    /// `Other`.
    pub fn contract(&self) -> ContractError {
        use ContractError as C;
        let message = self.to_string();
        match self {
            Error::NotFound { .. } => C::NotFound(message),
            Error::NameTaken { .. } => C::NameTaken(message),
            Error::DeletionPending { .. } => C::DeletionPending(message),
            Error::InvalidName(_) => C::InvalidName,
            Error::DocumentTooLarge(_) | Error::InvalidDocument(_) => C::InvalidDocument(message),
            Error::SchemaVersionDowngrade { .. } => C::SchemaVersionDowngrade(message),
            Error::Stopped => C::Stopped,
            Error::WrongKind { .. } => C::WrongKind(message),
            Error::InvalidOption(_) => C::InvalidOption(message),
            Error::Decode { .. } => C::Decode(message),
            Error::NotLoaded(_) => C::NotLoaded(message),
            Error::DuplicateConditionType(_) => C::DuplicateConditionType(message),
            Error::InvalidCondition(_) => C::InvalidCondition(message),
            Error::ReconcileReturned => C::ReconcileReturned,
            Error::NoController(_) => C::NoController(message),
            Error::StoreInUse(_) => C::StoreInUse(message),
            Error::DependencyCycle { cycle } => C::DependencyCycle(cycle.clone()),
            Error::TransactionTimedOut => C::TransactionTimedOut,
            Error::NoTransaction => C::NoTransaction,
            _ => C::Other(message),
        }
    }

    /// Whether the database was out of reach ([`Error::Unavailable`]): the
    /// same call may succeed once it answers again.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }

    pub(crate) fn not_found(what: impl Into<String>) -> Self {
        Error::NotFound { what: what.into() }
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;

    #[test]
    fn a_host_error_names_its_contract_case_with_its_message() {
        let taken = Error::NameTaken {
            kind: "Db".into(),
            name: "orders".into(),
        };
        assert_eq!(
            taken.contract(),
            ContractError::NameTaken(taken.to_string())
        );
        let cycle = Error::DependencyCycle {
            cycle: vec!["A/a".into(), "A/a".into()],
        };
        assert_eq!(
            cycle.contract(),
            ContractError::DependencyCycle(vec!["A/a".into(), "A/a".into()])
        );
        // What the contract has no case for reaches a plugin as Other.
        let disk = Error::from(std::io::Error::other("disk full"));
        assert_eq!(disk.contract(), ContractError::Other(disk.to_string()));
    }

    #[test]
    fn a_store_error_says_its_cause_once_in_a_chain() {
        let io = Error::from(std::io::Error::other("disk full"));
        assert_eq!(io.to_string(), "io: disk full");
        assert!(std::error::Error::source(&io).is_none());
    }
}
