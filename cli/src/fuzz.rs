//! Fuzz targets for what the CLI reads and prints, as proptest generators
//! with a fixed case budget: `BEEHIVE_FUZZ_CASES` per target (1,000 by
//! default, so the test command runs them in seconds; the README gives the
//! longer run). Each must find nothing: no panic, the YAML pre-scan never
//! counts shallower than the parser nests, and what `get` prints applies
//! back as the same object.

use proptest::prelude::*;

use crate::flow_depth::flow_depth_beyond;
use crate::manifest::parse;
use crate::output::{self, Format};
use crate::protocol::{ObjectView, Request};

fn config() -> ProptestConfig {
    let cases = std::env::var("BEEHIVE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    ProptestConfig {
        cases,
        // A failure is printed, shrunk, with its input; nothing is written
        // into the source tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Characters that mean something to YAML or JSON, and some that mean
/// nothing but must survive.
const TRICKY: &[char] = &[
    '[', ']', '{', '}', ',', ':', '-', '?', '#', '\'', '"', '\\', '|', '>', '&', '*', '!', '%',
    '@', '`', ' ', ' ', '\n', '\t', 'a', 'k', 'n', '1', '0', '.', 'e', 'é', '\u{0}', '\u{1b}',
    '\u{2028}', '🐝',
];

fn tricky_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TRICKY), 0..max)
        .prop_map(|c| c.into_iter().collect())
}

/// `base` with up to eight random edits: a span replaced by tricky text.
fn mutated(base: &'static str) -> impl Strategy<Value = String> {
    let edit = (any::<prop::sample::Index>(), 0usize..8, tricky_text(12));
    prop::collection::vec(edit, 0..8).prop_map(move |edits| {
        let mut text: Vec<char> = base.chars().collect();
        for (at, cut, insert) in edits {
            let start = at.index(text.len() + 1);
            let end = (start + cut).min(text.len());
            text.splice(start..end, insert.chars());
        }
        text.into_iter().collect()
    })
}

const MANIFEST: &str = "kind: Greeting.example.dev\nname: ada\nspec:\n  name: Ada\n  tags: [a, 'b', \"c\"]\n  nested: {x: [1, {y: 2}]}\nowner: GreetingSet/team\nfinalizers: [example.dev/f]\n---\n- {kind: Note, name: n, spec: {}}\n";

const REQUESTS: &[&str] = &[
    r#"{"op":"apply","args":{"objects":[{"kind":"Note","name":"a","spec":{"x":[1,{"y":"z"}]}}],"new_kinds":true}}"#,
    r#"{"op":"get","args":{"kind":"Note","name":null}}"#,
    r#"{"op":"wait","args":{"kind":"Note","name":"a","until":{"condition":{"type":"Ready","status":"True"}},"timeout_ms":5}}"#,
    r#"{"op":"logs","args":{"kind":"Note","name":"a","follow":true}}"#,
    r#"{"op":"remove-finalizer","args":{"kind":"Note","name":"a","finalizer":"x/y"}}"#,
];

/// A JSON value of bounded depth and size whose strings are tricky.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let scalar = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e6f64..1e6).prop_map(serde_json::Value::from),
        prop::sample::select(
            &[
                "yes", "no", "null", "~", "1e3", "0x1F", "- a", "a: b", "#c", ""
            ][..]
        )
        .prop_map(serde_json::Value::from),
        tricky_text(16).prop_map(serde_json::Value::from),
    ];
    scalar.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(tricky_text(8), inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A YAML flow node for `value`, its strings written plain where YAML
/// allows, else single- or double-quoted; `style` picks among them.
fn flow_yaml(value: &serde_json::Value, style: &mut impl Iterator<Item = u8>) -> String {
    match value {
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(|v| flow_yaml(v, style)).collect();
            format!("[{}]", items.join(", "))
        }
        serde_json::Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", quoted(k, style), flow_yaml(v, style)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        serde_json::Value::String(text) => quoted(text, style),
        other => other.to_string(),
    }
}

