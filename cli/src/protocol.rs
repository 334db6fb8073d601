//! What a command asks of whoever holds the database, and what comes back.
//!
//! A command runs against a live host over its Unix socket, or against the
//! database directly when no host runs; both paths carry the same requests
//! and the same replies, so they cannot drift apart. On the socket each is
//! one line of JSON.

use std::io::BufRead;

use beehive::object::{ObjectDocument, Timestamp};
use serde::{Deserialize, Serialize};

use crate::manifest::Manifest;

/// One command's request. Its fields travel beside the tag, under `args`:
/// an internally tagged enum is buffered whole before it is read, which
/// doubled what a 20,000-object `apply` cost the host.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", content = "args", rename_all = "kebab-case")]
pub enum Request {
    Apply {
        objects: Vec<Manifest>,
        /// Whether a kind nothing knows yet may be created (`--new-kind`);
        /// otherwise such a kind is taken for a typo and refused.
        #[serde(default)]
        new_kinds: bool,
        /// Whether a manifest's `generation` is ignored, so a spec changed
        /// since the manifest was read is overwritten (`--force-conflicts`).
        #[serde(default)]
        force_conflicts: bool,
        /// Check and write everything, then roll back (`--dry-run`).
        #[serde(default)]
        dry_run: bool,
        /// How the writes join a trace: under a caller's `traceparent`,
        /// or as a new trace (`--trace`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<TraceAsk>,
    },
    Get {
        kind: String,
        name: Option<String>,
        /// The spec version to show the specs in (`--spec-version`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spec_version: Option<i64>,
        /// Only the objects whose labels match (`-l`), with no name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
    },
    /// Changes an object's labels: `set` added or replaced (a value other
    /// than the current one only with `overwrite`), `remove` taken away.
    Label {
        kind: String,
        name: String,
        set: std::collections::BTreeMap<String, String>,
        remove: Vec<String>,
        overwrite: bool,
    },
    Describe {
        kind: String,
        name: String,
    },
    Delete {
        kind: String,
        name: String,
    },
    /// Replaces an object's spec (JSON text), unless its spec changed since
    /// it was read at `generation`: what `edit` writes.
    ReplaceSpec {
        kind: String,
        name: String,
        generation: i64,
        spec: String,
    },
    /// Patches an object's spec (`patch` is the patch's JSON text).
    Patch {
        kind: String,
        name: String,
        #[serde(rename = "type")]
        patch_type: crate::patch::PatchType,
        patch: String,
    },
    /// One object's timeline, or with `selector` (and no `name`) the runs
    /// of every object of `kind` the selector picks, newest first.
    Events {
        kind: String,
        name: String,
        category: Option<String>,
        #[serde(default)]
        selector: Option<String>,
    },
    Wait {
        kind: String,
        name: String,
        until: Until,
        timeout_ms: u64,
    },
    Plugins,
    /// Which build answers, the contract it serves, and the store's schema.
    Version,
    /// Every kind the store knows: who serves it, its versions, its objects.
    Kinds,
    /// A consistent copy of the store into `file` (absolute, new), while the
    /// host serves (`Reply::BackedUp`).
    Backup {
        file: std::path::PathBuf,
    },
    /// Up to `limit` names of `kind`'s objects that start with `prefix`,
    /// in order (`Reply::Names`): what shell completion offers.
    Names {
        kind: String,
        prefix: String,
        limit: usize,
    },
    /// A kind's newest revision and how far its rollout has gone
    /// (`Reply::Rollouts` of one), or, with `history`, every revision kept.
    Rollout {
        kind: String,
        #[serde(default)]
        history: bool,
    },
    /// A kind's schemas, as its registration recorded them.
    Explain {
        kind: String,
    },
    /// The host's metrics, in the Prometheus text format.
    Metrics,
    Requeue {
        kind: String,
        name: String,
    },
    /// Removes one finalizer, whichever controller owns it.
    RemoveFinalizer {
        kind: String,
        name: String,
        finalizer: String,
    },
    /// Plugin log lines about a kind (or one object of it): the latest the
    /// host kept (`Reply::Logs`), then, when `follow`, a `Reply::Logs` line
    /// per line logged until either side hangs up.
    Logs {
        kind: String,
        name: Option<String>,
        #[serde(default)]
        follow: bool,
    },
    /// A snapshot (`Reply::Objects`), then one `Reply::Change` line per
    /// change until either side hangs up.
    Watch {
        kind: String,
        name: Option<String>,
        /// Only the objects whose labels match, read and filtered by the
        /// host (a kind's watch only).
        #[serde(default)]
        selector: Option<String>,
    },
    /// The timeline (`Reply::Events`), then a `Reply::Events` line per run
    /// written, until either side hangs up.
    WatchEvents {
        kind: String,
        name: String,
        category: Option<String>,
    },
}

