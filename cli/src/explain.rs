//! `beehive explain KIND[.spec|.status[.field...]]`: a kind's documents as
//! its plugin's JSON Schemas describe them, in the manner of
//! `kubectl explain`.
//!
//! Only the shapes `schemars` and the Python SDK emit need to read well:
//! objects with `properties`, arrays with `items`, local `$ref`s into
//! `$defs`, `anyOf` with `null` for optional values, `enum`s. Anything else
//! is shown by its `type`, or as `<Object>`.

use serde_json::Value;

use crate::protocol::KindSchemas;

/// The most `$ref`s followed to reach one node: a schema that refers to
/// itself in a loop ends there.
const MAX_REFS: usize = 32;

/// `Greeting.example.dev.spec.name` as the kind (`Greeting.example.dev`)
/// and the path into its documents (`spec`, `name`): the path starts at the
/// first `spec` or `status` segment.
pub fn split_target(target: &str) -> (String, Vec<String>) {
    let segments: Vec<&str> = target.split('.').collect();
    let start = segments
        .iter()
        .skip(1)
        .position(|s| *s == "spec" || *s == "status")
        .map_or(segments.len(), |i| i + 1);
    let kind = segments[..start].join(".");
    let path = segments[start..].iter().map(|s| s.to_string()).collect();
    (kind, path)
}

/// The explanation of `path` (empty for the whole object) in `kind`.
///
/// # Errors
/// A field the schema does not have, or a document with no schema.
pub fn explain(kind: &KindSchemas, path: &[String]) -> Result<String, String> {
    let mut out = format!("KIND:     {}\n", kind.kind);
    if let Some(source) = &kind.source {
        out.push_str(&format!("SOURCE:   {source}\n"));
    }
    let Some((document, fields)) = path.split_first() else {
        out.push_str("\nFIELDS:\n");
        for (name, schema) in [("spec", &kind.spec), ("status", &kind.status)] {
            let root = schema.as_ref().map(|s| parse(s)).transpose()?;
            let description = match &root {
                Some(root) => description(root, root).unwrap_or_default(),
                None => "(the plugin declares no schema)".into(),
            };
            field_line(&mut out, name, "Object", false, &description);
        }
        return Ok(out);
    };
    let text = match document.as_str() {
        "spec" => &kind.spec,
        _ => &kind.status,
    };
    let text = text
        .as_ref()
        .ok_or_else(|| format!("{}'s plugin declares no {document} schema", kind.kind))?;
    let root = parse(text)?;
    let mut node = resolve(&root, &root);
    let mut required = false;
    for (depth, field) in fields.iter().enumerate() {
        let object = through_arrays(&root, node);
        let Some(child) = object.get("properties").and_then(|p| p.get(field)) else {
            let at = path[..depth + 1].join(".");
            return Err(format!(
                "field {field:?} does not exist in {at}: {}",
                names(object)
            ));
        };
        required = required_in(object).contains(&field.as_str());
        node = resolve(&root, child);
    }
    out.push_str(&format!(
        "FIELD:    {} <{}>{}\n",
        path.join("."),
        type_name(&root, node),
        if required { " -required-" } else { "" }
    ));
    if let Some(text) = description(&root, node) {
        out.push_str(&format!("\nDESCRIPTION:\n{}\n", indent(&text, 4)));
    }
    let object = through_arrays(&root, node);
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        out.push_str("\nFIELDS:\n");
        let required = required_in(object);
        for (name, child) in properties {
            let child = resolve(&root, child);
            field_line(
                &mut out,
                name,
                &type_name(&root, child),
                required.contains(&name.as_str()),
                &description(&root, child).unwrap_or_default(),
            );
        }
    }
    Ok(out)
}

/// `kind`'s schemas as one JSON document, for `-o json|yaml`.
pub fn document(kind: &KindSchemas) -> Value {
    let schema = |text: &Option<String>| {
        text.as_deref()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null)
    };
    serde_json::json!({
        "kind": kind.kind,
        "source": kind.source,
        "specVersion": kind.spec_version,
        "spec": schema(&kind.spec),
        "status": schema(&kind.status),
    })
}

fn parse(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("the recorded schema is not JSON: {e}"))
}

fn field_line(out: &mut String, name: &str, type_: &str, required: bool, description: &str) {
    let required = if required { " -required-" } else { "" };
    out.push_str(&format!("  {name}\t<{type_}>{required}\n"));
    if !description.is_empty() {
        out.push_str(&indent(description, 4));
        out.push('\n');
    }
}

fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines()
        .map(|line| format!("{pad}{line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `node` with its `$ref`s followed and an optional (`anyOf` with `null`)
/// unwrapped.
fn resolve<'a>(root: &'a Value, mut node: &'a Value) -> &'a Value {
    for _ in 0..MAX_REFS {
        if let Some(target) = node.get("$ref").and_then(Value::as_str) {
            match target.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(found) => node = found,
                None => return node,
            }
        } else if let Some(inner) = not_null(node) {
            node = inner;
        } else {
            return node;
        }
    }
    node
}

/// The one branch of an `anyOf`/`oneOf` that is not `{"type": "null"}`.
fn not_null(node: &Value) -> Option<&Value> {
    let branches = node
        .get("anyOf")
        .or_else(|| node.get("oneOf"))?
        .as_array()?;
    let mut others = branches
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"));
    let only = others.next()?;
    (branches.len() == 2 && others.next().is_none()).then_some(only)
}

/// The element schema of an array (of arrays), or `node` itself.
fn through_arrays<'a>(root: &'a Value, mut node: &'a Value) -> &'a Value {
    for _ in 0..MAX_REFS {
        match node.get("items") {
            Some(items) if types(node).contains(&"array") => node = resolve(root, items),
            _ => break,
        }
    }
    node
}

fn types(node: &Value) -> Vec<&str> {
    match node.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// `string`, `integer`, `[]string`, `Object`, ...
fn type_name(root: &Value, node: &Value) -> String {
    let node = resolve(root, node);
    let type_ = types(node).into_iter().find(|t| *t != "null");
    match type_ {
        Some("array") => match node.get("items") {
            Some(items) => format!("[]{}", type_name(root, items)),
            None => "[]".into(),
        },
        Some("object") | None => "Object".into(),
        Some(other) => other.into(),
    }
}

fn description(root: &Value, node: &Value) -> Option<String> {
    let node = resolve(root, node);
    let mut text = node
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values.iter().map(Value::to_string).collect();
        let line = format!("One of: {}.", values.join(", "));
        text = Some(match text {
            Some(text) => format!("{text}\n{line}"),
            None => line,
        });
    }
    text
}

fn required_in(node: &Value) -> Vec<&str> {
    node.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn names(node: &Value) -> String {
    match node.get("properties").and_then(Value::as_object) {
        Some(p) if !p.is_empty() => {
            let names: Vec<&str> = p.keys().map(String::as_str).collect();
            format!("its fields are {}", names.join(", "))
        }
        _ => "it has no fields".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(spec: &str) -> KindSchemas {
        KindSchemas {
            kind: "Service.example.dev".into(),
            source: None,
            spec_version: 0,
            spec: Some(spec.into()),
            status: None,
        }
    }

    const SPEC: &str = r##"{
        "type": "object",
        "description": "A service to run.",
        "properties": {
            "port": {"type": "integer", "description": "The port."},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
            "mode": {"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}]}
        },
        "required": ["port"],
        "$defs": {
            "Tag": {"type": "object", "properties": {"key": {"type": "string", "description": "Its key."}}},
            "Mode": {"type": "string", "enum": ["fast", "safe"], "description": "How."}
        }
    }"##;

    #[test]
    fn the_target_splits_at_spec_or_status() {
        assert_eq!(split_target("Greeting"), ("Greeting".into(), vec![]));
        assert_eq!(
            split_target("Greeting.example.dev.spec.name"),
            (
                "Greeting.example.dev".into(),
                vec!["spec".into(), "name".into()]
            )
        );
        assert_eq!(
            split_target("Greeting.status"),
            ("Greeting".into(), vec!["status".into()])
        );
    }

    #[test]
    fn a_field_shows_its_type_and_description_and_its_fields() {
        let path = |p: &str| p.split('.').map(String::from).collect::<Vec<_>>();
        let spec = explain(&kind(SPEC), &path("spec")).unwrap();
        assert!(spec.contains("FIELD:    spec <Object>"), "{spec}");
        assert!(
            spec.contains("  port\t<integer> -required-\n    The port."),
            "{spec}"
        );
        assert!(spec.contains("  tags\t<[]Object>"), "{spec}");
        assert!(
            spec.contains("  mode\t<string>\n    How.\n    One of: \"fast\", \"safe\"."),
            "{spec}"
        );
        let key = explain(&kind(SPEC), &path("spec.tags.key")).unwrap();
        assert!(key.contains("FIELD:    spec.tags.key <string>"), "{key}");
        assert!(key.contains("Its key."), "{key}");
        let missing = explain(&kind(SPEC), &path("spec.nope")).unwrap_err();
        assert!(missing.contains("its fields are"), "{missing}");
    }

    #[test]
    fn a_schema_that_refers_to_itself_ends() {
        let looping = r##"{"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}"##;
        let text = explain(&kind(looping), &["spec".into()]).unwrap();
        assert!(text.contains("<Object>"), "{text}");
    }
}
