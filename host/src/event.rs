//! Events: a per-object, append-only log of observations, grouped into runs.
//!
//! Consecutive records sharing (category, type, reason) in one object's
//! timeline merge into one run: its count grows and its window widens, while
//! the message and detail are sampled (the latest wins). Each category is an
//! independent timeline, so unrelated concerns never break each other's runs.

use crate::error::{Error, Result};
use crate::json::Json;
use crate::naming::{label_problem, message_problem};
use crate::object::{ObjectId, Timestamp};

pub use beehive_types::{EventSpec, EventType};

/// Refuses an event the store would not keep: no reason, or a label or
/// message over the limits in [`crate::policy`].
pub(crate) fn validate(event: &EventSpec) -> Result<()> {
    if event.reason.is_empty() {
        return Err(Error::InvalidOption("an event needs a reason".into()));
    }
    let problem = label_problem("an event reason", &event.reason)
        .or_else(|| label_problem("an event category", &event.category))
        .or_else(|| message_problem("an event message", &event.message));
    if let Some(problem) = problem {
        return Err(Error::InvalidOption(problem));
    }
    Ok(())
}

/// One run of consecutive observations in an object's timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The run's id.
    pub id: i64,
    /// The object it is about.
    pub object_id: ObjectId,
    /// Its timeline.
    pub category: String,
    /// Normal or Warning.
    pub type_: EventType,
    /// The run's reason.
    pub reason: String,
    /// The latest occurrence's message.
    pub message: String,
    /// The latest occurrence's payload.
    pub detail: Option<Json>,
    /// Occurrences in this run, at least 1.
    pub count: i64,
    /// When the run started.
    pub first_at: Timestamp,
    /// When it was last extended.
    pub last_at: Timestamp,
    /// Its position in the store-wide sequence; an extend takes a new one.
    pub resource_version: i64,
    /// The trace of the pass that wrote the latest occurrence (hex), when
    /// the host traces.
    pub trace_id: Option<String>,
}

/// Which runs a read returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub(crate) category: Option<String>,
    pub(crate) type_: Option<EventType>,
    pub(crate) reason: Option<String>,
    pub(crate) limit: Option<usize>,
    pub(crate) since: Option<Timestamp>,
}

impl EventFilter {
    /// Every run.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only runs in `category` (`""` is the default timeline).
    pub fn category(mut self, category: impl Into<String>) -> Self {
        self.category = Some(category.into());
        self
    }

    /// Only runs of one type.
    pub fn type_(mut self, type_: EventType) -> Self {
        self.type_ = Some(type_);
        self
    }

    /// Only runs with this reason.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// At most the newest `limit` runs.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Only runs still active at or after `since`.
    pub fn since(mut self, since: Timestamp) -> Self {
        self.since = Some(since);
        self
    }
}
