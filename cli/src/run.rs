//! `beehive run`: the host. It holds the lock beside the database for its
//! lifetime, loads and watches the plugin directory, applies and watches the
//! manifest directory, serves the other commands on a Unix socket, and stops
//! gracefully on SIGINT or SIGTERM.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use beehive::engine::{Cadence, Tenure};
use beehive::plugin::{Directory, HttpLimits, LimitOverrides, Limits, Runtime, RuntimeOptions};
use beehive::{Host, HostOptions};
use clap::Args;

use crate::endpoint::{Lock, Paths, holder, remove_stale_socket};
use crate::failure::Failure;
use crate::handlers::Context;
use crate::plugin_mirror;
use crate::readiness::{Phase, Readiness};
use crate::server::{Signals, listen, serve};
use crate::startup::load_plugins_then_manifests;

/// How long `run` waits for a command that holds the lock to finish.
const LOCK_PATIENCE: Duration = Duration::from_secs(10);

/// `beehive run`'s flags.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The plugin directory: every `*.wasm` in it serves its kind, and files
    /// added, replaced or removed are hot-swapped. A `NAME.toml` beside
    /// `NAME.wasm` is that plugin's policy, and grants it directories
    /// (`[files."/out"] path = "/srv/out"`, `access = "read-write"`), HTTP
    /// hosts (`[http] allow = ["127.0.0.1:8080", "*.example.com"]`), kinds
    /// besides its own (`[store] read = ["Site.example.dev"]`, `write =
    /// ["*.example.dev"]`) and config values (`[config] token = { env =
    /// "TOKEN" }`, never shown); no file grants nothing (its own kind
    /// stays read-write), and a changed file is hot-swapped like the
    /// plugin. Default `plugins/`, created if missing; a directory named
    /// here must exist. On a PostgreSQL store the default is the store's
    /// plugin set instead (`beehive plugins push`), so every host serves the
    /// same plugins: it is mirrored into a local directory and re-read every
    /// second.
    #[arg(long, value_name = "DIR")]
    plugins: Option<PathBuf>,

    /// A directory of manifests (JSON or YAML) applied at start and again
    /// whenever one of its files changes.
    #[arg(long, value_name = "DIR")]
    manifests: Option<PathBuf>,

    /// Where compiled plugins are kept, so a restart compiles nothing.
    /// Default: `DB.plugin-cache/` beside the database. Artifacts are
    /// sealed with the key in `DB.plugin-cache.key`, beside the database
    /// wherever the cache is; no plugin may be granted either.
    #[arg(long, value_name = "DIR")]
    plugin_cache: Option<PathBuf>,

    /// Guest CPU time one pass may use (time blocked in host calls does not
    /// count). A ceiling: a plugin may ask for less, never more.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    plugin_deadline: Duration,

    /// Wall-clock time one pass may take in all, host calls included; a
    /// pass still running then is cancelled and fails.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    plugin_wall_limit: Duration,

    /// Linear memory one plugin instance may grow to, e.g. `64MiB`.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    plugin_memory: usize,

    /// Linear memory all plugin instances together may hold.
    #[arg(long, value_name = "SIZE", default_value = "192MiB", value_parser = parse_size)]
    plugin_memory_budget: usize,

    /// The most passes at once a plugin's kind may run (and instances it may
    /// hold); a plugin asking for more gets this many.
    #[arg(long, value_name = "N", default_value = "16", value_parser = clap::value_parser!(u32).range(1..=1024))]
    plugin_concurrency: u32,

    /// Host calls one pass may make (WASI calls included); a pass that makes
    /// more fails.
    #[arg(long, value_name = "N", default_value = "10000")]
    plugin_host_calls: u64,

    /// The shortest cadence a plugin may ask for (owed, full and individual
    /// pass intervals, backoff cap).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    plugin_min_interval: Duration,

    /// How long a plugin's outbound HTTP connection may take to open (TLS
    /// included). A plugin's policy may set its own (`connect_timeout_ms`);
    /// a plugin's request may only ask for less.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = humantime::parse_duration)]
    plugin_http_connect_timeout: Duration,

    /// How long a plugin's outbound request may wait for the response's
    /// first byte, and for each later one (policy: `first_byte_timeout_ms`).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    plugin_http_first_byte_timeout: Duration,

    /// The largest response body a plugin's request may read; the body
    /// ends with an error past it (policy: `max_response_bytes`).
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_size)]
    plugin_http_response_limit: usize,

    /// Outbound requests one plugin may have in flight; one more waits up to
    /// the connect timeout for a turn, then fails (policy:
    /// `max_concurrent_requests`).
    #[arg(long, value_name = "N", default_value = "8", value_parser = clap::value_parser!(u32).range(1..=1024))]
    plugin_http_concurrency: u32,

    /// Passes at once per kind, unless a plugin asks for its own number
    /// (default 1).
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,

    /// Pass every object once at start, for every kind (plugins may also
    /// ask for it themselves).
    #[arg(long)]
    startup_full_pass: bool,

    /// The pass deadline ceiling of one plugin, `NAME=DURATION` (NAME is its
    /// file name without `.wasm`), instead of --plugin-deadline. Repeatable.
    /// Every --plugin-* limit is a ceiling: a plugin may ask for less in its
    /// registration, never more, and `beehive plugins` shows what applies.
    #[arg(long, value_name = "NAME=DURATION", value_parser = parse_named_duration)]
    plugin_deadline_for: Vec<(String, Duration)>,

    /// The memory cap of one plugin, `NAME=SIZE`. Repeatable.
    #[arg(long, value_name = "NAME=SIZE", value_parser = parse_named_size)]
    plugin_memory_for: Vec<(String, usize)>,

    /// The concurrency ceiling of one plugin, `NAME=N`. Repeatable.
    #[arg(long, value_name = "NAME=N", value_parser = parse_named_count)]
    plugin_concurrency_for: Vec<(String, usize)>,

    /// How often each kind lists the objects that owe a pass (default 30s;
    /// must be positive).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    owed_pass_interval: Option<Duration>,

    /// How often each kind passes every object (default off; `0s` is off).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    full_pass_interval: Option<Duration>,

    /// Per-object pass cadence, jittered (default off; `0s` is off).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    individual_pass_interval: Option<Duration>,

    /// The longest wait between retries of a failing object (default 30s;
    /// must be positive).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    max_retry_interval: Option<Duration>,

    /// How often garbage collection sweeps deleted objects (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    gc_interval: Option<Duration>,

    /// The shortest time between two passes of one object (default 1s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    requeue_floor: Option<Duration>,

    /// How often dependents that missed a wake are found and queued
    /// (default 60s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    stale_dependents_interval: Option<Duration>,

    /// How long a pass's transaction may hold the writer (default 1s). On
    /// PostgreSQL the server also ends a transaction idle for 3 s between
    /// two statements, so a paused host cannot hold the lease row's lock.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    transaction_hold_limit: Option<Duration>,

    /// Keep at most this many runs per event timeline (0: no cap).
    #[arg(long, value_name = "RUNS", default_value = "0")]
    event_retention: usize,

    /// Drop event runs that ended longer ago than this (0s: keep).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = humantime::parse_duration)]
    event_max_age: Duration,

    /// How often the plugin and manifest directories are rescanned even
    /// without a change notification.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    rescan_interval: Duration,

    /// Serve the metrics in the Prometheus text format at
    /// http://ADDR/metrics (off by default; `beehive metrics` prints them
    /// over the socket either way). Bind to 127.0.0.1 unless the network
    /// is trusted: the endpoint has no authentication.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,

    /// On a PostgreSQL store: how long the active host's lease lasts
    /// unrenewed (it renews every third of it). A host that cannot renew in
    /// time steps down, and its later writes are refused. Failover, from
    /// the active host's death to the new one's first pass, takes at most
    /// LEASE + 250 ms (the standby's poll) + the new host's start (its
    /// plugins load from the compiled cache: well under 0.5 s), under 5 s
    /// with the default. A lease under 3 s gains nothing against a paused
    /// host: the server ends its open transaction, and so its lock on the
    /// lease, only after 3 s idle.
    #[arg(long, value_name = "DURATION", default_value = "4s", value_parser = humantime::parse_duration)]
    lease: Duration,

    /// How long a graceful stop waits for passes in flight.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    stop_timeout: Duration,
}

