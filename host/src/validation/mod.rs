//! Checking a spec before it is written: the JSON Schema a kind's controller
//! declares, and the rules beyond a schema it may check itself.
//!
//! A native typed client refuses a spec that does not serialise from its
//! type; a plugin's kind has no such type on the host's side, so its plugin
//! declares the shape as a JSON Schema and the host checks every spec write
//! of the kind against it, whoever writes it. The schema is recorded with
//! the kind's registration, so a process with no host running (the CLI
//! writing to the store directly) checks by the same rules.
//!
//! Schemas come from plugins, which are not trusted: one is refused above
//! [`MAX_SCHEMA_BYTES`], `pattern`s compile with a linear-time regex engine
//! under a size cap, a `$ref` can reach only the schema itself (no file or
//! network resolution is built in), a schema whose evaluation would loop
//! without reading the spec is refused when it is compiled (`loops`), and
//! each check of a spec has a budget of steps and time (`budget`).

mod budget;
mod loops;

pub use budget::{MAX_SCHEMA_CHECK_TIME, MAX_SCHEMA_STEPS};

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::error::{Error, Result};
use crate::json::Json;
use crate::object::GroupKind;
use crate::sync::{read, write};

/// The largest schema, as JSON text, a kind may declare.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// The most violations one refusal lists; the rest are counted.
pub const MAX_VIOLATIONS_SHOWN: usize = 10;

/// The most bytes a compiled `pattern` may take.
const MAX_PATTERN_BYTES: usize = 1024 * 1024;

/// The JSON Schemas a kind's controller declares, as JSON text (draft
/// 2020-12 unless the schema's `$schema` names another draft).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KindSchemas {
    /// The spec's schema, at the controller's current spec version; `None`
    /// leaves specs unchecked.
    pub spec: Option<String>,
    /// The status's schema, shown by `explain`; statuses are written by the
    /// controller itself and are not checked against it.
    pub status: Option<String>,
}

/// One way a spec breaks a rule: the type a plugin's `validate` reports
/// too.
pub use beehive_types::Violation;

/// `violations` as one line, the first [`MAX_VIOLATIONS_SHOWN`] of them.
pub(crate) fn violations_line(violations: &[Violation]) -> String {
    let mut shown: Vec<String> = violations
        .iter()
        .take(MAX_VIOLATIONS_SHOWN)
        .map(Violation::to_string)
        .collect();
    if violations.len() > MAX_VIOLATIONS_SHOWN {
        shown.push(format!(
            "and {} more",
            violations.len() - MAX_VIOLATIONS_SHOWN
        ));
    }
    shown.join("; ")
}

/// Rules over a kind's specs that a schema cannot say (a port between 1
/// and 65535, two fields that exclude each other). Called for every spec
/// write of the kind that passed its schema, before anything is written.
pub trait SpecValidator: Send + Sync + 'static {
    /// The ways `spec` breaks the kind's rules; empty when it keeps them.
    ///
    /// # Errors
    /// Why the rules could not be checked (the validator failed); the
    /// write is refused with [`Error::ValidatorFailed`].
    fn validate(&self, spec: &Json) -> std::result::Result<Vec<Violation>, String>;
}

/// A compiled spec schema: what the host checks a kind's spec writes
/// against, for an embedder to check a spec the same way before writing it.
///
/// # Example
/// ```
/// use beehive::Json;
/// use beehive::validation::SpecSchema;
///
/// let schema = SpecSchema::compile(r#"{"type": "object", "required": ["name"]}"#)?;
/// let violations = schema.check(&Json::parse("{}")?);
/// assert_eq!(violations[0].path, "spec");
/// # Ok::<(), beehive::Error>(())
/// ```
#[derive(Debug)]
pub struct SpecSchema {
    validator: jsonschema::Validator,
}

