//! A plugin author's loop and a large plugin's first serve, timed on the
//! real binary. Needs the example plugins built (`scripts/build-plugins`)
//! and the Python and JavaScript toolchains `scripts/test` makes.
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `author.edit_to_served_rust_s`, `author.edit_to_served_python_s`,
//!   `author.edit_to_served_js_s`: a plugin made by `beehive new`, served by
//!   a running host; its status message edited, built with its language's
//!   tools and renamed into the plugin directory, until the object shows
//!   the new message; the median (mean) of two edits, each started once the
//!   host has optimised the version before. Beside each, the two
//!   steps: `author.build_LANG_s` (the build) and `author.drop_to_status_LANG_s`
//!   (the rename until the status);
//! - `plugin.python_first_serve_ms`, `plugin.js_first_serve_ms`: the 18 MB
//!   `conditions-py` (16 MB `conditions-js`) renamed into a running host's
//!   plugin directory with an empty compiled cache, until an object of its
//!   kind has had its first pass, under the default tiered compiler (served
//!   from baseline code); one run;
//! - `plugin.python_tier_up_ms`, `plugin.js_tier_up_ms`: from the same
//!   rename until `beehive plugins` shows it on optimised code;
//! - `plugin.python_first_serve_optimized_ms`,
//!   `plugin.js_first_serve_optimized_ms`: the first serve under
//!   `--compiler optimizing`, which waits for Cranelift (one run);
//! - `plugin.pull_verify_ms`: `beehive plugins pull` of a signed 2 MB
//!   plugin, by digest, from Debian's docker-registry on loopback, into a
//!   directory that trusts its key (the process, the manifest, layer and
//!   signature fetched and checked, both files written); the median of
//!   five. (Here, not with `plugin.verify_ms`, as this bench's package
//!   builds the binary it runs.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use beehive_e2e::bench::{figure, median, wanted};
use beehive_e2e::{Workspace, plugin_wasm, wait_until};

/// Edits of each language's plugin; the figure is their median.
const EDITS: usize = 2;

/// First serves of each large plugin under the tiered compiler (each also
/// times its tier-up), and under the optimising one. Few: each is a host's
/// start and a 5–10 s compile, and the whole bench run has a budget.
const TIERED_SERVES: usize = 1;
const OPTIMIZING_SERVES: usize = 1;

