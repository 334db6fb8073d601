use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Condition, Timestamp};

/// The store-assigned identity of one object incarnation. Never reused.
pub type ObjectId = i64;

/// A kind of object: `Kind` in the core group (`""`), or `Kind.group`.
///
/// ```
/// use beehive_types::GroupKind;
///
/// assert_eq!(GroupKind::new("acme.com", "Db").to_string(), "Db.acme.com");
/// assert_eq!(GroupKind::core("Cluster").to_string(), "Cluster");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupKind {
    /// `""` for the core group, a domain such as `acme.com` otherwise.
    pub group: String,
    /// The kind's name, e.g. `Cluster`.
    pub kind: String,
}

impl GroupKind {
    /// A kind in `group`.
    pub fn new(group: impl Into<String>, kind: impl Into<String>) -> Self {
        GroupKind {
            group: group.into(),
            kind: kind.into(),
        }
    }

    /// A kind in the core group.
    pub fn core(kind: impl Into<String>) -> Self {
        GroupKind::new("", kind)
    }
}

impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

/// A pointer to a related object, with the kind needed to address it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    /// The related object's id.
    pub id: ObjectId,
    /// Its kind.
    #[serde(flatten)]
    pub group_kind: GroupKind,
}

/// Metadata every object carries, whatever its spec and status types.
///
/// Serialized with camelCase keys and the kind as two keys, `group` and
/// `kind`, as the CLI prints an object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// The object's id.
    pub id: ObjectId,
    /// Its kind.
    #[serde(flatten)]
    pub group_kind: GroupKind,
    /// Its name: unique within the kind, immutable, never empty.
    pub name: String,
    /// Bumped by every spec write that changes the spec.
    pub generation: i64,
    /// The generation a controller last settled, if any.
    pub observed_generation: Option<i64>,
    /// When `observed_generation` was recorded. Not a heartbeat.
    pub observed_at: Option<Timestamp>,
    /// The store-wide write sequence at this object's last write.
    pub resource_version: i64,
    /// Set once deletion is requested; the row lingers until its finalizers clear.
    pub deletion_requested_at: Option<Timestamp>,
    /// What must be cleared before the row can be removed.
    pub finalizers: Vec<String>,
    /// Per-type observations reported by controllers.
    pub conditions: Vec<Condition>,
    /// Its labels: `key: value` pairs with Kubernetes' syntax, by which
    /// selectors find it. Setting them does not move the generation.
    #[serde(default, skip_serializing_if = "crate::Labels::is_empty")]
    pub labels: crate::Labels,
    /// When the object was created.
    pub created_at: Timestamp,
    /// When the object was last written.
    pub updated_at: Timestamp,
}

impl Meta {
    /// A `Kind/name` label for messages.
    pub fn label(&self) -> String {
        // The text of `format!("{}/{}", group_kind, name)`, built in one
        // allocation: every pass makes one, for its log lines.
        let GroupKind { group, kind } = &self.group_kind;
        let mut label = String::with_capacity(kind.len() + group.len() + self.name.len() + 2);
        label.push_str(kind);
        if !group.is_empty() {
            label.push('.');
            label.push_str(group);
        }
        label.push('/');
        label.push_str(&self.name);
        label
    }

    /// A reference to this object.
    pub fn to_ref(&self) -> ObjectRef {
        ObjectRef {
            id: self.id,
            group_kind: self.group_kind.clone(),
        }
    }

    /// True when the current generation has been settled by a controller.
    pub fn is_observed(&self) -> bool {
        self.observed_generation == Some(self.generation)
    }

    /// Whether deletion was requested.
    pub fn is_deleting(&self) -> bool {
        self.deletion_requested_at.is_some()
    }

    /// The condition of `type_`, if the object has one.
    ///
    /// ```
    /// use beehive_types::{Condition, ConditionStatus, Meta};
    ///
    /// let meta = Meta {
    ///     conditions: vec![Condition::new("Ready", ConditionStatus::True)],
    ///     ..Meta::default()
    /// };
    /// assert_eq!(meta.condition("Ready").map(|c| c.status), Some(ConditionStatus::True));
    /// assert!(meta.condition("Live").is_none());
    /// ```
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_serializes_with_camel_case_keys_and_the_kind_as_two_keys() {
        let meta = Meta {
            id: 7,
            group_kind: GroupKind::new("acme.com", "Db"),
            name: "orders".into(),
            observed_generation: Some(2),
            ..Meta::default()
        };
        let text = serde_json::to_string(&meta).unwrap();
        assert!(text.contains("\"observedGeneration\":2"), "{text}");
        assert!(
            text.contains("\"group\":\"acme.com\",\"kind\":\"Db\""),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Meta>(&text).unwrap(), meta);
    }

    #[test]
    fn a_label_reads_as_the_kind_then_the_name() {
        let named = |group: &str| Meta {
            group_kind: GroupKind::new(group, "Db"),
            name: "orders".into(),
            ..Meta::default()
        };
        for group in ["acme.com", ""] {
            let meta = named(group);
            assert_eq!(meta.label(), format!("{}/{}", meta.group_kind, meta.name));
        }
        assert_eq!(named("").label(), "Db/orders");
    }
}
