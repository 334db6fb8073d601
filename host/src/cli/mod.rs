//! The `beehive` command line: `run` is the host; every other command reaches
//! it over its socket, or opens the database itself when no host runs.

mod endpoint;
mod failure;
mod manifest;
mod manifest_watch;
mod metrics_http;
mod ops;
mod output;
mod plugin_mirror;
mod protocol;
mod run;
mod server;
mod top;

use crate::cli::failure::Failure;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use endpoint::{Endpoint, Paths};
use ops::Context;
use output::Format;
use protocol::{Outcome, Reply, Request, Until};

/// Beehive: an embedded, durable, self-healing control plane whose
/// controllers are WebAssembly plugins.
///
/// `beehive run` is the host: it loads every plugin in a directory and
/// reconciles objects until stopped. The other commands work the same with
/// or without a running host: they talk to the host over `DB.sock`, or, when
/// none runs, take the lock `DB.lock` and open the database themselves.
#[derive(Parser, Debug)]
#[command(
    name = "beehive",
    version,
    about,
    long_about,
    after_help = "Exit codes: 0 done, 1 failed, 2 usage, 3 not found, 4 conflict \
                  (name taken, being deleted, cycle, store in use), 5 timed out, \
                  6 no host answers (a command that needs one)."
)]
struct Cli {
    /// The database: a SQLite file, or a PostgreSQL connection string
    /// (postgres://user@host/db, or postgres://user@/db?host=/socket/dir).
    #[arg(
        long,
        global = true,
        value_name = "FILE|URL",
        default_value = "beehive.db",
        env = "BEEHIVE_DB"
    )]
    db: PathBuf,

    /// The least severe log lines shown (on stderr).
    #[arg(long, global = true, value_enum, default_value = "info")]
    log_level: LogLevel,

    /// Log lines as text or as JSON objects.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the host: load the plugin directory and reconcile until SIGINT or
    /// SIGTERM (a second signal forces the stop).
    Run(Box<run::RunArgs>),
    /// Create or update the objects in manifest files (JSON or YAML): all of
    /// them or, if any is invalid, none.
    Apply {
        /// A file, a directory of `.json`/`.yaml`/`.yml` files, or `-` for stdin.
        #[arg(short = 'f', long = "filename", value_name = "FILE|DIR|-")]
        file: PathBuf,
    },
    /// List the objects of a kind, or show one.
    Get {
        /// The kind: `Kind` or `Kind.group`.
        kind: String,
        /// Only this object.
        name: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
        /// After the current state, print each change as it happens (needs
        /// a running host; Ctrl-C ends it).
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// Show an object: spec, status, conditions, relations, next pass, events.
    Describe {
        #[command(flatten)]
        object: Named,
        #[command(flatten)]
        printed: Printed,
    },
    /// Delete objects (their finalizers and children are honoured). With
    /// several names each is tried; a name that cannot be deleted is
    /// reported and the rest go ahead.
    Delete {
        /// The kind: `Kind` or `Kind.group`.
        kind: String,
        /// The objects' names.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Show an object's event timeline, newest first.
    Events {
        #[command(flatten)]
        object: Named,
        /// Only this timeline (`""` is the default one).
        #[arg(long)]
        category: Option<String>,
        #[command(flatten)]
        printed: Printed,
        /// After the timeline, print each run as it is written (needs a
        /// running host; Ctrl-C ends it).
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// Wait until an object is settled, has a condition, or is deleted.
    Wait {
        #[command(flatten)]
        object: Named,
        /// `settled` (its generation observed), `condition=TYPE[=STATUS]`
        /// (STATUS defaults to True), or `delete`.
        #[arg(long = "for", value_name = "CONDITION", value_parser = parse_until)]
        until: Until,
        /// Give up after this long.
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// Show which plugin version serves each kind, and which files failed;
    /// on a PostgreSQL store, also push plugins into it.
    Plugins {
        #[command(flatten)]
        printed: Printed,
        #[command(subcommand)]
        action: Option<PluginsAction>,
    },
    /// Print the running host's metrics in the Prometheus text format
    /// (reconciles, work queues, plugins, the store, watches).
    Metrics,
    /// A live view of the running host, refreshed in place: per kind its
    /// objects, unsettled and failing ones, queue, passes/s and p99 pass
    /// time; per plugin its instances and memory. q, Esc or Ctrl-C quits.
    Top {
        /// How often it refreshes (and the interval rates are taken over).
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// Print one frame and exit (for scripts and non-terminals).
        #[arg(long)]
        once: bool,
    },
    /// Queue an object for a pass now, clearing its backoff (needs a host).
    Requeue {
        #[command(flatten)]
        object: Named,
    },
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// One object, named as its commands take it: kind, then name.
#[derive(Args, Debug)]
struct Named {
    /// The kind: `Kind` or `Kind.group`.
    kind: String,
    /// The object's name.
    name: String,
}

/// `-o json|yaml`, for the commands that print a document.
#[derive(Args, Debug)]
struct Printed {
    /// Print as JSON or YAML instead.
    #[arg(short = 'o', long, value_parser = ["json", "yaml"])]
    output: Option<String>,
}

impl Printed {
    /// `value` as `-o` asks, or as `as_text` puts it for people.
    fn show<T: serde::Serialize>(&self, value: &T, as_text: impl FnOnce(&T) -> String) -> String {
        match self.output.as_deref() {
            Some("json") => output::json(value),
            Some(_) => output::yaml(value),
            None => as_text(value),
        }
    }
}

fn parse_until(text: &str) -> Result<Until, String> {
    match text {
        "settled" => Ok(Until::Settled),
        "delete" | "deleted" => Ok(Until::Deleted),
        _ => {
            let condition = text.strip_prefix("condition=").ok_or_else(|| {
                format!("{text:?}: write settled, condition=TYPE[=STATUS] or delete")
            })?;
            let (type_, status) = condition.split_once('=').unwrap_or((condition, "True"));
            if type_.is_empty()
                || !["true", "false", "unknown"].contains(&status.to_lowercase().as_str())
            {
                return Err(format!(
                    "{text:?}: write condition=TYPE[=True|False|Unknown]"
                ));
            }
            Ok(Until::Condition {
                type_: type_.into(),
                status: status.into(),
            })
        }
    }
}

/// Parses the command line, runs it, and turns an error into one line on
/// stderr and the exit code of its kind (see `failure::Code`: 1 for most,
/// 3 not found, 4 conflict, 5 timeout, 6 unreachable).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_level, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return fail(&Failure::from(format!(
                "cannot start the async runtime: {e}"
            )));
        }
    };
    let result = runtime.block_on(execute(cli));
    // Tasks still running (a pass that outlived a stop's deadline) are
    // dropped at their next yield; nothing may hold the exit beyond this.
    runtime.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(failure) => fail(&failure),
    }
}