fn quoted(text: &str, style: &mut impl Iterator<Item = u8>) -> String {
    let plain_safe = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphabetic() || "'\" ".contains(c))
        && text.starts_with(|c: char| c.is_ascii_alphabetic())
        && !text.ends_with(' ')
        && !["yes", "no", "null", "true", "false", "on", "off", "y", "n"]
            .contains(&text.to_ascii_lowercase().as_str());
    match style.next().unwrap_or(0) % 3 {
        0 if plain_safe => text.to_string(),
        1 if !text.contains(['\n', '\u{0}', '\u{1b}', '\u{2028}', '\t', '\r']) => {
            format!("'{}'", text.replace('\'', "''"))
        }
        _ => serde_json::Value::from(text).to_string(),
    }
}

/// An object as the host stores it, for `get` to print.
fn stored(name: String, spec: serde_json::Value, owner: Option<String>) -> ObjectView {
    let meta = beehive::object::Meta {
        id: 7,
        group_kind: beehive::GroupKind::new("example.dev", "Note"),
        name,
        generation: 3,
        resource_version: 9,
        ..Default::default()
    };
    let mut document = serde_json::to_value(meta).expect("metadata serializes");
    document["spec"] = serde_json::json!({ "v": spec });
    document["status"] = serde_json::json!({ "seen": true });
    document["owner"] = owner.map_or(serde_json::Value::Null, serde_json::Value::from);
    serde_json::from_value(document).expect("a stored object reads")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_the_manifest_reader_never_panics(text in prop_oneof![tricky_text(300), mutated(MANIFEST)]) {
        for json in [false, true] {
            if let Ok(manifests) = parse("fuzz", &text, json) {
                for manifest in manifests {
                    prop_assert!(!manifest.name.is_empty());
                    prop_assert!(manifest.spec.json().depth() <= beehive::naming::MAX_DEPTH);
                }
            }
        }
    }

    #[test]
    fn fuzz_the_yaml_prescan_never_counts_shallower_than_the_parser(
        value in json_value(),
        styles in prop::collection::vec(any::<u8>(), 64),
        hider in prop::collection::vec(prop::sample::select(&['\'', '"', '[', ']', '{', '}', 'a', ','][..]), 0..12),
    ) {
        let mut style = styles.into_iter().cycle();
        let hider: String = hider.into_iter().collect();
        let text = format!("note: x{hider}\nspec: {}\n", flow_yaml(&value, &mut style));
        let parsed: serde_json::Value = match serde_norway::from_str(&text) {
            Ok(parsed) => parsed,
            // A generated text YAML reads otherwise (a key twice): skip it.
            Err(_) => return Ok(()),
        };
        let real = beehive::Json::from_value(&parsed["spec"]).depth();
        prop_assert!(real == 0 || flow_depth_beyond(&text, real - 1).is_some(), "counted shallower than {real}: {text}");
        prop_assert!(flow_depth_beyond(&text, real).is_none(), "counted deeper than {real}: {text}");
    }

    #[test]
    fn fuzz_the_socket_request_decoder_never_panics(
        text in prop_oneof![
            tricky_text(200),
            prop::sample::select(REQUESTS).prop_flat_map(mutated),
        ]
    ) {
        if let Ok(request) = serde_json::from_str::<Request>(&text) {
            let again = serde_json::to_string(&request).expect("a request serializes");
            prop_assert!(serde_json::from_str::<Request>(&again).is_ok(), "{again}");
        }
    }

    #[test]
    fn fuzz_what_get_prints_applies_back_as_the_same_object(
        name in "[a-z0-9][a-z0-9.-]{0,20}",
        spec in json_value(),
        owner in prop::option::of("[a-z][a-z0-9-]{0,10}"),
        yaml in any::<bool>(),
        single in any::<bool>(),
    ) {
        let owner = owner.map(|o| format!("GreetingSet.example.dev/{o}"));
        let object = stored(name.clone(), spec.clone(), owner.clone());
        let format = if yaml { Format::Yaml } else { Format::Json };
        let printed = output::objects(std::slice::from_ref(&object), format, single);
        let manifests = parse("printed", &printed, !yaml).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        prop_assert_eq!(manifests.len(), 1);
        let manifest = &manifests[0];
        prop_assert_eq!(&manifest.name, &name);
        prop_assert_eq!(manifest.kind_text(), "Note.example.dev");
        prop_assert_eq!(&manifest.owner, &owner);
        prop_assert_eq!(manifest.spec.json().to_value(), serde_json::json!({ "v": spec }), "{}", printed);
    }
}
