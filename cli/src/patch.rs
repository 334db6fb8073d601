//! `beehive patch`'s two patch formats: JSON merge patch (RFC 7386) and
//! JSON patch (RFC 6902, with RFC 6901 pointers).
//!
//! The adversary is a malformed or hostile patch from the command line or a
//! script: every failure is an error naming the operation and path, never a
//! panic; a patch is applied to a copy, so a failing operation leaves the
//! document as it was (RFC 6902 applies all operations or none). Documents
//! and patches are bounded by the size of a request.

use serde_json::{Map, Value};

/// Which format a patch is in.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum PatchType {
    /// JSON merge patch (RFC 7386): an object whose fields replace the
    /// document's, `null` removing one.
    Merge,
    /// JSON patch (RFC 6902): a list of `add`, `remove`, `replace`, `move`,
    /// `copy` and `test` operations on paths like `/spec/port`.
    Json,
}

/// `patch` applied to `document` as `kind` says.
///
/// # Errors
/// Why the patch does not apply, naming the operation and its path.
pub fn apply(document: &Value, kind: PatchType, patch: &Value) -> Result<Value, String> {
    match kind {
        PatchType::Merge => Ok(merge(document.clone(), patch)),
        PatchType::Json => json_patch(document.clone(), patch),
    }
}

/// RFC 7386: an object merges field by field, `null` removes, anything
/// else replaces.
fn merge(target: Value, patch: &Value) -> Value {
    let Value::Object(fields) = patch else {
        return patch.clone();
    };
    let mut target = match target {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    for (key, value) in fields {
        if value.is_null() {
            target.remove(key);
        } else {
            let current = target.remove(key).unwrap_or(Value::Null);
            target.insert(key.clone(), merge(current, value));
        }
    }
    Value::Object(target)
}

/// RFC 6902: the operations in order, on a copy.
fn json_patch(mut document: Value, patch: &Value) -> Result<Value, String> {
    let operations = patch
        .as_array()
        .ok_or("a JSON patch is a list of operations: [{\"op\": \"replace\", \"path\": \"/spec/port\", \"value\": 8080}]")?;
    for (i, operation) in operations.iter().enumerate() {
        apply_operation(&mut document, operation)
            .map_err(|why| format!("operation {}: {why}", i + 1))?;
    }
    Ok(document)
}

fn apply_operation(document: &mut Value, operation: &Value) -> Result<(), String> {
    let field = |name: &str| {
        operation
            .get(name)
            .ok_or_else(|| format!("no {name:?} field"))
    };
    let text = |name: &str| -> Result<&str, String> {
        field(name)?
            .as_str()
            .ok_or_else(|| format!("{name:?} is not a string"))
    };
    let op = text("op")?;
    let path = text("path")?;
    let at = |why: String| format!("{op} {path}: {why}");
    match op {
        "add" => add(document, path, field("value")?.clone()).map_err(at),
        "remove" => remove(document, path).map(drop).map_err(at),
        "replace" => {
            remove(document, path).map_err(at)?;
            add(document, path, field("value")?.clone()).map_err(at)
        }
        "move" => {
            let from = text("from")?;
            if path.starts_with(&format!("{from}/")) {
                return Err(at(format!("cannot move {from} into itself")));
            }
            let value = remove(document, from).map_err(at)?;
            add(document, path, value).map_err(at)
        }
        "copy" => {
            let from = text("from")?;
            let value = get(document, from).map_err(at)?.clone();
            add(document, path, value).map_err(at)
        }
        "test" => {
            let wanted = field("value")?;
            match get(document, path).map_err(at)? == wanted {
                true => Ok(()),
                false => Err(at(format!("the value is not {wanted}"))),
            }
        }
        other => Err(format!(
            "{other:?} is not an operation: add, remove, replace, move, copy or test"
        )),
    }
}

/// An RFC 6901 pointer's tokens: `/a~1b/c~0d` is `a/b`, `c~d`.
fn tokens(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let rest = pointer
        .strip_prefix('/')
        .ok_or_else(|| format!("{pointer:?} does not start with '/'"))?;
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// The value at `pointer`.
fn get<'v>(document: &'v Value, pointer: &str) -> Result<&'v Value, String> {
    let mut at = document;
    for token in tokens(pointer)? {
        at = match at {
            Value::Object(fields) => fields.get(&token),
            Value::Array(items) => index(&token, items.len())?.and_then(|i| items.get(i)),
            _ => None,
        }
        .ok_or_else(|| format!("nothing at {token:?}"))?;
    }
    Ok(at)
}