impl SpecSchema {
    /// Compiles `text`, a JSON Schema (draft 2020-12 unless its `$schema`
    /// names another).
    ///
    /// # Errors
    /// [`Error::InvalidDocument`] saying why it is not a usable schema: too
    /// large, not JSON, not a schema, or a `$ref` that leaves the document.
    pub fn compile(text: &str) -> Result<SpecSchema> {
        Self::parse(text).map_err(Error::InvalidDocument)
    }

    /// The ways `spec` breaks the schema; empty when it keeps it.
    pub fn check(&self, spec: &Json) -> Vec<Violation> {
        self.violations(&spec.to_value())
    }

    /// [`SpecSchema::compile`], saying why not in words.
    pub(crate) fn parse(text: &str) -> std::result::Result<SpecSchema, String> {
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(format!(
                "the schema is {} bytes, above the limit of {MAX_SCHEMA_BYTES}",
                text.len()
            ));
        }
        let mut value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("the schema is not JSON: {e}"))?;
        loops::refuse_loops(&value)?;
        budget::mark_subschemas(&mut value);
        let patterns = jsonschema::PatternOptions::regex().size_limit(MAX_PATTERN_BYTES);
        let validator = jsonschema::options()
            .with_pattern_options(patterns)
            .with_keyword(budget::STEP_KEYWORD, budget::step_keyword)
            .build(&value)
            .map_err(|e| format!("not a usable JSON Schema: {e}"))?;
        Ok(SpecSchema { validator })
    }

    /// Whether `spec` keeps the schema, stopping at the first failure.
    ///
    /// # Errors
    /// The check's budget was spent first: a refusal saying so.
    fn keeps(&self, spec: &serde_json::Value) -> std::result::Result<bool, Vec<Violation>> {
        budget::within_budget(|| self.validator.is_valid(spec)).map_err(spent_budget)
    }

    /// The ways `spec` breaks the schema; a spent budget is one of them.
    pub(crate) fn violations(&self, spec: &serde_json::Value) -> Vec<Violation> {
        budget::within_budget(|| {
            self.validator
                .iter_errors(spec)
                .map(|error| Violation {
                    path: object_path(error.instance_path().as_str()),
                    message: error.to_string(),
                })
                .collect()
        })
        .unwrap_or_else(spent_budget)
    }
}

/// The refusal of a spec whose check spent its budget.
fn spent_budget(spent: budget::Spent) -> Vec<Violation> {
    vec![Violation {
        path: "spec".to_string(),
        message: spent.message(),
    }]
}

/// `spec.ports[0].name` for the JSON pointer `/ports/0/name`.
pub(crate) fn object_path(pointer: &str) -> String {
    let mut path = String::from("spec");
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        let plain = !segment.is_empty()
            && segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !segment.is_empty() && segment.chars().all(|c| c.is_ascii_digit()) {
            path.push_str(&format!("[{segment}]"));
        } else if plain {
            path.push('.');
            path.push_str(&segment);
        } else {
            path.push_str(&format!("[{segment:?}]"));
        }
    }
    path
}

/// What a kind's spec writes are checked against.
#[derive(Default)]
pub(crate) struct KindRules {
    pub(crate) schema: Option<SpecSchema>,
    pub(crate) validator: Option<Arc<dyn SpecValidator>>,
}

impl KindRules {
    fn is_empty(&self) -> bool {
        self.schema.is_none() && self.validator.is_none()
    }

    /// Checks `spec` of `what`: the schema first, then the validator on a
    /// spec the schema accepts. `what` is named only in a refusal: most
    /// writes pass, and naming one was two fifths of a small spec's check.
    fn check(&self, what: impl Fn() -> String, spec: &Json) -> Result<()> {
        let invalid = |violations: Vec<Violation>| Error::Invalid {
            what: what(),
            violations,
        };
        if let Some(schema) = &self.schema {
            let value = spec.to_value();
            // `keeps` stops at the first failure and builds no errors.
            match schema.keeps(&value) {
                Ok(true) => {}
                Ok(false) => return Err(invalid(schema.violations(&value))),
                Err(spent) => return Err(invalid(spent)),
            }
        }
        if let Some(validator) = &self.validator {
            let violations =
                validator
                    .validate(spec)
                    .map_err(|message| Error::ValidatorFailed {
                        what: what(),
                        message,
                    })?;
            if !violations.is_empty() {
                return Err(invalid(violations));
            }
        }
        Ok(())
    }
}