/// Parses `64MiB`, `512KiB`, `1GiB`, `100MB` or a plain number of bytes.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: usize = digits
        .parse()
        .map_err(|_| format!("invalid size {text:?}: write e.g. 64MiB"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => return Err(format!("invalid size unit {other:?}: use KiB, MiB or GiB")),
    };
    number
        .checked_mul(scale)
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("invalid size {text:?}"))
}

fn split_named(text: &str) -> Result<(String, &str), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value)),
        _ => Err(format!(
            "{text:?}: write NAME=VALUE, NAME being the plugin file without .wasm"
        )),
    }
}

fn parse_named_duration(text: &str) -> Result<(String, Duration), String> {
    let (name, value) = split_named(text)?;
    let duration = humantime::parse_duration(value).map_err(|e| format!("{value:?}: {e}"))?;
    Ok((name, duration))
}

fn parse_named_count(text: &str) -> Result<(String, usize), String> {
    let (name, value) = split_named(text)?;
    match value.parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok((name, n)),
        _ => Err(format!("{value:?}: write a number from 1 to 1024")),
    }
}

fn parse_named_size(text: &str) -> Result<(String, usize), String> {
    let (name, value) = split_named(text)?;
    Ok((name, parse_size(value)?))
}

impl RunArgs {
    /// The host's options; a host `taking_over` a PostgreSQL store's lease
    /// passes every object once, since what its predecessor held in memory
    /// is gone.
    fn host_options(&self, taking_over: bool) -> HostOptions {
        let mut options = HostOptions::new().cadence(Cadence {
            owed_pass_interval: self.owed_pass_interval,
            full_pass_interval: self.full_pass_interval,
            individual_pass_interval: self.individual_pass_interval,
            startup_full_pass: (self.startup_full_pass || taking_over).then_some(true),
            max_retry_interval: self.max_retry_interval,
        });
        if let Some(workers) = self.concurrency {
            options = options.concurrency(workers);
        }
        if let Some(d) = self.gc_interval {
            options = options.gc_interval(d);
        }
        if let Some(d) = self.requeue_floor {
            options = options.requeue_floor(d);
        }
        if let Some(d) = self.stale_dependents_interval {
            options = options.stale_dependents_interval(d);
        }
        if let Some(d) = self.transaction_hold_limit {
            options = options.transaction_hold_limit(d);
        }
        options.event_retention(self.event_retention, self.event_max_age)
    }

