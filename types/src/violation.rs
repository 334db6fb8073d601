//! A way a spec breaks a rule: what a schema check and a controller's own
//! `validate` report, on both sides of the plugin boundary.

use serde::{Deserialize, Serialize};

/// One way a spec breaks a rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Where, as a path into the object: `spec` for the whole spec,
    /// `spec.ports[0]` for a part of it.
    pub path: String,
    /// The rule it breaks, in words (`must be between 1 and 65535`).
    pub message: String,
}

impl Violation {
    /// A violation at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Violation {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}