/// What `wait` waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Until {
    /// The current generation is observed.
    Settled,
    /// A condition of this type holds (`True`), or has this status.
    Condition { type_: String, status: String },
    /// The object is gone.
    Deleted,
    /// A JSONPath (`{.status.ready}`) finds a value, or prints `value`, in
    /// the object as `get -o json` shows it.
    JsonPath { path: String, value: Option<String> },
}

/// A request's outcome: a reply, or one line saying why not.
pub type Outcome = Result<Reply, crate::failure::Failure>;

/// What came back.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "kebab-case")]
pub enum Reply {
    Applied {
        results: Vec<Applied>,
        /// The trace the writes joined, when the apply asked for one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace_id: Option<String>,
        /// What the caller should know though nothing failed, one line
        /// each.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
    },
    Objects {
        objects: Vec<ObjectView>,
    },
    Described(Box<Description>),
    Events {
        events: Vec<EventView>,
    },
    Plugins(PluginsView),
    Version(VersionView),
    Kinds {
        kinds: Vec<KindRow>,
    },
    Schemas(KindSchemas),
    Names {
        names: Vec<String>,
    },
    BackedUp(BackupView),
    Rollouts {
        /// Oldest first.
        revisions: Vec<RolloutView>,
        /// Whether a running host that serves the kind answered: without
        /// one, a rollout still rolling is stalled.
        live: bool,
        /// The file of the newest revision, when the host is loading a new
        /// version of it (changed, and not yet serving): a revision to come.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        loading: Option<String>,
    },
    Metrics {
        text: String,
    },
    Done {
        message: String,
    },
    Change(Box<Change>),
    Logs {
        lines: Vec<LogLineView>,
        /// Lines a follower missed because it fell behind.
        #[serde(default, skip_serializing_if = "is_zero")]
        missed: u64,
    },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One line a plugin logged.
#[derive(Debug, Serialize, Deserialize)]
pub struct LogLineView {
    pub at: Timestamp,
    pub level: String,
    pub plugin: String,
    /// The object of the pass (`Kind.group/name`); empty outside a pass.
    #[serde(default)]
    pub object: String,
    pub message: String,
}

/// A kind's schemas, for `explain`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KindSchemas {
    pub kind: String,
    /// The plugin file that serves it.
    pub source: Option<String>,
    /// The spec version the schema describes.
    pub spec_version: i64,
    /// The spec's JSON Schema, as text.
    pub spec: Option<String>,
    /// The status's JSON Schema, as text.
    pub status: Option<String>,
}

/// One change on a watch.
#[derive(Debug, Serialize, Deserialize)]
pub struct Change {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub change: String,
    pub id: i64,
    /// The current state; on `DELETED`, the state it was collected in.
    pub object: Option<ObjectView>,
    /// Where a reader may resume after this change.
    #[serde(default)]
    pub resource_version: Option<i64>,
}

/// An object as `get` prints it: the stored document and its owner, so
/// that what `get -o yaml` prints applies back as it is.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ObjectView {
    #[serde(flatten)]
    pub document: ObjectDocument,
    /// The owner as a manifest names it (`Kind.group/name`); an owner
    /// collected meanwhile shows as `Kind.group/#ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// When its latest pass ended, if that pass failed: its conditions may
    /// predate the failure. Only a running host knows.
    #[serde(
        default,
        rename = "lastPassFailedAt",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_pass_failed_at: Option<Timestamp>,
}

