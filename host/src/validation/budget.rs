//! The work budget of one spec check against a plugin's schema.
//!
//! A schema comes from a plugin, which is not trusted, and the work of
//! checking a spec against it is not bounded by the schema's size: an
//! `anyOf` whose branches both descend to the same place doubles the work
//! at every level of the spec, so a 21 KB schema and a spec 24 levels deep
//! never finish. The checker (`jsonschema`) has no budget of its own, so
//! the host gives it one: before compiling, every subschema gets one more
//! keyword, [`STEP_KEYWORD`], whose check takes one step from the budget of
//! the check in progress on this thread. Every visit of every subschema,
//! whichever way it was reached (`$ref`, `anyOf`, `items`, ...), passes
//! through it. Once the budget is spent, or the check's time is up, the
//! check ends at once and reports [`Spent`] instead of a verdict.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use jsonschema::paths::{LazyLocation, Location};
use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Value};

/// The keyword added to every subschema; a plugin's own use of the name is
/// replaced. A subschema's keywords are checked in the order of their
/// names and the check stops at the first that fails, so the step must
/// come first or a failing `anyOf` would hide the steps of everything
/// below it: `$$` sorts before every keyword that checks anything.
pub(crate) const STEP_KEYWORD: &str = "$$beehive-step";

/// The most subschema visits one check of one spec may make: about 30 ms
/// of work here, and far above what a spec of the largest size takes
/// against a schema whose work grows with the spec alone (a visit or a few
/// per value in it).
pub const MAX_SCHEMA_STEPS: u64 = 1_000_000;

/// The longest one check of one spec may take, whatever its steps cost (a
/// step may compare a long string with a long `enum`).
pub const MAX_SCHEMA_CHECK_TIME: Duration = Duration::from_millis(500);

/// How many steps pass between two readings of the clock.
const STEPS_PER_CLOCK_READING: u64 = 256;

/// Why a check gave no verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spent {
    /// It made [`MAX_SCHEMA_STEPS`] visits.
    Steps,
    /// It ran for [`MAX_SCHEMA_CHECK_TIME`].
    Time,
}

impl Spent {
    /// The refusal, in words a plugin author and an operator can act on.
    pub(crate) fn message(self) -> String {
        let what = match self {
            Spent::Steps => format!("took more than {MAX_SCHEMA_STEPS} schema steps"),
            Spent::Time => format!("took longer than {} ms", MAX_SCHEMA_CHECK_TIME.as_millis()),
        };
        format!(
            "checking this spec against the kind's schema {what}, the limit; \
             the schema's branches (anyOf, oneOf, $ref) repeat work at every \
             level of the spec: the plugin's author can make the branches \
             exclusive, or the spec can be made shallower"
        )
    }
}

/// The budget of the check running on this thread.
#[derive(Clone, Copy)]
struct Budget {
    steps_left: u64,
    deadline: Instant,
}

thread_local! {
    static BUDGET: Cell<Option<Budget>> = const { Cell::new(None) };
}

/// What a spent budget unwinds the check with.
struct Unwound(Spent);

/// Runs `check` under a fresh budget, restoring any budget it interrupts.
///
/// A spent budget ends the check by unwinding out of it: the checker's
/// error collection visits every keyword of a subschema whatever the
/// others said, so a failing step alone would not stop the doubling
/// below it. The unwinding starts with [`std::panic::resume_unwind`],
/// which runs no panic hook (nothing is printed), and is caught here;
/// the checker holds no lock or half-built state across a keyword's check.
///
/// # Errors
/// [`Spent`] when the check ran out of steps or time.
pub(crate) fn within_budget<T>(check: impl FnOnce() -> T) -> Result<T, Spent> {
    let budget = Budget {
        steps_left: MAX_SCHEMA_STEPS,
        deadline: Instant::now() + MAX_SCHEMA_CHECK_TIME,
    };
    let outer = BUDGET.with(|cell| cell.replace(Some(budget)));
    let verdict = panic::catch_unwind(AssertUnwindSafe(check));
    BUDGET.with(|cell| cell.set(outer));
    match verdict {
        Ok(verdict) => Ok(verdict),
        Err(payload) => match payload.downcast::<Unwound>() {
            Ok(unwound) => Err(unwound.0),
            Err(other) => panic::resume_unwind(other),
        },
    }
}

/// Takes one step from this thread's budget, unwinding the check when it
/// is spent. A thread with no budget (a schema checked outside
/// [`within_budget`]) is not limited.
fn take_step() {
    let spent = BUDGET.with(|cell| {
        let mut budget = cell.get()?;
        if budget.steps_left == 0 {
            return Some(Spent::Steps);
        }
        budget.steps_left -= 1;
        if budget.steps_left % STEPS_PER_CLOCK_READING == 0 && Instant::now() >= budget.deadline {
            return Some(Spent::Time);
        }
        cell.set(Some(budget));
        None
    });
    if let Some(spent) = spent {
        panic::resume_unwind(Box::new(Unwound(spent)));
    }
}