/// The rules of every kind one store's writers have met.
///
/// A registered controller installs its kind's rules; a kind this process
/// serves no controller for is checked by the schema recorded with its
/// registration, read once and kept.
#[derive(Default)]
pub(crate) struct Validations {
    by_kind: RwLock<HashMap<GroupKind, Arc<KindRules>>>,
}

impl Validations {
    /// Installs the rules of `group_kind`, replacing what it had.
    pub(crate) fn set(&self, group_kind: &GroupKind, rules: KindRules) {
        write(&self.by_kind).insert(group_kind.clone(), Arc::new(rules));
    }

    /// Checks a spec about to be written for `what`, of `group_kind`.
    /// `recorded` reads the spec schema recorded with the kind's
    /// registration; it is called once per kind, the first time the kind
    /// is met.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming each violation; [`Error::ValidatorFailed`]
    /// when the kind's validator could not run; what `recorded` returns.
    pub(crate) fn check(
        &self,
        group_kind: &GroupKind,
        what: impl Fn() -> String,
        spec: &Json,
        recorded: impl FnOnce() -> Result<Option<String>>,
    ) -> Result<()> {
        let known = read(&self.by_kind).get(group_kind).cloned();
        let rules = match known {
            Some(rules) => rules,
            None => {
                let rules = Arc::new(Self::from_record(group_kind, recorded()?)?);
                write(&self.by_kind)
                    .entry(group_kind.clone())
                    .or_insert(rules)
                    .clone()
            }
        };
        if rules.is_empty() {
            return Ok(());
        }
        rules.check(what, spec)
    }

