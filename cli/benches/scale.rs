//! What the CLI and a host cost as the store grows, through the real
//! binary. The store is grown by `apply -f -` of JSON lines in batches of
//! 20,000 with no host running, as a user would load it; a host then
//! serves it with the greeting plugin (`scripts/build-plugins`), whose
//! compiled code is cached by a first start on the empty store, as any
//! restart finds it.
//!
//! Prints, at each size N (10k and 100k; 1M too with `BEEHIVE_SCALE_1M=1`):
//! - `scale.apply_per_s@N`: objects per second of the batch that brought
//!   the store to N objects;
//! - `scale.converge_s@N`: from starting `beehive run` to every object
//!   settled, for the objects applied since the last size; and
//!   `scale.converge_per_s@N`, those objects per second;
//! - `scale.idle_cpu_ms_per_min@N`: CPU time of the settled host over 30 s
//!   (each thread alive at its end, from `/proc/PID/task/*/schedstat`), per
//!   minute, with the threads that spent it; and
//!   `scale.idle_wakes_per_min@N`, the times those threads were put on a
//!   CPU, per minute (what a wake costs differs between machines by orders
//!   of magnitude; how many there are does not);
//! - `scale.rss_mib@N`: the settled host's resident memory;
//! - `scale.serve_peak_rss_mib@N`: the most it was resident at any moment
//!   since it started, converging included (`VmHWM`);
//! - `scale.peak_rss_mib@N`: the most a host was resident (`VmHWM`) while
//!   N objects were applied through it into a fresh store, 20,000 an
//!   `apply`, and until they converged; and `scale.apply_host_per_s@N`,
//!   objects per second of that apply;
//! - `scale.restart_to_socket_ms@N`: a restart of the settled host, until
//!   its socket accepts;
//! - `scale.restart_first_pass_ms@N`: the same restart, until an object
//!   applied once the socket accepts has had its first pass;
//! - `scale.get_one_ms@N`: `beehive get KIND NAME -o json` of one object,
//!   process start included, with no host; the median of five;
//! - `scale.get_small_kind_ms@N`: `beehive get KIND` of a 20-object kind
//!   beside the big one, the same way;
//! - `scale.get_selector_ms@N`: `beehive get KIND -l pick=y -o name` of the
//!   100 objects of the big kind that carry that label, the same way;
//! - `scale.db_mib@N`: the database's size on disk, its write-ahead log
//!   included.
//!
//! - `web.first_screen_ms@N`: the console's first screen (`run
//!   --web-addr`), one GET over a fresh connection, from the request to the
//!   page's last byte, on the restarted host; the median of five; and
//!   `web.kind_page_ms@N`, a page of the big kind (500 objects) the same way;
//! - `web.apply_to_page_ms@N`: with the console's live stream open, from an
//!   `apply` (process start included) of an object carrying a label to the
//!   stream's `change` event and a refetch of the page that selects that
//!   label holding it: what an open page shows an apply in.
//!
//! And `scale.load_avg_1m` before each size, since these figures move with
//! the machine's load.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use beehive_e2e::bench::{
    self, cpu_spent, figure, median, per_thread_cpu, print_idle_threads, runs_spent,
};

/// Objects per `apply`.
const BATCH: usize = 20_000;

/// The big kind (the greeting plugin's), and the small one beside it.
const BIG: &str = "Greeting.example.dev";
const SMALL: &str = "Small.scale.dev";

/// How long the settled host is watched for idle CPU.
const IDLE: Duration = Duration::from_secs(30);

/// How long any wait here may take before the benchmark gives up.
const PATIENCE: Duration = Duration::from_secs(900);

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

/// How many objects of the big kind carry the label `pick: y`: the first.
const PICKED: usize = 100;