    fn runtime_options(&self, paths: &Paths) -> RuntimeOptions {
        let cache = self
            .plugin_cache
            .clone()
            .unwrap_or_else(|| paths.beside(".plugin-cache"));
        let mut per_plugin: BTreeMap<&str, LimitOverrides> = BTreeMap::new();
        for (name, deadline) in &self.plugin_deadline_for {
            per_plugin.entry(name).or_default().pass_deadline = Some(*deadline);
        }
        for (name, memory) in &self.plugin_memory_for {
            per_plugin.entry(name).or_default().memory = Some(*memory);
        }
        for (name, workers) in &self.plugin_concurrency_for {
            per_plugin.entry(name).or_default().concurrency = Some(*workers);
        }
        per_plugin.into_iter().fold(
            RuntimeOptions::new()
                .limits(Limits {
                    pass_deadline: self.plugin_deadline,
                    pass_wall_limit: self.plugin_wall_limit,
                    memory: self.plugin_memory,
                    concurrency: self.plugin_concurrency as usize,
                    min_interval: self.plugin_min_interval,
                    host_calls_per_pass: self.plugin_host_calls,
                    http: HttpLimits {
                        connect_timeout: self.plugin_http_connect_timeout,
                        first_byte_timeout: self.plugin_http_first_byte_timeout,
                        max_response_bytes: self.plugin_http_response_limit as u64,
                        max_concurrent_requests: self.plugin_http_concurrency as usize,
                    },
                    ..Limits::default()
                })
                .memory_budget(self.plugin_memory_budget)
                .cache_dir(cache)
                .cache_key(paths.beside(".plugin-cache.key")),
            |options, (name, limits)| options.plugin_limits(name, limits),
        )
    }

    /// The directory plugins are served from, and whether it mirrors the
    /// store's plugin set (a PostgreSQL store, with no `--plugins`). The
    /// default is made if missing; a named one must exist.
    fn plugin_dir(&self, paths: &Paths) -> Result<(PathBuf, bool), String> {
        match &self.plugins {
            Some(dir) => require_directory("plugin directory", dir).map(|()| (dir.clone(), false)),
            None => {
                let mirrored = paths.is_postgres();
                let dir = match mirrored {
                    true => paths.beside(".plugins"),
                    false => PathBuf::from("plugins"),
                };
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                if mirrored {
                    plugin_mirror::require_private(&dir)?;
                }
                Ok((dir, mirrored))
            }
        }
    }
}

