//! The command line's flags and commands, as clap parses them; what each
//! command does is in `commands`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::failure::Failure;
use crate::get_format::{self, GetOutput};
use crate::jsonpath::Path;
use crate::output;
use crate::protocol::Until;
use crate::run;

/// Beehive: an embedded, durable, self-healing control plane whose
/// controllers are WebAssembly plugins.
///
/// `beehive run` is the host: it loads every plugin in a directory and
/// reconciles objects until stopped. The other commands work the same with
/// or without a running host: they talk to the host over `DB.sock`, or, when
/// none runs, take the lock `DB.lock` and open the database themselves.
/// The heading every command's help lists the global flags under, apart
/// from its own: on `new` or `completions`, which touch no store, they do
/// nothing.
const GLOBAL: &str = "Global options (for commands on a store)";

#[derive(Parser, Debug)]
#[command(
    name = "beehive",
    version,
    about,
    long_about,
    after_help = "Exit codes: 0 done, 1 failed, 2 usage, 3 not found, 4 conflict \
                  (name taken, being deleted, cycle, store in use), 5 timed out, \
                  6 no host answers (a command that needs one), 7 invalid (a spec \
                  refused by its kind's schema or plugin; nothing written)."
)]
pub(crate) struct Cli {
    /// The database: a SQLite file, or a PostgreSQL connection string
    /// (postgres://user@host/db, or postgres://user@/db?host=/socket/dir).
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        value_name = "FILE|URL",
        default_value = "beehive.db",
        env = "BEEHIVE_DB"
    )]
    pub(crate) db: PathBuf,

    /// The least severe log lines shown (on stderr).
    #[arg(long, global = true, help_heading = GLOBAL, value_enum, default_value = "info")]
    pub(crate) log_level: LogLevel,

    /// How long a command waits for a running host's answer (a watch: for
    /// its first), e.g. `30s`, `2m`; `0` waits for ever. `wait` adds its
    /// own --timeout. On PostgreSQL, a command safe to repeat is sent again
    /// within it when its host is replaced or the database restarts.
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "DURATION", default_value = "30s", value_parser = parse_request_timeout)]
    pub(crate) request_timeout: Duration,

    /// Log lines as text or as JSON objects.
    #[arg(long, global = true, help_heading = GLOBAL, value_enum, default_value = "text")]
    pub(crate) log_format: LogFormat,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run the host: load the plugin directory and reconcile until SIGINT or
    /// SIGTERM (a second signal forces the stop).
    Run(Box<run::RunArgs>),
    /// Create or update the objects in manifest files (JSON or YAML): all of
    /// them or, if any is invalid, none.
    Apply {
        /// A file, a directory of `.json`/`.yaml`/`.yml` files, or `-` for stdin.
        #[arg(short = 'f', long = "filename", value_name = "FILE|DIR|-")]
        file: PathBuf,
        /// Allow kinds that no plugin serves and no object has: without it,
        /// such a kind is taken for a typo and nothing is applied.
        #[arg(long)]
        new_kind: bool,
        /// Apply manifests that carry a `generation` even when the object's
        /// spec has changed since they were read, overwriting that change.
        #[arg(long)]
        force_conflicts: bool,
        /// Check everything an apply checks (schemas, the plugins' own
        /// rules, the store's), then write nothing; `--dry-run=server` as
        /// kubectl spells it.
        #[arg(long, num_args = 0..=1, default_missing_value = "server", value_parser = ["server"])]
        dry_run: Option<String>,
        /// Start a trace with this apply and print its id: the passes the
        /// writes cause are spans in it, exported by a host run with
        /// `--otlp-endpoint`. Without it, a `TRACEPARENT` in the
        /// environment (W3C trace context) is the writes' parent.
        #[arg(long)]
        trace: bool,
    },
    /// What applying a file would change: a unified diff of each object's
    /// labels and spec as stored against as the apply would leave them.
    /// Exits 0 when nothing would change, 1 when something would.
    Diff {
        /// A file, a directory of `.json`/`.yaml`/`.yml` files, or `-` for stdin.
        #[arg(short = 'f', long = "filename", value_name = "FILE|DIR|-")]
        file: PathBuf,
    },
    /// List the objects of a kind, or show one.
    Get {
        /// The kind (`Kind` or `Kind.group`; any case, singular or plural),
        /// or `KIND/NAME`.
        kind: String,
        /// Only these objects.
        names: Vec<String>,
        /// Output format: table, wide, json, yaml, name,
        /// `jsonpath=TEMPLATE` (kubectl's: `{.spec.port}`,
        /// `{range .items[*]}{.name}{"\n"}{end}`) or
        /// `custom-columns=HEADER:PATH,...` (`NAME:.name,PORT:.spec.port`).
        /// Paths apply to the object as `-o json` prints it.
        #[arg(
            short = 'o',
            long,
            value_name = "FORMAT",
            default_value = "table",
            value_parser = GetOutput::parse
        )]
        output: GetOutput,
        /// Sort the objects by what this path finds in each (`.spec.port`,
        /// `{.name}`): numbers by value, text by its characters, objects
        /// where it finds nothing last.
        #[arg(long, value_name = "PATH", value_parser = get_format::sort_path, conflicts_with = "watch")]
        sort_by: Option<Path>,
        /// After the current state, print each change as it happens (needs
        /// a running host; Ctrl-C ends it).
        #[arg(short = 'w', long)]
        watch: bool,
        /// Show specs in this spec schema version. Plugins convert only
        /// upwards, so only the version the kind's plugin reads now can be
        /// shown; any other is refused (exit 7).
        #[arg(long, value_name = "N", conflicts_with = "watch")]
        spec_version: Option<i64>,
        /// Print the table's rows without its header line.
        #[arg(long, conflicts_with = "watch")]
        no_headers: bool,
        /// Only the objects whose labels match this selector: `k=v`,
        /// `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by
        /// commas (all must hold).
        #[arg(short = 'l', long, value_name = "SELECTOR")]
        selector: Option<String>,
        /// Add a LABELS column to the table.
        #[arg(long)]
        show_labels: bool,
        /// With -o json or yaml: print objects in Kubernetes' shape
        /// (apiVersion GROUP/vN for spec version N-1, kind, metadata,
        /// spec, status), which apply reads back.
        #[arg(long)]
        kubernetes: bool,
    },
    /// Show an object: spec, status, conditions, relations, next pass, events.
    Describe {
        #[command(flatten)]
        object: ObjectArgs,
        #[command(flatten)]
        printed: Printed,
    },
    /// Delete objects (their finalizers and children are honoured). With
    /// several names each is tried; a name that cannot be deleted is
    /// reported and the rest go ahead.
    Delete {
        /// The kind (`Kind` or `Kind.group`), or `KIND/NAME`.
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        kind: Option<String>,
        /// The objects' names.
        names: Vec<String>,
        /// Delete the objects a manifest file (or directory, or - for
        /// stdin) names, as `apply -f` reads it.
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: Option<PathBuf>,
        /// Delete every object of the kind.
        #[arg(long, requires = "kind", conflicts_with_all = ["names", "file"])]
        all: bool,
        /// Delete the objects of the kind whose labels match this selector.
        #[arg(short = 'l', long, value_name = "SELECTOR", requires = "kind", conflicts_with_all = ["names", "file", "all"])]
        selector: Option<String>,
        /// An object (or kind) that does not exist is not an error: nothing
        /// is printed for it, and the exit code is 0 if nothing else failed.
        #[arg(long)]
        ignore_not_found: bool,
    },
    /// Show what plugins logged about a kind, or one object of it: the
    /// latest lines the running host kept (1,000 at most, all plugins
    /// together), then with -f each line as it is logged.
    Logs {
        /// The kind (`Kind` or `Kind.group`), or `KIND/NAME`.
        kind: String,
        /// One object's name.
        name: Option<String>,
        /// Then print each line as it is logged (Ctrl-C ends it).
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Show an object's event timeline, newest first.
    Events {
        #[command(flatten)]
        object: ObjectArgs,
        /// Only this timeline (`""` is the default one).
        #[arg(long)]
        category: Option<String>,
        /// The runs of every object of the kind whose labels match this
        /// selector (at most 1,000 objects), newest first, with an OBJECT
        /// column.
        #[arg(short = 'l', long, value_name = "SELECTOR", conflicts_with = "watch")]
        selector: Option<String>,
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
        object: WaitObjects,
        /// `settled` (its generation observed), `condition=TYPE[=STATUS]`
        /// (STATUS defaults to True), `jsonpath='{PATH}'[=VALUE]` (the
        /// path finds a value, or prints VALUE, in the object as `get -o
        /// json` shows it), or `delete`.
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
        /// Wait until the running host has loaded its plugin directory and
        /// no file is loading, then show them (a script's way to know a
        /// freshly started host serves its kinds).
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this long (exit 5).
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration, requires = "wait")]
        timeout: Duration,
        #[command(subcommand)]
        action: Option<PluginsAction>,
    },
    /// Show a kind's fields as its plugin's schema describes them:
    /// `explain Greeting`, `explain Greeting.spec`, `explain
    /// Greeting.example.dev.spec.name`.
    Explain {
        /// The kind, then `.spec` or `.status` and a path of fields.
        target: String,
        #[command(flatten)]
        printed: Printed,
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
    /// Remove a finalizer from an object, whichever controller owns it: the
    /// way out for an object wedged by a finalizer nothing will clear (its
    /// controller gone). The cleanup that finalizer stood for does not run.
    Finalize {
        #[command(flatten)]
        object: ObjectArgs,
        /// The finalizer to remove, as `describe` lists it.
        #[arg(long, value_name = "FINALIZER")]
        remove: String,
    },
    /// Edit an object's spec in $VISUAL or $EDITOR (else vi), as YAML;
    /// saving writes it back, validated like any write. A refusal reopens
    /// the file with the error on top; a spec changed meanwhile by another
    /// write is never overwritten (exit 4, the edit kept in a file).
    Edit {
        #[command(flatten)]
        object: ObjectArgs,
    },
    /// Change an object's spec with a patch, validated like any write:
    /// `-p '{"spec":{"port":8080}}'` (JSON merge patch, the default) or
    /// `--type json -p '[{"op":"replace","path":"/spec/port","value":8080}]'`
    /// (JSON patch). The object is read, patched and written in one
    /// transaction, so a write in between is never lost.
    Patch {
        #[command(flatten)]
        object: ObjectArgs,
        /// The patch, as JSON.
        #[arg(short = 'p', long, value_name = "PATCH")]
        patch: String,
        /// `merge` (RFC 7386) or `json` (RFC 6902).
        #[arg(long = "type", value_enum, default_value = "merge")]
        patch_type: crate::patch::PatchType,
    },
    /// Queue an object for a pass now, clearing its backoff (needs a host).
    Requeue {
        #[command(flatten)]
        object: ObjectArgs,
    },
    /// Write a new plugin project in a new directory NAME, outside any
    /// checkout: a reconcile with a spec, a status and a condition, a test
    /// on the SDK's fake client, and a README with the commands to test,
    /// build and install it.
    New {
        /// The plugin's name: its directory, its file stem, its crate.
        name: String,
        /// The language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: crate::scaffold::Lang,
        /// The kind it reconciles, `Kind.group` (default: NAME in
        /// CamelCase, in example.dev).
        #[arg(long, value_name = "KIND.GROUP")]
        kind: Option<String>,
        /// The SDK to depend on: a checkout's guest-sdk (Rust),
        /// guest-sdk/python (Python) or guest-sdk/js (JavaScript). Default:
        /// the checkout this binary was built from.
        #[arg(long, value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
    /// List every kind the store knows, as kubectl's api-resources: its
    /// group, the plugin (or native controller) that registered it, its
    /// spec and status versions, its objects and how many are unsettled.
    #[command(name = "api-resources")]
    ApiResources {
        #[command(flatten)]
        printed: Printed,
    },
    /// Print this build's version and the plugin contract it serves, and,
    /// from whoever holds the store (a running host, or this command), the
    /// host's and the store's schema version.
    Version {
        #[command(flatten)]
        printed: Printed,
    },
    /// Add, change or remove an object's labels: `k=v` sets (a new value for
    /// a label it has only with --overwrite), `k-` removes. A write of its
    /// own: watches see it, the generation stays.
    Label {
        /// The kind, or `KIND/NAME`.
        kind: String,
        /// The object's name (left out after `KIND/NAME`), then the changes.
        #[arg(required = true, num_args = 1..)]
        rest: Vec<String>,
        /// Replace the value of a label the object already has.
        #[arg(long)]
        overwrite: bool,
    },
    /// Write a consistent copy of the store to FILE while it serves (with a
    /// host running or not), and its SHA-256 to FILE.sha256; prints the
    /// write-log position it holds. A SQLite store only.
    Backup {
        /// The backup file to make; it must not exist.
        file: PathBuf,
    },
    /// Make a new store at --db from a backup: checked whole (its
    /// checksum, SQLite's integrity check, a schema this build knows),
    /// never written over an existing database. Every object owes one
    /// pass, and watches resumed from before the restore are refused as
    /// too old. On PostgreSQL, restore with the server's tools
    /// (`pg_restore`), then `restore --prepare` readies the database.
    Restore {
        /// The backup file (with its FILE.sha256 beside it).
        #[arg(required_unless_present = "prepare", conflicts_with = "prepare")]
        file: Option<PathBuf>,
        /// Ready a PostgreSQL database `pg_restore` filled to serve, as a
        /// restore readies a SQLite copy: every object owes one pass,
        /// watches resumed from before are refused, and the host lease is
        /// taken from the host that held it in the dump, so no host from
        /// before the restore can commit into it. Refused while a host
        /// holds the lease, unless --take-lease.
        #[arg(long)]
        prepare: bool,
        /// With --prepare: take the lease even though it is live. A dump
        /// restored moments after it was taken holds the lease of the host
        /// that served it; this takes it from that host now rather than
        /// once it lapses.
        #[arg(long, requires = "prepare")]
        take_lease: bool,
    },
    /// Follow a kind's rollouts: when its plugin is replaced, every object
    /// gets a pass on the new version (`status`); `history` lists the
    /// versions it was served by.
    Rollout {
        #[command(subcommand)]
        action: RolloutAction,
    },
    /// Print a shell completion script. In bash, zsh and fish it completes
    /// kinds and object names too, asking the running host or the store:
    /// `source <(beehive completions bash)`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// The completion script's question: the candidates for the last of
    /// WORDS (the command line after `beehive`), one per line.
    #[command(name = "__complete", hide = true)]
    Complete {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

/// What `beehive rollout` does.
#[derive(Subcommand, Debug)]
pub(crate) enum RolloutAction {
    /// How far the kind's newest version has reached its objects: by
    /// default followed until every object has had a pass on it, as
    /// kubectl does (`--watch=false` prints it once). Exits 1 if some
    /// objects' first pass on it failed.
    Status {
        /// The kind (`Kind` or `Kind.group`; any case, singular or plural).
        kind: String,
        /// Follow the rollout until it completes.
        #[arg(
            short = 'w',
            long,
            default_value_t = true,
            num_args = 0..=1,
            default_missing_value = "true",
            action = clap::ArgAction::Set
        )]
        watch: bool,
        /// Give up following after this long (exit 5).
        #[arg(long, value_parser = humantime::parse_duration)]
        timeout: Option<Duration>,
    },
    /// The versions the kind was served by, oldest first: the last 50
    /// revisions, each with its rollout.
    History {
        /// The kind.
        kind: String,
        #[command(flatten)]
        printed: Printed,
    },
}

/// One object, as its commands take it: `KIND NAME`, or `KIND/NAME` as
/// `get -o name` prints it.
#[derive(Args, Debug)]
pub(crate) struct ObjectArgs {
    /// The kind (`Kind` or `Kind.group`; any case, singular or plural), or
    /// `KIND/NAME`.
    kind: String,
    /// The object's name (left out after `KIND/NAME`).
    name: Option<String>,
}

/// What `wait` waits on: one object, or with `--all` every object of the
/// kind (those there when it starts).
#[derive(Args, Debug)]
pub(crate) struct WaitObjects {
    /// The kind (`Kind` or `Kind.group`; any case, singular or plural), or
    /// `KIND/NAME`.
    kind: String,
    /// The object's name (left out after `KIND/NAME`, and with --all).
    name: Option<String>,
    /// Every object of the kind, one after the other, within --timeout.
    #[arg(long, conflicts_with = "name")]
    pub(crate) all: bool,
    /// Every object of the kind whose labels match this selector.
    #[arg(short = 'l', long, value_name = "SELECTOR", conflicts_with_all = ["name", "all"])]
    pub(crate) selector: Option<String>,
}

impl WaitObjects {
    /// The one object named, or the kind alone with --all or -l.
    pub(crate) fn addressed(self) -> Result<Addressed, Failure> {
        let addressed = addressed(self.kind, self.name.into_iter().collect())?;
        let many = self.all || self.selector.is_some();
        match (many, addressed.names.len()) {
            (true, 0) | (false, 1) => Ok(addressed),
            (true, _) => Err(Failure::usage(
                "--all and -l wait on a kind's objects: name no object",
            )),
            (false, 0) => Err(Failure::usage(
                "name the object (KIND NAME or KIND/NAME), or pass --all or -l SELECTOR",
            )),
            (false, _) => Err(Failure::usage("one object only: KIND NAME or KIND/NAME")),
        }
    }
}

/// One object's kind and name, as the user wrote them.
pub(crate) struct Named {
    pub(crate) kind: String,
    pub(crate) name: String,
}

impl ObjectArgs {
    /// The kind and the name, from either way of writing them.
    /// The kind alone, for a command given a selector rather than a name.
    pub(crate) fn kind_alone(self) -> Result<String, Failure> {
        let addressed = addressed(self.kind, self.name.into_iter().collect())?;
        match addressed.names.is_empty() {
            true => Ok(addressed.kind),
            false => Err(Failure::usage(
                "-l picks the kind's objects by label: name no object",
            )),
        }
    }

    pub(crate) fn named(self) -> Result<Named, Failure> {
        let mut names = addressed(self.kind, self.name.into_iter().collect())?;
        match (names.names.pop(), names.names.is_empty()) {
            (Some(name), true) => Ok(Named {
                kind: names.kind,
                name,
            }),
            (Some(_), false) => Err(Failure::usage("one object only: KIND NAME or KIND/NAME")),
            (None, _) => Err(Failure::usage("name the object: KIND NAME or KIND/NAME")),
        }
    }
}

/// A kind and the names that follow it.
pub(crate) struct Addressed {
    pub(crate) kind: String,
    pub(crate) names: Vec<String>,
}

/// `KIND NAME...` or `KIND/NAME NAME...`: a first argument with a `/`
/// carries the first name (kinds never hold one); a later argument may
/// repeat the same `KIND/` before its name, as `get -o name` prints it.
pub(crate) fn addressed(first: String, rest: Vec<String>) -> Result<Addressed, Failure> {
    let (kind, mut names) = match first.split_once('/') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {
            (kind.to_string(), vec![name.to_string()])
        }
        Some(_) => {
            return Err(Failure::usage(format!(
                "{first:?} is not KIND/NAME: neither may be empty"
            )));
        }
        None => (first, Vec::new()),
    };
    let prefix = format!("{kind}/");
    for name in rest {
        match name.strip_prefix(&prefix) {
            Some(bare) => names.push(bare.to_string()),
            None if name.contains('/') => {
                return Err(Failure::usage(format!(
                    "{name}: one kind per command ({kind} here)"
                )));
            }
            None => names.push(name),
        }
    }
    Ok(Addressed { kind, names })
}