/// JSON lines for objects `from..to` of `kind`; the first [`PICKED`] carry
/// the label a selector picks them by.
fn manifests(kind: &str, from: usize, to: usize) -> Vec<u8> {
    (from..to)
        .map(|i| {
            let labels = match i < PICKED {
                true => ",\"labels\":{\"pick\":\"y\"}",
                false => "",
            };
            format!(
                "{{\"kind\":\"{kind}\",\"name\":\"o{i}\"{labels},\"spec\":{{\"name\":\"n{i}\"}}}}\n"
            )
        })
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

/// The figures this benchmark prints, without their sizes.
const FIGURES: [&str; 19] = [
    "scale.load_avg_1m",
    "scale.apply_per_s",
    "scale.converge_s",
    "scale.converge_per_s",
    "scale.idle_cpu_ms_per_min",
    "scale.idle_wakes_per_min",
    "scale.rss_mib",
    "scale.serve_peak_rss_mib",
    "scale.peak_rss_mib",
    "scale.apply_host_per_s",
    "scale.restart_to_socket_ms",
    "scale.restart_first_pass_ms",
    "scale.get_one_ms",
    "scale.get_small_kind_ms",
    "scale.get_selector_ms",
    "scale.db_mib",
    "web.first_screen_ms",
    "web.kind_page_ms",
    "web.apply_to_page_ms",
];

/// Whether to run: `cargo bench -- NAME` runs only the benchmarks with a
/// figure whose name contains NAME.
fn wanted() -> bool {
    FIGURES.iter().any(|name| bench::wanted(name))
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Waits until `done` holds, polling every `every`.
///
/// # Panics
/// After [`PATIENCE`], naming `what`.
fn wait_until(what: &str, every: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(every);
    }
}

/// A plugin directory holding the greeting plugin.
fn plugin_directory(scratch: &Path) -> PathBuf {
    // The bench runs from the cli package; plugins are built into the
    // workspace's shared target directory.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(target, PathBuf::from);
    let wasm = target.join("wasm32-wasip2/release/greeting.wasm");
    assert!(
        wasm.exists(),
        "{} is missing: run scripts/build-plugins first",
        wasm.display()
    );
    let plugins = scratch.join("plugins");
    std::fs::create_dir_all(&plugins).expect("the plugin directory");
    std::fs::copy(&wasm, plugins.join("greeting.wasm")).expect("the plugin is copied");
    plugins
}

/// A `beehive run` over the store, started now.
struct HostProcess {
    child: Child,
    started: Instant,
}

impl HostProcess {
    fn start(db: &Path, plugins: &Path) -> HostProcess {
        HostProcess::start_with(db, plugins, &[])
    }

    fn start_with(db: &Path, plugins: &Path, args: &[&str]) -> HostProcess {
        let log = std::fs::File::create(db.with_extension("host.log")).expect("a host log");
        let started = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_beehive"))
            .arg("--db")
            .arg(db)
            .args(["--log-level", "warn", "run", "--plugins"])
            .arg(plugins)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("beehive run starts");
        HostProcess { child, started }
    }

    /// Milliseconds from the start until the socket accepts a connection.
    fn socket_ms(&mut self, db: &Path) -> f64 {
        let socket = db.with_extension("db.sock");
        wait_until("the host's socket", Duration::from_millis(2), || {
            assert!(
                self.child.try_wait().expect("the host's state").is_none(),
                "the host exited; see {}",
                db.with_extension("host.log").display()
            );
            UnixStream::connect(&socket).is_ok()
        });
        ms(self.started.elapsed())
    }

    /// Stops the host as an operator would (SIGTERM) and waits for it.
    fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "the host is signalled");
        let exited = self.child.wait().expect("the host exits");
        assert!(exited.success(), "the host stops cleanly: {exited}");
    }
}

/// A `/proc/PID/status` field in MiB (`VmRSS`).
fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .expect("the field");
    kib / 1024.0
}

fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1000.0
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

/// Objects of the big kind that owe a pass, read through the store's
/// partial index of outstanding work (what the owed scan reads).
fn outstanding(db: &Path) -> i64 {
    read_only(db)
        .query_row(
            "SELECT count(*) FROM objects \
         WHERE grp = 'example.dev' AND kind = 'Greeting' \
           AND (observed_generation IS NULL \
                OR observed_generation < generation \
                OR reconcile_owed > 0)",
            [],
            |row| row.get(0),
        )
        .expect("the count")
}

