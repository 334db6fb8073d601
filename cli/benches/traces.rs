//! What exporting traces costs a host, on the real binary with the
//! `greeting` plugin (`scripts/build-plugins`), against a collector on
//! loopback that takes whatever it is sent.
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `trace.converge_10k_ratio`: 10,000 greetings applied in one file
//!   through a running host, from the apply to every one settled, with
//!   `--otlp-endpoint` over without; the median of nine pairs on fresh
//!   stores, each pair's order the other way from the last's;
//! - `trace.span_export_overhead_us`: what export adds to each object's
//!   convergence (its pass span, its write spans, their trip through the
//!   queue and the encoder), from the same runs: the median of the pairs'
//!   `1/rate_on − 1/rate_off`;
//! - `trace.converge_10k_on_per_s` / `trace.converge_10k_off_per_s`: the
//!   medians of the two sides, and `trace.spans_exported_share`, the share
//!   of the spans made that reached the collector (the rest were dropped
//!   by the bounded queue, and counted);
//! - `trace.host_cpu_us_per_object_on` / `_off`: the host process's CPU
//!   time over the converge, per object (on this 2-core machine the host
//!   keeps both cores busy, so what export spends comes out of the rate).

use std::path::Path;
use std::time::{Duration, Instant};

use beehive_e2e::bench::{cpu_spent, figure, median, per_thread_cpu, wanted};
use beehive_e2e::{TestServer, Workspace};

const OBJECTS: usize = 10_000;
const PAIRS: usize = 9;

fn manifests() -> String {
    (0..OBJECTS)
        .map(|i| {
            format!(
                "{{\"kind\":\"Greeting.example.dev\",\"name\":\"g{i}\",\"spec\":{{\"name\":\"n{i}\"}}}}\n"
            )
        })
        .collect()
}

/// The store as an outside observer reads it, beside the running host.
fn read_only(db: &Path) -> rusqlite::Connection {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("the store opens read-only");
    conn.busy_timeout(Duration::from_secs(5))
        .expect("a busy timeout");
    conn
}

/// Greetings that still owe a pass.
fn outstanding(conn: &rusqlite::Connection) -> i64 {
    conn.query_row(
        "SELECT count(*) FROM objects WHERE kind = 'Greeting' \
           AND (observed_generation IS NULL OR observed_generation < generation \
                OR reconcile_owed > 0)",
        [],
        |row| row.get(0),
    )
    .expect("the count")
}

/// A value of the host's metrics.
fn metric(workspace: &Workspace, name: &str) -> f64 {
    workspace
        .ok(&["metrics"])
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// One converge of [`OBJECTS`] greetings through a fresh host: objects per
/// second, the host's CPU time per object (µs), and with a collector, the
/// share of spans it received.
fn converge(exporting: bool) -> (f64, f64, Option<f64>) {
    let workspace = Workspace::with_plugins(&["greeting"]);
    // Kept alive, as a collector keeps its clients' connections.
    let collector = TestServer::start_keeping_alive();
    collector.route("/v1/traces", 200, "");
    let endpoint = collector.url("");
    let args: &[&str] = match exporting {
        true => &["--otlp-endpoint", &endpoint],
        false => &[],
    };
    let host = workspace.start_host(args);
    workspace.write("greetings.json", &manifests());
    let observer = read_only(&workspace.path().join("beehive.db"));
    let tasks = format!("/proc/{}/task", host.pid());
    let cpu_before = per_thread_cpu(&tasks);
    let started = Instant::now();
    workspace.ok(&["apply", "-f", "greetings.json"]);
    // Polled often: a converge takes a few hundred milliseconds, and the
    // poll's grain is part of what is measured.
    let deadline = started + Duration::from_secs(300);
    while outstanding(&observer) != 0 {
        assert!(Instant::now() < deadline, "the greetings did not settle");
        std::thread::sleep(Duration::from_millis(1));
    }
    let rate = OBJECTS as f64 / started.elapsed().as_secs_f64();
    let cpu = cpu_spent(&cpu_before, &per_thread_cpu(&tasks)).as_secs_f64() * 1e6 / OBJECTS as f64;
    let share = exporting.then(|| {
        // The last batch leaves within the schedule delay (1 s).
        std::thread::sleep(Duration::from_millis(1500));
        let exported = metric(&workspace, "beehive_otlp_spans_exported_total");
        let dropped = metric(&workspace, "beehive_otlp_spans_dropped_total");
        exported / (exported + dropped).max(1.0)
    });
    host.terminate();
    (rate, cpu, share)
}

fn main() {
    if !wanted("trace.") {
        return;
    }
    let (mut on, mut off, mut ratios, mut overheads, mut shares) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut cpu_on, mut cpu_off) = (Vec::new(), Vec::new());
    for pair in 0..PAIRS {
        let ((without, cpu_without, _), (with, cpu_with, share)) = if pair % 2 == 0 {
            (converge(false), converge(true))
        } else {
            let on = converge(true);
            (converge(false), on)
        };
        on.push(with);
        off.push(without);
        cpu_on.push(cpu_with);
        cpu_off.push(cpu_without);
        ratios.push(with / without);
        overheads.push((1.0 / with - 1.0 / without) * 1e6);
        shares.extend(share);
    }
    figure("trace.converge_10k_ratio", median(ratios), "ratio");
    figure("trace.span_export_overhead_us", median(overheads), "us");
    figure("trace.converge_10k_on_per_s", median(on), "obj/s");
    figure("trace.converge_10k_off_per_s", median(off), "obj/s");
    figure("trace.spans_exported_share", median(shares), "ratio");
    figure("trace.host_cpu_us_per_object_on", median(cpu_on), "us");
    figure("trace.host_cpu_us_per_object_off", median(cpu_off), "us");
}
