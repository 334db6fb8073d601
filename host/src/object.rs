//! The object model: identity, metadata, conditions and secondary lookups.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::json::Json;

pub use beehive_types::{
    Condition, ConditionStatus, GroupKind, Labels, Meta, ObjectId, ObjectRef, Requirement,
    Selector, SelectorError, Timestamp, label_problem, labels_problem,
};

/// Which secondary lookups a read loads alongside each object.
///
/// Build it with the chained constructors: `Loads::none().owner().dependents()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loads {
    pub(crate) owner: bool,
    pub(crate) dependencies: bool,
    pub(crate) dependents: bool,
    pub(crate) owned: bool,
    pub(crate) events: bool,
}

impl Loads {
    /// Load nothing beyond the object itself.
    pub fn none() -> Loads {
        Loads::default()
    }

    /// Every relation (edges; not events, which can be long: ask for
    /// [`Loads::events`] as well).
    pub fn all() -> Loads {
        Loads::none().owner().dependencies().dependents().owned()
    }

    /// Also load the owner (the outgoing `owned_by` edge).
    pub fn owner(mut self) -> Loads {
        self.owner = true;
        self
    }

    /// Also load the objects this one depends on (outgoing `depends_on`).
    pub fn dependencies(mut self) -> Loads {
        self.dependencies = true;
        self
    }

    /// Also load the objects that depend on this one (incoming `depends_on`).
    pub fn dependents(mut self) -> Loads {
        self.dependents = true;
        self
    }

    /// Also load the objects this one owns (incoming `owned_by`).
    pub fn owned(mut self) -> Loads {
        self.owned = true;
        self
    }

    /// Also load the object's event log, every timeline, newest first.
    pub fn events(mut self) -> Loads {
        self.events = true;
        self
    }

    pub(crate) fn any(self) -> bool {
        self.owner || self.dependencies || self.dependents || self.owned || self.events
    }
}

/// The secondary lookups a read filled in; `None` means "not requested".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Relations {
    pub(crate) owner: Option<Option<ObjectRef>>,
    pub(crate) dependencies: Option<Vec<ObjectRef>>,
    pub(crate) dependents: Option<Vec<ObjectRef>>,
    pub(crate) owned: Option<Vec<ObjectRef>>,
    pub(crate) events: Option<Vec<crate::event::Event>>,
}

impl Relations {
    pub(crate) fn owner(&self) -> Result<Option<&ObjectRef>> {
        match &self.owner {
            Some(owner) => Ok(owner.as_ref()),
            None => Err(Error::NotLoaded("owner")),
        }
    }

    pub(crate) fn events(&self) -> Result<&[crate::event::Event]> {
        self.events.as_deref().ok_or(Error::NotLoaded("events"))
    }

    pub(crate) fn refs<'a>(
        list: &'a Option<Vec<ObjectRef>>,
        relation: &'static str,
    ) -> Result<&'a [ObjectRef]> {
        list.as_deref().ok_or(Error::NotLoaded(relation))
    }
}

/// An object: its metadata, its desired state (`spec`) and what a controller
/// last reported (`status`). The type parameters are serde types for the
/// typed [`Client`](crate::Client) and canonical [`Json`] by default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object<Spec = Json, Status = Json> {
    /// Identity and metadata.
    pub meta: Meta,
    /// The desired state.
    pub spec: Spec,
    /// The observed state, once a controller has reported one.
    pub status: Option<Status>,
    pub(crate) relations: Relations,
    pub(crate) bookkeeping: Bookkeeping,
}

/// What the host keeps on a row beside its metadata: the schema versions
/// its documents were written at (shown in an [`ObjectDocument`]) and the
/// engine's pass bookkeeping (never shown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bookkeeping {
    /// The schema version the spec was written at; 0 for a kind that never
    /// declared one.
    pub(crate) spec_version: i64,
    /// The version the status was written at, as `spec_version`.
    pub(crate) status_version: i64,
    /// Passes owed by dependency wakes, drained by successful passes.
    pub(crate) reconcile_owed: i64,
    /// When the last pass asked to run again, kept across restarts.
    pub(crate) requeue_at: Option<Timestamp>,
    /// The trace context the latest spec write carried, if it carried one:
    /// the parent of the passes that reconcile that generation.
    pub(crate) trace: Option<crate::trace::TraceContext>,
}

/// An object with its spec and status as canonical JSON: what the untyped
/// client, the CLI and plugins work with.
pub type RawObject = Object;

