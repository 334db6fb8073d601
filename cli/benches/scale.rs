//! What the CLI costs as the store grows, through the real binary with no
//! host running (each command opens the database itself, as an operator's
//! would between host runs). The store is grown by `apply -f -` of JSON
//! lines in batches of 20,000, as a user would load it.
//!
//! Prints, at each size N (10k and 100k; 1M too with `BEEHIVE_SCALE_1M=1`):
//! - `scale.apply_per_s@N`: objects per second of the batch that brought
//!   the store to N objects;
//! - `scale.get_one_ms@N`: `beehive get KIND NAME -o json` of one object,
//!   process start included; the median of five;
//! - `scale.get_small_kind_ms@N`: `beehive get KIND` of a 20-object kind
//!   beside the big one, the same way;
//! - `scale.db_mib@N`: the database's size on disk, its write-ahead log
//!   included.
//!
//! And once, before anything runs: `scale.load_avg_1m`, the machine's load,
//! since these figures move with it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Objects per `apply`.
const BATCH: usize = 20_000;

/// The big kind, and the small one beside it.
const BIG: &str = "Bulk.scale.dev";
const SMALL: &str = "Small.scale.dev";

/// Runs `beehive --db DB ARGS` with `stdin`, and insists it succeeds.
fn beehive(db: &Path, args: &[&str], stdin: &[u8]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_beehive"))
        .arg("--db")
        .arg(db)
        .arg("--log-level")
        .arg("error")
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

/// JSON lines for objects `from..to` of `kind`.
fn manifests(kind: &str, from: usize, to: usize) -> Vec<u8> {
    (from..to)
        .map(|i| format!("{{\"kind\":\"{kind}\",\"name\":\"o{i}\",\"spec\":{{\"n\":{i}}}}}\n"))
        .collect::<String>()
        .into_bytes()
}

/// The median time of five runs of `args`, in milliseconds.
fn timed_ms(db: &Path, args: &[&str]) -> f64 {
    let samples = (0..5)
        .map(|_| {
            let started = Instant::now();
            beehive(db, args, b"");
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    median(samples)
}

fn figure(name: &str, value: f64, unit: &str) {
    println!("figure {name} {value:.3} {unit}");
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The figures this benchmark prints, without their sizes.
const FIGURES: [&str; 5] = [
    "scale.load_avg_1m",
    "scale.apply_per_s",
    "scale.get_one_ms",
    "scale.get_small_kind_ms",
    "scale.db_mib",
];

/// Whether to run: `cargo bench -- NAME` runs only the benchmarks with a
/// figure whose name contains NAME (`cargo bench` itself passes `--bench`).
fn wanted() -> bool {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    filter.is_none_or(|f| FIGURES.iter().any(|name| name.contains(&f)))
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn main() {
    if !wanted() {
        return;
    }
    figure("scale.load_avg_1m", load_average(), "load");
    let mut sizes = vec![10_000, 100_000];
    if std::env::var_os("BEEHIVE_SCALE_1M").is_some() {
        sizes.push(1_000_000);
    }
    let dir = tempfile::tempdir().expect("a scratch directory");
    let db = dir.path().join("scale.db");
    beehive(&db, &["apply", "-f", "-"], &manifests(SMALL, 0, 20));
    let mut stored = 0;
    for size in sizes {
        let mut last_rate = 0.0;
        while stored < size {
            let to = (stored + BATCH).min(size);
            let started = Instant::now();
            beehive(&db, &["apply", "-f", "-"], &manifests(BIG, stored, to));
            last_rate = (to - stored) as f64 / started.elapsed().as_secs_f64();
            stored = to;
        }
        figure(&format!("scale.apply_per_s@{size}"), last_rate, "obj/s");
        let name = format!("o{}", size / 2);
        figure(
            &format!("scale.get_one_ms@{size}"),
            timed_ms(&db, &["get", BIG, &name, "-o", "json"]),
            "ms",
        );
        figure(
            &format!("scale.get_small_kind_ms@{size}"),
            timed_ms(&db, &["get", SMALL]),
            "ms",
        );
        let wal = dir.path().join("scale.db-wal");
        let bytes: u64 = [&db, &wal]
            .iter()
            .map(|file| std::fs::metadata(file).map(|m| m.len()).unwrap_or(0))
            .sum();
        figure(
            &format!("scale.db_mib@{size}"),
            bytes as f64 / f64::from(1 << 20),
            "MiB",
        );
    }
}