fn fail(failure: &Failure) -> ExitCode {
    eprintln!("error: {}", failure.message);
    ExitCode::from(failure.code.exit_code())
}

fn init_logging(level: LogLevel, format: LogFormat) {
    let level = match level {
        LogLevel::Error => tracing::Level::ERROR,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Debug => tracing::Level::DEBUG,
        LogLevel::Trace => tracing::Level::TRACE,
    };
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Runs a command and returns what to print.
async fn execute(cli: Cli) -> Result<String, Failure> {
    let paths = Paths::new(&cli.db);
    let request = match cli.command {
        Command::Run(args) => {
            return run::run(&cli.db, *args)
                .await
                .map(|()| String::new())
                .map_err(Failure::from);
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "beehive", &mut script);
            return Ok(String::from_utf8_lossy(&script).into_owned());
        }
        Command::Wait {
            object,
            until,
            timeout,
        } => return wait(&paths, object, until, timeout).await,
        Command::Apply { file } => Request::Apply {
            objects: manifest::load(&file)?,
        },
        Command::Get {
            kind,
            name,
            output,
            watch: true,
        } => return watch_objects(&paths, kind, name, output).await,
        Command::Get {
            kind, name, output, ..
        } => {
            let single = name.is_some();
            let reply = dispatch(&paths, Request::Get { kind, name }).await?;
            return match reply {
                Reply::Objects { objects } => Ok(output::objects(&objects, output, single)),
                other => Err(unexpected(&other)),
            };
        }
        Command::Describe { object, printed } => {
            let Named { kind, name } = object;
            return match dispatch(&paths, Request::Describe { kind, name }).await? {
                Reply::Described(d) => Ok(printed.show(&*d, output::description)),
                other => Err(unexpected(&other)),
            };
        }
        Command::Events {
            object,
            category,
            watch: true,
            ..
        } => return watch_events(&paths, object, category).await,
        Command::Events {
            object: Named { kind, name },
            category,
            printed,
            ..
        } => {
            let request = Request::Events {
                kind,
                name,
                category,
            };
            return match dispatch(&paths, request).await? {
                Reply::Events { events } => Ok(printed.show(&events, |e| output::events(e))),
                other => Err(unexpected(&other)),
            };
        }
        Command::Plugins {
            action: Some(action),
            ..
        } => return plugins_action(&paths, action).await,
        Command::Plugins { printed, .. } => {
            return match dispatch(&paths, Request::Plugins).await? {
                Reply::Plugins(view) => Ok(printed.show(&view, output::plugins)),
                other => Err(unexpected(&other)),
            };
        }
        Command::Top { interval, once } => {
            let mut source = MetricsSource { paths: &paths };
            let host = paths.shown.clone();
            if once {
                return top::once(&mut source, &host, interval).await;
            }
            if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                return Err("beehive top needs a terminal: use --once to print one frame".into());
            }
            return top::interactive(&mut source, &host, interval)
                .await
                .map(|()| String::new());
        }
        Command::Metrics => {
            return match dispatch(&paths, Request::Metrics).await? {
                Reply::Metrics { text } => Ok(text),
                other => Err(unexpected(&other)),
            };
        }
        Command::Delete { kind, names } => return delete_each(&paths, &kind, names).await,
        Command::Requeue {
            object: Named { kind, name },
        } => Request::Requeue { kind, name },
    };
    match dispatch(&paths, request).await? {
        Reply::Done { message } => Ok(message + "\n"),
        Reply::Applied { results } => Ok(results
            .iter()
            .map(|r| format!("{}/{} {}\n", r.kind, r.name, r.action))
            .collect()),
        other => Err(unexpected(&other)),
    }
}

