//! Controllers written in JavaScript (plugins/conditions-js and probe-js,
//! built by componentize-js) served by the real binary beside the Rust
//! plugins: hot-swapped to a release that migrates its specs, a thrown
//! exception backing its object off while the plugin serves on, and HTTP
//! reaching only where the operator grants it.

use beehive_e2e::{Workspace, assert_mentions, shared_plugin_cache, wait_until};

use crate::conditions_example;

#[test]
fn a_javascript_plugin_converges_beside_rust_ones_and_hot_swaps() {
    let workspace = Workspace::with_plugins(&["conditions", "conditions-js"]);
    let cache = shared_plugin_cache();
    let host = workspace.start_host(&["--plugin-cache", cache.to_str().unwrap()]);
    assert_mentions(
        &workspace.ok(&["plugins"]),
        &["Service.js.example.dev", "Service.example.dev"],
    );

    workspace.apply(
        "services.yaml",
        "kind: Service.example.dev\nname: web\nspec: {port: 8080}\n---\n\
         kind: Service.js.example.dev\nname: web\nspec: {port: 8080}\n---\n\
         kind: Service.js.example.dev\nname: off\nspec: {port: 9090, enabled: false}\n",
    );
    for kind in ["Service.example.dev", "Service.js.example.dev"] {
        workspace.ok(&["wait", kind, "web", "--for", "condition=Serving=True"]);
    }
    workspace.ok(&[
        "wait",
        "Service.js.example.dev",
        "off",
        "--for",
        "condition=Configured=True",
    ]);
    assert_mentions(
        &workspace.ok(&["describe", "Service.js.example.dev", "web"]),
        &["http://web:8080", "listening on :8080", "ValidPort"],
    );
    assert_mentions(
        &workspace.ok(&["describe", "Service.js.example.dev", "off"]),
        &["Disabled"],
    );
    // The plugin's JSON Schema (with its descriptions) and its validate
    // refuse bad specs at apply.
    conditions_example::refuses_bad_specs(&workspace, "Service.js.example.dev");
    let web = conditions_example::swaps_to_release_2(
        &workspace,
        "Service.js.example.dev",
        "conditions-js-v2",
        "conditions-js.wasm",
    );
    // Release 2 requires `enabled` (spec version 1); the stored version-0
    // spec reads upgraded through the plugin's JavaScript migrator.
    assert_mentions(&web, &["\"enabled\": true", "\"specVersion\": 1"]);
    host.terminate();
}

#[test]
fn a_thrown_exception_backs_its_object_off_and_the_plugin_serves_on() {
    let workspace = Workspace::new();
    let endpoint = beehive_e2e::TestServer::healthy();
    workspace.install_granted(
        "probe-js",
        &format!(
            "[http]\nallow = [{:?}]\n\n[config]\ntoken = \"js-t0ken\"\n",
            endpoint.authority()
        ),
    );
    let cache = shared_plugin_cache();
    let host = workspace.start_host(&["--plugin-cache", cache.to_str().unwrap()]);
    let probe = |name: &str, spec: &str| {
        format!("kind: Probe.js.example.dev\nname: {name}\nspec: {spec}\n")
    };
    workspace.apply(
        "probes.yaml",
        &[
            probe("broken", "{fail: asked to fail}"),
            probe(
                "up",
                &format!("{{url: \"{}\", intervalMs: 200}}", endpoint.url("/health")),
            ),
            probe(
                "rogue",
                &format!("{{url: \"{}\"}}", endpoint.localhost_url("/health")),
            ),
        ]
        .join("---\n"),
    );

    // The throw is the pass's failure, retried on the backoff ladder: the
    // same run of ReconcileFailed grows, carrying the exception.
    wait_until("the broken probe has failed twice", || {
        let events = workspace.ok(&["events", "Probe.js.example.dev", "broken"]);
        events.contains("TypeError: asked to fail") && events.contains("×2")
    });
    // The thrown error's stack is the event's detail, and in the plugin's
    // log lines.
    let runs = workspace.ok(&["events", "Probe.js.example.dev", "broken", "-o", "json"]);
    let runs: serde_json::Value = serde_json::from_str(&runs).unwrap();
    let trace = runs[0]["detail"]["trace"].as_str().unwrap_or_default();
    assert!(trace.starts_with("reconcile@"), "{runs}");
    let logs = workspace.ok(&["logs", "Probe.js.example.dev", "broken"]);
    assert_mentions(&logs, &["TypeError: asked to fail", "reconcile@"]);
    // Meanwhile the same plugin serves the other objects.
    wait_until("the granted probe is reachable", || {
        workspace
            .ok(&["get", "Probe.js.example.dev", "up", "-o", "json"])
            .contains("\"reachable\"")
    });
    assert_eq!(
        endpoint.last_header("/health", "authorization").as_deref(),
        Some("Bearer js-t0ken"),
        "the token from the policy's config reached the endpoint"
    );
    wait_until("the rogue probe was denied", || {
        let events = workspace.ok(&["events", "Probe.js.example.dev", "rogue"]);
        events.contains("HttpRequestDenied") && events.contains("ProbeFailed")
    });
    let plugins = workspace.ok(&["plugins"]);
    assert!(
        plugins.contains("Probe.js.example.dev") && !plugins.contains("FAILED"),
        "the plugin still serves: {plugins}"
    );

    // Fixed, the object settles on its next pass.
    workspace.apply(
        "probes.yaml",
        &probe(
            "broken",
            &format!("{{url: \"{}\"}}", endpoint.url("/health")),
        ),
    );
    wait_until("the fixed probe is reachable", || {
        workspace
            .ok(&["get", "Probe.js.example.dev", "broken", "-o", "json"])
            .contains("\"reachable\"")
    });
    host.terminate();
}
