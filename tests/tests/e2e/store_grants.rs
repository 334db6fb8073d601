//! Least privilege inside the store, through the real binary and the
//! `hostile` plugin: a plugin touches kinds other than its own only as its
//! policy's `[store]` section grants; each refusal is an error in the
//! plugin, a Warning event on the pass's object and a metric, and writes
//! nothing; a changed grant applies to the next instances, and a revoked
//! one to a pass already running.

use beehive_e2e::{Workspace, wait_until};

use crate::holds::{act, outcome, plugins_mentioning, stops_promptly};

/// The operator's object of a kind no plugin serves, and its id.
fn note(workspace: &Workspace, name: &str) -> i64 {
    let note = serde_json::json!({"kind": "Note.test.dev", "name": name, "spec": {"text": name}});
    workspace.apply_new_kind(&format!("{name}.json"), &note.to_string());
    let shown = workspace.ok(&["get", "Note", name, "-o", "json"]);
    let object: serde_json::Value = serde_json::from_str(&shown).unwrap();
    object["id"].as_i64().unwrap()
}

/// The store calls `hostile` makes, on `Note.test.dev` object `n1` (id
/// `id`) or a new object, and the verb and kind each needs. Finalizers
/// need a kind with a controller: `Greeting`. The delete takes `gone`, so
/// a denied call retried once granted cannot take `n1` from the others.
fn calls(id: i64) -> Vec<(&'static str, String, &'static str, &'static str)> {
    let note = "Note.test.dev";
    let on = |kind: &str, name: &str| format!("{kind} {name} {id}");
    vec![
        ("store-get", on(note, "n1"), "read", note),
        ("store-list", on(note, "n1"), "read", note),
        ("store-depend", on(note, "n1"), "read", note),
        ("store-own", on(note, "n1"), "read", note),
        ("store-owned", on(note, "n1"), "read", note),
        ("store-create", on(note, "n2"), "write", note),
        (
            "store-finalize",
            on("Greeting.example.dev", "held"),
            "write",
            "Greeting.example.dev",
        ),
        ("store-update", on(note, "n1"), "write", note),
        ("store-delete", on(note, "gone"), "write", note),
    ]
}