    fn from_record(group_kind: &GroupKind, schema: Option<String>) -> Result<KindRules> {
        let schema = schema
            .map(|text| SpecSchema::parse(&text))
            .transpose()
            .map_err(|e| {
                Error::Internal(format!(
                    "the spec schema recorded for {group_kind} does not compile: {e}"
                ))
            })?;
        Ok(KindRules {
            schema,
            validator: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GREETING: &str = r#"{
        "type": "object",
        "properties": {"name": {"type": "string"}, "ports": {"type": "array", "items": {"type": "integer", "maximum": 65535}}},
        "required": ["name"],
        "additionalProperties": false
    }"#;

    fn violations(schema: &str, spec: &str) -> Vec<String> {
        let schema = SpecSchema::parse(schema).unwrap();
        schema
            .violations(&serde_json::from_str(spec).unwrap())
            .iter()
            .map(Violation::to_string)
            .collect()
    }

    #[test]
    fn a_violation_names_the_path_and_the_rule() {
        assert_eq!(
            violations(GREETING, r#"{"name": 5}"#),
            [r#"spec.name: 5 is not of type "string""#]
        );
        assert_eq!(
            violations(GREETING, r#"{"name": "a", "ports": [80, 70000]}"#),
            ["spec.ports[1]: 70000 is greater than the maximum of 65535"]
        );
        let missing = violations(GREETING, "{}");
        assert_eq!(missing.len(), 1);
        assert!(missing[0].starts_with("spec: "), "{missing:?}");
        assert!(
            missing[0].contains("\"name\" is a required property"),
            "{missing:?}"
        );
        assert!(violations(GREETING, r#"{"name": "a"}"#).is_empty());
    }

    #[test]
    fn paths_quote_keys_that_are_not_plain() {
        assert_eq!(object_path(""), "spec");
        assert_eq!(object_path("/a/0/b-c"), "spec.a[0].b-c");
        assert_eq!(object_path("/a.b/x~1y"), r#"spec["a.b"]["x/y"]"#);
    }

    #[test]
    fn a_schema_that_reaches_outside_itself_is_refused() {
        let remote = r#"{"$ref": "https://example.com/schema.json"}"#;
        assert!(SpecSchema::parse(remote).is_err());
        let file = r#"{"$ref": "file:///etc/passwd"}"#;
        assert!(SpecSchema::parse(file).is_err());
    }

    #[test]
    fn a_schema_too_large_or_not_json_is_refused() {
        let large = format!(r#"{{"description": "{}"}}"#, "x".repeat(MAX_SCHEMA_BYTES));
        assert!(
            SpecSchema::parse(&large)
                .unwrap_err()
                .contains("above the limit")
        );
        assert!(SpecSchema::parse("{").unwrap_err().contains("not JSON"));
        assert!(SpecSchema::parse(r#"{"type": 5}"#).is_err());
    }

    #[test]
    fn a_long_list_of_violations_is_cut() {
        let many: Vec<Violation> = (0..12)
            .map(|i| Violation {
                path: format!("spec.f{i}"),
                message: "bad".into(),
            })
            .collect();
        let line = violations_line(&many);
        assert!(line.ends_with("spec.f9: bad; and 2 more"), "{line}");
    }

    #[test]
    fn a_kind_met_first_is_checked_by_its_recorded_schema_read_once() {
        let validations = Validations::default();
        let gk = GroupKind::new("example.dev", "Greeting");
        let reads = std::cell::Cell::new(0);
        let recorded = || {
            reads.set(reads.get() + 1);
            Ok(Some(GREETING.to_string()))
        };
        let bad = Json::parse(r#"{"name": 5}"#).unwrap();
        let error = validations
            .check(&gk, || "Greeting/x".into(), &bad, recorded)
            .unwrap_err();
        assert!(matches!(error, Error::Invalid { .. }), "{error}");
        let good = Json::parse(r#"{"name": "a"}"#).unwrap();
        validations
            .check(&gk, || "Greeting/x".into(), &good, recorded)
            .unwrap();
        assert_eq!(reads.get(), 1);
    }

    /// 51 levels of an `anyOf` whose two branches both descend to the next
    /// level under `a` (the hostile plugin's attack on the checker).
    fn doubling_schema() -> String {
        let level = |i: usize| {
            let next = serde_json::json!({"$ref": format!("#/$defs/l{}", i + 1)});
            serde_json::json!({"anyOf": [
                {"type": "object", "properties": {"a": next}},
                {"type": "object", "properties": {"a": next}, "minProperties": 1},
            ]})
        };
        let mut defs: serde_json::Map<String, serde_json::Value> =
            (0..50).map(|i| (format!("l{i}"), level(i))).collect();
        defs.insert("l50".into(), serde_json::json!({"type": "string"}));
        serde_json::json!({"$ref": "#/$defs/l0", "$defs": defs}).to_string()
    }

    #[test]
    fn a_check_whose_work_doubles_per_level_is_cut_off_by_its_budget() {
        let schema = SpecSchema::parse(&doubling_schema()).unwrap();
        let nested = |depth: usize| {
            let text = (0..depth).fold("1".to_string(), |inner, _| format!(r#"{{"a": {inner}}}"#));
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        };
        // Shallow: a verdict, and the violation named.
        assert_eq!(schema.keeps(&nested(4)), Ok(false));
        assert!(!schema.violations(&nested(4)).is_empty());
        // As deep as a document may be: 2^50 visits, cut off.
        let deep = nested(crate::naming::MAX_DEPTH - 2);
        // Its steps run out first, or on a busy machine its time.
        let spent = |message: &str| message.contains("against the kind's schema took");
        let refusal = schema.keeps(&deep).unwrap_err();
        assert!(spent(&refusal[0].message), "{refusal:?}");
        let listed = schema.violations(&deep);
        assert_eq!(listed.len(), 1, "the error listing is cut off too");
        assert!(spent(&listed[0].message), "{listed:?}");
    }
}
