//! The values a plugin works with, as plain Rust: the same on the host target
//! (for tests with the fake client) and inside a component.

use std::time::Duration;

use serde::de::DeserializeOwned;

impl From<crate::http::HttpError> for Error {
    fn from(error: crate::http::HttpError) -> Error {
        Error::Other(format!("HTTP: {error}"))
    }
}

/// The result type of the SDK.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use beehive_types::{
    Action, Cadence, Condition, ConditionStatus, ContractError as Error, EventSpec, EventType,
    GroupKind, KindPattern, Labels, Meta, ObjectId, ObjectRef, Selector, StoreGrants, StoreVerb,
    Timestamp, Verdict,
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
        let (spec, status) = Self::documents(raw)?;
        Ok(Object {
            meta: raw.meta.clone(),
            spec,
            status,
        })
    }

    /// [`Object::decode`] of an object the caller gives up: its metadata
    /// moves instead of being copied.
    ///
    /// # Errors
    /// [`Error::Decode`] when the spec or status does not fit.
    pub fn decode_owned(raw: RawObject) -> Result<Self> {
        let (spec, status) = Self::documents(&raw)?;
        Ok(Object {
            meta: raw.meta,
            spec,
            status,
        })
    }

    /// The spec and status of `raw`, decoded.
    pub(crate) fn documents(raw: &RawObject) -> Result<(Spec, Option<Status>)> {
        let spec = serde_json::from_str(&raw.spec)
            .map_err(|e| Error::Decode(format!("spec of {}: {e}", raw.meta.name)))?;
        let status = match &raw.status {
            Some(text) => Some(
                serde_json::from_str(text)
                    .map_err(|e| Error::Decode(format!("status of {}: {e}", raw.meta.name)))?,
            ),
            None => None,
        };
        Ok((spec, status))
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
    /// The JSON Schema of the spec, as JSON text: the host checks every
    /// spec write of the kind against it before it commits.
    pub spec_schema: Option<String>,
    /// The JSON Schema of the status, as JSON text (shown by `explain`).
    pub status_schema: Option<String>,
    /// Whether the host calls [`crate::Controller::validate`] on every spec
    /// write of the kind that passed the schema.
    pub validates: bool,
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

    /// Declares the spec's JSON Schema, derived from `Spec` (usually the
    /// controller's [`crate::Controller::Spec`]) with
    /// `#[derive(schemars::JsonSchema)]`: doc comments become descriptions
    /// and serde attributes (`deny_unknown_fields`, `default`, `rename`)
    /// are honoured. The host then refuses, at `apply` and every other
    /// write, a spec that would not decode into `Spec`, naming the field and
    /// the rule. Describe the shape of [`Registration::schema_versions`]'s
    /// spec version.
    ///
    /// ```
    /// use beehive_guest::Registration;
    ///
    /// /// What a greeting asks for.
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// #[serde(deny_unknown_fields)]
    /// struct GreetingSpec {
    ///     /// Who to greet.
    ///     name: String,
    /// }
    ///
    /// let registration = Registration::new("example.dev", "Greeting").spec_schema::<GreetingSpec>();
    /// assert!(registration.spec_schema.unwrap().contains("Who to greet."));
    /// ```
    pub fn spec_schema<Spec: schemars::JsonSchema>(mut self) -> Self {
        self.spec_schema = Some(schema_text::<Spec>());
        self
    }

    /// Declares the status's JSON Schema, derived from `Status`, for
    /// `explain`.
    pub fn status_schema<Status: schemars::JsonSchema>(mut self) -> Self {
        self.status_schema = Some(schema_text::<Status>());
        self
    }

    /// Asks the host to call [`crate::Controller::validate`] on every spec
    /// write of the kind, after the schema: for rules a schema cannot say.
    /// It runs under the plugin's limits on an instance of its own that
    /// later calls may reuse, so keep it a pure function of the spec.
    pub fn validates(mut self) -> Self {
        self.validates = true;
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

/// `T`'s JSON Schema (draft 2020-12) as JSON text.
fn schema_text<T: schemars::JsonSchema>() -> String {
    schemars::schema_for!(T).as_value().to_string()
}

/// One way a spec breaks a controller's rules, as
/// [`crate::Controller::validate`] reports it: the host's own type.
pub use beehive_types::Violation;

#[cfg(test)]
mod schema_tests {
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    use super::*;

    /// A spec with the shapes plugins use: nested types, optionals, lists,
    /// enums, renamed and defaulted fields.
    #[derive(Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Spec {
        /// The port.
        port: u16,
        replicas: Option<u32>,
        #[serde(default)]
        tags: Vec<Tag>,
        mode: Mode,
    }

    #[derive(Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
    struct Tag {
        key: String,
        value: Option<String>,
    }

    #[derive(Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
    #[serde(rename_all = "kebab-case")]
    enum Mode {
        Fast,
        SafeAndSlow,
    }

    fn validator() -> jsonschema::Validator {
        let registration = Registration::new("example.dev", "Service").spec_schema::<Spec>();
        let schema: serde_json::Value =
            serde_json::from_str(&registration.spec_schema.unwrap()).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    }

    #[test]
    fn the_derived_schema_accepts_what_the_type_writes() {
        let validator = validator();
        let specs = [
            Spec {
                port: 80,
                replicas: None,
                tags: vec![],
                mode: Mode::Fast,
            },
            Spec {
                port: 65535,
                replicas: Some(3),
                tags: vec![Tag {
                    key: "team".into(),
                    value: Some("ada".into()),
                }],
                mode: Mode::SafeAndSlow,
            },
        ];
        for spec in specs {
            let value = serde_json::to_value(&spec).unwrap();
            assert!(validator.is_valid(&value), "{value}");
        }
        // A defaulted field may be left out, as the type's decoder allows.
        assert!(validator.is_valid(&json!({"port": 1, "mode": "fast"})));
    }

    #[test]
    fn the_derived_schema_refuses_what_the_type_cannot_read() {
        let validator = validator();
        let unreadable = [
            json!({"port": "80", "mode": "fast"}),
            json!({"port": 70000, "mode": "fast"}),
            json!({"port": 80, "mode": "medium"}),
            json!({"port": 80, "mode": "fast", "extra": 1}),
            json!({"mode": "fast"}),
            json!({"port": 80, "mode": "fast", "tags": [{"value": "x"}]}),
        ];
        for value in unreadable {
            assert!(
                serde_json::from_value::<Spec>(value.clone()).is_err(),
                "the type reads {value}"
            );
            assert!(!validator.is_valid(&value), "the schema accepts {value}");
        }
    }

    #[test]
    fn doc_comments_become_descriptions() {
        let registration = Registration::new("example.dev", "Service").spec_schema::<Spec>();
        assert!(registration.spec_schema.unwrap().contains("The port."));
    }

    #[test]
    fn an_owned_object_decodes_as_a_borrowed_one_does() {
        let raw = |spec: &str, status: Option<&str>| RawObject {
            meta: Meta {
                name: "web".into(),
                finalizers: vec!["example.dev/cleanup".into()],
                ..Meta::default()
            },
            spec: spec.into(),
            status: status.map(str::to_string),
        };
        let good = raw(r#"{"port": 80, "mode": "fast"}"#, Some(r#"{"up": true}"#));
        let decoded = Object::<Spec, serde_json::Value>::decode(&good).unwrap();
        assert_eq!(Object::decode_owned(good).unwrap(), decoded);
        let bad = raw(r#"{"port": "80"}"#, None);
        let refused = Object::<Spec, serde_json::Value>::decode(&bad).unwrap_err();
        let owned = Object::<Spec, serde_json::Value>::decode_owned(bad).unwrap_err();
        assert_eq!(owned.to_string(), refused.to_string());
        assert!(owned.to_string().contains("spec of web"), "{owned}");
    }
}