/// `-o json|yaml`, for the commands that print a document.
#[derive(Args, Debug)]
pub(crate) struct Printed {
    /// Print as JSON or YAML instead.
    #[arg(short = 'o', long, value_parser = ["json", "yaml"])]
    pub(crate) output: Option<String>,
}

impl Printed {
    /// `value` as `-o` asks, or as `as_text` puts it for people.
    pub(crate) fn show<T: serde::Serialize>(
        &self,
        value: &T,
        as_text: impl FnOnce(&T) -> String,
    ) -> String {
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
        _ if text.starts_with("jsonpath=") => parse_jsonpath_until(&text["jsonpath=".len()..]),
        _ => {
            let condition = text.strip_prefix("condition=").ok_or_else(|| {
                format!(
                    "{text:?}: write settled, condition=TYPE[=STATUS], \
                     jsonpath='{{PATH}}'[=VALUE] or delete"
                )
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

/// `jsonpath=`'s rest: `{PATH}` or `{PATH}=VALUE`, braces optional when the
/// path holds no `=` of its own.
fn parse_jsonpath_until(text: &str) -> Result<Until, String> {
    let (path, value) = match text.strip_prefix('{') {
        Some(inner) => {
            let end = inner
                .find('}')
                .ok_or_else(|| format!("jsonpath={text}: a '{{' is never closed"))?;
            let value = &inner[end + 1..];
            let value = match value.strip_prefix('=') {
                Some(value) => Some(value),
                None if value.is_empty() => None,
                None => return Err(format!("jsonpath={text}: write '{{PATH}}=VALUE'")),
            };
            (&inner[..end], value)
        }
        None => match text.split_once('=') {
            Some((path, value)) => (path, Some(value)),
            None => (text, None),
        },
    };
    Path::parse(path).map_err(|why| format!("jsonpath: {why}"))?;
    Ok(Until::JsonPath {
        path: path.to_string(),
        value: value.map(str::to_string),
    })
}

/// What `beehive plugins` can do beside listing: check a file offline;
/// on a PostgreSQL store, whose hosts serve the plugins pushed into it,
/// push, remove and list them.
#[derive(Debug, Subcommand)]
pub(crate) enum PluginsAction {
    /// Say what a plugin file is and what a host would make of it, without
    /// a host: component or not, contract and world, the kind it
    /// registers, its cadences and schema versions, and the limits and
    /// grants it would get under these flags and its policy. Compiles it
    /// (tens of seconds for a Python plugin) into the plugin cache of the
    /// store --db names, when that exists, so its host serves the file
    /// without compiling it again. A file a host would refuse exits 7 with
    /// the reason.
    Check {
        /// The plugin file (`.wasm`).
        file: PathBuf,
        /// Its policy file (default: `NAME.toml` beside it, if there is one).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        #[command(flatten)]
        limits: crate::plugin_limits::PluginLimitArgs,
    },
    /// With REF (`HOST/REPO:TAG`): publish the plugin to an OCI registry
    /// as a Wasm artifact, with its signature (`FILE.minisig`) when one is
    /// beside it, and print the digest to pull it by (credentials:
    /// BEEHIVE_REGISTRY_AUTH=USER:PASSWORD). Without: store a plugin in the
    /// PostgreSQL database and make it the version serving under its name:
    /// every active host hot-swaps to it within a second; pushing an older
    /// file again rolls back.
    Push {
        /// The component (`.wasm`).
        file: PathBuf,
        /// Where to publish it: `[oci://]HOST[:PORT]/REPO:TAG`.
        #[arg(value_name = "REF", conflicts_with_all = ["name", "policy"])]
        reference: Option<String>,
        /// The name it serves under (default: the file's stem).
        #[arg(long)]
        name: Option<String>,
        /// Its policy file (what it may reach; see `beehive run --help`).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
    /// Fetch a plugin from an OCI registry by tag or digest, with its
    /// signature, check both (the manifest against the digest asked for,
    /// the layer against the manifest, the signature against the trust of
    /// the directory it goes into), then write `FILE.minisig` and `FILE`.
    /// Nothing is written when a check fails.
    Pull {
        /// `[oci://]HOST[:PORT]/REPO:TAG` or `.../REPO@sha256:DIGEST`.
        #[arg(value_name = "REF")]
        reference: String,
        /// Where to write it (default: REPO's last part `.wasm`, here);
        /// into a host's plugin directory to serve it.
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// How long each call to the registry may take, from connecting to
        /// the body's last byte (a registry that trickles is cut off here).
        #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_registry_timeout)]
        timeout: Duration,
    },
    /// Stop serving a pushed plugin (its bytes are kept for a later push).
    Remove {
        /// The plugin's name.
        name: String,
    },
    /// List the plugins pushed into the store.
    List,
}

/// A registry call's timeout: a duration above zero (a call without end is
/// what the timeout is there to refuse).
fn parse_registry_timeout(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text.trim()) {
        Ok(timeout) if !timeout.is_zero() => Ok(timeout),
        Ok(_) => Err("a registry call needs a time limit above zero (e.g. 60s)".to_string()),
        Err(e) => Err(format!("{text:?}: {e} (write e.g. 60s)")),
    }
}

/// A duration, or `0` for no limit, as kubectl's --request-timeout.
fn parse_request_timeout(text: &str) -> Result<Duration, String> {
    match text.trim() {
        "0" => Ok(Duration::ZERO),
        text => humantime::parse_duration(text)
            .map_err(|e| format!("{text:?}: {e} (write e.g. 30s, or 0 for no limit)")),
    }
}