/// How an apply's writes join a trace.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceAsk {
    /// Under the caller's context (`TRACEPARENT`), as W3C `traceparent` text.
    Parent(String),
    /// As a new trace (`--trace`).
    New,
}

/// What `apply` did to one object.
#[derive(Debug, Serialize, Deserialize)]
pub struct Applied {
    pub kind: String,
    pub name: String,
    /// `created`, `configured` or `unchanged`.
    pub action: String,
    /// On a dry run: the object as stored before (none when it would be
    /// created) and as the apply would leave it, as `diff` compares them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Compared>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Compared>,
}

/// What `diff` shows of an object: what a manifest sets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    pub spec: serde_json::Value,
}

/// Another object, named.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Related {
    pub kind: String,
    pub name: String,
}

/// Everything `describe` shows.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    pub object: ObjectDocument,
    pub owner: Option<Related>,
    pub children: Vec<Related>,
    pub dependencies: Vec<Related>,
    pub dependents: Vec<Related>,
    /// `None` when no host runs to schedule anything.
    pub next_pass: Option<NextPass>,
    /// The trace of the object's latest traced pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pass_trace: Option<String>,
    pub events: Vec<EventView>,
}

/// When the object's next pass is due, as the running host knows it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NextPass {
    pub at: Option<Timestamp>,
}

/// One run of an event timeline.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// The object's name, when the runs are several objects'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    pub category: String,
    pub warning: bool,
    pub reason: String,
    pub message: String,
    pub detail: Option<serde_json::Value>,
    pub count: i64,
    pub first_at: Timestamp,
    pub last_at: Timestamp,
    /// The trace of the pass that wrote the latest occurrence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// What serves each kind.
#[derive(Debug, Serialize, Deserialize)]
pub struct PluginsView {
    /// Whether a host runs (otherwise the rows are the last recorded ones).
    pub running: bool,
    /// On a PostgreSQL store: the host holding the lease, the one that
    /// serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_host: Option<ActiveHostView>,
    /// Why the running host cannot do its job now (its store cannot
    /// write), if it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_ready: Option<String>,
    pub plugins: Vec<PluginRow>,
    pub failures: Vec<PluginFailure>,
    /// The files being loaded now (compiled, or read from the cache).
    #[serde(default)]
    pub loading: Vec<LoadingRow>,
    /// Whether the running host has loaded its plugin directory once
    /// (every file in it then served or was refused) and applied its
    /// manifest directory.
    #[serde(default)]
    pub started: bool,
}

/// A plugin file being loaded.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadingRow {
    pub file: String,
    pub bytes: u64,
    /// How long it has been loading, in milliseconds.
    pub for_ms: u64,
}

/// Who holds a PostgreSQL store's host lease.
#[derive(Debug, Serialize, Deserialize)]
pub struct ActiveHostView {
    pub holder: String,
    pub tenure: i64,
    /// Whether its lease is running (otherwise it lapsed and no host serves).
    pub live: bool,
}

/// A kind and the plugin version serving it.
#[derive(Debug, Serialize, Deserialize)]
pub struct PluginRow {
    pub kind: String,
    pub source: String,
    pub content_hash: Option<String>,
    /// What its passes run under; known only while a host runs.
    #[serde(default)]
    pub limits: Option<LimitsView>,
    /// `baseline` while its optimised code is still being compiled,
    /// `optimized` after; known only while a host runs.
    #[serde(default)]
    pub tier: Option<String>,
    /// The contract version it was built against (`0.2.0`); known only
    /// while a host runs.
    #[serde(default)]
    pub contract: Option<String>,
    /// Who signed it (`release (FD2E6F4A0E55C5DD)`), `unsigned` where the
    /// plugin directory trusts no key; known only while a host runs.
    #[serde(default)]
    pub signer: Option<String>,
}

