//! Refusing a schema whose evaluation would come back to where it started
//! without reading any of the spec.
//!
//! `{"anyOf": [{"$ref": "#"}, {"type": "string"}]}` asks, to check a value,
//! to check the same value against itself first. The checker breaks such a
//! loop by treating it as `true`, so the schema loads and then accepts
//! anything: a plugin that meant to constrain its specs constrains nothing,
//! and no one is told. A loop is legitimate only when it passes through a
//! keyword that moves into a part of the spec (`properties`, `items`, ...),
//! so that each turn reads something smaller; this module finds the loops
//! that do not, and names their path.

use std::collections::HashMap;

use serde_json::Value;

/// Keywords whose subschemas apply to the same value as the schema holding
/// them.
const IN_PLACE_LISTS: [&str; 3] = ["allOf", "anyOf", "oneOf"];
const IN_PLACE_ONE: [&str; 3] = ["not", "if", "then"];
const IN_PLACE_MAPS: [&str; 2] = ["dependentSchemas", "dependencies"];
const REFERENCES: [&str; 3] = ["$ref", "$dynamicRef", "$recursiveRef"];

/// Keywords whose subschemas apply to a part of the value.
const DESCENDING_MAPS: [&str; 2] = ["properties", "patternProperties"];
const DESCENDING_ONE: [&str; 6] = [
    "additionalProperties",
    "additionalItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
];

/// Keywords holding subschemas that apply only when referred to.
const DEFINITIONS: [&str; 2] = ["$defs", "definitions"];

/// One subschema, found at a JSON pointer.
struct Node<'s> {
    schema: &'s serde_json::Map<String, Value>,
    /// The pointer of the resource it belongs to (the nearest `$id`), which
    /// its `#...` references are read against.
    resource: String,
}

/// Every object subschema of one schema, by pointer, and its anchors.
struct Subschemas<'s> {
    nodes: HashMap<String, Node<'s>>,
    /// `$id`, `$anchor` and `$dynamicAnchor` names, to their pointers.
    names: HashMap<String, String>,
}

/// Refuses `schema` when some subschema, evaluated, would evaluate itself
/// again against the same value.
///
/// # Errors
/// The loop, as the pointers it passes through.
pub(crate) fn refuse_loops(schema: &Value) -> Result<(), String> {
    let mut found = Subschemas {
        nodes: HashMap::new(),
        names: HashMap::new(),
    };
    found.collect(schema, String::new(), String::new());
    let edges: HashMap<&str, Vec<String>> = found
        .nodes
        .iter()
        .map(|(pointer, node)| (pointer.as_str(), found.in_place(pointer, node)))
        .collect();
    match find_cycle(&edges) {
        None => Ok(()),
        Some(cycle) => Err(format!(
            "the schema loops without reading the spec: {}; a loop must pass \
             through a keyword that reads a part of the spec (properties, \
             items, ...), or every value it meets is accepted unchecked",
            shown_path(&cycle)
        )),
    }
}

impl<'s> Subschemas<'s> {
    fn collect(&mut self, schema: &'s Value, pointer: String, resource: String) {
        let Value::Object(map) = schema else {
            return;
        };
        let mut resource = resource;
        if let Some(Value::String(id)) = map.get("$id")
            && !id.starts_with('#')
        {
            resource = pointer.clone();
            self.names
                .insert(id.trim_end_matches('#').to_string(), pointer.clone());
        }
        for key in ["$anchor", "$dynamicAnchor"] {
            if let Some(Value::String(anchor)) = map.get(key) {
                self.names.insert(format!("#{anchor}"), pointer.clone());
            }
        }
        for (keyword, value) in map {
            let here = format!("{pointer}/{}", escape(keyword));
            match value {
                Value::Object(children)
                    if DESCENDING_MAPS.contains(&keyword.as_str())
                        || IN_PLACE_MAPS.contains(&keyword.as_str())
                        || DEFINITIONS.contains(&keyword.as_str()) =>
                {
                    for (name, child) in children {
                        let at = format!("{here}/{}", escape(name));
                        self.collect(child, at, resource.clone());
                    }
                }
                Value::Array(list)
                    if IN_PLACE_LISTS.contains(&keyword.as_str())
                        || keyword == "items"
                        || keyword == "prefixItems" =>
                {
                    for (index, child) in list.iter().enumerate() {
                        self.collect(child, format!("{here}/{index}"), resource.clone());
                    }
                }
                Value::Object(_)
                    if IN_PLACE_ONE.contains(&keyword.as_str())
                        || keyword == "else"
                        || keyword == "items"
                        || DESCENDING_ONE.contains(&keyword.as_str()) =>
                {
                    self.collect(value, here, resource.clone());
                }
                _ => {}
            }
        }
        self.nodes.insert(
            pointer,
            Node {
                schema: map,
                resource,
            },
        );
    }

