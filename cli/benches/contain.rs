//! Containment, measured on the real binary with the `hostile` test plugin.
//! Needs the plugins built first (`scripts/build-plugins`).
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `contain.get_p99_ms_under_spin`: p99 latency of `get` over the host's
//!   socket (request written to reply read) while the hostile plugin's
//!   passes spin in guest code on every worker (`--plugin-concurrency 2`
//!   on two cores, a 10-minute CPU deadline, so no pass ends during the
//!   measurement); 300 requests;
//! - `contain.hostile_rss_mib`: the host's peak resident memory (VmHWM)
//!   while the hostile plugin runs every attack it has on 16 objects each
//!   (default limits: as many workers as the operator allows), each retried
//!   on the backoff ladder, for 15 s.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Copies the example plugin `name`, built by `scripts/build-plugins`, into
/// `dir`.
fn copy_plugin(name: &str, dir: &Path) {
    let built = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../target/wasm32-wasip2/release/{name}.wasm"));
    if let Err(error) = std::fs::copy(&built, dir.join(format!("{name}.wasm"))) {
        panic!("{}: {error} (run scripts/build-plugins)", built.display());
    }
}

/// A `beehive run` in a scratch directory, killed when dropped.
struct Running {
    child: Child,
    dir: tempfile::TempDir,
}

impl Running {
    fn start(plugins: &[&str], args: &[&str]) -> Running {
        let dir = tempfile::tempdir().expect("scratch directory");
        std::fs::create_dir(dir.path().join("plugins")).expect("plugins directory");
        for plugin in plugins {
            copy_plugin(plugin, &dir.path().join("plugins"));
        }
        let child = Command::new(env!("CARGO_BIN_EXE_beehive"))
            .arg("--log-level")
            .arg("error")
            .arg("run")
            .args(args)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("beehive run starts");
        let running = Running { child, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while running.connect().is_none() {
            assert!(Instant::now() < deadline, "the host did not serve");
            std::thread::sleep(Duration::from_millis(20));
        }
        let loaded = Command::new(env!("CARGO_BIN_EXE_beehive"))
            .args(["plugins", "--wait"])
            .current_dir(running.dir.path())
            .stdout(Stdio::null())
            .status()
            .expect("beehive plugins --wait runs");
        assert!(loaded.success(), "the plugins loaded");
        running
    }

    fn connect(&self) -> Option<UnixStream> {
        UnixStream::connect(self.dir.path().join("beehive.db.sock")).ok()
    }

    /// Sends one request line and waits for the one reply line.
    fn ask(&self, request: &str) -> String {
        let mut stream = self.connect().expect("the host answers");
        stream.write_all(request.as_bytes()).expect("send");
        stream.write_all(b"\n").expect("send");
        let mut reply = String::new();
        BufReader::new(stream)
            .read_line(&mut reply)
            .expect("a reply");
        reply
    }

    fn apply(&self, objects: &[(&str, &str)]) {
        let objects: Vec<String> = objects
            .iter()
            .map(|(name, act)| {
                format!(r#"{{"kind":"Hostile.test.dev","name":"{name}","spec":{{"act":"{act}"}}}}"#)
            })
            .collect();
        let reply = self.ask(&format!(
            r#"{{"op":"apply","args":{{"objects":[{}]}}}}"#,
            objects.join(",")
        ));
        assert!(reply.contains("Ok"), "apply failed: {reply}");
    }

    /// Peak resident memory so far, in MiB.
    fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the host's /proc status");
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM");
        kib / 1024.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get_p99_under_spin() -> f64 {
    let host = Running::start(
        &["hostile", "greeting"],
        &["--plugin-concurrency", "2", "--plugin-deadline", "600s"],
    );
    host.apply(&[("spin-a", "spin"), ("spin-b", "spin"), ("spin-c", "spin")]);
    std::thread::sleep(Duration::from_millis(500));
    let mut latencies: Vec<Duration> = (0..300)
        .map(|_| {
            let asked = Instant::now();
            let reply = host.ask(r#"{"op":"get","args":{"kind":"Hostile","name":null}}"#);
            let took = asked.elapsed();
            assert!(reply.contains("spin-a"), "{reply}");
            took
        })
        .collect();
    latencies.sort();
    latencies[latencies.len() * 99 / 100].as_secs_f64() * 1000.0
}

fn hostile_rss() -> f64 {
    let host = Running::start(&["hostile"], &["--plugin-wall-limit", "2s"]);
    let attacks = [
        "spin",
        "sleep",
        "host-loop",
        "leak-clients",
        "long-kind",
        "huge-status",
        "touch-memory",
        "forge-log",
    ];
    // Sixteen of each: every worker the plugin can get runs every attack.
    let objects: Vec<(String, &str)> = (0..16)
        .flat_map(|i| attacks.iter().map(move |a| (format!("{a}-{i}"), *a)))
        .collect();
    let borrowed: Vec<(&str, &str)> = objects.iter().map(|(n, a)| (n.as_str(), *a)).collect();
    host.apply(&borrowed);
    let until = Instant::now() + Duration::from_secs(15);
    let mut peak: f64 = 0.0;
    while Instant::now() < until {
        peak = peak.max(host.peak_rss_mib());
        std::thread::sleep(Duration::from_millis(200));
    }
    peak.max(host.peak_rss_mib())
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument runs nothing here.
    if std::env::args().skip(1).any(|a| !a.starts_with('-')) {
        return;
    }
    let p99 = get_p99_under_spin();
    println!("figure contain.get_p99_ms_under_spin {p99:.1} ms");
    let rss = hostile_rss();
    println!("figure contain.hostile_rss_mib {rss:.0} MiB");
}
