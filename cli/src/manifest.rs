//! Manifests: files of objects to create or update, in JSON or YAML.
//!
//! A file holds one object, a list of objects, (YAML) several documents
//! separated by `---`, or (JSON) several values one after another, each one
//! object or a list, as `jq -c` writes them. An object is:
//!
//! ```yaml
//! kind: Greeting          # or Greeting.example.dev
//! group: example.dev      # optional
//! name: ada
//! spec: {name: Ada}
//! specVersion: 0          # optional: the spec schema version it is written in
//! owner: GreetingSet/team # optional, Kind/name
//! finalizers: []          # optional, set on create
//! labels: {tier: web}     # optional: replaces the object's labels
//! generation: 3           # optional: apply only if the spec is still at it
//! ```
//!
//! The other fields `get -o json|yaml` prints beside these (`status`,
//! `resourceVersion`, `conditions`, ...) are read-only: accepted and
//! ignored, so a printed object applies back as it is. Its `generation` is
//! kept: it makes the apply conditional on nobody having changed the spec
//! since it was printed.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One object to apply.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub name: String,
    #[serde(default)]
    pub spec: Spec,
    /// The spec schema version `spec` is written in; absent means the
    /// version the kind's plugin reads now.
    #[serde(
        default,
        rename = "specVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub spec_version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
    /// The object's labels: given, they replace the stored ones; left out,
    /// the stored ones stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<beehive::object::Labels>,
    /// The object's generation when this manifest was read from it, as
    /// `get -o yaml` prints it: `apply` writes the spec only while the
    /// stored one is still at that generation (or already equal to this
    /// one), unless `--force-conflicts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

/// A manifest's spec, canonical from the moment it is read: a parsed JSON
/// value costs a map node of 600-odd bytes however small the spec, and a
/// host holds every spec of an `apply` at once (20,000 of them in a batch
/// the docs suggest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec(beehive::Json);

impl Spec {
    /// The canonical document.
    pub fn json(&self) -> &beehive::Json {
        &self.0
    }

    fn is_object(&self) -> bool {
        self.0.as_str().starts_with('{')
    }
}

impl Default for Spec {
    /// No spec written: an empty object.
    fn default() -> Self {
        Spec(beehive::Json::from_value(&serde_json::json!({})))
    }
}

impl Serialize for Spec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Spec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(Spec(beehive::Json::from_value(&value)))
    }
}

impl Manifest {
    /// The kind as written on the command line: `Kind` or `Kind.group`.
    pub fn kind_text(&self) -> String {
        match &self.group {
            Some(group) if !group.is_empty() => format!("{}.{group}", self.kind),
            _ => self.kind.clone(),
        }
    }

    /// The owner as (kind, name), from `Kind/name`.
    pub fn owner_parts(&self) -> Option<(&str, &str)> {
        self.owner.as_deref().and_then(|o| o.split_once('/'))
    }

    /// What is wrong with it, before anything is written.
    fn problem(&self) -> Option<String> {
        if self.kind.is_empty() {
            return Some("kind is empty".into());
        }
        if self.group.is_some() && self.kind.contains('.') {
            return Some(format!(
                "kind {:?} names a group and `group` names another: use one",
                self.kind
            ));
        }
        if self.name.is_empty() {
            return Some("name is empty".into());
        }
        if let Some(problem) = beehive::naming::name_problem(&self.name) {
            return Some(problem);
        }
        if !self.spec.is_object() {
            return Some("spec must be a JSON object".into());
        }
        if let Some(generation) = self.generation.filter(|g| *g < 1) {
            return Some(format!(
                "generation {generation} is not one an object has: generations count up from 1"
            ));
        }
        if let Some(version) = self.spec_version.filter(|v| *v < 0) {
            return Some(format!(
                "specVersion {version} is negative: versions count up from 0"
            ));
        }
        if let Some(owner) = &self.owner {
            match owner.split_once('/') {
                Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
                _ => return Some(format!("owner {owner:?} must be written Kind/name")),
            }
        }
        if self.finalizers.iter().any(String::is_empty) {
            return Some("a finalizer is empty".into());
        }
        if let Some(problem) = self
            .labels
            .as_ref()
            .and_then(beehive::object::labels_problem)
        {
            return Some(problem);
        }
        let finalizer_problem = |f: &String| beehive::naming::label_problem("a finalizer", f);
        if let Some(problem) = self.finalizers.iter().find_map(finalizer_problem) {
            return Some(problem);
        }
        None
    }
}