    /// The pointers of the subschemas `node` applies to its own value.
    fn in_place(&self, pointer: &str, node: &Node<'s>) -> Vec<String> {
        let mut next = Vec::new();
        for (keyword, value) in node.schema {
            let here = format!("{pointer}/{}", escape(keyword));
            let keyword = keyword.as_str();
            match value {
                Value::Array(list) if IN_PLACE_LISTS.contains(&keyword) => {
                    next.extend((0..list.len()).map(|index| format!("{here}/{index}")));
                }
                Value::Object(_) if IN_PLACE_ONE.contains(&keyword) || keyword == "else" => {
                    next.push(here);
                }
                Value::Object(map) if IN_PLACE_MAPS.contains(&keyword) => {
                    next.extend(map.keys().map(|name| format!("{here}/{}", escape(name))));
                }
                Value::String(reference) if REFERENCES.contains(&keyword) => {
                    next.extend(self.resolve(&node.resource, reference));
                }
                _ => {}
            }
        }
        next.retain(|target| self.nodes.contains_key(target));
        next
    }

    /// The pointer a reference names, when it names a place in this
    /// schema; others are left to the checker, which resolves nothing
    /// outside the schema.
    fn resolve(&self, resource: &str, reference: &str) -> Option<String> {
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let root = if base.is_empty() {
            resource.to_string()
        } else {
            self.names.get(base)?.clone()
        };
        if fragment.is_empty() || fragment.starts_with('/') {
            Some(format!("{root}{}", crate::percent::decoded(fragment)))
        } else {
            self.names.get(&format!("#{fragment}")).cloned()
        }
    }
}

/// The most pointers of a loop a refusal names.
const MAX_POINTERS_SHOWN: usize = 8;

/// `cycle` as `#/a -> #/b -> ...`, its middle cut when it is long.
fn shown_path(cycle: &[String]) -> String {
    let pointer = |p: &String| format!("#{p}");
    if cycle.len() <= MAX_POINTERS_SHOWN {
        return cycle.iter().map(pointer).collect::<Vec<_>>().join(" -> ");
    }
    let head: Vec<String> = cycle[..MAX_POINTERS_SHOWN - 1]
        .iter()
        .map(pointer)
        .collect();
    format!(
        "{} -> ({} more) -> {}",
        head.join(" -> "),
        cycle.len() - MAX_POINTERS_SHOWN,
        pointer(&cycle[cycle.len() - 1])
    )
}

/// A cycle in `edges`, as the pointers along it with the first repeated
/// at the end; found by a depth-first search kept on the heap (a schema's
/// chain of references can be longer than a thread's stack allows).
fn find_cycle(edges: &HashMap<&str, Vec<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        OnPath,
        Done,
    }
    let mut marks: HashMap<&str, Mark> = HashMap::new();
    let mut starts: Vec<&&str> = edges.keys().collect();
    starts.sort();
    for &start in starts {
        if marks.contains_key(start) {
            continue;
        }
        // The path from `start`, each with the index of its next edge.
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        marks.insert(start, Mark::OnPath);
        while let Some((node, index)) = path.last_mut() {
            let Some(target) = edges[*node].get(*index) else {
                marks.insert(*node, Mark::Done);
                path.pop();
                continue;
            };
            *index += 1;
            let target = target.as_str();
            match marks.get(target) {
                Some(Mark::OnPath) => {
                    let from = path.iter().position(|(n, _)| *n == target)?;
                    let mut cycle: Vec<String> =
                        path[from..].iter().map(|(n, _)| n.to_string()).collect();
                    cycle.push(target.to_string());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    let (&key, _) = edges.get_key_value(target)?;
                    marks.insert(key, Mark::OnPath);
                    path.push((key, 0));
                }
            }
        }
    }
    None
}

/// A key as a JSON pointer segment.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(schema: Value) -> String {
        refuse_loops(&schema).expect_err("a loop")
    }

    #[test]
    fn a_reference_to_itself_in_an_any_of_is_refused_with_its_path() {
        let message = refused(json!({"anyOf": [{"$ref": "#"}, {"type": "string"}]}));
        assert!(message.contains("# -> #/anyOf/0 -> #"), "{message}");
    }

    #[test]
    fn loops_through_definitions_and_anchors_are_refused() {
        refused(
            json!({"$ref": "#/$defs/a", "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"not": {"$ref": "#/$defs/a"}}}}),
        );
        refused(json!({"$defs": {"a": {"$anchor": "here", "oneOf": [{"$ref": "#here"}]}}}));
        refused(json!({"$defs": {"a b": {"$ref": "#/$defs/a%20b"}}}));
    }

    #[test]
    fn loops_that_read_a_part_of_the_spec_load() {
        let tree = json!({
            "type": "object",
            "properties": {"left": {"$ref": "#"}, "right": {"$ref": "#"}},
            "items": {"$ref": "#/$defs/node"},
            "$defs": {"node": {"anyOf": [{"type": "null"}, {"additionalProperties": {"$ref": "#/$defs/node"}}]}}
        });
        refuse_loops(&tree).unwrap();
        refuse_loops(&json!({"const": {"$ref": "#"}, "enum": [{"allOf": [{"$ref": "#"}]}]}))
            .unwrap();
    }

    #[test]
    fn a_long_chain_of_references_is_searched_without_deep_recursion() {
        let defs: serde_json::Map<String, Value> = (0..20_000)
            .map(|i| {
                (
                    format!("d{i}"),
                    json!({"$ref": format!("#/$defs/d{}", i + 1)}),
                )
            })
            .chain([("d20000".to_string(), json!({"$ref": "#/$defs/d0"}))])
            .collect();
        let message = refused(json!({"$defs": defs}));
        assert!(message.contains("#/$defs/d0"), "{}", &message[..200]);
    }
}
