//! Why a command failed, and the exit code that says so: scripts can tell
//! "not there" from "taken" from "too slow" from "no host" without reading
//! the message.

use serde::{Deserialize, Serialize};

/// What kind of failure; each has its own exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// Anything else (exit 1).
    Failure,
    /// The command line does not say what to do (exit 2, as clap's own).
    Usage,
    /// The object or kind does not exist (exit 3).
    NotFound,
    /// The store holds something that stops it: a taken name, a deletion
    /// in progress, a dependency cycle, another host (exit 4).
    Conflict,
    /// A `wait` (or another bounded wait) ran out of time (exit 5).
    Timeout,
    /// Nothing answers: the command needs a running host and none does, or
    /// the database is out of reach (exit 6).
    Unreachable,
    /// A spec breaks its kind's schema or its plugin's rules; nothing was
    /// written (exit 7).
    Invalid,
}

impl Code {
    /// The process exit code. 2 is clap's, for usage errors.
    pub fn exit_code(self) -> u8 {
        match self {
            Code::Failure => 1,
            Code::Usage => 2,
            Code::NotFound => 3,
            Code::Conflict => 4,
            Code::Timeout => 5,
            Code::Unreachable => 6,
            Code::Invalid => 7,
        }
    }
}

/// A command's failure: its code and one line for a person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub code: Code,
    pub message: String,
}

impl Failure {
    pub fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> Failure {
        Failure::new(Code::NotFound, message)
    }

    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(Code::Usage, message)
    }

    pub fn conflict(message: impl Into<String>) -> Failure {
        Failure::new(Code::Conflict, message)
    }

    pub fn timeout(message: impl Into<String>) -> Failure {
        Failure::new(Code::Timeout, message)
    }

    pub fn unreachable(message: impl Into<String>) -> Failure {
        Failure::new(Code::Unreachable, message)
    }
}

impl From<beehive::Error> for Failure {
    fn from(error: beehive::Error) -> Failure {
        use beehive::Error as E;
        let code = match &error {
            E::NotFound { .. } => Code::NotFound,
            E::NameTaken { .. }
            | E::DeletionPending { .. }
            | E::DependencyCycle { .. }
            | E::StoreInUse(_) => Code::Conflict,
            // Nothing took the call, and it may succeed elsewhere or later.
            E::Unavailable { .. } | E::LeaseLost(_) => Code::Unreachable,
            E::Invalid { .. }
            | E::ValidatorFailed { .. }
            | E::SpecVersionTooNew { .. }
            | E::InvalidBackup(_) => Code::Invalid,
            _ => Code::Failure,
        };
        Failure::new(code, error.to_string())
    }
}

impl Failure {
    /// `error`'s failure, its message prefixed with `about` unless the
    /// message already names it.
    pub fn about(about: &str, error: beehive::Error) -> Failure {
        let failure = Failure::from(error);
        if failure.message.contains(about) {
            return failure;
        }
        Failure::new(failure.code, format!("{about}: {}", failure.message))
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::new(Code::Failure, message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Failure {
        Failure::new(Code::Failure, message)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_map_to_codes() {
        let missing = Failure::from(beehive::Error::NotFound {
            what: "Greeting/x".into(),
        });
        assert_eq!(missing.code.exit_code(), 3);
        let taken = Failure::from(beehive::Error::NameTaken {
            kind: "Greeting".into(),
            name: "x".into(),
        });
        assert_eq!(taken.code, Code::Conflict);
        assert_eq!(Failure::from("boom").code.exit_code(), 1);
        let invalid = Failure::from(beehive::Error::Invalid {
            what: "Greeting/x".into(),
            violations: vec![],
        });
        assert_eq!(invalid.code.exit_code(), 7);
    }
}