/// Reads the manifests in `source`: a file, a directory (its `.json`,
/// `.jsonl`, `.yaml` and `.yml` files, by name), or `-` for standard input. Every
/// object is checked; one bad object fails the whole read.
pub fn load(source: &Path) -> Result<Vec<Manifest>, String> {
    if source == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        // Standard input has no extension to go by: JSON values in a row
        // are read as JSON, anything else as YAML.
        let json = looks_like_json(&text);
        return parse("standard input", &text, json);
    }
    let meta = std::fs::metadata(source)
        .map_err(|e| format!("{}: {}", source.display(), io_reason(&e)))?;
    let files = if meta.is_dir() {
        manifest_files(source)?
    } else {
        vec![source.to_path_buf()]
    };
    let mut manifests = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("{}: {}", file.display(), io_reason(&e)))?;
        let json = is_json(&file, &text);
        manifests.extend(parse(&file.display().to_string(), &text, json)?);
    }
    Ok(manifests)
}

/// The manifest files of a directory, sorted by name.
pub fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("{}: {}", dir.display(), io_reason(&e)))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let hidden = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            let known = p
                .extension()
                .is_some_and(|e| e == "json" || e == "jsonl" || e == "yaml" || e == "yml");
            !hidden && known && p.is_file()
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Why a spec nests too deeply to store, if it does: the store's own limit,
/// checked here too so a file says which object it is.
fn spec_too_deep(spec: &Spec) -> Option<String> {
    let depth = spec.json().depth();
    (depth > beehive::naming::MAX_DEPTH).then(|| {
        format!(
            "the spec is nested {depth} levels deep; at most {}",
            beehive::naming::MAX_DEPTH
        )
    })
}

fn io_reason(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        _ => error.to_string(),
    }
}

/// Parses one file's text: JSON if `json`, else YAML (which reads JSON too).
/// What `get -o json|yaml` prints that a manifest cannot set.
const READ_ONLY_FIELDS: [&str; 11] = [
    "id",
    "observedGeneration",
    "observedAt",
    "resourceVersion",
    "deletionRequestedAt",
    "conditions",
    "createdAt",
    "updatedAt",
    "status",
    "statusVersion",
    "lastPassFailedAt",
];

pub(crate) fn parse(origin: &str, text: &str, json: bool) -> Result<Vec<Manifest>, String> {
    let documents: Vec<serde_json::Value> = if json {
        serde_json::Deserializer::from_str(text)
            .into_iter::<serde_json::Value>()
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{origin}: invalid JSON: {e}"))?
    } else {
        // A spec may nest 64 levels; a manifest wraps it in at most two
        // flow levels of its own (a list, an object). The exact limit is
        // the store's, on the parsed spec; this only keeps the parser from
        // a text whose nesting would cost it minutes.
        let limit = beehive::naming::MAX_DEPTH + 2;
        if let Some(at) = crate::flow_depth::flow_depth_beyond(text, limit) {
            return Err(format!(
                "{origin}: nested deeper than {} levels (at byte {at})",
                beehive::naming::MAX_DEPTH
            ));
        }
        serde_norway::Deserializer::from_str(text)
            .map(serde_json::Value::deserialize)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{origin}: invalid YAML: {e}"))?
    };
    let values = documents.into_iter().flat_map(|doc| match doc {
        serde_json::Value::Array(items) => items,
        serde_json::Value::Null => Vec::new(),
        other => vec![other],
    });
    let mut manifests = Vec::new();
    for (index, mut value) in values.enumerate() {
        let at = format!("{origin}: object {}", index + 1);
        if crate::kube_shape::is_kubernetes_shaped(&value) {
            value = crate::kube_shape::translate(value).map_err(|e| format!("{at}: {e}"))?;
        }
        if let Some(fields) = value.as_object_mut() {
            fields.retain(|key, _| !READ_ONLY_FIELDS.contains(&key.as_str()));
        }
        let manifest: Manifest = serde_json::from_value(value).map_err(|e| format!("{at}: {e}"))?;
        let problem = manifest.problem().or_else(|| spec_too_deep(&manifest.spec));
        if let Some(problem) = problem {
            // Escaped: a name is the file author's text, and may hold the
            // control characters it is refused for.
            return Err(format!(
                "{at} ({}): {problem}",
                manifest.name.escape_debug()
            ));
        }
        manifests.push(manifest);
    }
    Ok(manifests)
}