/// Refuses `dir` unless it is a directory, saying what it is instead.
fn require_directory(what: &str, dir: &Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!("{what} {} is not a directory", dir.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{what} {} does not exist", dir.display()))
        }
        Err(e) => Err(format!("{what} {}: {e}", dir.display())),
    }
}

/// Runs the host until a signal stops it. On PostgreSQL it stands by
/// until it takes the store's lease, serves while it holds it, and goes
/// back to standing by when it loses it.
pub async fn run(db: &Path, args: RunArgs) -> Result<(), Failure> {
    let paths = Paths::new(db);
    let (plugin_dir, mirrored) = args.plugin_dir(&paths)?;
    if let Some(dir) = &args.manifests {
        require_directory("manifest directory", dir)?;
    }
    let file_parent = db
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && !paths.is_postgres());
    if let Some(parent) = file_parent {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    // On PostgreSQL hosts coordinate through the store's lease instead of a
    // lock file: any number may run, one is active.
    let _lock = match paths.is_postgres() {
        true => None,
        false => Some(lock_for_host(&paths).await?),
    };
    let store = paths.open_store()?;
    let mut signals = Signals::new()?;
    let readiness = Readiness::new(store.clone());
    if let Some(addr) = args.metrics_addr {
        let endpoint =
            crate::metrics_http::listen(addr, store.metrics().clone(), readiness.clone()).await?;
        tracing::info!(
            "serving metrics on http://{endpoint}/metrics, health on /healthz and /readyz"
        );
    }
    let serving = Serving {
        paths: &paths,
        args: &args,
        store: &store,
        plugin_dir: &plugin_dir,
        mirrored,
        readiness: &readiness,
    };
    if !paths.is_postgres() {
        serving.serve(None, &mut signals).await?;
        return Ok(());
    }
    loop {
        readiness.set(Phase::StandingBy);
        let tenure = match until_signal(&mut signals, Tenure::take(&store, args.lease)).await {
            Some(tenure) => tenure.map_err(|e| format!("taking the host lease: {e}"))?,
            None => return Ok(()),
        };
        match serving.serve(Some(tenure), &mut signals).await? {
            Ending::Stopped => return Ok(()),
            Ending::SteppedDown => {
                tracing::warn!("back to standing by: this host competes for the lease again");
            }
        }
    }
}

/// How one stretch of serving ended.
enum Ending {
    /// A signal asked the host to stop.
    Stopped,
    /// The host lost its lease; its passes were wound down.
    SteppedDown,
}

/// What a stretch of serving needs, the same for every tenure.
struct Serving<'a> {
    paths: &'a Paths,
    args: &'a RunArgs,
    store: &'a beehive::Store,
    plugin_dir: &'a Path,
    mirrored: bool,
    readiness: &'a Readiness,
}

