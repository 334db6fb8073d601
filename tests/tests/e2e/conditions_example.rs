//! What every language's `conditions` example must do through the binary,
//! shared by the Python and JavaScript tests: refuse bad specs by its schema
//! and its validate, and hot-swap to its release 2, which migrates specs.

use beehive_e2e::{Workspace, assert_mentions, wait_until};

/// `explain` shows the port's schema, and a port out of range or not an
/// integer is refused at apply (exit 7) with the rule it breaks.
pub fn refuses_bad_specs(workspace: &Workspace, kind: &str) {
    assert_mentions(
        &workspace.ok(&["explain", &format!("{kind}.spec.port")]),
        &["<integer> -required-", "The port to listen on"],
    );
    for (spec, rule) in [
        ("{port: 70000}", "spec.port: 70000 is outside 1-65535"),
        (
            "{port: eighty}",
            r#"spec.port: "eighty" is not of type "integer""#,
        ),
    ] {
        workspace.write(
            "bad.yaml",
            &format!("kind: {kind}\nname: bad\nspec: {spec}\n"),
        );
        let refused = workspace.run(&["apply", "-f", "bad.yaml"]);
        assert_eq!(refused.status.code(), Some(7), "{refused:?}");
        assert_mentions(&String::from_utf8_lossy(&refused.stderr), &[rule]);
    }
}

/// Installs example `release_2` over `file`, waits until it has re-run the
/// service `web`, checks no pass failed across the swap, and returns `web`
/// as `get -o json` prints it (its spec read through the migrator).
pub fn swaps_to_release_2(
    workspace: &Workspace,
    kind: &str,
    release_2: &str,
    file: &str,
) -> String {
    workspace.install_plugin(release_2, file);
    wait_until("release 2 has re-run every service", || {
        workspace
            .ok(&["describe", kind, "web"])
            .contains("(release 2)")
    });
    let events = workspace.ok(&["events", kind, "web"]);
    assert!(
        !events.contains("ReconcileFailed") && !events.contains("DecodeFailed"),
        "no pass failed across the swap: {events}"
    );
    workspace.ok(&["get", kind, "web", "-o", "json"])
}
