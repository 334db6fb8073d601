//! What the benchmarks in `tests/benches/` share: the runtime and the figure
//! lines, the throughput workload (its kind, its controller, its writers) and
//! the wait for a store to settle.

use std::future::Future;
use std::time::Duration;

use beehive::{
    Action, Controller, ControllerClient, CreateOptions, GroupKind, Json, RawClient, RawObject,
    Result,
};

/// How many objects a throughput workload creates.
pub const OBJECTS: usize = 10_000;

/// How many tasks write them, as the concurrent callers of an application.
pub const WRITERS: usize = 8;

/// Prints `figure NAME VALUE UNIT` on a line of its own.
pub fn figure(name: &str, value: f64, unit: &str) {
    println!("figure {name} {value:.4} {unit}");
}

/// Whether the figure `name` is wanted: `cargo bench -- NAME` runs only the
/// figures whose name contains NAME (`cargo bench` itself passes `--bench`).
pub fn wanted(name: &str) -> bool {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    filter.is_none_or(|f| name.contains(&f))
}

/// Runs a benchmark on a multi-threaded runtime, as `beehive run` serves.
///
/// # Panics
/// When the runtime cannot be built.
pub fn block_on<F: Future>(body: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(body)
}

/// The median of `samples`: one run on a shared two-core machine swings by
/// ±15%, so a figure measured several times reports the middle one.
///
/// # Panics
/// When `samples` is empty.
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The kind the throughput workloads create.
pub fn widget() -> GroupKind {
    GroupKind::new("bench.dev", "Widget")
}

/// The name of the workload's `i`th object.
pub fn object_name(i: usize) -> String {
    format!("o{i}")
}

/// The throughput workloads' controller: it copies the spec into the status
/// and settles, the cheapest real pass, so a figure measures the engine and
/// the store rather than the controller.
pub struct WriteStatus;

impl Controller for WriteStatus {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        client.update_status_json(object.spec.clone()).await?;
        Ok(Action::settled())
    }
}

/// Runs `write(client, i)` for every `i` in `0..count`, spread over
/// [`WRITERS`] tasks.
///
/// # Panics
/// When a writer panics.
pub async fn write_all<F, Fut>(client: &RawClient, count: usize, write: F)
where
    F: Fn(RawClient, usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (client, write) = (client.clone(), write.clone());
            tokio::spawn(async move {
                for i in (writer..count).step_by(WRITERS) {
                    write(client.clone(), i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("writer");
    }
}

/// Creates `count` objects of the client's kind, the `i`th named
/// [`object_name`]`(i)` with the spec `spec(i)`, from [`WRITERS`] tasks.
///
/// # Panics
/// When a spec is not JSON or a create fails.
pub async fn create_all<S>(client: &RawClient, count: usize, spec: S)
where
    S: Fn(usize) -> String + Clone + Send + Sync + 'static,
{
    write_all(client, count, move |client, i| {
        let spec = spec.clone();
        async move {
            let spec = Json::parse(&spec(i)).expect("spec");
            client
                .create(&object_name(i), spec, CreateOptions::new())
                .await
                .expect("create");
        }
    })
    .await;
}

/// Objects that still owe a pass — of `kind`, or of every kind — counted in
/// an SQLite store's file as an outside observer would: through the partial
/// index of outstanding work, so a poll costs what is left to do.
///
/// # Panics
/// When the query fails.
pub fn outstanding(conn: &rusqlite::Connection, kind: Option<&GroupKind>) -> i64 {
    let mut sql = "SELECT COUNT(*) FROM objects INDEXED BY objects_owed \
                   WHERE (observed_generation IS NULL OR observed_generation < generation \
                          OR reconcile_owed > 0 OR deletion_requested_at IS NOT NULL)"
        .to_string();
    let mut params = Vec::new();
    if let Some(kind) = kind {
        sql.push_str(" AND grp = ?1 AND kind = ?2");
        params = vec![&kind.group, &kind.kind];
    }
    conn.query_row(&sql, rusqlite::params_from_iter(params), |row| row.get(0))
        .expect("count")
}

/// Polls `done` every `every` until it holds. A benchmark has no deadline:
/// a workload that never settles is a bug, not a figure.
pub async fn wait_for(every: Duration, mut done: impl FnMut() -> bool) {
    while !done() {
        tokio::time::sleep(every).await;
    }
}

/// One thread's use of the CPU so far, from `/proc/PID/task/ID/schedstat`.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadUsage {
    /// `comm:id`, as the idle lines print it.
    pub thread: String,
    /// Time on a CPU (nanoseconds, unlike `stat`'s 10 ms ticks).
    pub cpu: Duration,
    /// Times the thread was put on a CPU: its wakes, and its returns after
    /// preemption. Unlike CPU time, this does not depend on what the machine
    /// charges a wake, which differs by orders of magnitude between VMs.
    pub runs: u64,
}

/// Each thread's CPU use so far; `tasks` is `/proc/PID/task` (`/proc/self/task`
/// for this process).
pub fn per_thread_cpu(tasks: &str) -> Vec<ThreadUsage> {
    let Ok(entries) = std::fs::read_dir(tasks) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = std::fs::read_to_string(path.join("comm")).ok()?;
            let schedstat = std::fs::read_to_string(path.join("schedstat")).ok()?;
            // Fields: time on a CPU (ns), time waiting for one (ns), runs.
            let mut fields = schedstat.split_whitespace();
            let nanos: u64 = fields.next()?.parse().ok()?;
            let runs: u64 = fields.nth(1)?.parse().ok()?;
            let id = path.file_name()?.to_string_lossy().into_owned();
            Some(ThreadUsage {
                thread: format!("{}:{id}", name.trim()),
                cpu: Duration::from_nanos(nanos),
                runs,
            })
        })
        .collect()
}

