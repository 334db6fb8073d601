//! Controllers written in Python (plugins/conditions-py and probe-py, built
//! by componentize-py) served by the real binary beside the Rust plugins:
//! hot-swapped to a release that migrates its specs, and reaching HTTP only
//! where the operator grants it.

use beehive_e2e::{Workspace, assert_mentions, shared_plugin_cache, wait_until};

use crate::conditions_example;

#[test]
fn a_python_plugin_converges_beside_rust_ones_and_hot_swaps() {
    let workspace = Workspace::with_plugins(&["conditions", "conditions-py"]);
    let cache = shared_plugin_cache();
    let host = workspace.start_host(&["--plugin-cache", cache.to_str().unwrap()]);
    let plugins = workspace.ok(&["plugins"]);
    assert_mentions(&plugins, &["Service.py.example.dev", "Service.example.dev"]);

    workspace.apply(
        "services.yaml",
        "kind: Service.example.dev\nname: web\nspec: {port: 8080}\n---\n\
         kind: Service.py.example.dev\nname: web\nspec: {port: 8080}\n",
    );
    for kind in ["Service.example.dev", "Service.py.example.dev"] {
        workspace.ok(&["wait", kind, "web", "--for", "condition=Serving=True"]);
    }
    let described = workspace.ok(&["describe", "Service.py.example.dev", "web"]);
    assert_mentions(&described, &["http://web:8080", "listening on :8080"]);
    // The Python SDK's schema (from the dataclass, `#:` comments as
    // descriptions) and its validate refuse bad specs at apply.
    conditions_example::refuses_bad_specs(&workspace, "Service.py.example.dev");
    let web = conditions_example::swaps_to_release_2(
        &workspace,
        "Service.py.example.dev",
        "conditions-py-v2",
        "conditions-py.wasm",
    );
    // Release 2 requires `enabled` (spec version 1); the stored version-0
    // spec reads upgraded through the plugin's Python migrator.
    assert_mentions(&web, &["\"enabled\": true"]);
    host.terminate();
}

#[test]
fn a_plugin_that_cannot_start_within_its_memory_cap_is_refused_with_both_numbers() {
    let workspace = Workspace::with_plugins(&["conditions-py"]);
    let host = workspace.start_host(&["--plugin-memory", "8MiB"]);
    let plugins = workspace.ok(&["plugins"]);
    assert_mentions(
        &plugins,
        &[
            "of linear memory at start, more than its cap of 8.0 MiB",
            "needs 12.",
        ],
    );
    host.terminate();
}

#[test]
fn a_python_plugin_reaches_a_granted_endpoint_with_its_token_and_is_denied_elsewhere() {
    let workspace = Workspace::new();
    let endpoint = beehive_e2e::TestServer::healthy();
    workspace.install_granted(
        "probe-py",
        &format!(
            "[http]\nallow = [{:?}]\n\n[config]\ntoken = \"py-t0ken\"\n",
            endpoint.authority()
        ),
    );
    let cache = shared_plugin_cache();
    let host = workspace.start_host(&["--plugin-cache", cache.to_str().unwrap()]);
    let probe = |name: &str, url: &str| {
        format!(
            "kind: Probe.py.example.dev\nname: {name}\nspec: {{url: \"{url}\", interval_seconds: 0.2}}\n"
        )
    };
    workspace.apply(
        "probes.yaml",
        &format!(
            "{}---\n{}",
            probe("up", &endpoint.url("/health")),
            probe("rogue", &endpoint.localhost_url("/health"))
        ),
    );
    wait_until("the granted probe is reachable", || {
        workspace
            .ok(&["get", "Probe.py.example.dev", "up", "-o", "json"])
            .contains("\"reachable\"")
    });
    assert_eq!(
        endpoint.last_header("/health", "authorization").as_deref(),
        Some("Bearer py-t0ken"),
        "the token from the policy's config reached the endpoint"
    );
    wait_until("the rogue probe was denied", || {
        let events = workspace.ok(&["events", "Probe.py.example.dev", "rogue"]);
        events.contains("HttpRequestDenied") && events.contains("ProbeFailed")
    });
    let rogue = workspace.ok(&["get", "Probe.py.example.dev", "rogue", "-o", "json"]);
    assert_mentions(&rogue, &["\"unreachable\""]);
    host.terminate();
}