/// Whether object `name` of the big kind has been settled.
fn settled(db: &Path, name: &str) -> bool {
    read_only(db)
        .query_row(
            "SELECT observed_generation = generation FROM objects \
         WHERE grp = 'example.dev' AND kind = 'Greeting' AND name = ?1",
            [name],
            |row| row.get::<_, Option<bool>>(0),
        )
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// Serves the store until the `added` objects applied since the last size
/// settle, then measures the settled host.
fn serve_and_settle(db: &Path, plugins: &Path, size: usize, added: usize) {
    let mut host = HostProcess::start(db, plugins);
    host.socket_ms(db);
    wait_until("every object settled", Duration::from_millis(200), || {
        outstanding(db) == 0
    });
    let converge = host.started.elapsed().as_secs_f64();
    figure(&format!("scale.converge_s@{size}"), converge, "s");
    figure(
        &format!("scale.converge_per_s@{size}"),
        added as f64 / converge,
        "obj/s",
    );
    // Let the last status writes and the commit listener's tail finish.
    std::thread::sleep(Duration::from_secs(2));
    let tasks = format!("/proc/{}/task", host.child.id());
    let before = per_thread_cpu(&tasks);
    std::thread::sleep(IDLE);
    let after = per_thread_cpu(&tasks);
    let idle = cpu_spent(&before, &after);
    let per_minute = ms(idle) * 60.0 / IDLE.as_secs_f64();
    figure(
        &format!("scale.idle_cpu_ms_per_min@{size}"),
        per_minute,
        "ms",
    );
    figure(
        &format!("scale.idle_wakes_per_min@{size}"),
        runs_spent(&before, &after) as f64 * 60.0 / IDLE.as_secs_f64(),
        "wakes/min",
    );
    print_idle_threads(&before, &after);
    figure(
        &format!("scale.rss_mib@{size}"),
        status_mib(host.child.id(), "VmRSS"),
        "MiB",
    );
    figure(
        &format!("scale.serve_peak_rss_mib@{size}"),
        status_mib(host.child.id(), "VmHWM"),
        "MiB",
    );
    host.stop();
}

/// Applies `size` objects through a host serving a fresh store in
/// `scratch`, until they converge. The store `compiled` beside it lends its
/// compiled plugin (and the key that seals it), as a restart finds it: the
/// figure is the apply's, not a compile's.
fn apply_through_host(scratch: &Path, compiled: &Path, plugins: &Path, size: usize) {
    let dir = scratch.join(format!("through-host-{size}"));
    std::fs::create_dir_all(&dir).expect("a directory for the store");
    let db = dir.join("scale.db");
    let beside = |db: &Path, suffix: &str| db.with_extension(format!("db{suffix}"));
    let cache = beside(&db, ".plugin-cache");
    std::fs::create_dir_all(&cache).expect("a plugin cache");
    for artifact in std::fs::read_dir(beside(compiled, ".plugin-cache")).expect("the cache") {
        let artifact = artifact.expect("a cache entry").path();
        std::fs::copy(&artifact, cache.join(artifact.file_name().expect("a name")))
            .expect("the artifact is copied");
    }
    std::fs::copy(
        beside(compiled, ".plugin-cache.key"),
        beside(&db, ".plugin-cache.key"),
    )
    .expect("the key is copied");
    let mut host = HostProcess::start(&db, plugins);
    host.socket_ms(&db);
    beehive(&db, &["plugins", "--wait"], b"");
    let started = Instant::now();
    for from in (0..size).step_by(BATCH) {
        let to = (from + BATCH).min(size);
        beehive(&db, &["apply", "-f", "-"], &manifests(BIG, from, to));
    }
    figure(
        &format!("scale.apply_host_per_s@{size}"),
        size as f64 / started.elapsed().as_secs_f64(),
        "obj/s",
    );
    wait_until("every object settled", Duration::from_millis(200), || {
        outstanding(&db) == 0
    });
    figure(
        &format!("scale.peak_rss_mib@{size}"),
        status_mib(host.child.id(), "VmHWM"),
        "MiB",
    );
    host.stop();
    std::fs::remove_dir_all(&dir).expect("the store is removed");
}

/// Restarts the settled host: until the socket accepts, then until an
/// object applied through it has had its first pass.
fn restart(db: &Path, plugins: &Path, size: usize) {
    let console = free_address();
    let mut host = HostProcess::start_with(db, plugins, &["--web-addr", &console]);
    let socket = host.socket_ms(db);
    figure(&format!("scale.restart_to_socket_ms@{size}"), socket, "ms");
    let name = format!("fresh-{size}");
    let manifest =
        format!("{{\"kind\":\"{BIG}\",\"name\":\"{name}\",\"spec\":{{\"name\":\"x\"}}}}\n");
    beehive(db, &["apply", "-f", "-"], manifest.as_bytes());
    wait_until(
        "the fresh object's first pass",
        Duration::from_millis(2),
        || settled(db, &name),
    );
    figure(
        &format!("scale.restart_first_pass_ms@{size}"),
        ms(host.started.elapsed()),
        "ms",
    );
    console_figures(db, &console, size);
    host.stop();
}

/// A loopback address no one listens on now.
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").to_string()
}