/// Each thread's use between two readings of [`per_thread_cpu`]: a thread
/// born meanwhile counts whole. A thread that ended meanwhile (the runtime's
/// blocking pool lets idle threads go) drops out, where a difference of two
/// sums would subtract all it ever spent.
pub fn use_by_thread<'a>(
    before: &'a [ThreadUsage],
    after: &'a [ThreadUsage],
) -> impl Iterator<Item = ThreadUsage> + 'a {
    after.iter().map(|now| {
        let earlier = before.iter().find(|then| then.thread == now.thread);
        ThreadUsage {
            thread: now.thread.clone(),
            cpu: now
                .cpu
                .saturating_sub(earlier.map_or(Duration::ZERO, |then| then.cpu)),
            runs: now.runs.saturating_sub(earlier.map_or(0, |then| then.runs)),
        }
    })
}

/// The CPU time the threads alive at `after` spent since `before`.
pub fn cpu_spent(before: &[ThreadUsage], after: &[ThreadUsage]) -> Duration {
    use_by_thread(before, after).map(|used| used.cpu).sum()
}

/// How many times the threads alive at `after` were put on a CPU since
/// `before`.
pub fn runs_spent(before: &[ThreadUsage], after: &[ThreadUsage]) -> u64 {
    use_by_thread(before, after).map(|used| used.runs).sum()
}

/// Prints a line for each thread that ran between two readings of
/// [`per_thread_cpu`], with its CPU time and runs, so an idle figure that
/// moved says where it went, and whether the thread woke more often or the
/// machine charged each wake more.
pub fn print_idle_threads(before: &[ThreadUsage], after: &[ThreadUsage]) {
    for used in use_by_thread(before, after) {
        if used.runs > 0 || used.cpu >= Duration::from_micros(100) {
            println!(
                "  idle cpu: thread {} {:.2} ms in {} runs",
                used.thread,
                used.cpu.as_secs_f64() * 1000.0,
                used.runs
            );
        }
    }
}

/// A 2 MB "plugin" (any bytes: neither check reads them as wasm), signed
/// by a fresh minisign key, and the trust file naming that key, in `dir`:
/// the plugin `plugin.verify_ms` and `plugin.pull_verify_ms` check.
///
/// # Panics
/// When minisign is missing (`scripts/test` installs it) or fails.
pub fn signed_two_megabytes(dir: &std::path::Path) -> std::path::PathBuf {
    let run = |args: &[&str]| {
        let done = std::process::Command::new("minisign")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("minisign (scripts/test installs it)");
        assert!(done.status.success(), "{done:?}");
    };
    run(&["-G", "-W", "-p", "bench.pub", "-s", "bench.key"]);
    let plugin = dir.join("plugin.wasm");
    let bytes: Vec<u8> = (0..2_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(&plugin, bytes).expect("the plugin");
    run(&["-S", "-s", "bench.key", "-m", "plugin.wasm"]);
    let public = std::fs::read_to_string(dir.join("bench.pub")).expect("the key");
    let line = public.lines().nth(1).expect("a key line");
    std::fs::write(
        dir.join(beehive::plugin::TRUST_FILE),
        format!("[[key]]\nname = \"bench\"\nminisign = \"{line}\"\n"),
    )
    .expect("the trust file");
    plugin
}
