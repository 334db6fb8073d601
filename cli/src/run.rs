//! `beehive run`: the host. It holds the lock beside the database for its
//! lifetime, loads and watches the plugin directory, applies and watches the
//! manifest directory, serves the other commands on a Unix socket, and stops
//! gracefully on SIGINT or SIGTERM.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use beehive::engine::{Cadence, Tenure};
use beehive::plugin::{Compiler, Directory, Runtime, RuntimeOptions};
use beehive::trace::Tracer;
use beehive::{Host, HostOptions};
use clap::Args;

use crate::endpoint::{Lock, Paths, holder, remove_stale_socket};
use crate::failure::Failure;
use crate::handlers::Context;
use crate::otlp::OtlpConfig;
use crate::plugin_limits::PluginLimitArgs;
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

    /// How plugins are compiled: `tiered` serves a large (Python or
    /// JavaScript) plugin from quick baseline code in seconds and moves it
    /// to optimised code when that is ready; `optimizing` waits for the
    /// optimised code; `baseline` never optimises. A plugin already in the
    /// cache loads its optimised code under each.
    #[arg(long, value_name = "COMPILER", default_value = "tiered")]
    compiler: CompilerArg,

    #[command(flatten)]
    limits: PluginLimitArgs,

    /// Pass every object once at start, for every kind (plugins may also
    /// ask for it themselves).
    #[arg(long)]
    startup_full_pass: bool,

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

    /// The most objects a kind's work queue tracks at once (default 65536,
    /// about 10 MiB). Past it, owed work waits for an owed scan, paged to the
    /// room the queue has.
    #[arg(long, value_name = "OBJECTS", value_parser = clap::value_parser!(u32).range(2..))]
    queue_capacity: Option<u32>,

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

    /// Take a backup of the store into this directory every
    /// --backup-every, as `beehive backup` does (`beehive-TIME.db` and its
    /// `.sha256`), keeping the newest --backup-keep. A failure (a full
    /// disk, a directory gone) is logged and counted
    /// (`beehive_backup_failures`), and the next is tried on time. SQLite
    /// stores only.
    #[arg(long, value_name = "DIR")]
    backup_dir: Option<PathBuf>,

    /// How often a scheduled backup is taken.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration, requires = "backup_dir")]
    backup_every: Duration,

    /// How many scheduled backups are kept (older ones are removed).
    #[arg(long, value_name = "N", default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..), requires = "backup_dir")]
    backup_keep: u32,

    /// Export a span of every pass (with its store writes and a plugin's
    /// HTTP requests as children) over OTLP/HTTP to this collector, e.g.
    /// `http://127.0.0.1:4318` (`/v1/traces` is added). Off by default;
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` and the other standard `OTEL_*`
    /// variables (service name, resource attributes, sampler, batch
    /// sizes, timeout) are read too. Spans wait in a bounded queue: a
    /// collector that is down or slow never delays a pass, and what is
    /// dropped is counted (`beehive_otlp_spans_dropped_total`).
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,

    /// Serve a read-only console for a browser at http://ADDR/ (off by
    /// default; a bare PORT means 127.0.0.1:PORT): every kind with its
    /// objects and unsettled ones, each object's conditions, relations,
    /// spec, status and events. Pages hold no script; what plugins and
    /// manifests wrote is shown as text. An address other machines can
    /// reach needs --web-token-file.
    #[arg(long, value_name = "ADDR", value_parser = crate::web::parse_addr)]
    web_addr: Option<std::net::SocketAddr>,

    /// A file whose first line is the token the console requires (at
    /// least 16 characters): a browser opens /?token=TOKEN once and keeps
    /// it in a cookie; other clients send `Authorization: Bearer TOKEN`.
    /// Read from a file so it never shows in `ps`.
    #[arg(long, value_name = "FILE", requires = "web_addr")]
    web_token_file: Option<PathBuf>,

    /// How long a graceful stop waits for passes in flight.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    stop_timeout: Duration,
}

impl RunArgs {
    /// The host's options; a host `taking_over` a PostgreSQL store's lease
    /// passes every object once, since what its predecessor held in memory
    /// is gone.
    fn host_options(&self, taking_over: bool, tracer: Option<&Tracer>) -> HostOptions {
        let mut options = HostOptions::new().cadence(Cadence {
            owed_pass_interval: self.owed_pass_interval,
            full_pass_interval: self.full_pass_interval,
            individual_pass_interval: self.individual_pass_interval,
            startup_full_pass: (self.startup_full_pass || taking_over).then_some(true),
            max_retry_interval: self.max_retry_interval,
        });
        if let Some(workers) = self.limits.concurrency {
            options = options.concurrency(workers);
        }
        if let Some(d) = self.gc_interval {
            options = options.gc_interval(d);
        }
        if let Some(d) = self.requeue_floor {
            options = options.requeue_floor(d);
        }
        if let Some(objects) = self.queue_capacity {
            options = options.queue_capacity(objects as usize);
        }
        if let Some(d) = self.stale_dependents_interval {
            options = options.stale_dependents_interval(d);
        }
        if let Some(d) = self.transaction_hold_limit {
            options = options.transaction_hold_limit(d);
        }
        if let Some(tracer) = tracer {
            options = options.tracer(tracer.clone());
        }
        options.event_retention(self.event_retention, self.event_max_age)
    }

    fn runtime_options(&self, paths: &Paths) -> RuntimeOptions {
        let cache = self
            .plugin_cache
            .clone()
            .unwrap_or_else(|| default_plugin_cache(paths));
        self.limits
            .runtime_options()
            .compiler(self.compiler.into())
            .cache_dir(cache)
            .cache_key(plugin_cache_key(paths))
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
    if let Some(dir) = &args.backup_dir {
        if paths.is_postgres() {
            return Err(Failure::usage(
                "--backup-dir backs up a SQLite store: back a PostgreSQL store up with the \
                 server's own tools (see docs/backups.md)",
            ));
        }
        crate::backup::require_backup_dir(dir)?;
    }
    let otlp = OtlpConfig::resolve(args.otlp_endpoint.as_deref(), |name| {
        std::env::var(name).ok()
    })
    .map_err(Failure::usage)?;
    let metrics_listener = match args.metrics_addr {
        Some(addr) => Some(crate::metrics_http::bind(addr).await?),
        None => None,
    };
    let console = match args.web_addr {
        Some(addr) => Some(Console::bind(addr, args.web_token_file.as_deref()).await?),
        None => None,
    };
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
    if let Some(listener) = metrics_listener {
        let endpoint =
            crate::metrics_http::listen(listener, store.metrics().clone(), readiness.clone())?;
        tracing::info!(
            "serving metrics on http://{endpoint}/metrics, health on /healthz and /readyz"
        );
    }
    let (tracer, exporter) = match otlp {
        Some(config) => {
            tracing::info!("exporting traces to {}", config.endpoint);
            let (tracer, exporter) = crate::otlp::start(config, store.metrics().clone());
            (Some(tracer), Some(exporter))
        }
        None => (None, None),
    };
    let serving = Serving {
        paths: &paths,
        args: &args,
        store: &store,
        plugin_dir: &plugin_dir,
        mirrored,
        readiness: &readiness,
        tracer: tracer.as_ref(),
        console: console.as_ref(),
    };
    let served = serve_until_stopped(&serving, &mut signals).await;
    if let Some(exporter) = exporter {
        exporter.stop(EXPORT_FLUSH_PATIENCE).await;
    }
    served
}

/// The console's bound listener and the token guarding it, kept across a
/// PostgreSQL host's tenures: each tenure serves it with its own host.
struct Console {
    listener: Arc<tokio::net::TcpListener>,
    token: Option<Arc<crate::web::Token>>,
}

impl Console {
    /// # Errors
    /// A usage failure for an unreadable or short token, or an address off
    /// loopback without one; a failure when the address cannot be bound.
    async fn bind(
        addr: std::net::SocketAddr,
        token_file: Option<&Path>,
    ) -> Result<Console, Failure> {
        let token = token_file
            .map(crate::web::Token::read)
            .transpose()
            .map_err(Failure::usage)?;
        if !addr.ip().is_loopback() && token.is_none() {
            return Err(Failure::usage(crate::web::needs_token(addr)));
        }
        let listener = crate::web::bind(addr).await?;
        Ok(Console {
            listener: Arc::new(listener),
            token: token.map(Arc::new),
        })
    }
}

/// How long a stopping host gives the trace exporter to send what is queued.
const EXPORT_FLUSH_PATIENCE: Duration = Duration::from_secs(5);

/// Serves until a signal: once on SQLite, tenure after tenure on PostgreSQL.
async fn serve_until_stopped(serving: &Serving<'_>, signals: &mut Signals) -> Result<(), Failure> {
    let (store, args) = (serving.store, serving.args);
    if !serving.paths.is_postgres() {
        serving.serve(None, signals).await?;
        return Ok(());
    }
    let readiness = serving.readiness;
    loop {
        readiness.set(Phase::StandingBy);
        let tenure = match until_signal(signals, Tenure::take(store, args.lease)).await {
            Some(tenure) => tenure.map_err(|e| format!("taking the host lease: {e}"))?,
            None => return Ok(()),
        };
        match serving.serve(Some(tenure), signals).await? {
            Ending::Stopped => return Ok(()),
            Ending::SteppedDown => {
                tracing::warn!("back to standing by: this host competes for the lease again");
            }
        }
    }
}

/// `--compiler`'s values.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum CompilerArg {
    Tiered,
    Optimizing,
    Baseline,
}

impl From<CompilerArg> for Compiler {
    fn from(arg: CompilerArg) -> Compiler {
        match arg {
            CompilerArg::Tiered => Compiler::Tiered,
            CompilerArg::Optimizing => Compiler::Optimizing,
            CompilerArg::Baseline => Compiler::Baseline,
        }
    }
}

/// Where a host over `paths` keeps compiled plugins unless `--plugin-cache`
/// says otherwise.
pub fn default_plugin_cache(paths: &Paths) -> PathBuf {
    paths.beside(".plugin-cache")
}

/// The key that seals a host's compiled plugins, beside its database.
pub fn plugin_cache_key(paths: &Paths) -> PathBuf {
    paths.beside(".plugin-cache.key")
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
    tracer: Option<&'a Tracer>,
    console: Option<&'a Console>,
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
            tracer,
            console,
        } = *self;
        readiness.set(Phase::Starting);
        remove_stale_socket(&paths.socket);
        let host = Host::new(store, args.host_options(tenure.is_some(), tracer))
            .map_err(|e| e.to_string())?;
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
        let console = console.map(|console| {
            if let Ok(addr) = console.listener.local_addr() {
                tracing::info!("serving the console on http://{addr}/");
            }
            crate::web::serve(console.listener.clone(), ctx.clone(), console.token.clone())
        });
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
        let backups = args.backup_dir.clone().map(|dir| {
            let every = args.backup_every;
            let keep = args.backup_keep as usize;
            tokio::spawn(crate::backup::scheduled(store.clone(), dir, every, keep))
        });
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
        if let Some(console) = console {
            console.abort();
        }
        if let Some(backups) = backups {
            backups.abort();
        }
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
}