/// One GET of `path` over a fresh connection: the milliseconds to the
/// last byte, and the body.
fn get_page(address: &str, path: &str) -> (f64, String) {
    let started = Instant::now();
    let (head, page) = beehive_e2e::http_get(address, path);
    let took = ms(started.elapsed());
    assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
    (took, page)
}

/// The console's figures on a host serving `size` objects.
fn console_figures(db: &Path, address: &str, size: usize) {
    let first: Vec<f64> = (0..5).map(|_| get_page(address, "/").0).collect();
    figure(&format!("web.first_screen_ms@{size}"), median(first), "ms");
    let kind_page = format!("/kinds/{BIG}");
    let pages: Vec<f64> = (0..5).map(|_| get_page(address, &kind_page).0).collect();
    figure(&format!("web.kind_page_ms@{size}"), median(pages), "ms");

    use std::io::Read;
    let mut live = std::net::TcpStream::connect(address).expect("the live stream opens");
    live.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("a read timeout");
    write!(live, "GET /live HTTP/1.1\r\nhost: {address}\r\n\r\n").expect("asked");
    let mut heard = String::new();
    let mut buffer = [0u8; 4096];
    let mut listen = |heard: &mut String| {
        if let Ok(read) = live.read(&mut buffer) {
            heard.push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
    };
    wait_until("the live stream opens", Duration::ZERO, || {
        listen(&mut heard);
        heard.contains("retry:")
    });
    let name = format!("web-{size}");
    let manifest = format!(
        "{{\"kind\":\"{BIG}\",\"name\":\"{name}\",\"labels\":{{\"web\":\"{size}\"}},\"spec\":{{\"name\":\"x\"}}}}\n"
    );
    let started = Instant::now();
    beehive(db, &["apply", "-f", "-"], manifest.as_bytes());
    wait_until("the change event", Duration::ZERO, || {
        listen(&mut heard);
        heard.contains("event: change")
    });
    let selected = format!("/kinds/{BIG}?l=web%3D{size}");
    wait_until(
        "the page shows the object",
        Duration::from_millis(5),
        || {
            get_page(address, &selected)
                .1
                .contains(&format!(">{name}<"))
        },
    );
    figure(
        &format!("web.apply_to_page_ms@{size}"),
        ms(started.elapsed()),
        "ms",
    );
}

fn main() {
    if !wanted() {
        return;
    }
    let mut sizes = vec![10_000, 100_000];
    if std::env::var_os("BEEHIVE_SCALE_1M").is_some() {
        sizes.push(1_000_000);
    }
    let dir = tempfile::tempdir().expect("a scratch directory");
    let db = dir.path().join("scale.db");
    let plugins = plugin_directory(dir.path());
    beehive(
        &db,
        &["apply", "-f", "-", "--new-kind"],
        &manifests(SMALL, 0, 20),
    );
    // Compiles the plugin into the cache beside the store.
    let mut first = HostProcess::start(&db, &plugins);
    first.socket_ms(&db);
    beehive(&db, &["plugins", "--wait"], b"");
    first.stop();
    let mut stored = 0;
    for size in sizes {
        figure("scale.load_avg_1m", load_average(), "load");
        let mut last_rate = 0.0;
        let added = size - stored;
        while stored < size {
            let to = (stored + BATCH).min(size);
            let started = Instant::now();
            beehive(&db, &["apply", "-f", "-"], &manifests(BIG, stored, to));
            last_rate = (to - stored) as f64 / started.elapsed().as_secs_f64();
            stored = to;
        }
        figure(&format!("scale.apply_per_s@{size}"), last_rate, "obj/s");
        serve_and_settle(&db, &plugins, size, added);
        restart(&db, &plugins, size);
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
        figure(
            &format!("scale.get_selector_ms@{size}"),
            timed_ms(&db, &["get", BIG, "-l", "pick=y", "-o", "name"]),
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
        apply_through_host(dir.path(), &db, &plugins, size);
    }
}