fn metric(workspace: &Workspace, series: &str) -> f64 {
    let metrics = workspace.ok(&["metrics"]);
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn a_plugin_touches_other_kinds_only_as_its_policy_grants() {
    let workspace = Workspace::with_plugins(&["hostile", "greeting"]);
    let host = workspace.start_host(&[]);
    let id = note(&workspace, "n1");
    note(&workspace, "gone");
    let before = workspace.ok(&["get", "Note", "n1", "-o", "json"]);

    for (op, path, verb, kind) in calls(id) {
        let name = format!("denied-{}", &op["store-".len()..]);
        let refused = act(&workspace, "Hostile", &name, op, &path).unwrap_err();
        let expected = format!("not granted: {verb} on {kind}");
        assert!(refused.contains(&expected), "{op}: {refused}");
        let events = workspace.ok(&["events", "Hostile", &name]);
        assert!(events.contains("StoreAccessDenied"), "{op}: {events}");
        assert!(
            events.contains(&format!("denied {verb} on {kind}")),
            "{op}: {events}"
        );
        // The fix, named: the line to add and the file to add it to.
        let fix = format!("add `{verb} = ['{kind}']` under `[store]` in ");
        assert!(events.contains(&fix), "{op}: {events}");
        assert!(events.contains("hostile.toml"), "{op}: {events}");
    }
    for verb in ["read", "write"] {
        let series = format!(
            "beehive_plugin_denials_total{{plugin=\"hostile\",kind=\"Note.test.dev\",verb=\"{verb}\"}}"
        );
        assert!(metric(&workspace, &series) >= 3.0, "{series}");
    }
    // Nothing was written: n1 as it was, no other Note, no owned child, no
    // dependency.
    assert_eq!(workspace.ok(&["get", "Note", "n1", "-o", "json"]), before);
    let notes = workspace.ok(&["get", "Note", "-o", "name"]);
    let mut notes: Vec<&str> = notes.lines().collect();
    notes.sort();
    assert_eq!(notes, ["Note.test.dev/gone", "Note.test.dev/n1"]);
    assert!(
        workspace
            .fails(&["get", "Hostile", "denied-own-child"])
            .contains("not found")
    );
    assert!(
        workspace
            .fails(&["get", "Greeting", "held"])
            .contains("not found")
    );
    let depending = workspace.ok(&["describe", "Hostile", "denied-depend"]);
    assert!(!depending.contains("Note.test.dev/n1"), "{depending}");

    // Granted, the same calls go through on the next instances.
    workspace.write(
        "plugins/hostile.toml",
        "[store]\nwrite = [\"*.test.dev\", \"Greeting.example.dev\"]\n",
    );
    plugins_mentioning(&workspace, "store:write:*.test.dev");
    for (op, path, _, _) in calls(id) {
        let name = format!("granted-{}", &op["store-".len()..]);
        let done = act(&workspace, "Hostile", &name, op, &path);
        assert!(done.is_ok(), "{op}: {done:?}");
    }
    wait_until("`gone` is deleted", || {
        let shown = workspace.run(&["get", "Note", "gone", "-o", "json"]);
        !shown.status.success()
            || !String::from_utf8_lossy(&shown.stdout).contains("\"deletionRequestedAt\": null")
    });
    let notes = workspace.ok(&["get", "Note", "-o", "name"]);
    assert!(notes.contains("Note.test.dev/n2"), "{notes}");
    let held = workspace.ok(&["get", "Greeting", "held", "-o", "json"]);
    assert!(held.contains("test.dev/hold"), "{held}");
    stops_promptly(host);
}

#[test]
fn a_read_grant_does_not_write_and_the_shipped_cascade_policy_works() {
    let workspace = Workspace::with_plugins(&["hostile", "greeting", "cascade"]);
    workspace.write(
        "plugins/hostile.toml",
        "[store]\nread = [\"Note.test.dev\"]\n",
    );
    let host = workspace.start_host(&[]);
    let id = note(&workspace, "n1");
    let path = format!("Note.test.dev n1 {id}");
    assert!(act(&workspace, "Hostile", "reads", "store-get", &path).is_ok());
    let refused = act(&workspace, "Hostile", "writes", "store-update", &path).unwrap_err();
    assert!(
        refused.contains("not granted: write on Note.test.dev"),
        "{refused}"
    );

    // cascade ships with write on Greeting.example.dev: its set converges.
    let set = "kind: GreetingSet.example.dev\nname: team\nspec: {names: [ada]}\n";
    workspace.apply("set.yaml", set);
    workspace.ok(&["wait", "GreetingSet", "team", "--for", "condition=Ready"]);
    stops_promptly(host);
}

#[test]
fn a_revoked_grant_stops_a_pass_already_running_at_its_next_store_call() {
    let workspace = Workspace::with_plugins(&["hostile"]);
    workspace.write(
        "plugins/hostile.toml",
        "[store]\nwrite = [\"Note.test.dev\"]\n",
    );
    let host = workspace.start_host(&[]);
    note(&workspace, "n0");
    // One pass writing Note w-0, w-1, ... a tenth of a second apart.
    let writer = serde_json::json!({
        "kind": "Hostile.test.dev",
        "name": "writer",
        "spec": {"act": "store-until-denied", "path": "Note.test.dev w 0"},
    });
    workspace.apply("writer.json", &writer.to_string());
    wait_until("the pass has written", || {
        workspace.run(&["get", "Note", "w-1"]).status.success()
    });
    // Before: the pass kept its grant to its wall-clock limit (60 s).
    workspace.write("plugins/hostile.toml", "# no grants\n");
    wait_until("the writer's pass ends", || {
        outcome(&workspace, "Hostile", "writer").is_some()
    });
    let ended = outcome(&workspace, "Hostile", "writer").unwrap();
    let ended = ended.expect("the pass reports the denial, not a failure");
    assert!(
        ended.starts_with("denied after") && ended.contains("not granted: write on Note.test.dev"),
        "{ended}"
    );
    stops_promptly(host);
}
