//! Manifests in Kubernetes' shape, the first thing a kubectl user writes:
//! `apiVersion: GROUP/vN`, `kind`, `metadata` (`name`, `labels`,
//! `finalizers`, `ownerReferences`), `spec`. They are read as Beehive's own
//! shape, and `get --kubernetes` prints objects in theirs.
//!
//! `vN` is spec version N − 1: a kind whose plugin never migrated its spec
//! reads version 0, and is `v1` as every new Kubernetes API is
//! (`docs/adr/2026-12-07-kubernetes-shaped-manifests.md`).

use serde_json::{Map, Value, json};

/// Whether `value` is written in Kubernetes' shape.
pub(crate) fn is_kubernetes_shaped(value: &Value) -> bool {
    ["apiVersion", "metadata"]
        .iter()
        .any(|field| value.get(field).is_some())
}

/// The metadata fields `get --kubernetes` prints that only the store
/// writes: accepted and ignored, so a printed object applies back.
const READ_ONLY_METADATA: [&str; 5] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
];

/// A Kubernetes-shaped manifest as Beehive's shape, or what is wrong.
pub(crate) fn translate(value: Value) -> Result<Value, String> {
    let Value::Object(mut fields) = value else {
        return Err("a manifest must be a mapping".into());
    };
    let api_version = take_text(&mut fields, "apiVersion")?
        .ok_or("apiVersion is missing: write GROUP/vN (vN is spec version N-1)")?;
    let (group, version) = api_version
        .rsplit_once('/')
        .unwrap_or(("", api_version.as_str()));
    let spec_version = spec_version_of(version).ok_or_else(|| {
        format!(
            "apiVersion {api_version:?}: the version must be vN with N ≥ 1 (vN is spec version N-1)"
        )
    })?;
    let Some(Value::Object(mut metadata)) = fields.remove("metadata") else {
        return Err(
            "metadata is missing: a Kubernetes-shaped manifest names its object in metadata.name"
                .into(),
        );
    };
    let mut out = Map::new();
    if let Some(kind) = fields.remove("kind") {
        out.insert("kind".into(), kind);
    }
    if !group.is_empty() {
        out.insert("group".into(), json!(group));
    }
    out.insert("specVersion".into(), json!(spec_version));
    for (from, to) in [
        ("name", "name"),
        ("labels", "labels"),
        ("finalizers", "finalizers"),
        ("generation", "generation"),
    ] {
        if let Some(value) = metadata.remove(from) {
            out.insert(to.into(), value);
        }
    }
    if let Some(references) = metadata.remove("ownerReferences") {
        out.insert("owner".into(), json!(owner_of(&references)?));
    }
    metadata.retain(|key, _| !READ_ONLY_METADATA.contains(&key.as_str()));
    if let Some(other) = metadata.keys().next() {
        return Err(format!(
            "metadata.{other} is not read: a Beehive object has metadata.name, labels, \
             finalizers and ownerReferences (one, by kind and name)"
        ));
    }
    if let Some(spec) = fields.remove("spec") {
        out.insert("spec".into(), spec);
    }
    fields.remove("status");
    if let Some(other) = fields.keys().next() {
        return Err(format!(
            "{other} is not read: a Kubernetes-shaped manifest has apiVersion, kind, metadata, \
             spec (and status, ignored)"
        ));
    }
    Ok(Value::Object(out))
}

/// `vN` as spec version N − 1.
fn spec_version_of(version: &str) -> Option<i64> {
    let n: i64 = version.strip_prefix('v')?.parse().ok()?;
    (n >= 1).then(|| n - 1)
}

fn take_text(fields: &mut Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match fields.remove(key) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(format!("{key} must be text, not {other}")),
    }
}

/// One owner reference as Beehive's `owner: Kind.group/name`.
fn owner_of(references: &Value) -> Result<String, String> {
    let [reference] = references.as_array().map(Vec::as_slice).unwrap_or_default() else {
        return Err(
            "metadata.ownerReferences must hold one owner: an object has at most one".into(),
        );
    };
    let text = |key: &str| reference.get(key).and_then(Value::as_str);
    let (Some(kind), Some(name)) = (text("kind"), text("name")) else {
        return Err("metadata.ownerReferences[0] needs kind and name".into());
    };
    let group = text("apiVersion")
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(group, _)| group);
    Ok(match group.is_empty() {
        true => format!("{kind}/{name}"),
        false => format!("{kind}.{group}/{name}"),
    })
}

