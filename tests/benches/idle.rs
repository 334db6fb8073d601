//! What an idle host costs, and how much memory a host takes, in a process
//! of its own (so resident memory is the host's alone). The host runs in
//! this process on a file-backed store with the four example plugins
//! (`greeting`, `cascade`, `conditions`, `events`) from `scripts/build-plugins`.
//!
//! The plugins come from a compiled-plugin cache filled by a child process
//! first, as a host restarting on the same plugins finds it: compiling is a
//! one-off cost, and its code would otherwise stay resident here.
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `host.rss_peak_mib`: peak resident memory over loading, converging
//!   10,000 objects (7,500 greetings, 2,500 services) and re-converging them
//!   all (every spec updated);
//! - `host.idle_cpu_ms_per_min`: CPU time (all threads) over 60 s with those
//!   10,000 objects settled, per minute;
//! - `host.idle_wakes_per_min`: the times this process's threads were put
//!   on a CPU over that minute (what a machine charges a wake differs by
//!   orders of magnitude between VMs; how many wakes there are does not);
//! - `host.idle_writes`: commits during those 60 s (should be 0);
//! - `host.rss_idle_mib`: resident memory at the end of the idle minute.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use beehive::plugin::{Change, Directory, Runtime, RuntimeOptions};
use beehive::{GroupKind, Host, HostOptions, Json, RawClient, Store};
use beehive_e2e::bench::{
    block_on, create_all, figure, object_name, outstanding, per_thread_cpu, print_idle_threads,
    runs_spent, wait_for, write_all,
};
use beehive_e2e::plugin_dir;

const GREETINGS: usize = 7_500;
const SERVICES: usize = 2_500;
const IDLE: Duration = Duration::from_secs(60);

/// CPU time of the whole process so far (user + system, all threads).
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// A `/proc/self/status` field in MiB (`VmRSS`, `VmHWM`).
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("proc status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .expect("the field");
    kib / 1024.0
}

/// Rewrites the spec of every object [`create_all`] made.
async fn update_all<S>(client: &RawClient, count: usize, spec: S)
where
    S: Fn(usize) -> String + Clone + Send + Sync + 'static,
{
    write_all(client, count, move |client, i| {
        let spec = Json::parse(&spec(i)).expect("spec");
        async move {
            client
                .update_by_name(&object_name(i), spec)
                .await
                .expect("update");
        }
    })
    .await;
}

async fn settled(conn: &rusqlite::Connection) {
    wait_for(Duration::from_millis(20), || outstanding(conn, None) == 0).await;
}

/// Set in the child that fills the cache: the plugin and cache directories.
const WARM: &str = "BEEHIVE_IDLE_BENCH_WARM";

/// Loads every plugin in `plugins` into a fresh host, through `cache`.
async fn load(plugins: &Path, cache: &Path, store: &Store) -> (Host, Arc<Directory>) {
    let host = Host::new(store, HostOptions::new()).expect("host");
    let options = RuntimeOptions::new()
        .cache_dir(cache)
        .metrics(store.metrics().clone());
    let runtime = Runtime::new(options).expect("runtime");
    let directory = Directory::new(runtime, host.clone(), plugins);
    for change in directory.sync().await.expect("load") {
        assert!(matches!(change, Change::Loaded { .. }), "{change}");
    }
    (host, directory)
}

fn main() {
    if let Ok(dirs) = std::env::var(WARM) {
        let (plugins, cache) = dirs.split_once('\n').expect("two directories");
        block_on(async {
            let store = Store::temporary().expect("store");
            load(Path::new(plugins), Path::new(cache), &store).await;
        });
        return;
    }
    block_on(async {
        let plugins = plugin_dir(&["greeting", "cascade", "conditions", "events"]);
        let cache = tempfile::tempdir().expect("cache");
        let warmed = std::process::Command::new(std::env::current_exe().expect("this bench"))
            .env(
                WARM,
                format!("{}\n{}", plugins.path().display(), cache.path().display()),
            )
            .status()
            .expect("the cache filler runs");
        assert!(warmed.success(), "the cache filler failed");
        let dir = tempfile::tempdir().expect("dir");
        let store = Store::open(dir.path().join("beehive.db")).expect("store");
        let (host, _directory) = load(plugins.path(), cache.path(), &store).await;
        let running = host.start().await.expect("start");
        let conn = rusqlite::Connection::open(store.path()).expect("observer");
        let greetings = host.client(GroupKind::new("example.dev", "Greeting"));
        let services = host.client(GroupKind::new("example.dev", "Service"));
        create_all(&greetings, GREETINGS, |i| format!(r#"{{"name":"n{i}"}}"#)).await;
        create_all(&services, SERVICES, |i| format!(r#"{{"port":{}}}"#, 1 + i)).await;
        settled(&conn).await;
        update_all(&greetings, GREETINGS, |i| format!(r#"{{"name":"m{i}"}}"#)).await;
        update_all(&services, SERVICES, |i| format!(r#"{{"port":{}}}"#, 2 + i)).await;
        settled(&conn).await;
        figure("host.rss_peak_mib", status_mib("VmHWM"), "MiB");

        // Let the last handshakes drain and the first backstop passes after
        // the burst run (the sweep gives back the pages the updates freed, a
        // one-off write; the stale-dependents pass, every 60 s, reads the
        // edges once), then watch the host do nothing.
        tokio::time::sleep(Duration::from_secs(65)).await;
        let commits = |text: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix("beehive_store_commits_total "))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        let metrics_before = store.metrics().encode();
        let commits_before = commits(&metrics_before);
        let version_before = store.resource_version();
        // The threads' times are read outside the measured minute: reading
        // them costs more than the minute's work.
        let threads_before = per_thread_cpu("/proc/self/task");
        let cpu_before = cpu_time();
        tokio::time::sleep(IDLE).await;
        let cpu = cpu_time() - cpu_before;
        let threads_after = per_thread_cpu("/proc/self/task");
        let metrics_after = store.metrics().encode();
        let commits_after = commits(&metrics_after);
        if commits_after > commits_before {
            // Say what moved, so a write in the idle minute can be traced.
            let before: std::collections::HashSet<&str> = metrics_before.lines().collect();
            for line in metrics_after
                .lines()
                .filter(|l| !l.starts_with('#') && !before.contains(l))
            {
                eprintln!("moved while idle: {line}");
            }
        }
        let per_minute = cpu.as_secs_f64() * 1000.0 * 60.0 / IDLE.as_secs_f64();
        figure("host.idle_cpu_ms_per_min", per_minute, "ms/min");
        let wakes = runs_spent(&threads_before, &threads_after) as f64;
        figure(
            "host.idle_wakes_per_min",
            wakes * 60.0 / IDLE.as_secs_f64(),
            "wakes/min",
        );
        print_idle_threads(&threads_before, &threads_after);
        let writes = commits_after - commits_before;
        figure("host.idle_writes", writes, "commits");
        assert_eq!(
            store.resource_version(),
            version_before,
            "an idle host writes nothing"
        );
        figure("host.rss_idle_mib", status_mib("VmRSS"), "MiB");
        running.stop(Duration::from_secs(30)).await.expect("stop");
    });
}