/// The limits that apply to one plugin.
#[derive(Debug, Serialize, Deserialize)]
pub struct LimitsView {
    pub concurrency: usize,
    pub pass_deadline_ms: u64,
    pub pass_wall_limit_ms: u64,
    pub memory_bytes: usize,
    /// Grants: directories `GUEST=HOST:ro|rw`, hosts `http:PATTERN`,
    /// config keys `config:KEY(SOURCE)`.
    #[serde(default)]
    pub grants: Vec<String>,
    /// The bounds on its outbound HTTP, when it is granted any host.
    #[serde(default)]
    pub http: Option<HttpLimitsView>,
}

/// The bounds on one plugin's outbound HTTP.
#[derive(Debug, Serialize, Deserialize)]
pub struct HttpLimitsView {
    pub connect_timeout_ms: u64,
    pub first_byte_timeout_ms: u64,
    pub max_response_bytes: u64,
    pub max_concurrent_requests: usize,
}

/// What `version` reports of whoever answered: a running host, or the
/// command itself on the store.
#[derive(Debug, Serialize, Deserialize)]
pub struct VersionView {
    /// The `beehive` build.
    pub version: String,
    /// The plugin contract versions it serves.
    pub contracts: Vec<String>,
    /// The answering host's process id; `None` when no host runs.
    pub host_pid: Option<u32>,
    /// The store: its location as shown, its backend and schema version.
    pub store: StoreView,
}

/// What a backup holds.
#[derive(Debug, Serialize, Deserialize)]
pub struct BackupView {
    pub file: std::path::PathBuf,
    /// Every write at or below this write-log position is in it, none above.
    pub position: i64,
    pub objects: i64,
    pub bytes: u64,
    pub sha256: String,
    pub took_ms: u64,
}

/// One version a kind was served by, and its rollout to the kind's objects.
#[derive(Debug, Serialize, Deserialize)]
pub struct RolloutView {
    pub kind: String,
    pub revision: i64,
    pub source: String,
    pub content_hash: Option<String>,
    /// `rolling`, `complete` or `superseded`.
    pub state: String,
    pub started_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    /// The kind's objects when the revision began.
    pub objects: i64,
    /// Objects whose first pass on it succeeded, and failed.
    pub passed: i64,
    pub failed: i64,
}

impl From<beehive::store::Rollout> for RolloutView {
    fn from(rollout: beehive::store::Rollout) -> Self {
        RolloutView {
            kind: rollout.group_kind.to_string(),
            revision: rollout.revision,
            source: rollout.source,
            content_hash: rollout.content_hash,
            state: rollout.state.as_str().to_string(),
            started_at: rollout.started_at,
            finished_at: rollout.finished_at,
            objects: rollout.objects,
            passed: rollout.passed,
            failed: rollout.failed,
        }
    }
}

/// A kind as `api-resources` lists it.
#[derive(Debug, Serialize, Deserialize)]
pub struct KindRow {
    pub kind: String,
    pub group: String,
    /// Where its controller came from (a plugin file, `native`); `None`
    /// for a kind nothing has registered (plain records).
    pub source: Option<String>,
    pub spec_version: Option<i64>,
    pub status_version: Option<i64>,
    pub objects: i64,
    /// Objects whose latest generation no pass has observed yet.
    pub unsettled: i64,
}

/// A store as `version` names it.
#[derive(Debug, Serialize, Deserialize)]
pub struct StoreView {
    pub location: String,
    pub backend: String,
    pub schema_version: i64,
}

/// A plugin file that does not load.
#[derive(Debug, Serialize, Deserialize)]
pub struct PluginFailure {
    pub file: String,
    pub error: String,
}

/// Reads one line of JSON.
pub fn read_line<T: serde::de::DeserializeOwned>(input: &mut impl BufRead) -> std::io::Result<T> {
    let mut line = String::new();
    if input.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the host closed the connection without replying",
        ));
    }
    serde_json::from_str(&line).map_err(std::io::Error::other)
}