/// `delete KIND NAME...`. One name fails as its request does. With several,
/// as kubectl does: each deletion is printed as it lands, each refusal as
/// it comes, and a closing error carries the first refusal's exit code.
async fn delete_each(paths: &Paths, kind: &str, names: Vec<String>) -> Result<String, Failure> {
    if let [name] = names.as_slice() {
        return delete_one(paths, kind, name).await.map(|done| done + "\n");
    }
    let mut first_refusal: Option<Failure> = None;
    let mut refusals = 0;
    for name in &names {
        match delete_one(paths, kind, name).await {
            Ok(done) => println!("{done}"),
            Err(refusal) => {
                eprintln!("error: {}", refusal.message);
                refusals += 1;
                first_refusal.get_or_insert(refusal);
            }
        }
    }
    match first_refusal {
        None => Ok(String::new()),
        Some(first) => Err(Failure::new(
            first.code,
            format!("{refusals} of {} objects not deleted", names.len()),
        )),
    }
}

/// Deletes one object; what happened, in a line.
async fn delete_one(paths: &Paths, kind: &str, name: &str) -> Result<String, Failure> {
    let request = Request::Delete {
        kind: kind.to_string(),
        name: name.to_string(),
    };
    match dispatch(paths, request).await? {
        Reply::Done { message } => Ok(message),
        other => Err(unexpected(&other)),
    }
}

/// `beehive top`'s snapshots: the metrics, over the socket.
struct MetricsSource<'a> {
    paths: &'a Paths,
}