/// An array index token: a number without leading zeros, or `-` (one past
/// the end, `None`).
fn index(token: &str, len: usize) -> Result<Option<usize>, String> {
    if token == "-" {
        return Ok(None);
    }
    let valid = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    let i: usize = match valid {
        true => token
            .parse()
            .map_err(|_| format!("{token:?} is too large an index"))?,
        false => return Err(format!("{token:?} is not an array index")),
    };
    match i <= len {
        true => Ok(Some(i)),
        false => Err(format!("index {i} is past the end ({len} items)")),
    }
}

/// The parent of the pointer's last token, and that token.
fn parent<'v>(document: &'v mut Value, pointer: &str) -> Result<(&'v mut Value, String), String> {
    let mut tokens = tokens(pointer)?;
    let last = tokens
        .pop()
        .ok_or("the whole document cannot be added to or removed")?;
    let mut at = document;
    for token in tokens {
        at = match at {
            Value::Object(fields) => fields.get_mut(&token),
            Value::Array(items) => {
                let len = items.len();
                index(&token, len)?.and_then(|i| items.get_mut(i))
            }
            _ => None,
        }
        .ok_or_else(|| format!("nothing at {token:?}"))?;
    }
    Ok((at, last))
}

fn add(document: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    if pointer.is_empty() {
        *document = value;
        return Ok(());
    }
    let (parent, last) = parent(document, pointer)?;
    match parent {
        Value::Object(fields) => {
            fields.insert(last, value);
            Ok(())
        }
        Value::Array(items) => {
            let at = index(&last, items.len())?.unwrap_or(items.len());
            items.insert(at, value);
            Ok(())
        }
        _ => Err("its parent is neither an object nor a list".into()),
    }
}

fn remove(document: &mut Value, pointer: &str) -> Result<Value, String> {
    let (parent, last) = parent(document, pointer)?;
    match parent {
        Value::Object(fields) => fields
            .remove(&last)
            .ok_or_else(|| format!("nothing at {last:?}")),
        Value::Array(items) => match index(&last, items.len())? {
            Some(i) if i < items.len() => Ok(items.remove(i)),
            _ => Err(format!("nothing at {last:?}")),
        },
        _ => Err("its parent is neither an object nor a list".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patches_follow_rfc_7386() {
        // Examples from the RFC's appendix.
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (document, patch, merged) in cases {
            assert_eq!(apply(&document, PatchType::Merge, &patch).unwrap(), merged);
        }
    }

    #[test]
    fn json_patches_follow_rfc_6902() {
        let document = json!({"spec": {"port": 80, "tags": ["a", "b"], "a/b": 1}});
        let patch = json!([
            {"op": "test", "path": "/spec/port", "value": 80},
            {"op": "replace", "path": "/spec/port", "value": 8080},
            {"op": "add", "path": "/spec/tags/1", "value": "x"},
            {"op": "add", "path": "/spec/tags/-", "value": "z"},
            {"op": "remove", "path": "/spec/tags/0"},
            {"op": "copy", "from": "/spec/port", "path": "/spec/old"},
            {"op": "move", "from": "/spec/a~1b", "path": "/spec/moved"},
        ]);
        assert_eq!(
            apply(&document, PatchType::Json, &patch).unwrap(),
            json!({"spec": {"port": 8080, "tags": ["x", "b", "z"], "old": 8080, "moved": 1}})
        );
    }

    #[test]
    fn a_failing_operation_names_itself_and_changes_nothing() {
        let document = json!({"spec": {"port": 80, "tags": []}});
        for (patch, says) in [
            (
                json!([{"op": "test", "path": "/spec/port", "value": 81}]),
                "operation 1: test /spec/port",
            ),
            (
                json!([{"op": "remove", "path": "/spec/nope"}]),
                "nothing at \"nope\"",
            ),
            (
                json!([{"op": "add", "path": "/spec/tags/5", "value": 1}]),
                "past the end",
            ),
            (
                json!([{"op": "add", "path": "/spec/tags/01", "value": 1}]),
                "not an array index",
            ),
            (json!([{"op": "frob", "path": "/spec"}]), "not an operation"),
            (
                json!([{"op": "add", "path": "spec", "value": 1}]),
                "does not start with '/'",
            ),
            (
                json!([{"op": "move", "from": "/spec", "path": "/spec/x"}]),
                "into itself",
            ),
            (
                json!([{"op": "replace", "path": "/spec/port"}]),
                "no \"value\" field",
            ),
            (json!({"op": "add"}), "a list of operations"),
        ] {
            let error = apply(&document, PatchType::Json, &patch).unwrap_err();
            assert!(error.contains(says), "{patch}: {error}");
        }
    }
}