/// The keyword's check: one step per visit.
struct Step;

impl Keyword for Step {
    fn validate<'i>(
        &self,
        _instance: &'i Value,
        _location: &LazyLocation,
    ) -> Result<(), ValidationError<'i>> {
        take_step();
        Ok(())
    }

    fn is_valid(&self, _instance: &Value) -> bool {
        take_step();
        true
    }
}

/// The factory `jsonschema` calls for each subschema that has the keyword.
pub(crate) fn step_keyword<'a>(
    _parent: &'a Map<String, Value>,
    _value: &'a Value,
    _path: Location,
) -> Result<Box<dyn Keyword>, ValidationError<'a>> {
    Ok(Box::new(Step))
}

/// Adds [`STEP_KEYWORD`] to `schema` and every subschema in it, following
/// the keywords of drafts 4 to 2020-12 that hold subschemas. Values that
/// are data (`const`, `enum`, `default`, `examples`) are left as they are.
pub(crate) fn mark_subschemas(schema: &mut Value) {
    let Value::Object(map) = schema else {
        // `true` and `false` take no work worth counting.
        return;
    };
    map.remove(STEP_KEYWORD);
    // First in a map that keeps insertion order too.
    let mut marked = Map::with_capacity(map.len() + 1);
    marked.insert(STEP_KEYWORD.to_string(), Value::Bool(true));
    marked.append(map);
    *map = marked;
    for (keyword, value) in map.iter_mut() {
        for subschema in subschemas_mut(keyword, value) {
            mark_subschemas(subschema);
        }
    }
}

/// The subschemas `value`, under `keyword`, holds.
fn subschemas_mut<'v>(keyword: &str, value: &'v mut Value) -> Vec<&'v mut Value> {
    match (keyword, value) {
        (
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas",
            Value::Object(map),
        ) => map.values_mut().collect(),
        // Draft 7's `dependencies` mixes lists of names with subschemas.
        ("dependencies", Value::Object(map)) => {
            map.values_mut().filter(|v| v.is_object()).collect()
        }
        ("items" | "prefixItems" | "allOf" | "anyOf" | "oneOf", Value::Array(list)) => {
            list.iter_mut().collect()
        }
        (
            "items"
            | "additionalItems"
            | "additionalProperties"
            | "unevaluatedItems"
            | "unevaluatedProperties"
            | "contains"
            | "propertyNames"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contentSchema",
            value,
        ) => vec![value],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subschema_is_marked_and_data_is_not() {
        let mut schema = serde_json::json!({
            "properties": {"a": {"type": "string"}, "b": {"items": [{}, true]}},
            "anyOf": [{"$ref": "#/$defs/x"}],
            "$defs": {"x": {"not": {}}},
            "const": {"type": "object"},
            "enum": [{}]
        });
        mark_subschemas(&mut schema);
        let marked = |pointer: &str| schema.pointer(pointer).unwrap()[STEP_KEYWORD] == true;
        for pointer in [
            "",
            "/properties/a",
            "/properties/b",
            "/properties/b/items/0",
            "/anyOf/0",
            "/$defs/x",
            "/$defs/x/not",
        ] {
            assert!(marked(pointer), "{pointer}");
        }
        assert_eq!(schema["const"], serde_json::json!({"type": "object"}));
        assert_eq!(schema["enum"], serde_json::json!([{}]));
        assert_eq!(schema["properties"]["b"]["items"][1], true);
        assert_eq!(
            schema["anyOf"][0]
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap(),
            STEP_KEYWORD,
            "checked first"
        );
    }

    #[test]
    fn a_spent_budget_ends_the_check_and_a_new_check_starts_afresh() {
        let mut steps = 0_u64;
        let result = within_budget(|| {
            while steps < u64::MAX {
                take_step();
                steps += 1;
            }
        });
        // The steps run out first, unless a busy machine lets the clock.
        match result {
            Err(Spent::Steps) => assert_eq!(steps, MAX_SCHEMA_STEPS),
            Err(Spent::Time) => assert!(steps < MAX_SCHEMA_STEPS),
            Ok(()) => panic!("the budget was never spent"),
        }
        assert_eq!(within_budget(|| (0..10).for_each(|_| take_step())), Ok(()));
        take_step(); // outside a check, nothing is limited
    }

    #[test]
    fn other_panics_pass_through() {
        let caught = panic::catch_unwind(|| within_budget(|| panic::resume_unwind(Box::new(7))))
            .unwrap_err();
        assert_eq!(caught.downcast_ref::<i32>(), Some(&7));
    }
}