/// The host answers on its socket while an uncached Python plugin compiles:
/// a Rust plugin serves meanwhile, `beehive plugins` shows the Python file
/// loading, an object of its kind waits for it, and `plugins --wait`
/// returns once it serves. A metrics address in use is refused before any
/// plugin loads.
#[test]
fn the_host_serves_while_a_large_plugin_compiles() {
    let workspace = Workspace::with_plugins(&["greeting", "conditions-py"]);
    // The workspace's own cache is empty: the Python plugin compiles.
    let host = workspace.start_host_until(&[], "host.log", "serving ");
    let mut shown = String::new();
    wait_until("the greeting plugin serves", || {
        shown = workspace.ok(&["plugins"]);
        shown.contains("Greeting.example.dev")
    });
    assert_mentions(&shown, &["LOADING plugins/conditions-py.wasm (18."]);
    workspace.apply(
        "greeting.yaml",
        "kind: Greeting\nname: early\nspec: {name: Early}\n",
    );
    workspace.ok(&["wait", "Greeting", "early", "--for", "settled"]);

    // A kind of the plugin still compiling: the apply waits for the load
    // rather than refusing the kind as unknown (as it did before).
    workspace.write(
        "service.yaml",
        "kind: Service.py.example.dev\nname: web\nspec: {port: 8080}\n",
    );
    let applied = workspace.ok(&["apply", "-f", "service.yaml", "--request-timeout", "10m"]);
    assert_eq!(applied, "Service.py.example.dev/web created\n");
    let served = workspace.ok(&["plugins", "--wait"]);
    assert_mentions(&served, &["Service.py.example.dev", "Greeting.example.dev"]);
    assert!(!served.contains("LOADING"), "{served}");
    workspace.ok(&["wait", "Service.py.example.dev", "web", "--for", "settled"]);

    let log = host.log();
    let at = |line: &str| {
        log.find(line)
            .unwrap_or_else(|| panic!("the host never logged {line:?}:\n{log}"))
    };
    assert!(at("serving ") < at("compiling plugins/greeting.wasm (0."));
    assert!(at("serves Greeting.example.dev") < at("compiling plugins/conditions-py.wasm"));
    assert!(
        at("compiled plugins/conditions-py.wasm (baseline code) in")
            < at("serves Service.py.example.dev")
    );
    assert!(at("serves Service.py.example.dev") < at("first plugin load done"));

    // Served from baseline code first, it moves to optimized code that
    // Cranelift compiled behind it, and says so in `plugins` until then.
    wait_until("the optimized code takes over", || {
        host.log()
            .contains("plugins/conditions-py.wasm now runs its optimized code")
    });
    let optimized = workspace.ok(&["plugins"]);
    assert!(!optimized.contains("BASELINE"), "{optimized}");
    workspace.ok(&["wait", "Service.py.example.dev", "web", "--for", "settled"]);

    // The metrics port is taken now: a second host on another store is
    // refused at once, before it loads (or compiles) anything.
    let metrics = Workspace::with_plugins(&["conditions-py"]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let started = std::time::Instant::now();
    let refused = metrics.run(&["run", "--metrics-addr", &addr]);
    assert!(!refused.status.success());
    assert_mentions(
        &String::from_utf8_lossy(&refused.stderr),
        &[&format!("--metrics-addr {addr}")],
    );
    assert!(
        !String::from_utf8_lossy(&refused.stderr).contains("compiling"),
        "refused before loading plugins"
    );
    // ... and before it creates its store or the lock beside it.
    for left in ["beehive.db", "beehive.db.lock"] {
        assert!(
            !metrics.path().join(left).exists(),
            "{left} was left behind"
        );
    }
    eprintln!("refused in {:?}", started.elapsed());
    host.terminate();
}

/// The Python SDK is a package: pip installs it (with `beehive-py` and the
/// WIT it carries) into a fresh environment, and `beehive-py build` makes a
/// plugin from a directory outside the checkout that a host would serve.
#[test]
fn the_python_sdk_installs_with_pip_and_builds_a_plugin_anywhere() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The toolchain environment the build scripts made (componentize-py).
    let toolchain = repo.join("target/python-venv/bin");
    assert!(
        toolchain.join("componentize-py").exists(),
        "scripts/python-env makes the toolchain first"
    );
    let scratch = tempfile::tempdir().unwrap();
    let venv = scratch.path().join("venv");
    let run = |program: &std::path::Path, args: &[&str], dir: &std::path::Path| {
        let path = format!("{}:{}", toolchain.display(), std::env::var("PATH").unwrap());
        let out = std::process::Command::new(program)
            .args(args)
            .current_dir(dir)
            .env("PATH", path)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{program:?} {args:?}: {printed}");
        printed
    };
    run(
        std::path::Path::new("python3"),
        &["-m", "venv", venv.to_str().unwrap()],
        scratch.path(),
    );
    // A copy, links resolved: pip builds in the source tree, and the
    // package's WIT is a link into the checkout.
    let sdk = scratch.path().join("sdk");
    run(
        std::path::Path::new("cp"),
        &[
            "-rL",
            repo.join("guest-sdk/python").to_str().unwrap(),
            sdk.to_str().unwrap(),
        ],
        scratch.path(),
    );
    // pip fetches the build backend (setuptools) from PyPI, or its cache.
    run(
        &venv.join("bin/pip"),
        &["install", "--quiet", "--no-deps", sdk.to_str().unwrap()],
        scratch.path(),
    );

    let plugin = scratch.path().join("svc");
    std::fs::create_dir(&plugin).unwrap();
    std::fs::copy(
        repo.join("plugins/conditions-py/app.py"),
        plugin.join("app.py"),
    )
    .unwrap();
    let built = run(
        &venv.join("bin/beehive-py"),
        &["build", "svc/app.py", "-o", "svc.wasm"],
        scratch.path(),
    );
    assert_mentions(
        &built,
        &[
            "beehive-py: componentizing app.py for world plugin-with-http",
            "beehive-py: built in ",
            "svc.wasm (world plugin-with-http)",
        ],
    );
    let checked = run(
        &beehive_e2e::beehive_bin(),
        &["plugins", "check", "svc.wasm"],
        scratch.path(),
    );
    assert_mentions(&checked, &["Kind:       Service.py.example.dev"]);
    // The fake client for a plugin's own tests comes with the package.
    run(
        &venv.join("bin/python"),
        &["-c", "import beehive_guest.fake"],
        scratch.path(),
    );
}

