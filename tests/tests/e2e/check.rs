//! `beehive plugins check FILE`: what a plugin file is and what a host would
//! make of it, with no host and no store, for each example language and each
//! way a file can be wrong.

use beehive_e2e::{Workspace, assert_mentions, plugin_wasm};

/// Runs `plugins check` on `file` in `workspace`; the exit code and what it
/// printed (stdout, then stderr).
fn check(workspace: &Workspace, file: &str, flags: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["plugins", "check", file];
    args.extend(flags);
    let out = workspace.run(&args);
    let printed =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), printed)
}

#[test]
fn a_rust_a_python_and_a_javascript_plugin_are_described_with_what_they_would_get() {
    let workspace = Workspace::new();
    workspace.install_plugin("greeting", "greeting.wasm");
    workspace.write("plugins/greeting.toml", "[config]\nregion = \"eu\"\n");
    let (code, rust) = check(
        &workspace,
        "plugins/greeting.wasm",
        &["--plugin-memory", "32MiB", "--concurrency", "3"],
    );
    assert_eq!(code, Some(0), "{rust}");
    assert_mentions(
        &rust,
        &[
            "Contract:   beehive:controller@0.2.0, world plugin",
            "Kind:       Greeting.example.dev",
            "Spec:       version 0, JSON Schema",
            "Workers:    3",
            "memory 32Mi (it starts with",
            "Grants:     config:region",
        ],
    );
    assert!(
        !workspace.path().join("beehive.db").exists(),
        "a check makes no store"
    );

    // A plugin built before contract 0.2 is still a plugin.
    workspace.install_plugin_0_1("greeting", "greeting-0.1.wasm");
    let (code, first) = check(&workspace, "plugins/greeting-0.1.wasm", &[]);
    assert_eq!(code, Some(0), "{first}");
    assert_mentions(
        &first,
        &[
            "Contract:   beehive:controller@0.1.0, world plugin-with-schema",
            "Kind:       Greeting.example.dev",
            "Spec:       version 0, JSON Schema",
        ],
    );

    workspace.install_plugin("conditions-py", "conditions-py.wasm");
    let (code, python) = check(&workspace, "plugins/conditions-py.wasm", &[]);
    assert_eq!(code, Some(0), "{python}");
    assert_mentions(
        &python,
        &[
            "Contract:   beehive:controller@0.2.0, world plugin-with-http (Python)",
            "Kind:       Service.py.example.dev",
            "Validates:  yes",
        ],
    );

    workspace.install_plugin("conditions-js-v2", "conditions-js.wasm");
    let (code, javascript) = check(&workspace, "plugins/conditions-js.wasm", &[]);
    assert_eq!(code, Some(0), "{javascript}");
    assert_mentions(
        &javascript,
        &[
            "Contract:   beehive:controller@0.2.0, world plugin-with-http (JavaScript)",
            "Kind:       Service.js.example.dev",
            "Spec:       version 1, JSON Schema",
            "Migrates:   yes",
            "Validates:  yes",
        ],
    );
}

#[test]
fn each_wrong_file_is_refused_in_one_line_saying_what_it_is() {
    let workspace = Workspace::new();
    workspace.write("text.wasm", "hello, I am not a plugin");
    let core_module = b"\0asm\x01\0\0\0";
    std::fs::write(workspace.path().join("core.wasm"), core_module).unwrap();
    let empty_component = b"\0asm\x0d\0\x01\0";
    std::fs::write(workspace.path().join("other.wasm"), empty_component).unwrap();
    // The greeting plugin, its contract's names rewritten to another
    // version (same length, so the binary still reads).
    let mut bytes = std::fs::read(plugin_wasm("greeting")).unwrap();
    for interface in ["host", "config", "types", "controller"] {
        let from = format!("beehive:controller/{interface}@0.2.0");
        let to = format!("beehive:controller/{interface}@0.9.0");
        replace_all(&mut bytes, from.as_bytes(), to.as_bytes());
    }
    std::fs::write(workspace.path().join("newer.wasm"), bytes).unwrap();

    for (file, reason) in [
        (
            "text.wasm",
            "not a plugin: the file does not start with the WebAssembly magic bytes",
        ),
        (
            "core.wasm",
            "a core WebAssembly module, not a component: build it for wasm32-wasip2",
        ),
        (
            "other.wasm",
            "a component of another world (it exports nothing): a plugin exports beehive:controller/controller; build it for world plugin",
        ),
        (
            "newer.wasm",
            "built against beehive:controller@0.9.0, and this host serves \
             beehive:controller@0.1.0, beehive:controller@0.2.0",
        ),
        ("missing.wasm", "cannot read"),
    ] {
        let (code, printed) = check(&workspace, file, &[]);
        assert_eq!(code, Some(7), "{file}: {printed}");
        assert_mentions(&printed, &[&format!("error: {file}: "), reason]);
        assert_eq!(printed.lines().count(), 1, "one line: {printed}");
    }
}

fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let mut at = 0;
    while let Some(found) = bytes[at..].windows(from.len()).position(|w| w == from) {
        bytes[at + found..at + found + to.len()].copy_from_slice(to);
        at += found + to.len();
    }
}