impl<Spec, Status> Object<Spec, Status> {
    /// The object's id.
    pub fn id(&self) -> ObjectId {
        self.meta.id
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// The owner, if it has one.
    ///
    /// # Errors
    /// [`Error::NotLoaded`] unless the read asked for [`Loads::owner`].
    pub fn owner(&self) -> Result<Option<&ObjectRef>> {
        self.relations.owner()
    }

    /// The objects this one depends on.
    ///
    /// # Errors
    /// [`Error::NotLoaded`] unless the read asked for [`Loads::dependencies`].
    pub fn dependencies(&self) -> Result<&[ObjectRef]> {
        Relations::refs(&self.relations.dependencies, "dependencies")
    }

    /// The objects that depend on this one.
    ///
    /// # Errors
    /// [`Error::NotLoaded`] unless the read asked for [`Loads::dependents`].
    pub fn dependents(&self) -> Result<&[ObjectRef]> {
        Relations::refs(&self.relations.dependents, "dependents")
    }

    /// Its event log, newest first.
    ///
    /// # Errors
    /// [`Error::NotLoaded`] unless the read asked for [`Loads::events`].
    pub fn events(&self) -> Result<&[crate::event::Event]> {
        self.relations.events()
    }

    /// The objects this one owns.
    ///
    /// # Errors
    /// [`Error::NotLoaded`] unless the read asked for [`Loads::owned`].
    pub fn owned(&self) -> Result<&[ObjectRef]> {
        Relations::refs(&self.relations.owned, "owned")
    }
}

/// An object as one JSON document (camelCase keys): what the CLI prints and
/// sends over its socket, and what the write log keeps as a collected
/// object's final state. The metadata's keys sit beside `spec` and `status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectDocument {
    /// Identity and metadata.
    #[serde(flatten)]
    pub meta: Meta,
    /// The schema version the spec was written at; documents logged before
    /// versions were recorded hold none.
    #[serde(default, rename = "specVersion")]
    pub(crate) spec_version: i64,
    /// The version the status was written at, as `spec_version`.
    #[serde(default, rename = "statusVersion")]
    pub(crate) status_version: i64,
    /// The spec.
    pub spec: serde_json::Value,
    /// The status, if any was written.
    pub status: Option<serde_json::Value>,
}

impl From<&RawObject> for ObjectDocument {
    fn from(object: &RawObject) -> Self {
        ObjectDocument {
            meta: object.meta.clone(),
            spec_version: object.bookkeeping.spec_version,
            status_version: object.bookkeeping.status_version,
            spec: object.spec.to_value(),
            status: object.status.as_ref().map(Json::to_value),
        }
    }
}

impl ObjectDocument {
    /// The object the document describes, with no relations loaded and
    /// nothing owed.
    pub(crate) fn into_raw(self) -> RawObject {
        RawObject {
            meta: self.meta,
            spec: Json::from_value(&self.spec),
            status: self.status.as_ref().map(Json::from_value),
            relations: Relations::default(),
            bookkeeping: Bookkeeping {
                spec_version: self.spec_version,
                status_version: self.status_version,
                ..Bookkeeping::default()
            },
        }
    }
}

/// Returns `prefix` joined to a fresh UUIDv7, so generated names sharing a
/// prefix sort by creation time.
///
/// Collision-resistant, not collision-proof: a caller generating names should
/// retry a bounded number of times on [`Error::NameTaken`] and on nothing else.
pub fn generate_name(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::now_v7())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_keep_the_prefix_and_sort_by_time() {
        let a = generate_name("cache-");
        let b = generate_name("cache-");
        assert!(a.starts_with("cache-"));
        assert_eq!(a.len(), "cache-".len() + 36);
        assert_ne!(a, b);
        assert!(a < b);
    }

    #[test]
    fn kinds_print_as_kind_dot_group() {
        assert_eq!(GroupKind::core("Cluster").to_string(), "Cluster");
        assert_eq!(GroupKind::new("acme.com", "Db").to_string(), "Db.acme.com");
    }

    #[test]
    fn a_document_reads_back_as_the_object_it_was_made_from() {
        let meta = Meta {
            id: 7,
            group_kind: GroupKind::new("acme.com", "Db"),
            name: "orders".into(),
            generation: 3,
            observed_generation: Some(2),
            observed_at: Some(Timestamp::from_millis(5)),
            resource_version: 11,
            deletion_requested_at: None,
            finalizers: vec!["acme.com/backup".into()],
            conditions: vec![Condition::new("Ready", ConditionStatus::True).reason("Up")],
            labels: [("tier".to_string(), "db".to_string())].into(),
            created_at: Timestamp::from_millis(1),
            updated_at: Timestamp::from_millis(4),
        };
        let document = ObjectDocument {
            meta,
            spec_version: 1,
            status_version: 0,
            spec: serde_json::json!({"size": 2}),
            status: Some(serde_json::json!({"ready": true})),
        };
        let text = serde_json::to_string(&document).unwrap();
        assert!(text.contains("\"observedGeneration\":2"), "{text}");
        assert!(
            text.contains("\"group\":\"acme.com\",\"kind\":\"Db\""),
            "{text}"
        );
        assert!(!text.contains("reconcileOwed"), "{text}");
        let object = serde_json::from_str::<ObjectDocument>(&text)
            .unwrap()
            .into_raw();
        assert_eq!(object.meta.group_kind, GroupKind::new("acme.com", "Db"));
        assert_eq!(ObjectDocument::from(&object), document);
    }

    #[test]
    fn a_document_written_before_versions_existed_still_reads() {
        let text = r#"{"id":1,"group":"","kind":"K","name":"n","generation":1,
            "observedGeneration":null,"observedAt":null,"resourceVersion":1,
            "deletionRequestedAt":null,"finalizers":[],"conditions":[],
            "createdAt":0,"updatedAt":0,"spec":{},"status":null}"#;
        let object = serde_json::from_str::<ObjectDocument>(text)
            .unwrap()
            .into_raw();
        assert_eq!(object.bookkeeping.spec_version, 0);
    }
}
