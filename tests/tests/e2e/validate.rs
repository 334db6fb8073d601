//! Every spec write is checked against its plugin's schema and rules before
//! it commits: refusals through the binary, with and without a host.

use beehive_e2e::{Workspace, assert_mentions, wait_until};

/// `apply -f FILE` of `text`, expected to be refused as invalid (exit 7);
/// returns what it printed on stderr.
fn refused(workspace: &Workspace, file: &str, text: &str) -> String {
    workspace.write(file, text);
    let output = workspace.run(&["apply", "-f", file]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(7), "{file}: {stderr}");
    stderr
}

/// The names stored of `kind`, one per line.
fn names(workspace: &Workspace, kind: &str) -> String {
    workspace.ok(&["get", kind, "-o", "name"])
}

#[test]
fn apply_refuses_specs_that_break_the_schema_and_writes_nothing() {
    let workspace = Workspace::with_plugins(&["greeting", "conditions"]);
    let host = workspace.start_host(&[]);

    let type_ = refused(
        &workspace,
        "type.yaml",
        "kind: Greeting\nname: bad\nspec: {name: 5}\n",
    );
    assert_mentions(
        &type_,
        &[
            "Greeting.example.dev/bad",
            r#"spec.name: 5 is not of type "string""#,
        ],
    );
    let unknown = refused(
        &workspace,
        "unknown.yaml",
        "kind: Greeting\nname: bad\nspec: {name: a, extra: true}\n",
    );
    assert_mentions(&unknown, &["spec: ", "'extra' was unexpected"]);
    let missing = refused(
        &workspace,
        "missing.yaml",
        "kind: Greeting\nname: bad\nspec: {nom: a}\n",
    );
    assert_mentions(&missing, &[r#""name" is a required property"#]);
    let no_spec = refused(&workspace, "empty.yaml", "kind: Greeting\nname: bad\n");
    assert_mentions(&no_spec, &[r#""name" is a required property"#]);

    // One bad object refuses the whole apply.
    let mixed = "kind: Greeting\nname: good\nspec: {name: ada}\n---\n\
                 kind: Greeting\nname: bad\nspec: {name: [x]}\n";
    assert_mentions(&refused(&workspace, "mixed.yaml", mixed), &["spec.name"]);
    assert_eq!(names(&workspace, "Greeting"), "", "nothing was written");

    // A rule the schema cannot say, checked by the plugin's validate.
    let port = refused(
        &workspace,
        "port.yaml",
        "kind: Service\nname: web\nspec: {port: 70000}\n",
    );
    assert_mentions(&port, &["spec.port: 70000 is outside 1-65535"]);

    // Valid objects still apply, and converge.
    workspace.apply(
        "good.yaml",
        "kind: Greeting\nname: good\nspec: {name: ada}\n",
    );
    workspace.apply("web.yaml", "kind: Service\nname: web\nspec: {port: 8080}\n");
    workspace.ok(&["wait", "Greeting", "good", "--for", "settled"]);

    // With no host running, the schema recorded with the registration
    // still holds (the plugin's own rules need the plugin, so they do not).
    host.terminate();
    let offline = refused(
        &workspace,
        "offline.yaml",
        "kind: Greeting\nname: later\nspec: {name: false}\n",
    );
    assert_mentions(&offline, &["spec.name: false is not of type"]);
    workspace.apply(
        "later.yaml",
        "kind: Greeting\nname: later\nspec: {name: bo}\n",
    );
    assert_eq!(
        names(&workspace, "Greeting"),
        "Greeting.example.dev/good\nGreeting.example.dev/later\n"
    );
    // The plugin's own check cannot run, and the write says so.
    workspace.write("db.yaml", "kind: Service\nname: db\nspec: {port: 5432}\n");
    let unchecked = workspace.run(&["apply", "-f", "db.yaml"]);
    assert!(unchecked.status.success(), "{unchecked:?}");
    assert_mentions(
        &String::from_utf8_lossy(&unchecked.stderr),
        &[
            "warning: Service.example.dev: no host is running",
            "`validate`",
            "beehive run",
        ],
    );
    let later = workspace.run(&["apply", "-f", "later.yaml"]);
    assert!(
        !String::from_utf8_lossy(&later.stderr).contains("validate"),
        "a kind without a validate export warns of nothing: {later:?}"
    );
}

#[test]
fn a_validator_that_traps_loops_or_runs_out_of_memory_refuses_the_write() {
    let workspace = Workspace::with_plugins(&["misbehave"]);
    let host = workspace.start_host(&[]);
    let cases = [
        ("validate-loop", "CPU deadline"),
        ("validate-panic", "trapped"),
        ("validate-allocate", "out of memory"),
    ];
    for (act, why) in cases {
        let text = format!("kind: Misbehave\nname: {act}\nspec: {{act: {act}}}\n");
        let stderr = refused(&workspace, &format!("{act}.yaml"), &text);
        assert_mentions(&stderr, &["validator failed", why]);
    }
    let refuse = "kind: Misbehave\nname: r\nspec: {act: validate-refuse}\n";
    assert_mentions(
        &refused(&workspace, "refuse.yaml", refuse),
        &["spec.act: validate-refuse is refused"],
    );
    // A plugin's words reach the terminal with their escapes escaped.
    let escape = "kind: Misbehave\nname: e\nspec: {act: validate-escape}\n";
    let escaped = refused(&workspace, "escape.yaml", escape);
    assert!(!escaped.contains('\u{1b}'), "{escaped:?}");
    assert_mentions(&escaped, &[r"\u{1b}[31mred\nerror: forged"]);
    assert_eq!(names(&workspace, "Misbehave"), "", "nothing was written");
    // The host goes on serving, and a good spec applies.
    workspace.apply(
        "fine.yaml",
        "kind: Misbehave\nname: fine\nspec: {act: rest}\n",
    );
    workspace.ok(&["wait", "Misbehave", "fine", "--for", "settled"]);
    host.terminate();
}

#[test]
fn explain_shows_a_kinds_fields_and_a_swapped_plugin_validates_by_its_new_schema() {
    let workspace = Workspace::with_plugins(&["greeting", "conditions"]);
    let host = workspace.start_host(&[]);

    let greeting = workspace.ok(&["explain", "Greeting"]);
    assert_mentions(
        &greeting,
        &["KIND:     Greeting.example.dev", "spec\t<Object>"],
    );
    let spec = workspace.ok(&["explain", "Greeting.spec"]);
    assert_mentions(&spec, &["name\t<string> -required-", "Who to greet."]);
    let port = workspace.ok(&["explain", "Service.example.dev.spec.port"]);
    assert_mentions(
        &port,
        &["FIELD:    spec.port <integer> -required-", "1–65535"],
    );
    let missing = workspace.run(&["explain", "Service.spec.prot"]);
    assert_eq!(missing.status.code(), Some(3));
    assert_mentions(
        &String::from_utf8_lossy(&missing.stderr),
        &["\"prot\" does not exist", "enabled, port"],
    );

    // greeting-v3 renames `name` to `who`: once it serves, writes follow it.
    workspace.install_plugin("greeting_v3", "greeting.wasm");
    wait_until("the new schema is recorded", || {
        workspace.ok(&["explain", "Greeting.spec"]).contains("who")
    });
    let old_shape = refused(
        &workspace,
        "old.yaml",
        "kind: Greeting\nname: a\nspec: {name: ada}\n",
    );
    assert_mentions(&old_shape, &[r#""who" is a required property"#]);
    workspace.apply("new.yaml", "kind: Greeting\nname: a\nspec: {who: ada}\n");
    host.terminate();
}

/// How many `DecodeFailed` events `events Greeting NAME -o json` counts.
fn decode_failures(workspace: &Workspace, name: &str) -> u64 {
    let printed = workspace.ok(&["events", "Greeting", name, "-o", "json"]);
    let events: serde_json::Value = serde_json::from_str(&printed).expect("events as JSON");
    events
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "DecodeFailed")
        .map(|e| e["count"].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn an_object_stored_before_its_schema_is_quarantined_logged_once_and_counted_failing() {
    let workspace = Workspace::new();
    let host = workspace.start_host(&["--owed-pass-interval", "1s"]);
    // Written while no plugin serves the kind, so no schema checks it.
    workspace.write(
        "old.yaml",
        "kind: Greeting.example.dev\nname: old\nspec: {nom: a}\n",
    );
    workspace.ok(&["apply", "-f", "old.yaml", "--new-kind"]);
    workspace.install_plugin("greeting", "greeting.wasm");

    wait_until("three passes found it undecodable", || {
        decode_failures(&workspace, "old") >= 3
    });
    let logged = host.log().matches("quarantined").count();
    assert_eq!(logged, 1, "logged once for its generation: {}", host.log());
    let failing = r#"beehive_objects_failing{kind="Greeting.example.dev"} 1"#;
    wait_until("the metrics count it as failing", || {
        workspace.ok(&["metrics"]).contains(failing)
    });

    // A spec that decodes heals it.
    workspace.apply("fixed.yaml", "kind: Greeting\nname: old\nspec: {name: a}\n");
    workspace.ok(&["wait", "Greeting", "old", "--for", "settled"]);
    let healed = r#"beehive_objects_failing{kind="Greeting.example.dev"} 0"#;
    wait_until("the metrics no longer count it", || {
        workspace.ok(&["metrics"]).contains(healed)
    });
    host.terminate();
}

/// `{"a": {"a": ... 1}}`, `levels` deep.
fn nested_under_a(levels: usize) -> String {
    (0..levels).fold("1".to_string(), |inner, _| format!("{{\"a\": {inner}}}"))
}

#[test]
fn a_schema_whose_work_doubles_per_level_is_cut_off_and_a_looping_one_is_refused_at_load() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    // The hostile plugin twice, its spec schema replaced by an attack on
    // the host's checker (the config key `schema`), under two kinds.
    for (kind, schema) in [("Doubling", "exponential"), ("Looping", "looping")] {
        let file = kind.to_lowercase();
        let policy = format!("[config]\nkind = {kind:?}\nschema = {schema:?}\n");
        workspace.write(&format!("plugins/{file}.toml"), &policy);
        workspace.install_plugin("hostile", &format!("{file}.wasm"));
    }
    let host = workspace.start_host(&[]);

    // Before: this schema loaded and then accepted any spec unchecked.
    let plugins = workspace.ok(&["plugins"]);
    assert_mentions(
        &plugins,
        &[
            "looping.wasm",
            "the schema loops without reading the spec: # -> #/anyOf/0 -> #",
        ],
    );

    // Before: 16 levels took seconds, 24 never finished, and writes of
    // other kinds waited behind it. The deepest spec a document may be.
    let deep = format!("kind: Doubling\nname: deep\nspec: {}\n", nested_under_a(60));
    let stderr = refused(&workspace, "deep.yaml", &deep);
    assert_mentions(
        &stderr,
        // The steps run out first, or on a busy machine the time.
        &[
            "Doubling.test.dev/deep",
            "against the kind's schema took",
            "the limit",
            "anyOf",
        ],
    );
    assert_eq!(names(&workspace, "Doubling"), "", "nothing was written");
    // An empty listing says so on stderr, as kubectl's: stdout stays empty.
    let listed = workspace.run(&["get", "Doubling"]);
    assert_eq!(String::from_utf8_lossy(&listed.stdout), "");
    assert_mentions(
        &String::from_utf8_lossy(&listed.stderr),
        &["No objects found."],
    );

    // Shallow specs are checked as before, and other kinds are served.
    let shallow = format!(
        "kind: Doubling\nname: shallow\nspec: {}\n",
        nested_under_a(3)
    );
    assert_mentions(
        &refused(&workspace, "shallow.yaml", &shallow),
        &["not valid under any of the schemas listed in the 'anyOf' keyword"],
    );
    workspace.apply(
        "calm.yaml",
        "kind: Doubling\nname: calm\nspec: {act: calm}\n",
    );
    workspace.apply("ada.yaml", "kind: Greeting\nname: ada\nspec: {name: ada}\n");
    workspace.ok(&["wait", "Greeting", "ada", "--for", "settled"]);
    host.terminate();
}
