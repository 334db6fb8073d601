//! `beehive new`: a plugin project of one's own, made in a directory outside
//! the checkout, tests, builds and serves as it stands, in each language.
//! One test per language, so the slowest toolchain does not hold the others.

use std::path::{Path, PathBuf};
use std::process::Command;

use beehive_e2e::{HostProcess, Workspace, assert_mentions};

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

/// `beehive new NAME ARGS` in `projects`; what it printed.
fn new(projects: &Path, name: &str, args: &[&str]) -> String {
    let mut all = vec!["new", name];
    all.extend(args);
    run(&beehive_e2e::beehive_bin(), &all, projects, &[])
}

/// Serves `plugins` (each a built `.wasm`, under its file name) in a host,
/// applies `objects`, and waits for each `(kind, replicas)` in them to be
/// Ready with all its replicas; the host is handed back running.
fn serve(plugins: &[PathBuf], objects: &str, ready: &[(&str, u32)]) -> (Workspace, HostProcess) {
    let workspace = Workspace::new();
    let dir = workspace.path().join("plugins");
    std::fs::create_dir_all(&dir).unwrap();
    for wasm in plugins {
        std::fs::copy(wasm, dir.join(wasm.file_name().unwrap())).unwrap();
    }
    let cache = beehive_e2e::shared_plugin_cache();
    let host = workspace.start_host(&["--plugin-cache", cache.to_str().unwrap()]);
    workspace.apply("objects.yaml", objects);
    for (kind, replicas) in ready {
        workspace.ok(&["wait", kind, "web", "--for", "condition=Ready"]);
        assert_mentions(
            &workspace.ok(&["describe", kind, "web"]),
            &[
                "AllReplicasReady",
                &format!("{replicas} of {replicas} ready"),
            ],
        );
    }
    (workspace, host)
}

#[test]
fn a_new_rust_plugin_tests_builds_and_serves_from_outside_the_checkout() {
    let projects = tempfile::tempdir().unwrap();
    let made = new(projects.path(), "widget", &[]);
    assert_mentions(&made, &["Rust plugin for Widget.example.dev"]);
    let taken = Command::new(beehive_e2e::beehive_bin())
        .args(["new", "widget"])
        .current_dir(projects.path())
        .output()
        .unwrap();
    assert_eq!(taken.status.code(), Some(4), "the directory exists");

    // Its tests, then the component. The checkout's lock pins the
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
    let wasm = target.join("wasm32-wasip2/release/widget.wasm");
    let objects = "kind: Widget.example.dev\nname: web\nspec: {replicas: 3}\n";
    let (_workspace, host) = serve(&[wasm], objects, &[("Widget", 3)]);
    host.terminate();
}

#[test]
fn a_new_python_plugin_tests_builds_and_serves_from_outside_the_checkout() {
    let projects = tempfile::tempdir().unwrap();
    new(
        projects.path(),
        "gadget",
        &["--lang", "python", "--kind", "Gadget.acme.io"],
    );
    // Its tests on the fake client, then the component, with the toolchain
    // the build scripts made and the SDK of this checkout.
    let gadget = projects.path().join("gadget");
    let python = repo().join("target/python-venv/bin/python");
    let sdk = repo().join("guest-sdk/python");
    let env = [
        ("PYTHONPATH", sdk.as_path()),
        ("PYTHONDONTWRITEBYTECODE", Path::new("1")),
    ];
    let tested = run(
        &python,
        &["-m", "pytest", "-q", "-p", "no:cacheprovider"],
        &gadget,
        &env,
    );
    assert_mentions(&tested, &["2 passed"]);
    let build = [
        "-m",
        "beehive_guest.build",
        "build",
        "app.py",
        "-o",
        "gadget.wasm",
    ];
    run(&python, &build, &gadget, &env);
    let objects = "kind: Gadget.acme.io\nname: web\nspec: {replicas: 2}\n";
    let (_workspace, host) = serve(&[gadget.join("gadget.wasm")], objects, &[("Gadget", 2)]);
    host.terminate();
}

#[test]
fn a_new_javascript_plugin_and_its_typescript_rename_test_build_and_serve_from_outside_the_checkout()
 {
    let projects = tempfile::tempdir().unwrap();
    let made = new(
        projects.path(),
        "gizmo",
        &["--lang", "js", "--kind", "Gizmo.acme.io"],
    );
    assert_mentions(&made, &["JavaScript plugin for Gizmo.acme.io"]);

    // `npm install`, `npm test` and `npm run build`, as its README says,
    // with nothing of the checkout's prepared: the SDK is packed into the
    // project as it would be published, and npm installs its dependencies
    // (from its cache, or the registry). Before, the SDK was linked from
    // the checkout without them, and the build failed.
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
    let npm = Path::new("npm");
    run(npm, &installing, &gizmo, &[]);
    assert!(
        !gizmo
            .join("node_modules/beehive-guest")
            .symlink_metadata()
            .unwrap()
            .is_symlink(),
        "installed, not linked"
    );
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

    // It serves.
    let js = projects.path().join("js");
    std::fs::create_dir(&js).unwrap();
    std::fs::copy(gizmo.join("gizmo.wasm"), js.join("gizmo.wasm")).unwrap();
    let objects = "kind: Gizmo.acme.io\nname: web\nspec: {replicas: 4}\n";
    let (workspace, host) = serve(&[js.join("gizmo.wasm")], objects, &[("Gizmo", 4)]);

    // TypeScript: the same project with its module renamed `app.ts` and
    // typed, as its README says; the build strips the types. (Its tests
    // would need Node.js 22.6+ to import a `.ts` file.) Swapped in for the
    // JavaScript build, it serves every object.
    let untyped = std::fs::read_to_string(gizmo.join("app.js")).unwrap();
    let typed = untyped.replace(
        "reconcile(client, object) {",
        "reconcile(client: any, object: { spec: { replicas: number } }): unknown {",
    );
    assert_ne!(
        typed, untyped,
        "the template's reconcile is where the test looks"
    );
    std::fs::write(gizmo.join("app.ts"), typed).unwrap();
    std::fs::remove_file(gizmo.join("app.js")).unwrap();
    let manifest = std::fs::read_to_string(gizmo.join("package.json")).unwrap();
    std::fs::write(
        gizmo.join("package.json"),
        manifest.replace("build app.js", "build app.ts"),
    )
    .unwrap();
    run(npm, &["run", "build"], &gizmo, &[]);
    let staging = workspace.path().join("plugins/.gizmo.wasm.tmp");
    std::fs::copy(gizmo.join("gizmo.wasm"), &staging).unwrap();
    std::fs::rename(&staging, workspace.path().join("plugins/gizmo.wasm")).unwrap();
    let rolled = workspace.ok(&["rollout", "status", "Gizmo", "--timeout", "10m"]);
    assert_mentions(&rolled, &["to revision 2", "complete", "1 objects passed"]);
    assert_mentions(
        &workspace.ok(&["describe", "Gizmo", "web"]),
        &["AllReplicasReady", "4 of 4 ready"],
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
