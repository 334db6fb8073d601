//! Contract versions side by side: a plugin built against contract 0.1
//! (checked in under `tests/fixtures/contract-0.1/`) is served beside 0.2
//! plugins with the behaviour it was built for, keeps the labels it cannot
//! see, and hot-swaps to its 0.2 build and back without a restart.

use beehive_e2e::{Workspace, assert_mentions, wait_until};

use crate::TEAM;

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The contract version `beehive plugins` says serves `kind`.
fn contract_of(workspace: &Workspace, kind: &str) -> String {
    let plugins = json(&workspace.ok(&["plugins", "-o", "json"]));
    let row = plugins["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == kind)
        .unwrap_or_else(|| panic!("{kind} in {plugins}"))
        .clone();
    row["contract"].as_str().unwrap_or_default().to_string()
}

/// The names `get Greeting -l SELECTOR -o name` prints, one a line.
fn selected(workspace: &Workspace, selector: &str) -> String {
    workspace.ok(&["get", "Greeting", "-l", selector, "-o", "name"])
}

/// Waits for the rollout of `kind`'s newest revision to complete.
fn rolled_out(workspace: &Workspace, kind: &str, revision: &str) {
    let rolled = workspace.ok(&["rollout", "status", kind, "--timeout", "10m"]);
    assert_mentions(&rolled, &[&format!("to revision {revision}"), "complete"]);
}

#[test]
fn a_0_1_plugin_serves_beside_0_2_ones_keeps_labels_and_swaps_both_ways() {
    let workspace = Workspace::new();
    workspace.install_plugin_0_1("cascade", "cascade.wasm");
    workspace.install_plugin("greeting", "greeting.wasm");
    let host = workspace.start_host(&[]);
    workspace.apply("team.yaml", TEAM);
    workspace.ok(&["wait", "GreetingSet", "team", "--for", "condition=Ready"]);
    assert_eq!(contract_of(&workspace, "GreetingSet.example.dev"), "0.1.0");
    assert_eq!(contract_of(&workspace, "Greeting.example.dev"), "0.2.0");
    let table = workspace.ok(&["plugins"]);
    assert_mentions(&table, &["CONTRACT", "0.1.0", "0.2.0"]);

    // The 0.1 build creates its children with no labels; one labelled by
    // hand keeps its label through the set's next create-or-update.
    assert_eq!(selected(&workspace, "example.dev/set"), "");
    workspace.ok(&["label", "Greeting/team-ada", "tier=gold"]);
    workspace.apply(
        "team.yaml",
        &TEAM.replace("[ada, grace]", "[ada, grace, hopper]"),
    );
    workspace.ok(&[
        "wait",
        "GreetingSet/team",
        "--for",
        "jsonpath={.status.total}=3",
    ]);
    workspace.ok(&["wait", "GreetingSet", "team", "--for", "condition=Ready"]);
    assert_eq!(
        selected(&workspace, "tier=gold"),
        "Greeting.example.dev/team-ada\n"
    );

    // To its 0.2 build: every set gets a pass on it, which labels the
    // children with their set (and, owning their labels, replaces the
    // hand-set one).
    workspace.install_plugin("cascade", "cascade.wasm");
    rolled_out(&workspace, "GreetingSet", "2");
    assert_eq!(contract_of(&workspace, "GreetingSet.example.dev"), "0.2.0");
    wait_until("the 0.2 build labels every child", || {
        selected(&workspace, "example.dev/set=team").lines().count() == 3
    });
    assert_eq!(selected(&workspace, "tier=gold"), "");

    // And back to 0.1: its passes leave the labels it cannot see alone.
    workspace.install_plugin_0_1("cascade", "cascade.wasm");
    rolled_out(&workspace, "GreetingSet", "3");
    assert_eq!(contract_of(&workspace, "GreetingSet.example.dev"), "0.1.0");
    workspace.ok(&["wait", "GreetingSet", "team", "--for", "condition=Ready"]);
    assert_eq!(
        selected(&workspace, "example.dev/set=team").lines().count(),
        3,
        "a 0.1 pass keeps the labels"
    );
    let history = workspace.ok(&["rollout", "history", "GreetingSet"]);
    assert_eq!(history.lines().count(), 4, "three revisions: {history}");
    host.terminate();
}
