use serde::{Deserialize, Serialize};

use serde_json::Value;

/// How an event reads: fine, or worth a look.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// Things are as they should be (✓).
    Normal,
    /// Something went wrong (✗).
    Warning,
}

impl EventType {
    /// The stored spelling: `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One observation, as a controller records it.
///
/// Consecutive records sharing (category, type, reason) in one object's
/// timeline merge into one run: its count grows, and the message and detail
/// are sampled (the latest wins).
///
/// ```
/// use beehive_types::EventSpec;
///
/// let event = EventSpec::warning("ProbeFailed")
///     .category("connection")
///     .message("db-1:5432 refused the connection")
///     .detail(serde_json::json!({ "attempt": 3 }));
/// assert_eq!(event.reason, "ProbeFailed");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// The timeline it belongs to; `""` is the default one.
    pub category: String,
    /// Normal or Warning.
    pub type_: EventType,
    /// A machine-readable token, e.g. `ProbeFailed`.
    pub reason: String,
    /// Human-readable text; sampled, not part of the run key.
    pub message: String,
    /// An optional machine-readable payload; sampled like the message.
    pub detail: Option<Value>,
}

impl EventSpec {
    /// A Normal event with `reason` in the default category.
    pub fn normal(reason: impl Into<String>) -> Self {
        Self::new(EventType::Normal, reason)
    }

    /// A Warning event with `reason` in the default category.
    pub fn warning(reason: impl Into<String>) -> Self {
        Self::new(EventType::Warning, reason)
    }

    fn new(type_: EventType, reason: impl Into<String>) -> Self {
        EventSpec {
            category: String::new(),
            type_,
            reason: reason.into(),
            message: String::new(),
            detail: None,
        }
    }

    /// Puts the event in `category`'s timeline.
    pub fn category(mut self, category: impl Into<String>) -> Self {
        self.category = category.into();
        self
    }

    /// Sets the message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Attaches a JSON payload.
    pub fn detail(mut self, detail: Value) -> Self {
        self.detail = Some(detail);
        self
    }
}