/// Whether a file is read as JSON: by its extension, and a file with
/// another or none is read as JSON when its text is JSON values in a row,
/// as standard input is.
fn is_json(file: &Path, text: &str) -> bool {
    match file.extension().and_then(|e| e.to_str()) {
        Some("json" | "jsonl") => true,
        Some("yaml" | "yml") => false,
        _ => looks_like_json(text),
    }
}

fn looks_like_json(text: &str) -> bool {
    text.trim_start().starts_with(['{', '['])
        && serde_json::Deserializer::from_str(text)
            .into_iter::<serde::de::IgnoredAny>()
            .all(|value| value.is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_in_a_row_are_a_stream_of_objects() {
        let lines = "{\"kind\":\"K\",\"name\":\"a\"}\n{\"kind\":\"K\",\"name\":\"b\"}\n";
        let concatenated = "{\"kind\":\"K\",\"name\":\"a\"}[{\"kind\":\"K\",\"name\":\"b\"}]";
        for text in [lines, concatenated] {
            assert!(looks_like_json(text));
            let names: Vec<String> = parse("-", text, true)
                .unwrap()
                .into_iter()
                .map(|m| m.name)
                .collect();
            assert_eq!(names, ["a", "b"], "{text}");
        }
        assert!(!looks_like_json("kind: K\nname: a\n"));
        assert!(!looks_like_json("{kind: K, name: a}"), "YAML flow style");
    }

    #[test]
    fn deep_nesting_is_refused_at_once() {
        let deep = format!("kind: K\nname: n\nspec: {{a: {}}}\n", "[".repeat(100_000));
        let started = std::time::Instant::now();
        let error = parse("deep.yaml", &deep, false).unwrap_err();
        assert!(error.contains("nested deeper than 64"), "{error}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        // JSON's parser is linear and stops at its own limit.
        let error = parse("deep.json", &"[".repeat(100_000), true).unwrap_err();
        assert!(error.contains("recursion limit exceeded"), "{error}");
        let quoted = "kind: K\nname: n\nspec: {a: \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"} # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n";
        assert!(parse("quoted.yaml", quoted, false).is_ok());
    }

    /// A spec one level past the limit is refused whatever hides it (an
    /// apostrophe or a quote in a plain value before it), and brackets in a
    /// plain value are its text, not nesting.
    #[test]
    fn the_depth_limit_is_the_parsed_specs() {
        // A spec of `levels` levels: its own mapping, then `a`'s lists.
        let nested = |levels: usize| {
            let lists = levels - 1;
            format!("{}1{}", "[".repeat(lists), "]".repeat(lists))
        };
        for hider in ["note: it's", "note: say \"hi", "note: plain"] {
            for levels in [64, 65, 100] {
                let text = format!(
                    "kind: K\nname: n\nspec:\n  {hider}\n  a: {}\n",
                    nested(levels)
                );
                let parsed = parse("x", &text, false);
                match levels {
                    64 => assert!(parsed.is_ok(), "{hider:?} {levels}: {parsed:?}"),
                    _ => assert!(
                        parsed.as_ref().is_err_and(|e| e.contains("64")),
                        "{hider:?}: {levels} levels: {parsed:?}"
                    ),
                }
            }
        }
        let json = |levels: usize| {
            format!(
                "{{\"kind\":\"K\",\"name\":\"n\",\"spec\":{{\"a\":{}}}}}",
                nested(levels)
            )
        };
        assert!(parse("x", &json(64), true).is_ok());
        let error = parse("x", &json(65), true).unwrap_err();
        assert!(
            error.contains("the spec is nested 65 levels deep; at most 64"),
            "{error}"
        );

        let brackets = format!("kind: K\nname: n\nspec:\n  x: a{}\n", "[".repeat(65));
        let parsed = parse("x", &brackets, false).unwrap();
        assert_eq!(
            parsed[0].spec.json().to_value()["x"],
            format!("a{}", "[".repeat(65))
        );
    }

    #[test]
    fn yaml_documents_and_lists_both_hold_objects() {
        let text = "kind: Greeting.example.dev\nname: ada\nspec: {name: Ada}\n---\n- kind: Greeting\n  group: example.dev\n  name: grace\n";
        let manifests = parse("test.yaml", text, false).unwrap();
        assert_eq!(manifests.len(), 2);
        assert_eq!(manifests[0].spec.json().to_value()["name"], "Ada");
        assert_eq!(manifests[1].kind_text(), "Greeting.example.dev");
        assert_eq!(manifests[1].spec.json().as_str(), "{}");
    }

    #[test]
    fn json_holds_an_object_or_a_list() {
        let one = parse("a.json", r#"{"kind":"K","name":"n","spec":{}}"#, true).unwrap();
        assert_eq!(one.len(), 1);
        let two = parse(
            "b.json",
            r#"[{"kind":"K","name":"a"},{"kind":"K","name":"b"}]"#,
            true,
        );
        assert_eq!(two.unwrap().len(), 2);
    }

    #[test]
    fn one_bad_object_fails_the_file_with_a_line_naming_it() {
        let text = r#"[{"kind":"K","name":"ok"},{"kind":"K","name":""}]"#;
        let error = parse("bad.json", text, true).unwrap_err();
        assert_eq!(error, r#"bad.json: object 2 (): name is empty"#);
        let error = parse("x.yaml", "kind: K\nname: n\nspek: {}\n", false).unwrap_err();
        assert!(error.contains("unknown field `spek`"), "{error}");
        let error = parse("x.yaml", "kind: K\nname: n\nspec: [1]\n", false).unwrap_err();
        assert!(error.contains("spec must be a JSON object"), "{error}");
        let error = parse("x.yaml", "kind: K\nname: n\nowner: team\n", false).unwrap_err();
        assert!(error.contains("Kind/name"), "{error}");
        let error = parse("x.json", "{", true).unwrap_err();
        assert!(error.starts_with("x.json: invalid JSON"), "{error}");
        let error = parse("x.yaml", "kind: K\nname: n\nspecVersion: -1\n", false).unwrap_err();
        assert!(error.contains("specVersion -1 is negative"), "{error}");
    }

    #[test]
    fn a_kubernetes_shaped_manifest_is_read_as_one_of_ours() {
        let text = "apiVersion: example.dev/v2\nkind: Greeting\nmetadata: {name: ada}\nspec: {}\n";
        let read = parse("k.yaml", text, false).unwrap();
        assert_eq!(
            (
                read[0].kind_text(),
                read[0].name.as_str(),
                read[0].spec_version
            ),
            ("Greeting.example.dev".to_string(), "ada", Some(1))
        );
        let plain = parse("p.yaml", "kind: K\nname: n\nspek: {}\n", false).unwrap_err();
        assert!(plain.contains("unknown field `spek`"), "{plain}");
    }
}
