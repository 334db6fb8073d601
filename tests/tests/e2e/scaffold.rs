//! `beehive new`: a plugin project of one's own, made in a directory outside
//! the checkout, tests, builds and serves as it stands, in each language.

use std::path::{Path, PathBuf};
use std::process::Command;

use beehive_e2e::{Workspace, assert_mentions};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `program ARGS` in `dir`, insisting it succeeds; what it printed.
fn run(program: &Path, args: &[&str], dir: &Path, env: &[(&str, &Path)]) -> String {
    let mut command = Command::new(program);
    command.args(args).current_dir(dir);
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command.output().expect("the program runs");
    let printed =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{program:?} {args:?}: {printed}");
    printed
}

#[test]
fn new_rust_python_javascript_and_typescript_plugins_build_and_serve_from_outside_the_checkout() {
    let projects = tempfile::tempdir().unwrap();
    let beehive = beehive_e2e::beehive_bin();
    let made = run(&beehive, &["new", "widget"], projects.path(), &[]);
    assert_mentions(&made, &["Rust plugin for Widget.example.dev"]);
    run(
        &beehive,
        &[
            "new",
            "gadget",
            "--lang",
            "python",
            "--kind",
            "Gadget.acme.io",
        ],
        projects.path(),
        &[],
    );
    let made = run(
        &beehive,
        &["new", "gizmo", "--lang", "js", "--kind", "Gizmo.acme.io"],
        projects.path(),
        &[],
    );
    assert_mentions(&made, &["JavaScript plugin for Gizmo.acme.io"]);
    let taken = Command::new(&beehive)
        .args(["new", "widget"])
        .current_dir(projects.path())
        .output()
        .unwrap();
    assert_eq!(taken.status.code(), Some(4), "the directory exists");

    // Rust: its tests, then the component. The checkout's lock pins the
    // dependencies the rest of the suite built, and a target directory of
    // its own keeps the outer build's lock free.
    let widget = projects.path().join("widget");
    std::fs::copy(repo().join("Cargo.lock"), widget.join("Cargo.lock")).unwrap();
    let target = repo().join("target/scaffold");
    let cargo = Path::new(env!("CARGO"));
    let tested = run(cargo, &["test"], &widget, &[("CARGO_TARGET_DIR", &target)]);
    assert_mentions(&tested, &["test result: ok. 2 passed"]);
    run(
        cargo,
        &["build", "--release", "--target", "wasm32-wasip2"],
        &widget,
        &[("CARGO_TARGET_DIR", &target)],
    );

    // Python: its tests on the fake client, then the component, with the
    // toolchain the build scripts made and the SDK of this checkout.
    let gadget = projects.path().join("gadget");
    let python = repo().join("target/python-venv/bin/python");
    let sdk = repo().join("guest-sdk/python");
    let tested = run(
        &python,
        &["-m", "pytest", "-q", "-p", "no:cacheprovider"],
        &gadget,
        &[
            ("PYTHONPATH", &sdk),
            ("PYTHONDONTWRITEBYTECODE", Path::new("1")),
        ],
    );
    assert_mentions(&tested, &["2 passed"]);
    run(
        &python,
        &[
            "-m",
            "beehive_guest.build",
            "build",
            "app.py",
            "-o",
            "gadget.wasm",
        ],
        &gadget,
        &[
            ("PYTHONPATH", &sdk),
            ("PYTHONDONTWRITEBYTECODE", Path::new("1")),
        ],
    );

    // JavaScript: `npm install`, `npm test` and `npm run build`, as its
    // README says, with nothing of the checkout's prepared: the SDK is
    // packed into the project as it would be published, and npm installs
    // its dependencies (from its cache, or the registry). Before, the SDK
    // was linked from the checkout without them, and the build failed.
    let gizmo = projects.path().join("gizmo");
    let manifest = std::fs::read_to_string(gizmo.join("package.json")).unwrap();
    assert_mentions(
        &manifest,
        &["\"beehive-guest\": \"file:vendor/beehive-guest-0.1.0.tgz\""],
    );
    assert!(gizmo.join("vendor/beehive-guest-0.1.0.tgz").is_file());
    assert!(
        !gizmo.join(".sdk-staging").exists(),
        "the staging is removed"
    );
    let installing = ["install", "--no-audit", "--no-fund", "--prefer-offline"];
    run(Path::new("npm"), &installing, &gizmo, &[]);
    assert!(
        !gizmo
            .join("node_modules/beehive-guest")
            .symlink_metadata()
            .unwrap()
            .is_symlink(),
        "installed, not linked"
    );
    let npm = Path::new("npm");
    let tested = run(npm, &["test"], &gizmo, &[]);
    assert_mentions(&tested, &["pass 2", "fail 0"]);
    let built = run(npm, &["run", "build"], &gizmo, &[]);
    assert_mentions(
        &built,
        &[
            "beehive-js: bundling",
            "beehive-js: componentizing",
            "beehive-js: built in ",
        ],
    );

    // TypeScript: the JavaScript scaffold with its module renamed `app.ts`
    // and typed, as its README says; the build strips the types. (Its tests
    // would need Node.js 22.6+ to import a `.ts` file.)
    run(
        &beehive,
        &[
            "new",
            "gadgetts",
            "--lang",
            "js",
            "--kind",
            "Doohickey.acme.io",
        ],
        projects.path(),
        &[],
    );
    let gadgetts = projects.path().join("gadgetts");
    let untyped = std::fs::read_to_string(gadgetts.join("app.js")).unwrap();
    let typed = untyped.replace(
        "reconcile(client, object) {",
        "reconcile(client: any, object: { spec: { replicas: number } }): unknown {",
    );
    assert_ne!(
        typed, untyped,
        "the template's reconcile is where the test looks"
    );
    std::fs::write(gadgetts.join("app.ts"), typed).unwrap();
    std::fs::remove_file(gadgetts.join("app.js")).unwrap();
    let manifest = std::fs::read_to_string(gadgetts.join("package.json")).unwrap();
    std::fs::write(
        gadgetts.join("package.json"),
        manifest.replace("build app.js", "build app.ts"),
    )
    .unwrap();
    run(Path::new("npm"), &installing, &gadgetts, &[]);
    run(npm, &["run", "build"], &gadgetts, &[]);

    // All four serve in a host.
    let workspace = Workspace::new();
    let plugins = workspace.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(
        target.join("wasm32-wasip2/release/widget.wasm"),
        plugins.join("widget.wasm"),
    )
    .unwrap();
    std::fs::copy(gadget.join("gadget.wasm"), plugins.join("gadget.wasm")).unwrap();
    std::fs::copy(gizmo.join("gizmo.wasm"), plugins.join("gizmo.wasm")).unwrap();
    std::fs::copy(
        gadgetts.join("gadgetts.wasm"),
        plugins.join("gadgetts.wasm"),
    )
    .unwrap();
    let cache = beehive_e2e::shared_plugin_cache();
    let host = workspace.start_host(&["--plugin-cache", cache.to_str().unwrap()]);
    workspace.apply(
        "objects.yaml",
        "kind: Widget.example.dev\nname: web\nspec: {replicas: 3}\n---\n\
         kind: Gadget.acme.io\nname: web\nspec: {replicas: 2}\n---\n\
         kind: Gizmo.acme.io\nname: web\nspec: {replicas: 4}\n---\n\
         kind: Doohickey.acme.io\nname: web\nspec: {replicas: 5}\n",
    );
    for kind in ["Widget", "Gadget", "Gizmo", "Doohickey"] {
        workspace.ok(&["wait", kind, "web", "--for", "condition=Ready"]);
    }
    assert_mentions(
        &workspace.ok(&["describe", "Gadget", "web"]),
        &["AllReplicasReady", "2 of 2 ready"],
    );
    assert_mentions(
        &workspace.ok(&["describe", "Gizmo", "web"]),
        &["AllReplicasReady", "4 of 4 ready"],
    );
    assert_mentions(
        &workspace.ok(&["describe", "Doohickey", "web"]),
        &["AllReplicasReady", "5 of 5 ready"],
    );
    // The JavaScript plugin's schema is the kind's: a spec without
    // replicas is refused at apply.
    let refused = workspace.apply_fails(
        "bad.yaml",
        "kind: Gizmo.acme.io\nname: bad\nspec: {count: 1}\n",
    );
    assert_mentions(&refused, &["replicas"]);
    host.terminate();
}
