use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// The state a condition reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Nobody can currently tell.
    Unknown,
}

impl ConditionStatus {
    /// The stored spelling: `True`, `False` or `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// One per-type observation a controller reports about an object.
///
/// ```
/// use beehive_types::{Condition, ConditionStatus};
///
/// let ready = Condition::new("Ready", ConditionStatus::False)
///     .reason("DialTimeout")
///     .message("no answer from db-1:5432 in 2s");
/// assert_eq!(ready.status.as_str(), "False");
/// ```
///
/// Serialized with camelCase keys, as the rest of an object is; documents
/// written with the older snake_case keys still read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, unique per object, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// A machine-readable token, e.g. `DialTimeout`.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
    /// Valid only inside the process that wrote it: read back by a later
    /// process as `Unknown` with [`Condition::unconfirmed`] set.
    pub liveness: bool,
    /// Set on read when `status` is a downgrade of a liveness condition left by
    /// an earlier process, not a status anyone wrote. Ignored on write.
    pub unconfirmed: bool,
    /// When `status` last changed. Stamped by the store; ignored on write.
    #[serde(alias = "transitioned_at")]
    pub transitioned_at: Timestamp,
    /// When the condition was last written with different content. Stamped by
    /// the store; ignored on write.
    #[serde(alias = "updated_at")]
    pub updated_at: Timestamp,
}

impl Condition {
    /// A durable condition of `type_` with `status`, no reason and no message.
    pub fn new(type_: impl Into<String>, status: ConditionStatus) -> Self {
        Condition {
            type_: type_.into(),
            status,
            reason: String::new(),
            message: String::new(),
            liveness: false,
            unconfirmed: false,
            transitioned_at: Timestamp::default(),
            updated_at: Timestamp::default(),
        }
    }

    /// Sets the machine-readable reason.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// Sets the human-readable message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Marks the condition as describing something alive in this process, so
    /// a later process reads it as `Unknown` until a controller confirms it.
    pub fn liveness(mut self, liveness: bool) -> Self {
        self.liveness = liveness;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_camel_case_and_older_snake_case_documents_still_read() {
        let ready = Condition::new("Ready", ConditionStatus::True);
        let json = serde_json::to_value(&ready).unwrap();
        assert!(json.get("transitionedAt").is_some(), "{json}");
        assert!(json.get("updatedAt").is_some(), "{json}");
        assert!(json.get("transitioned_at").is_none(), "{json}");

        let mut older = json.clone();
        let object = older.as_object_mut().unwrap();
        let at = object.remove("transitionedAt").unwrap();
        object.insert("transitioned_at".into(), at);
        let updated = object.remove("updatedAt").unwrap();
        object.insert("updated_at".into(), updated);
        assert_eq!(serde_json::from_value::<Condition>(older).unwrap(), ready);
    }
}
