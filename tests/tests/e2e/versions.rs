//! Manifests that name the spec version they are written in: converted by
//! the serving plugin's migrator on write, refused when too new, printed
//! with their version so `get` output applies back.

use beehive_e2e::{Workspace, assert_mentions, wait_until};

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn greeting(workspace: &Workspace, name: &str) -> serde_json::Value {
    json(&workspace.ok(&["get", "Greeting", name, "-o", "json"]))
}

#[test]
fn a_manifest_names_its_spec_version_and_is_converted_on_write() {
    let workspace = Workspace::new();
    // The release whose spec version 1 calls `name` `who`.
    workspace.install_plugin("greeting_v3", "greeting.wasm");
    let host = workspace.start_host(&[]);

    let old = "kind: Greeting\nname: old\nspecVersion: 0\nspec: {name: ada}\n";
    assert_eq!(
        workspace.apply("old.yaml", old),
        "Greeting.example.dev/old created\n"
    );
    workspace.ok(&["wait", "Greeting", "old", "--for", "settled"]);
    let stored = greeting(&workspace, "old");
    assert_eq!(
        stored["spec"],
        serde_json::json!({"who": "ada"}),
        "{stored}"
    );
    assert_eq!(stored["specVersion"], 1);
    assert_eq!(stored["status"]["message"], "Hello, ada!");

    workspace.write(
        "newer.yaml",
        "kind: Greeting\nname: newer\nspecVersion: 2\nspec: {who: x}\n",
    );
    let newer = workspace.run(&["apply", "-f", "newer.yaml"]);
    assert_eq!(newer.status.code(), Some(7), "{newer:?}");
    assert_mentions(
        &String::from_utf8_lossy(&newer.stderr),
        &["spec version 2", "knows up to 1"],
    );
    assert!(
        !workspace
            .run(&["get", "Greeting", "newer"])
            .status
            .success()
    );

    // No version: taken as the current one, and said so.
    workspace.write(
        "plain.yaml",
        "kind: Greeting\nname: plain\nspec: {who: bo}\n",
    );
    let plain = workspace.run(&["apply", "-f", "plain.yaml"]);
    assert!(plain.status.success(), "{plain:?}");
    assert_mentions(
        &String::from_utf8_lossy(&plain.stderr),
        &[
            "warning: Greeting.example.dev reads spec version 1",
            "specVersion",
        ],
    );

    // A manifest written for version 0, naming none, is refused by the
    // version-1 schema; the refusal says why and how to fix it.
    workspace.write(
        "stale.yaml",
        "kind: Greeting\nname: stale\nspec: {name: cy}\n",
    );
    let stale = workspace.run(&["apply", "-f", "stale.yaml"]);
    assert_eq!(stale.status.code(), Some(7), "{stale:?}");
    assert_mentions(
        &String::from_utf8_lossy(&stale.stderr),
        &[
            "names no specVersion",
            "read as version 1",
            "`specVersion: N`",
        ],
    );

    // What get prints applies back unchanged, version and all.
    let printed = workspace.ok(&["get", "Greeting", "old", "-o", "yaml"]);
    assert_mentions(&printed, &["specVersion: 1"]);
    assert_eq!(
        workspace.apply("printed.yaml", &printed),
        "Greeting.example.dev/old unchanged\n"
    );

    // Reads show the current version; an older one cannot be made.
    workspace.ok(&[
        "get",
        "Greeting",
        "old",
        "--spec-version",
        "1",
        "-o",
        "json",
    ]);
    let older = workspace.run(&["get", "Greeting", "old", "--spec-version", "0"]);
    assert_eq!(older.status.code(), Some(7), "{older:?}");
    assert_mentions(
        &String::from_utf8_lossy(&older.stderr),
        &["converts only upwards", "version 0"],
    );

    // With no host, the CLI writes at the recorded version, and cannot
    // convert (the migrator is the plugin's).
    host.terminate();
    workspace.write(
        "offline.yaml",
        "kind: Greeting\nname: offline\nspecVersion: 0\nspec: {name: cy}\n",
    );
    let offline = workspace.run(&["apply", "-f", "offline.yaml"]);
    assert!(!offline.status.success());
    assert_mentions(
        &String::from_utf8_lossy(&offline.stderr),
        &["through the host"],
    );
    workspace.apply(
        "current.yaml",
        "kind: Greeting\nname: cy\nspec: {who: cy}\n",
    );
    assert_eq!(greeting(&workspace, "cy")["specVersion"], 1);
}

#[test]
fn a_manifests_directory_of_version_0_files_stays_settled_across_the_upgrade() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let manifest = |name: &str| {
        format!(
            "kind: Greeting.example.dev\nname: {name}\nspecVersion: 0\nspec: {{name: {name}}}\n"
        )
    };
    workspace.write("manifests/team.yaml", &manifest("ada"));
    let host = workspace.start_host(&["--manifests", "manifests"]);
    wait_until("ada is greeted", || {
        workspace
            .run(&["get", "Greeting", "ada", "-o", "json"])
            .stdout
            .starts_with(b"{")
            && greeting(&workspace, "ada")["status"]["message"] == "Hello, ada!"
    });

    workspace.install_plugin("greeting_v3", "greeting.wasm");
    wait_until("release 3 has greeted ada", || {
        greeting(&workspace, "ada")["status"]["release"] == 3
    });
    // What get prints (the spec as stored, at version 0) applies back as
    // unchanged: converted, it is what is stored.
    let generation = greeting(&workspace, "ada")["generation"].clone();
    let printed = workspace.ok(&["get", "Greeting", "ada", "-o", "yaml"]);
    assert_eq!(
        workspace.apply("printed.yaml", &printed),
        "Greeting.example.dev/ada unchanged\n",
        "{printed}"
    );
    assert_eq!(greeting(&workspace, "ada")["generation"], generation);
    // The file changes after the upgrade: its version-0 specs are
    // converted, not stored as version 1 and quarantined.
    workspace.write(
        "manifests/team.yaml",
        &format!("{}---\n{}", manifest("ada"), manifest("grace")),
    );
    wait_until("grace is greeted by release 3", || {
        let listed = workspace.ok(&["get", "Greeting", "-o", "name"]);
        listed.contains("grace") && greeting(&workspace, "grace")["status"]["release"] == 3
    });
    assert_eq!(
        greeting(&workspace, "grace")["spec"],
        serde_json::json!({"who": "grace"})
    );
    for name in ["ada", "grace"] {
        let events = workspace.ok(&["events", "Greeting", name]);
        assert!(!events.contains("DecodeFailed"), "{name}: {events}");
    }
    host.terminate();
}