impl top::Source for MetricsSource<'_> {
    async fn fetch(&mut self) -> Result<String, Failure> {
        match dispatch(self.paths, Request::Metrics).await? {
            Reply::Metrics { text } => Ok(text),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(reply: &Reply) -> Failure {
    Failure::from(format!("unexpected reply from the host: {reply:?}"))
}

/// `get -w`: the host streams the snapshot and each change; printed as they come.
async fn watch_objects(
    paths: &Paths,
    kind: String,
    name: Option<String>,
    format: Format,
) -> Result<String, Failure> {
    let mut printer = output::WatchPrinter::new(format);
    follow(paths, Request::Watch { kind, name }, move |reply| {
        match reply {
            Reply::Objects { objects } => printer.snapshot(&objects),
            Reply::Change(c) => {
                printer.change(&c.change, c.id, c.object.as_ref(), c.resource_version)
            }
            other => return Err(unexpected(&other)),
        }
        Ok(())
    })
    .await
}

/// `events -w`: the timeline, then each run as the host sees it written.
async fn watch_events(
    paths: &Paths,
    Named { kind, name }: Named,
    category: Option<String>,
) -> Result<String, Failure> {
    let request = Request::WatchEvents {
        kind,
        name,
        category,
    };
    let mut first = true;
    follow(paths, request, move |reply| {
        match reply {
            Reply::Events { events } if first => {
                first = false;
                output::print_now(&output::events(&events));
            }
            Reply::Events { events } => {
                for run in &events {
                    output::print_now(&output::event_run(run));
                }
            }
            other => return Err(unexpected(&other)),
        }
        Ok(())
    })
    .await
}

/// Sends a streaming request to the running host and hands each reply to
/// `on_reply` until the host hangs up or a reply (or the host) says why not.
async fn follow(
    paths: &Paths,
    request: Request,
    mut on_reply: impl FnMut(Reply) -> Result<(), Failure> + Send + 'static,
) -> Result<String, Failure> {
    let paths = paths.clone();
    tokio::task::spawn_blocking(move || {
        let Endpoint::Host(connection) = endpoint::reach(&paths)? else {
            return Err(Failure::unreachable(
                "watching needs a running host: start one with `beehive run`",
            ));
        };
        let mut failure = None;
        endpoint::stream(connection, &request, |outcome| {
            match outcome.and_then(&mut on_reply) {
                Ok(()) => true,
                Err(error) => {
                    failure = Some(error);
                    false
                }
            }
        })?;
        failure.map_or(Ok(String::new()), Err)
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Runs `request` on the host, or here under the lock when none runs.
async fn dispatch(paths: &Paths, request: Request) -> Outcome {
    let endpoint = {
        let paths = paths.clone();
        tokio::task::spawn_blocking(move || endpoint::reach(&paths))
            .await
            .map_err(|e| e.to_string())??
    };
    match endpoint {
        Endpoint::Host(stream) => {
            tokio::task::spawn_blocking(move || endpoint::ask(stream, &request))
                .await
                .map_err(|e| e.to_string())?
        }
        Endpoint::Direct(_lock) => {
            let creates = matches!(request, Request::Apply { .. });
            let ctx = open_directly(paths, creates)?;
            ops::execute(&ctx, request).await
        }
    }
}

/// What `beehive plugins` can change on a PostgreSQL store, whose hosts
/// serve the plugins pushed into it.
#[derive(Debug, Subcommand)]
enum PluginsAction {
    /// Store a plugin in the database and make it the version serving
    /// under its name: every active host hot-swaps to it within a second.
    /// Pushing an older file again rolls back.
    Push {
        /// The component (`.wasm`).
        file: PathBuf,
        /// The name it serves under (default: the file's stem).
        #[arg(long)]
        name: Option<String>,
        /// Its policy file (what it may reach; see `beehive run --help`).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
    /// Stop serving a pushed plugin (its bytes are kept for a later push).
    Remove {
        /// The plugin's name.
        name: String,
    },
    /// List the plugins pushed into the store.
    List,
}

async fn plugins_action(paths: &Paths, action: PluginsAction) -> Result<String, Failure> {
    if !paths.is_postgres() {
        return Err(format!(
            "{}: plugins are pushed into a PostgreSQL store; a SQLite host serves its plugin directory",
            paths.shown
        )
        .into());
    }
    let store = paths.open_store()?;
    match action {
        PluginsAction::Push { file, name, policy } => {
            let name = match name {
                Some(name) => name,
                None => file
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .ok_or_else(|| {
                        format!("{}: no file name to name the plugin by", file.display())
                    })?
                    .to_string(),
            };
            let wasm = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            if !wasm.starts_with(b"\0asm") {
                return Err(format!("{}: not a WebAssembly file", file.display()).into());
            }
            let policy = match policy {
                Some(path) => Some(
                    std::fs::read_to_string(&path)
                        .map_err(|e| format!("{}: {e}", path.display()))?,
                ),
                None => None,
            };
            let pushed = store
                .push_plugin(&name, wasm, policy)
                .await
                .map_err(|e| e.to_string())?;
            Ok(format!("pushed {} ({})\n", pushed.name, pushed.hash))
        }
        PluginsAction::Remove { name } => match store.remove_pushed_plugin(&name).await {
            Ok(true) => Ok(format!("removed {name}\n")),
            Ok(false) => Err(Failure::not_found(format!("no plugin {name} in the store"))),
            Err(e) => Err(e.to_string().into()),
        },
        PluginsAction::List => {
            let set = store.pushed_plugins().map_err(|e| e.to_string())?;
            if set.is_empty() {
                return Ok("No plugins pushed.\n".into());
            }
            let rows = set.iter().map(|p| {
                vec![
                    p.name.clone(),
                    p.hash.chars().skip("sha256:".len()).take(12).collect(),
                    if p.policy.is_some() {
                        "yes".into()
                    } else {
                        "-".into()
                    },
                    output::rfc3339(p.pushed_at),
                ]
            });
            Ok(output::columns(&["NAME", "HASH", "POLICY", "PUSHED"], rows))
        }
    }
}

/// The database, opened by a command that holds the lock. Reads never
/// create it.
fn open_directly(paths: &Paths, create: bool) -> Result<Context, Failure> {
    if !create && !paths.is_postgres() && !paths.db.exists() {
        return Err(format!(
            "no database at {}: nothing has been applied yet (`beehive apply` or `beehive run` make one)",
            paths.shown
        ).into());
    }
    let store = paths.open_store()?;
    Ok(Context {
        store,
        host: None,
        plugins: None,
    })
}

/// `wait`: a host answers once the condition holds; with no host, the
/// command looks again every 100 ms, taking the lock only to look, so a
/// host can start meanwhile.
async fn wait(
    paths: &Paths,
    Named { kind, name }: Named,
    until: Until,
    timeout: Duration,
) -> Result<String, Failure> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let endpoint = {
            let paths = paths.clone();
            tokio::task::spawn_blocking(move || endpoint::reach(&paths))
                .await
                .map_err(|e| e.to_string())??
        };
        let holds = match endpoint {
            Endpoint::Host(stream) => {
                let request = Request::Wait {
                    kind: kind.clone(),
                    name: name.clone(),
                    until: until.clone(),
                    timeout_ms: left.as_millis() as u64,
                };
                let reply = tokio::task::spawn_blocking(move || endpoint::ask(stream, &request))
                    .await
                    .map_err(|e| e.to_string())??;
                return match reply {
                    Reply::Done { message } => Ok(message + "\n"),
                    other => Err(unexpected(&other)),
                };
            }
            Endpoint::Direct(_lock) => {
                let ctx = open_directly(paths, false)?;
                let group_kind = ops::resolve_kind(&ctx.store, &kind)?;
                ops::holds(
                    &beehive::RawClient::new(&ctx.store, group_kind),
                    &name,
                    &until,
                )?
            }
        };
        if holds {
            return Ok(format!("{kind}/{name}: {}\n", ops::describe_until(&until)));
        }
        if left.is_zero() {
            return Err(Failure::timeout(format!(
                "timed out after {} waiting until {kind}/{name} is {} (no host is running)",
                humantime::format_duration(timeout),
                ops::describe_until(&until)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100).min(left)).await;
    }
}
