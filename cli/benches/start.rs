//! A host's start, measured on the real binary with one 18 MB Python plugin
//! that is not in the compiled cache and four Rust plugins that are. Needs
//! the plugins built first (`scripts/build-plugins`).
//!
//! Prints `figure NAME VALUE UNIT` lines, each the median of five starts:
//! - `host.start_to_socket_ms`: from spawning `beehive run` until its
//!   socket accepts a connection;
//! - `host.start_to_rust_serving_ms`: until `beehive plugins` (asked over
//!   the socket) lists all four Rust kinds;
//! - `host.python_loading_at_rust_serving`: how many of the five starts
//!   still had the Python plugin loading when the Rust kinds served (5 means
//!   it held none of them back).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use beehive_e2e::bench::{figure, median, wanted};
use beehive_e2e::plugin_wasm;

const RUST: [&str; 4] = ["greeting", "cascade", "conditions", "events"];
const PYTHON: &str = "conditions-py";
const STARTS: usize = 5;

/// How long any wait here may take before the benchmark gives up.
const PATIENCE: Duration = Duration::from_secs(600);

/// A scratch directory with the plugins and a cache holding the Rust ones.
struct Bed {
    dir: tempfile::TempDir,
    /// The cache files that hold the Rust plugins; any other is the Python
    /// plugin's, removed before each start.
    warm: BTreeSet<PathBuf>,
}

impl Bed {
    fn new() -> Bed {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).expect("the plugin directory");
        for name in RUST {
            copy(name, &plugins);
        }
        let mut bed = Bed {
            dir,
            warm: BTreeSet::new(),
        };
        // One start with the Rust plugins alone fills the cache with them.
        let host = bed.start();
        host.wait_for_socket(&bed.socket());
        let loaded = Command::new(env!("CARGO_BIN_EXE_beehive"))
            .args(["plugins", "--wait"])
            .current_dir(bed.dir.path())
            .stdout(Stdio::null())
            .status()
            .expect("beehive plugins --wait runs");
        assert!(loaded.success(), "the Rust plugins loaded");
        host.stop();
        bed.warm = bed.cache_files();
        copy(PYTHON, &plugins);
        bed
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("beehive.db.sock")
    }

    fn cache_files(&self) -> BTreeSet<PathBuf> {
        let cache = self.dir.path().join("beehive.db.plugin-cache");
        std::fs::read_dir(&cache)
            .unwrap_or_else(|e| panic!("{}: {e}", cache.display()))
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .collect()
    }

    /// Leaves only the Rust plugins in the cache.
    fn forget_python(&self) {
        for file in self.cache_files().difference(&self.warm) {
            std::fs::remove_file(file).expect("a cache file is removed");
        }
    }

    fn start(&self) -> Host {
        let child = Command::new(env!("CARGO_BIN_EXE_beehive"))
            .args(["--log-level", "warn", "run"])
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("beehive run starts");
        Host {
            child,
            started: Instant::now(),
        }
    }
}

fn copy(name: &str, dir: &Path) {
    std::fs::copy(plugin_wasm(name), dir.join(format!("{name}.wasm")))
        .expect("the plugin is copied");
}

struct Host {
    child: Child,
    started: Instant,
}

impl Host {
    fn wait_for_socket(&self, socket: &Path) -> Duration {
        while UnixStream::connect(socket).is_err() {
            assert!(self.started.elapsed() < PATIENCE, "the host never served");
            std::thread::sleep(Duration::from_millis(1));
        }
        self.started.elapsed()
    }

    /// Until the socket lists every Rust kind; whether the Python plugin
    /// was still loading then.
    fn wait_for_rust(&self, socket: &Path) -> (Duration, bool) {
        loop {
            let reply = plugins(socket);
            let kinds = reply["plugins"].as_array().cloned().unwrap_or_default();
            let rust = kinds
                .iter()
                .filter(|row| !row["source"].as_str().unwrap_or("").contains(PYTHON))
                .count();
            if rust == RUST.len() {
                let loading = reply["loading"].as_array().cloned().unwrap_or_default();
                let python_loading = loading
                    .iter()
                    .any(|row| row["file"].as_str().unwrap_or("").contains(PYTHON));
                return (self.started.elapsed(), python_loading);
            }
            assert!(
                self.started.elapsed() < PATIENCE,
                "the Rust kinds never served"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// SIGTERM, as an operator stops it; a compile in progress is dropped.
    fn stop(mut self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        let status = self.child.wait().expect("the host exits");
        assert!(status.success(), "the host stopped cleanly: {status}");
    }
}

/// The host's plugins reply, asked over its socket (a reply is `{"Ok":
/// REPLY}` or `{"Err": FAILURE}`).
fn plugins(socket: &Path) -> serde_json::Value {
    let mut stream = UnixStream::connect(socket).expect("the socket answers");
    stream
        .write_all(b"{\"op\":\"plugins\"}\n")
        .expect("the request is sent");
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .expect("a reply");
    let outcome: serde_json::Value = serde_json::from_str(&line).expect("a JSON reply");
    match outcome.get("Ok") {
        Some(reply) => reply.clone(),
        None => panic!("the host refused: {line}"),
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    if !["host.start_to_socket_ms", "host.start_to_rust_serving_ms"]
        .iter()
        .any(|name| wanted(name))
    {
        return;
    }
    let bed = Bed::new();
    let (mut socket, mut rust, mut python_loading) = (Vec::new(), Vec::new(), 0);
    for _ in 0..STARTS {
        bed.forget_python();
        let host = bed.start();
        socket.push(ms(host.wait_for_socket(&bed.socket())));
        let (serving, loading) = host.wait_for_rust(&bed.socket());
        rust.push(ms(serving));
        python_loading += usize::from(loading);
        host.stop();
    }
    figure("host.start_to_socket_ms", median(socket), "ms");
    figure("host.start_to_rust_serving_ms", median(rust), "ms");
    figure(
        "host.python_loading_at_rust_serving",
        python_loading as f64,
        "starts",
    );
}