impl Serving<'_> {
    /// Serves the store (while `tenure` is held, on PostgreSQL) until a
    /// signal or the loss of the tenure: a host, its plugins, the socket.
    async fn serve(&self, tenure: Option<Tenure>, signals: &mut Signals) -> Result<Ending, String> {
        let Serving {
            paths,
            args,
            store,
            plugin_dir,
            mirrored,
            readiness,
        } = *self;
        readiness.set(Phase::Starting);
        remove_stale_socket(&paths.socket);
        let host =
            Host::new(store, args.host_options(tenure.is_some())).map_err(|e| e.to_string())?;
        let runtime = Runtime::new(args.runtime_options(paths).metrics(store.metrics().clone()))
            .map_err(|e| e.to_string())?;
        if mirrored {
            plugin_mirror::mirror(store, plugin_dir)?;
        }
        let plugins = Directory::new(runtime, host.clone(), plugin_dir);
        // Refused at once, not after the socket is up: a directory that
        // cannot be read would serve nothing.
        std::fs::read_dir(plugin_dir)
            .map_err(|e| format!("plugin directory {}: {e}", plugin_dir.display()))?;
        let running = host.start().await.map_err(|e| e.to_string())?;
        let mirror = mirrored.then(|| {
            let (store, dir) = (store.clone(), plugin_dir.to_path_buf());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(plugin_mirror::INTERVAL).await;
                    if let Err(error) = plugin_mirror::mirror(&store, &dir) {
                        tracing::warn!("{error}");
                    }
                }
            })
        });
        let ctx = Context {
            store: store.clone(),
            host: Some(host),
            plugins: Some(plugins.clone()),
            started: Default::default(),
        };
        let listener = listen(&paths.socket)?;
        let socket = SocketFile::bound(&paths.socket);
        readiness.set(Phase::Serving);
        tracing::info!(
            "serving {} on {} (plugins: {}, loading)",
            paths.shown,
            paths.socket.display(),
            plugin_dir.display()
        );
        // Objects of a kind whose plugin is still loading wait for it.
        let startup = tokio::spawn(load_plugins_then_manifests(
            ctx.clone(),
            plugins.clone(),
            args.manifests.clone(),
            args.rescan_interval,
        ));
        let plugin_watch = plugins
            .watch(args.rescan_interval)
            .map_err(|e| e.to_string())?;
        let lost = async {
            match &tenure {
                Some(tenure) => tenure.hold().await,
                None => std::future::pending().await,
            }
        };
        let lost = serve(listener, &ctx, signals, lost).await?;
        match &lost {
            Some(why) => tracing::error!("stepping down: {why}"),
            None => tracing::info!("stopping: finishing passes in flight (a second signal forces)"),
        }
        socket.remove();
        if let Some(mirror) = mirror {
            mirror.abort();
        }
        plugin_watch.stop().await;
        // A load still compiling is abandoned; one that finished started
        // the manifest watch, which stops like the plugin watch.
        startup.abort();
        if let Ok(Some(watch)) = startup.await {
            watch.stop().await;
        }
        if lost.is_some() {
            // Its writes are refused now, so passes in flight cannot finish
            // anything: give them a moment, not the graceful stop's patience.
            let _ = running.stop(STEP_DOWN_PATIENCE).await;
            return Ok(Ending::SteppedDown);
        }
        let stopped = running.stop(args.stop_timeout).await;
        if let Some(tenure) = &tenure {
            tenure.release();
        }
        stopped.map_err(|e| e.to_string())?;
        tracing::info!("stopped");
        Ok(Ending::Stopped)
    }
}

/// The socket file this host bound, known by its inode: another host on
/// the same store may have replaced it since (after this one lost its
/// lease), and that one's is not this host's to remove.
struct SocketFile {
    path: PathBuf,
    identity: Option<(u64, u64)>,
}

impl SocketFile {
    fn bound(path: &Path) -> SocketFile {
        SocketFile {
            path: path.to_path_buf(),
            identity: identity(path),
        }
    }

    /// Removes the socket file if it is still the one this host bound.
    fn remove(self) {
        if self.identity.is_some() && identity(&self.path) == self.identity {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A file's device and inode, if it exists.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|meta| (meta.dev(), meta.ino()))
}

/// How long a host that lost its lease waits for its passes in flight.
const STEP_DOWN_PATIENCE: Duration = Duration::from_secs(1);

/// Runs `work` unless SIGINT or SIGTERM comes first (`None`).
async fn until_signal<T>(
    signals: &mut Signals,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        done = work => Some(done),
        () = signals.recv() => None,
    }
}

/// Takes the lock for the host's lifetime. A command holding it briefly is
/// waited for; another host is an error.
async fn lock_for_host(paths: &Paths) -> Result<Lock, Failure> {
    let deadline = Instant::now() + LOCK_PATIENCE;
    loop {
        if let Some(lock) = Lock::try_acquire(&paths.lock)? {
            return Ok(lock);
        }
        if std::os::unix::net::UnixStream::connect(&paths.socket).is_ok() {
            return Err(Failure::conflict(format!(
                "a host is already running on {} ({})",
                paths.shown,
                holder(&paths.lock)
            )));
        }
        if Instant::now() >= deadline {
            return Err(Failure::conflict(format!(
                "{} is held by {} and it does not let go",
                paths.lock.display(),
                holder(&paths.lock)
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_lease_is_the_librarys() {
        #[derive(clap::Parser)]
        struct Run {
            #[command(flatten)]
            args: RunArgs,
        }
        let run = <Run as clap::Parser>::parse_from(["run"]);
        assert_eq!(run.args.lease, beehive::engine::DEFAULT_LEASE);
    }

    #[test]
    fn sizes_and_named_limits_parse() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert_eq!(
            parse_named_duration("greeting=2s"),
            Ok(("greeting".into(), Duration::from_secs(2)))
        );
        assert!(parse_named_duration("=2s").is_err());
        assert_eq!(
            parse_named_size("greeting=1MiB"),
            Ok(("greeting".into(), 1 << 20))
        );
    }
}
