//! What checking specs against a plugin's schema costs an `apply`, through
//! the real binary with no host running.
//!
//! Prints:
//! - `cli.apply_10k_s`: seconds for one `apply -f -` of 10,000 greeting
//!   objects (JSON lines) into an empty store whose registration of
//!   `Greeting.example.dev` records the greeting plugin's spec schema, so
//!   every object is checked against it;
//! - `cli.apply_10k_unchecked_s`: the same objects of a kind no plugin
//!   serves (`--new-kind`), which nothing checks;
//! - `cli.apply_10k_schema_overhead_pct`: how much longer the checked
//!   apply takes, in percent.
//!
//! Each is the median of five, the two interleaved so a drift of the
//! machine's speed moves both alike.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use beehive_e2e::bench::{self, figure, median};

/// Objects per `apply`.
const OBJECTS: usize = 10_000;

/// Samples of each figure.
const RUNS: usize = 5;

const CHECKED: &str = "Greeting.example.dev";
const UNCHECKED: &str = "Plain.bench.dev";

/// Runs `beehive --db DB ARGS` with `stdin` and insists it succeeds.
fn beehive(db: &Path, args: &[&str], stdin: &[u8]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_beehive"))
        .arg("--db")
        .arg(db)
        .args(["--log-level", "error"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("beehive starts");
    let mut input = child.stdin.take().expect("a piped stdin");
    input.write_all(stdin).expect("stdin is written");
    drop(input);
    let done = child.wait_with_output().expect("beehive ends");
    assert!(
        done.status.success(),
        "beehive {args:?}: {}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// JSON lines of `OBJECTS` greeting-shaped objects of `kind`.
fn manifests(kind: &str) -> Vec<u8> {
    (0..OBJECTS)
        .map(|i| {
            format!("{{\"kind\":\"{kind}\",\"name\":\"o{i}\",\"spec\":{{\"name\":\"n{i}\"}}}}\n")
        })
        .collect::<String>()
        .into_bytes()
}

/// A store in which a host has served the greeting plugin once, so its
/// registration (and schema) is recorded; nothing else is in it.
fn registered_store(dir: &Path) -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(target, PathBuf::from);
    let wasm = target.join("wasm32-wasip2/release/greeting.wasm");
    assert!(
        wasm.exists(),
        "{} is missing: run scripts/build-plugins",
        wasm.display()
    );
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).expect("the plugin directory");
    std::fs::copy(&wasm, plugins.join("greeting.wasm")).expect("the plugin is copied");
    let db = dir.join("template.db");
    let mut host = Command::new(env!("CARGO_BIN_EXE_beehive"))
        .arg("--db")
        .arg(&db)
        .args(["--log-level", "error", "run", "--plugins"])
        .arg(&plugins)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("beehive run starts");
    let deadline = Instant::now() + Duration::from_secs(300);
    let socket = db.with_extension("db.sock");
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "the host never served");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The plugin loads behind the socket; its registration is what the
    // template keeps.
    let loaded = Command::new(env!("CARGO_BIN_EXE_beehive"))
        .arg("--db")
        .arg(&db)
        .args(["plugins", "--wait"])
        .stdout(Stdio::null())
        .status()
        .expect("beehive plugins --wait runs");
    assert!(loaded.success(), "the plugin loaded");
    // SIGTERM: a graceful stop keeps the registration.
    let stopped = Command::new("kill")
        .args(["-TERM", &host.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(stopped.success());
    host.wait().expect("the host stops");
    db
}

/// Seconds for one apply of `input` into a copy of `template` (or a fresh
/// store), with `args`.
fn timed_apply(dir: &Path, template: Option<&Path>, args: &[&str], input: &[u8]) -> f64 {
    let db = dir.join("run.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    if let Some(template) = template {
        std::fs::copy(template, &db).expect("the template is copied");
    }
    let started = Instant::now();
    beehive(&db, args, input);
    started.elapsed().as_secs_f64()
}

/// `cargo bench -- NAME` runs this only when NAME is part of a figure's.
fn wanted() -> bool {
    [
        "cli.apply_10k_s",
        "cli.apply_10k_unchecked_s",
        "cli.apply_10k_schema_overhead_pct",
    ]
    .iter()
    .any(|name| bench::wanted(name))
}

fn main() {
    if !wanted() {
        return;
    }
    let dir = tempfile::tempdir().expect("a scratch directory");
    let template = registered_store(dir.path());
    let (checked_input, unchecked_input) = (manifests(CHECKED), manifests(UNCHECKED));
    let (mut checked, mut unchecked) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        checked.push(timed_apply(
            dir.path(),
            Some(&template),
            &["apply", "-f", "-"],
            &checked_input,
        ));
        unchecked.push(timed_apply(
            dir.path(),
            Some(&template),
            &["apply", "-f", "-", "--new-kind"],
            &unchecked_input,
        ));
    }
    let (checked, unchecked) = (median(checked), median(unchecked));
    figure("cli.apply_10k_s", checked, "s");
    figure("cli.apply_10k_unchecked_s", unchecked, "s");
    figure(
        "cli.apply_10k_schema_overhead_pct",
        (checked / unchecked - 1.0) * 100.0,
        "%",
    );
}