/// What a host logs when a plugin moves to its optimised code.
const OPTIMIZED: &str = "now runs its optimized code";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `program ARGS` in `dir` with `env`, insisting it succeeds.
fn run(program: &Path, args: &[&str], dir: &Path, env: &[(&str, &Path)]) {
    let mut command = Command::new(program);
    command.args(args).current_dir(dir);
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command.output().expect("the program runs");
    assert!(
        out.status.success(),
        "{program:?} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Renames `file` into `workspace`'s plugin directory as `NAME.wasm`, the
/// way an operator should: copied under a hidden name first.
fn drop_in(workspace: &Workspace, file: &Path, name: &str) {
    let plugins = workspace.path().join("plugins");
    let staging = plugins.join(".staging.wasm");
    std::fs::copy(file, &staging).expect("staged");
    std::fs::rename(&staging, plugins.join(format!("{name}.wasm"))).expect("renamed");
}

/// A host over an empty plugin directory in a fresh workspace (so with an
/// empty compiled cache), started with `args`.
fn empty_host(args: &[&str]) -> (Workspace, beehive_e2e::HostProcess) {
    let workspace = Workspace::new();
    std::fs::create_dir(workspace.path().join("plugins")).expect("plugin directory");
    let host = workspace.start_host(args);
    (workspace, host)
}

/// Waits until `host` has moved `count` plugin versions to optimised code.
/// It reads the host's log, which costs the compile nothing; asking with
/// `beehive plugins` every few milliseconds would take a share of the CPU.
fn wait_for_optimized(host: &beehive_e2e::HostProcess, count: usize) {
    wait_until("the optimized code takes over", || {
        host.log().matches(OPTIMIZED).count() >= count
    });
}

/// Milliseconds from renaming example `plugin` into a running host's plugin
/// directory until an object of its `kind` has had a pass; with `tiered`,
/// also until it runs optimised code.
fn first_serve(plugin: &str, kind: &str, tiered: bool) -> (f64, Option<f64>) {
    let compiler = if tiered { "tiered" } else { "optimizing" };
    let (workspace, host) = empty_host(&["--compiler", compiler]);
    workspace.write(
        "service.yaml",
        &format!("kind: {kind}\nname: web\nspec: {{port: 8080}}\n"),
    );
    let started = Instant::now();
    drop_in(&workspace, &plugin_wasm(plugin), plugin);
    workspace.ok(&["plugins", "--wait"]);
    workspace.ok(&["apply", "-f", "service.yaml"]);
    workspace.ok(&["wait", kind, "web", "--for", "settled"]);
    let served = started.elapsed().as_secs_f64() * 1e3;
    let optimized = tiered.then(|| {
        wait_for_optimized(&host, 1);
        started.elapsed().as_secs_f64() * 1e3
    });
    host.terminate();
    (served, optimized)
}

/// `plugin`'s first-serve figures, under `label` (`python`, `js`).
fn first_serve_figures(label: &str, plugin: &str, kind: &str) {
    let (mut served, mut tier_up, mut optimized) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..TIERED_SERVES {
        let (ms, up) = first_serve(plugin, kind, true);
        served.push(ms);
        tier_up.extend(up);
    }
    for _ in 0..OPTIMIZING_SERVES {
        optimized.push(first_serve(plugin, kind, false).0);
    }
    figure(
        &format!("plugin.{label}_first_serve_ms"),
        median(served),
        "ms",
    );
    figure(&format!("plugin.{label}_tier_up_ms"), median(tier_up), "ms");
    figure(
        &format!("plugin.{label}_first_serve_optimized_ms"),
        median(optimized),
        "ms",
    );
}

/// A scaffolded project in one language: how to build it and where the
/// component lands.
struct Project {
    label: &'static str,
    name: &'static str,
    kind: &'static str,
    dir: PathBuf,
    source: &'static str,
}

impl Project {
    /// Makes the project with `beehive new` in `projects`, ready to build.
    fn new(projects: &Path, label: &'static str) -> Project {
        let (name, kind, lang, source) = match label {
            "rust" => ("widget", "Widget.example.dev", "rust", "src/lib.rs"),
            "python" => ("gadget", "Gadget.acme.io", "python", "app.py"),
            _ => ("gizmo", "Gizmo.acme.io", "js", "app.js"),
        };
        let beehive = beehive_e2e::beehive_bin();
        let args = ["new", name, "--lang", lang, "--kind", kind];
        run(&beehive, &args, projects, &[]);
        let dir = projects.join(name);
        match label {
            "rust" => {
                std::fs::copy(repo().join("Cargo.lock"), dir.join("Cargo.lock")).expect("lock");
            }
            "js" => {
                let install = ["install", "--no-audit", "--no-fund", "--prefer-offline"];
                run(Path::new("npm"), &install, &dir, &[]);
            }
            _ => {}
        }
        Project {
            label,
            name,
            kind,
            dir,
            source,
        }
    }

    /// Builds the component with the language's tools; its path.
    fn build(&self) -> PathBuf {
        match self.label {
            "rust" => {
                let target = repo().join("target/scaffold");
                let cargo = Path::new(env!("CARGO"));
                let args = ["build", "--release", "--target", "wasm32-wasip2"];
                run(cargo, &args, &self.dir, &[("CARGO_TARGET_DIR", &target)]);
                target.join(format!("wasm32-wasip2/release/{}.wasm", self.name))
            }
            "python" => {
                let python = repo().join("target/python-venv/bin/python");
                let sdk = repo().join("guest-sdk/python");
                let out = format!("{}.wasm", self.name);
                let args = ["-m", "beehive_guest.build", "build", "app.py", "-o", &out];
                run(&python, &args, &self.dir, &[("PYTHONPATH", &sdk)]);
                self.dir.join(out)
            }
            _ => {
                run(Path::new("npm"), &["run", "build"], &self.dir, &[]);
                self.dir.join(format!("{}.wasm", self.name))
            }
        }
    }

    /// Makes the plugin's Ready message end in `word` instead of `was`.
    fn edit(&self, was: &str, word: &str) {
        let path = self.dir.join(self.source);
        let text = std::fs::read_to_string(&path).expect("source");
        let edited = text.replace(&format!("}} {was}"), &format!("}} {word}"));
        assert_ne!(text, edited, "the message is in {}", self.source);
        std::fs::write(&path, edited).expect("edited");
    }
}

/// `label`'s author figures: three edits of a served plugin.
fn author_figures(label: &'static str) {
    let projects = tempfile::tempdir().expect("projects");
    let project = Project::new(projects.path(), label);
    let (workspace, host) = empty_host(&[]);
    drop_in(&workspace, &project.build(), project.name);
    workspace.ok(&["plugins", "--wait"]);
    workspace.write(
        "object.yaml",
        &format!("kind: {}\nname: web\nspec: {{replicas: 3}}\n", project.kind),
    );
    workspace.ok(&["apply", "-f", "object.yaml"]);
    let shows = |word: &str| {
        workspace
            .ok(&["get", project.kind, "web", "-o", "json"])
            .contains(&format!("3 of 3 {word}"))
    };
    wait_until("the first version's status", || shows("ready"));
    let (mut total, mut builds, mut drops) = (Vec::new(), Vec::new(), Vec::new());
    for edit in 0..EDITS {
        // Each edit starts from a host at rest: the previous version's
        // optimised code is in, so no compile from before runs now. (Rust
        // plugins are small enough to be optimised before they serve.)
        if label != "rust" {
            wait_for_optimized(&host, edit + 1);
        }
        let (was, word) = if edit % 2 == 0 {
            ("ready", "up")
        } else {
            ("up", "ready")
        };
        let started = Instant::now();
        project.edit(was, word);
        let built = project.build();
        let dropped = Instant::now();
        drop_in(&workspace, &built, project.name);
        wait_until("the edited version's status", || shows(word));
        builds.push((dropped - started).as_secs_f64());
        drops.push(dropped.elapsed().as_secs_f64());
        total.push(started.elapsed().as_secs_f64());
    }
    host.terminate();
    figure(
        &format!("author.edit_to_served_{label}_s"),
        median(total),
        "s",
    );
    figure(&format!("author.build_{label}_s"), median(builds), "s");
    figure(
        &format!("author.drop_to_status_{label}_s"),
        median(drops),
        "s",
    );
}

fn pull_verify_ms() -> f64 {
    let registry = beehive_e2e::TestRegistry::start();
    let dir = tempfile::tempdir().expect("a directory");
    let plugin = beehive_e2e::bench::signed_two_megabytes(dir.path());
    let beehive = |args: &[&str]| {
        let done = std::process::Command::new(beehive_e2e::beehive_bin())
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("beehive");
        assert!(done.status.success(), "{done:?}");
        String::from_utf8_lossy(&done.stdout).into_owned()
    };
    let reference = format!("{}/bench/plugin:v1", registry.address);
    let pushed = beehive(&[
        "plugins",
        "push",
        plugin.to_str().expect("a path"),
        &reference,
    ]);
    let pinned = pushed.lines().last().expect("the digest line").to_string();
    let samples = (0..5)
        .map(|_| {
            let start = std::time::Instant::now();
            beehive(&["plugins", "pull", &pinned, "-o", "pulled.wasm"]);
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    median(samples)
}

fn main() {
    if wanted("plugin.pull_verify_ms") {
        figure("plugin.pull_verify_ms", pull_verify_ms(), "ms");
    }
    for label in ["rust", "python", "js"] {
        if wanted(&format!("author.edit_to_served_{label}_s")) {
            author_figures(label);
        }
    }
    if wanted("plugin.python_first_serve_ms") {
        first_serve_figures("python", "conditions-py", "Service.py.example.dev");
    }
    if wanted("plugin.js_first_serve_ms") {
        first_serve_figures("js", "conditions-js", "Service.js.example.dev");
    }
}