/// A controller written against the WIT alone, with componentize-py's own
/// bindings and no SDK, for the contract's plain `plugin` world (no
/// wasi:http): a component is judged by what it imports, so it is served.
#[test]
fn a_python_component_of_the_plain_world_without_the_sdk_is_served() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let componentize = repo.join("target/python-venv/bin/componentize-py");
    assert!(
        componentize.exists(),
        "scripts/python-env makes the toolchain first"
    );
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("app.py"), BARE_CONTROLLER).unwrap();
    let workspace = Workspace::new();
    std::fs::create_dir_all(workspace.path().join("plugins")).unwrap();
    let built = std::process::Command::new(&componentize)
        .args(["-d", repo.join("wit").to_str().unwrap(), "-w", "plugin"])
        .args([
            "componentize",
            "app",
            "-p",
            scratch.path().to_str().unwrap(),
        ])
        .args(["-o", scratch.path().join("bare.wasm").to_str().unwrap()])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    std::fs::rename(
        scratch.path().join("bare.wasm"),
        workspace.path().join("plugins/bare.wasm"),
    )
    .unwrap();
    let cache = shared_plugin_cache();
    let host = workspace.start_host(&["--plugin-cache", cache.to_str().unwrap()]);
    // Before: refused as a Python plugin that "needs wasi:http".
    assert_mentions(
        &workspace.ok(&["plugins", "check", "plugins/bare.wasm"]),
        &["world plugin"],
    );
    workspace.apply("bare.yaml", "kind: Bare.example.dev\nname: one\nspec: {}\n");
    workspace.ok(&["wait", "Bare", "one", "--for", "settled"]);
    let one = workspace.ok(&["get", "Bare", "one", "-o", "json"]);
    assert_mentions(&one, &["\"seen\": \"one\""]);

    // A failure's first line is the event's message; the lines after it
    // (the SDKs send a traceback or a stack there) are its detail.
    workspace.apply(
        "broken.yaml",
        "kind: Bare.example.dev\nname: broken\nspec: {}\n",
    );
    let failures = || workspace.ok(&["events", "Bare", "broken", "-o", "json"]);
    wait_until("the failed pass's event", || {
        failures().contains("ReconcileFailed")
    });
    let events: serde_json::Value = serde_json::from_str(&failures()).unwrap();
    let failed = &events[0];
    assert_eq!(failed["message"], "ValueError: boom", "{events}");
    assert_eq!(
        failed["detail"]["trace"], "Traceback (most recent call last):\n  File \"app.py\"",
        "{events}"
    );
    host.terminate();
}

/// The whole of a controller written with componentize-py's bindings.
const BARE_CONTROLLER: &str = r#"
import json

from wit_world.imports import types


class Controller:
    def describe(self):
        return types.Registration(
            group="example.dev", kind="Bare", finalizers=[], concurrency=None,
            owed_pass_interval_ms=None, full_pass_interval_ms=None,
            individual_pass_interval_ms=None, startup_full_pass=None,
            max_retry_interval_ms=None, spec_schema_version=0,
            status_schema_version=0, pass_deadline_ms=None,
            spec_schema=None, status_schema=None, validates=False, migrates=False)

    def reconcile(self, obj, client):
        if obj.name == "broken":
            failure = "ValueError: boom\nTraceback (most recent call last):\n  File \"app.py\""
            return types.ReconcileResult(verdict=types.Verdict_Failed(failure), requeue_after_ms=None)
        client.update_status(json.dumps({"seen": obj.name}))
        return types.ReconcileResult(verdict=types.Verdict_Settled(), requeue_after_ms=None)

    # Contract 0.2 has every plugin export these; the registration above
    # says they mean nothing, so the host never calls them.
    def validate(self, spec):
        return []

    def convert_spec(self, from_version, raw):
        return raw

    def convert_status(self, from_version, raw):
        return raw
"#;