/// An object as `get -o json` prints it (Beehive's shape), in Kubernetes'.
pub(crate) fn to_kubernetes(document: &Value) -> Value {
    let text = |key: &str| document.get(key).cloned().unwrap_or(Value::Null);
    let group = document.get("group").and_then(Value::as_str).unwrap_or("");
    let version = document
        .get("specVersion")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        + 1;
    let api_version = match group.is_empty() {
        true => format!("v{version}"),
        false => format!("{group}/v{version}"),
    };
    let mut metadata = Map::new();
    metadata.insert("name".into(), text("name"));
    for (from, to) in [
        ("id", "uid"),
        ("generation", "generation"),
        ("resourceVersion", "resourceVersion"),
        ("createdAt", "creationTimestamp"),
        ("deletionRequestedAt", "deletionTimestamp"),
    ] {
        if let Some(value) = document.get(from).filter(|v| !v.is_null()) {
            metadata.insert(to.into(), value.clone());
        }
    }
    for key in ["labels", "finalizers"] {
        if let Some(value) = document.get(key).filter(|v| !is_empty(v)) {
            metadata.insert(key.into(), value.clone());
        }
    }
    if let Some(owner) = document.get("owner").and_then(Value::as_str)
        && let Some((kind, name)) = owner.split_once('/')
    {
        let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
        let api_version = match group.is_empty() {
            true => "v1".to_string(),
            false => format!("{group}/v1"),
        };
        metadata.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": api_version, "kind": kind, "name": name}]),
        );
    }
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), text("kind"));
    out.insert("metadata".into(), Value::Object(metadata));
    out.insert("spec".into(), text("spec"));
    if let Some(status) = document.get("status").filter(|v| !v.is_null()) {
        out.insert("status".into(), status.clone());
    }
    Value::Object(out)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubernetes_manifest_reads_as_beehive_s_shape() {
        let read = translate(json!({
            "apiVersion": "example.dev/v2",
            "kind": "Greeting",
            "metadata": {"name": "ada", "labels": {"tier": "web"}, "uid": 7},
            "spec": {"name": "Ada"},
            "status": {"ignored": true}
        }))
        .unwrap();
        assert_eq!(
            read,
            json!({"kind": "Greeting", "group": "example.dev", "specVersion": 1, "name": "ada",
                   "labels": {"tier": "web"}, "spec": {"name": "Ada"}})
        );
    }

    #[test]
    fn what_it_cannot_hold_is_named() {
        let refused = |value: Value| translate(value).unwrap_err();
        let base = |metadata: Value| json!({"apiVersion": "example.dev/v1", "kind": "G", "metadata": metadata, "spec": {}});
        assert!(
            refused(base(json!({"name": "a", "annotations": {}}))).contains("metadata.annotations")
        );
        assert!(refused(json!({"apiVersion": "example.dev/beta", "metadata": {}})).contains("vN"));
        assert!(refused(json!({"apiVersion": "example.dev/v0", "metadata": {}})).contains("N ≥ 1"));
        assert!(refused(json!({"metadata": {"name": "a"}})).contains("apiVersion is missing"));
        let two = json!([{"kind": "A", "name": "a"}, {"kind": "B", "name": "b"}]);
        assert!(refused(base(json!({"name": "a", "ownerReferences": two}))).contains("one owner"));
    }

    #[test]
    fn a_printed_object_reads_back_as_it_was() {
        let document = json!({
            "id": 3, "kind": "Greeting", "group": "example.dev", "name": "ada",
            "generation": 2, "resourceVersion": 9, "specVersion": 0,
            "labels": {"tier": "web"}, "finalizers": [],
            "owner": "GreetingSet.example.dev/team",
            "spec": {"name": "Ada"}, "status": {"message": "hi"}
        });
        let printed = to_kubernetes(&document);
        assert_eq!(printed["apiVersion"], "example.dev/v1");
        assert_eq!(printed["metadata"]["uid"], 3);
        let read = translate(printed).unwrap();
        assert_eq!(read["owner"], "GreetingSet.example.dev/team");
        assert_eq!(read["generation"], 2);
        assert_eq!(read["specVersion"], 0);
        assert_eq!(read["spec"], json!({"name": "Ada"}));
    }
}
