//! What each request does, against a store and, when this process is the
//! host, the running host. The host serves requests with this module and a
//! command with no host to reach runs it itself.

use std::sync::Arc;
use std::time::Duration;

use beehive::plugin::Directory;
use beehive::{
    CreateOptions, EventSpec, GroupKind, Host, Json, RawClient, RawObject, Store,
    engine::AdminClient,
    event::{EventFilter, EventType},
    object::{Loads, ObjectDocument, ObjectRef},
};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use crate::failure::{Code, Failure};
use crate::manifest::Manifest;
use crate::object_view::OwnerNames;
use crate::protocol::{
    ActiveHostView, Applied, Change, Description, EventView, HttpLimitsView, KindSchemas,
    LimitsView, LoadingRow, LogLineView, NextPass, Outcome, PluginFailure, PluginRow, PluginsView,
    Related, Reply, Request, Until,
};

/// How long `apply` may hold the writer for one batch of manifests.
const APPLY_HOLD_LIMIT: Duration = Duration::from_secs(10);

/// What a request runs against.
#[derive(Clone)]
pub struct Context {
    pub store: Store,
    /// The host, when this process runs one.
    pub host: Option<Host>,
    pub plugins: Option<Arc<Directory>>,
    /// Set once the running host has loaded its plugin directory and
    /// applied its manifest directory, as `beehive plugins --wait` waits for.
    pub started: Arc<std::sync::atomic::AtomicBool>,
}

/// Runs one request.
pub async fn execute(ctx: &Context, request: Request) -> Outcome {
    match request {
        Request::Apply { objects, new_kinds } => apply(ctx, objects, new_kinds).await,
        Request::Get {
            kind,
            name,
            spec_version,
        } => get(ctx, &kind, name.as_deref(), spec_version),
        Request::Describe { kind, name } => describe(ctx, &kind, &name),
        Request::Delete { kind, name } => delete(ctx, &kind, &name).await,
        Request::Events {
            kind,
            name,
            category,
        } => events(ctx, &kind, &name, category),
        Request::Wait {
            kind,
            name,
            until,
            timeout_ms,
        } => wait(ctx, &kind, &name, &until, Duration::from_millis(timeout_ms)).await,
        Request::Plugins => plugins(ctx),
        Request::Explain { kind } => explain(ctx, &kind),
        Request::Metrics => metrics(ctx),
        Request::Requeue { kind, name } => requeue(ctx, &kind, &name),
        Request::RemoveFinalizer {
            kind,
            name,
            finalizer,
        } => remove_finalizer(ctx, &kind, &name, &finalizer).await,
        Request::Logs {
            kind,
            name,
            follow: false,
        } => logs(ctx, &kind, name.as_deref()),
        Request::Watch { .. } | Request::WatchEvents { .. } | Request::Logs { .. } => {
            Err("a watch streams: it is answered by the host's socket".into())
        }
    }
}

/// What a watch request answers: a snapshot, then a reply per change until
/// the stream ends; its last item says why.
pub struct Following {
    pub snapshot: Reply,
    pub replies: BoxStream<'static, Outcome>,
}

/// Starts the watch a streaming request (`Watch`, `WatchEvents`) asks for.
pub fn follow(ctx: &Context, request: Request) -> Result<Following, Failure> {
    match request {
        Request::Watch { kind, name } => watch(ctx, &kind, name.as_deref()),
        Request::WatchEvents {
            kind,
            name,
            category,
        } => watch_events(ctx, &kind, &name, category.as_deref()),
        Request::Logs { kind, name, .. } => follow_logs(ctx, &kind, name.as_deref()),
        other => Err(format!("not a watch: {other:?}").into()),
    }
}

/// The plugin log lines the host kept about a kind or one object of it.
fn logs(ctx: &Context, kind: &str, name: Option<&str>) -> Outcome {
    let (directory, filter) = log_filter(ctx, kind, name)?;
    Ok(Reply::Logs {
        lines: log_views(directory.logs().recent(), &filter),
        missed: 0,
    })
}

/// Those lines, then each such line as a plugin logs it.
fn follow_logs(ctx: &Context, kind: &str, name: Option<&str>) -> Result<Following, Failure> {
    let (directory, filter) = log_filter(ctx, kind, name)?;
    let (recent, feed) = directory.logs().follow();
    let snapshot = Reply::Logs {
        lines: log_views(recent, &filter),
        missed: 0,
    };
    let replies = futures_util::stream::unfold((feed, filter), |(mut feed, filter)| async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            let reply = match feed.recv().await {
                Ok(line) if filter.matches(&line) => Reply::Logs {
                    lines: vec![log_view(line)],
                    missed: 0,
                },
                Ok(_) => continue,
                Err(RecvError::Lagged(missed)) => Reply::Logs {
                    lines: Vec::new(),
                    missed,
                },
                Err(RecvError::Closed) => return None,
            };
            return Some((Ok(reply), (feed, filter)));
        }
    });
    Ok(Following {
        snapshot,
        replies: replies.boxed(),
    })
}

/// Which plugin log lines are about a kind, or one object of it.
struct LogFilter {
    /// `Kind.group/`, how the objects' labels start.
    prefix: String,
    name: Option<String>,
    /// The plugin serving the kind: its lines outside passes are the kind's.
    plugin: Option<String>,
}

impl LogFilter {
    fn matches(&self, line: &beehive::plugin::LogLine) -> bool {
        match (&self.name, line.object.strip_prefix(&self.prefix)) {
            _ if line.object.is_empty() => {
                self.name.is_none() && self.plugin.as_deref() == Some(line.plugin.as_str())
            }
            (Some(name), Some(rest)) => rest == name,
            (None, Some(_)) => true,
            (_, None) => false,
        }
    }
}

fn log_filter(
    ctx: &Context,
    kind: &str,
    name: Option<&str>,
) -> Result<(Arc<Directory>, LogFilter), Failure> {
    let Some(directory) = ctx.plugins.clone() else {
        return Err(Failure::unreachable(
            "plugin logs are a running host's: start one with `beehive run`",
        ));
    };
    let group_kind = resolve_kind(&ctx.store, kind)?;
    if let Some(name) = name {
        // As kubectl's logs: an object that is not there is not found,
        // rather than an empty listing that looks like a quiet plugin.
        find(&ctx.store, kind, name)?;
    }
    let plugin = directory
        .served()
        .into_iter()
        .find(|s| s.group_kind == group_kind)
        .and_then(|s| Some(s.path.file_stem()?.to_string_lossy().into_owned()));
    let filter = LogFilter {
        prefix: format!("{group_kind}/"),
        name: name.map(str::to_string),
        plugin,
    };
    Ok((directory, filter))
}

fn log_views(lines: Vec<beehive::plugin::LogLine>, filter: &LogFilter) -> Vec<LogLineView> {
    lines
        .into_iter()
        .filter(|line| filter.matches(line))
        .map(log_view)
        .collect()
}

fn log_view(line: beehive::plugin::LogLine) -> LogLineView {
    LogLineView {
        at: line.at,
        level: line.level.to_string(),
        plugin: line.plugin,
        object: line.object,
        message: line.message,
    }
}

/// Starts watching an object's event timeline: the runs so far, then each
/// run as it is written.
fn watch_events(
    ctx: &Context,
    kind: &str,
    name: &str,
    category: Option<&str>,
) -> Result<Following, Failure> {
    let (_, object) = find(&ctx.store, kind, name)?;
    let mut stream = watching_client(ctx, object.meta.group_kind.clone())
        .watch_events(
            object.meta.id,
            category,
            beehive::client::WatchOptions::new(),
        )
        .map_err(error)?;
    let runs = std::mem::take(&mut stream.snapshot);
    Ok(Following {
        snapshot: Reply::Events {
            events: runs.into_iter().map(event_view).collect(),
        },
        replies: stream
            .map(|run| {
                Ok(Reply::Events {
                    events: vec![event_view(run?)],
                })
            })
            .boxed(),
    })
}

/// Starts watching a kind, or one object of it: what there is, then each
/// change.
fn watch(ctx: &Context, kind: &str, name: Option<&str>) -> Result<Following, Failure> {
    let options = beehive::client::WatchOptions::new();
    let mut owners = OwnerNames::new(&ctx.store);
    let (snapshot, changes) = match name {
        Some(name) => {
            let (_, object) = find(&ctx.store, kind, name)?;
            let stream = watching_client(ctx, object.meta.group_kind.clone())
                .watch(object.meta.id, options)
                .map_err(error)?;
            let snapshot = stream.snapshot.iter().map(|o| owners.view(o)).collect();
            (snapshot, stream.boxed())
        }
        None => {
            let group_kind = resolve_kind(&ctx.store, kind)?;
            let stream = watching_client(ctx, group_kind)
                .watch_list(options)
                .map_err(error)?;
            let snapshot = stream.snapshot.iter().map(|o| owners.view(o)).collect();
            (snapshot, stream.boxed())
        }
    };
    Ok(Following {
        snapshot: Reply::Objects { objects: snapshot },
        replies: changes
            .map(move |change| Ok(change_reply(change?, &mut owners)))
            .boxed(),
    })
}

fn change_reply(change: beehive::client::ObjectChange, owners: &mut OwnerNames) -> Reply {
    Reply::Change(Box::new(Change {
        change: format!("{:?}", change.change).to_uppercase(),
        id: change.id,
        object: change.object.as_ref().map(|o| owners.view(o)),
        resource_version: Some(change.resource_version),
    }))
}

/// A client whose watches end when the running host stops, so a follower
/// hears why its stream ended.
fn watching_client(ctx: &Context, group_kind: GroupKind) -> RawClient {
    match &ctx.host {
        Some(host) => host.client(group_kind),
        None => RawClient::new(&ctx.store, group_kind),
    }
}

fn error(e: beehive::Error) -> Failure {
    Failure::from(e)
}

/// The kinds the store knows, and each manifest's kind resolved against
/// them.
fn kinds_of(
    ctx: &Context,
    manifests: &[Manifest],
    new_kinds: bool,
) -> Result<(Kinds, Vec<GroupKind>), Failure> {
    let known = if new_kinds {
        // A store that cannot list its kinds leaves every kind as written.
        Kinds::load(&ctx.store).unwrap_or_default()
    } else {
        Kinds::load(&ctx.store)?
    };
    let kinds = manifests
        .iter()
        .map(|m| known.for_apply(&m.kind_text(), new_kinds))
        .collect::<Result<Vec<GroupKind>, Failure>>()?;
    Ok((known, kinds))
}

/// The longest an apply waits for the host's first plugin load (the
/// default of `plugins --wait`); the client's own request timeout (30 s by
/// default) usually ends the wait first.
const STARTUP_WAIT: Duration = Duration::from_secs(300);

/// Whether this process runs a host whose plugin directory has not been
/// loaded once yet, or is loading a file now. (Not `ctx.started`: that
/// also waits for the manifest directory, which is applied through here.)
fn still_starting(ctx: &Context) -> bool {
    let loading = |d: &Arc<Directory>| !d.synced() || !d.loading().is_empty();
    ctx.host.is_some() && ctx.plugins.as_ref().is_some_and(loading)
}

/// Waits, up to [`STARTUP_WAIT`], until the host is no longer starting.
async fn until_started(ctx: &Context) {
    let deadline = tokio::time::Instant::now() + STARTUP_WAIT;
    while still_starting(ctx) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An unknown kind while the host is still loading plugins may be one of
/// theirs: the failure says so, and how to wait.
fn while_starting(ctx: &Context, failure: Failure) -> Failure {
    let started = ctx.started.load(std::sync::atomic::Ordering::SeqCst);
    let loading: Vec<String> = ctx.plugins.as_ref().map_or_else(Vec::new, |d| {
        d.loading()
            .iter()
            .map(|l| l.path.display().to_string())
            .collect()
    });
    if failure.code != Code::NotFound || ctx.host.is_none() || (started && loading.is_empty()) {
        return failure;
    }
    let which = match loading.is_empty() {
        true => String::new(),
        false => format!(" ({})", loading.join(", ")),
    };
    Failure::not_found(format!(
        "{}; the host is still loading plugins{which}: `beehive plugins --wait` waits until it has",
        failure.message
    ))
}

/// Resolves `Kind` or `Kind.group` against the kinds that exist. `Kind`
/// alone names the core group, or the one group that has such a kind.
pub fn resolve_kind(store: &Store, text: &str) -> Result<GroupKind, Failure> {
    Kinds::load(store)?.resolve(text)
}

/// Whether `kind` (and `group`, unless empty) name `known`, ignoring case
/// and accepting the kind's plural (`greetings`, `classes`).
fn names_kind(known: &GroupKind, kind: &str, group: &str) -> bool {
    let group_fits = group.is_empty() || known.group.eq_ignore_ascii_case(group);
    let plural = if known.kind.ends_with('s') {
        format!("{}es", known.kind)
    } else {
        format!("{}s", known.kind)
    };
    group_fits && (known.kind.eq_ignore_ascii_case(kind) || plural.eq_ignore_ascii_case(kind))
}

/// The kinds that exist, read once for a whole request: an `apply` of many
/// objects resolves each one's kind against this, not against the store.
#[derive(Default)]
struct Kinds(Vec<GroupKind>);

impl Kinds {
    fn load(store: &Store) -> Result<Kinds, Failure> {
        store.kinds().map(Kinds).map_err(error)
    }

    /// As [`resolve_kind`].
    fn resolve(&self, text: &str) -> Result<GroupKind, Failure> {
        let (kind, group) = text.split_once('.').unwrap_or((text, ""));
        if kind.is_empty() {
            return Err(format!("invalid kind {text:?}: write Kind or Kind.group").into());
        }
        let known = &self.0;
        let wanted = GroupKind::new(group, kind);
        if known.contains(&wanted) {
            return Ok(wanted);
        }
        // Then as kubectl matches a resource: any case, singular or plural,
        // with or without the group, as long as one kind fits.
        let same_name: Vec<&GroupKind> = known
            .iter()
            .filter(|k| names_kind(k, kind, group))
            .collect();
        match same_name.as_slice() {
            [only] => return Ok((*only).clone()),
            [] => {}
            several => {
                let names: Vec<String> = several.iter().map(|k| k.to_string()).collect();
                return Err(format!(
                    "kind {text} is ambiguous: write one of {}",
                    names.join(", ")
                )
                .into());
            }
        }
        let names: Vec<String> = known.iter().map(ToString::to_string).collect();
        let listing = if names.is_empty() {
            "there are no kinds yet".to_string()
        } else {
            format!("known kinds: {}", names.join(", "))
        };
        Err(Failure::not_found(format!(
            "unknown kind {text}: {listing}"
        )))
    }

    /// The kind an applied object of kind `text` gets: an existing one, or,
    /// when `new_kinds` allows it, a new kind exactly as written.
    fn for_apply(&self, text: &str, new_kinds: bool) -> Result<GroupKind, Failure> {
        if new_kinds {
            return Ok(self.as_written(text));
        }
        self.resolve(text).map_err(|failure| match failure.code {
            Code::NotFound => Failure::not_found(format!(
                "{}; a plugin's kind is known once a host has served it, and \
                 `apply --new-kind` creates a kind that no plugin serves",
                failure.message
            )),
            _ => failure,
        })
    }

    /// The kind `text` names: an existing one if it resolves, otherwise a
    /// new kind exactly as written (kinds are open).
    fn as_written(&self, text: &str) -> GroupKind {
        self.resolve(text).unwrap_or_else(|_| {
            let (kind, group) = text.split_once('.').unwrap_or((text, ""));
            GroupKind::new(group, kind)
        })
    }
}

fn find(store: &Store, kind: &str, name: &str) -> Result<(RawClient, RawObject), Failure> {
    let group_kind = resolve_kind(store, kind)?;
    let client = RawClient::new(store, group_kind);
    let object = client.get_by_name(name).map_err(error)?;
    Ok((client, object))
}

/// Creates or updates every manifest in one transaction: all or none. A
/// kind nothing knows is refused unless `new_kinds` allows it.
async fn apply(ctx: &Context, manifests: Vec<Manifest>, new_kinds: bool) -> Outcome {
    let (known, kinds) = match kinds_of(ctx, &manifests, new_kinds) {
        // A kind the host's plugins may yet serve: apply once they have
        // loaded, rather than refuse a file that would apply a second later.
        Err(failure) if failure.code == Code::NotFound && still_starting(ctx) => {
            until_started(ctx).await;
            kinds_of(ctx, &manifests, new_kinds)
        }
        resolved => resolved,
    }
    .map_err(|failure| while_starting(ctx, failure))?;
    let tx = ctx
        .store
        .transaction(APPLY_HOLD_LIMIT)
        .await
        .map_err(error)?;
    let mut results = Vec::new();
    let mut warnings = Warnings::default();
    if ctx.host.is_none() {
        warnings.lines.extend(unchecked_by_plugins(ctx, &kinds)?);
    }
    for (manifest, group_kind) in manifests.iter().zip(kinds) {
        let client = tx.client(group_kind.clone());
        let label = format!("{group_kind}/{}", manifest.name.escape_debug());
        let before = client
            .get_by_name_with(&manifest.name, Loads::none().owner())
            .ok();
        let mut options = CreateOptions::new().finalizers(manifest.finalizers.clone());
        let mut owner_id = None;
        if let Some((owner_kind, owner_name)) = manifest.owner_parts() {
            let owner_kind = known.as_written(owner_kind);
            let owner = tx
                .client(owner_kind)
                .get_by_name(owner_name)
                .map_err(|e| Failure::about(&format!("{label}: owner"), e))?;
            options = options.owner(owner.meta.id);
            owner_id = Some(owner.meta.id);
        }
        if let Some(stored) = &before {
            let owner_label = |owner: &ObjectRef| {
                let name = tx.client(owner.group_kind.clone()).get(owner.id);
                name.map_or_else(
                    |_| format!("{}#{}", owner.group_kind, owner.id),
                    |o| format!("{}/{}", owner.group_kind, o.meta.name),
                )
            };
            set_at_creation_only(&label, stored, manifest, owner_id, owner_label)?;
        }
        let spec = spec_as_current(&client, manifest, &mut warnings).map_err(|e| match e {
            beehive::Error::TransactionTimedOut => Failure::from(too_long(manifests.len())),
            e => Failure::about(&label, e),
        })?;
        let (after, created) = client
            .create_or_update(&manifest.name, spec, options)
            .await
            .map_err(|e| match e {
                beehive::Error::TransactionTimedOut => Failure::from(too_long(manifests.len())),
                e @ beehive::Error::Invalid { .. } => {
                    let failure = Failure::about(&label, e);
                    match unversioned_hint(&client, manifest) {
                        Some(hint) => {
                            Failure::new(failure.code, format!("{}; {hint}", failure.message))
                        }
                        None => failure,
                    }
                }
                e => Failure::about(&label, e),
            })?;
        let action = match (created, before) {
            (true, _) => "created",
            (false, Some(b)) if b.meta.generation == after.meta.generation => "unchanged",
            (false, _) => "configured",
        };
        results.push(Applied {
            kind: group_kind.to_string(),
            name: manifest.name.clone(),
            action: action.into(),
        });
    }
    tx.commit().map_err(|e| match e {
        beehive::Error::TransactionTimedOut => Failure::from(too_long(manifests.len())),
        e => error(e),
    })?;
    Ok(Reply::Applied {
        results,
        warnings: warnings.lines,
    })
}

/// Refuses a re-apply that would change what is set only when an object is
/// created: its owner, and finalizers (added by controllers as they go, and
/// removed only by them or `beehive finalize`). A manifest that leaves them
/// out, or lists what is stored (as `get -o yaml` prints it), applies.
fn set_at_creation_only(
    label: &str,
    stored: &RawObject,
    manifest: &Manifest,
    owner: Option<beehive::ObjectId>,
    owner_label: impl Fn(&ObjectRef) -> String,
) -> Result<(), Failure> {
    let stored_owner = stored.owner().ok().flatten();
    if let Some(owner) = owner
        && stored_owner.map(|o| o.id) != Some(owner)
    {
        let was = stored_owner.map_or("none".to_string(), owner_label);
        return Err(Failure::conflict(format!(
            "{label}: the owner is set only at creation (it has {was}); delete and re-create the object to change it"
        )));
    }
    let added: Vec<&str> = manifest
        .finalizers
        .iter()
        .filter(|f| !stored.meta.finalizers.contains(f))
        .map(String::as_str)
        .collect();
    if !added.is_empty() {
        return Err(Failure::conflict(format!(
            "{label}: finalizers are set only at creation: {} is not on the stored object (it has: {})",
            added.join(", "),
            if stored.meta.finalizers.is_empty() {
                "none".to_string()
            } else {
                stored.meta.finalizers.join(", ")
            }
        )));
    }
    Ok(())
}

/// Warnings of one apply, each said once.
#[derive(Default)]
struct Warnings {
    lines: Vec<String>,
    unversioned: std::collections::BTreeSet<String>,
}

/// The files the host is loading, then those it has not noticed yet (just
/// dropped, changed or removed): `plugins --wait` waits for both.
fn loading_rows(directory: &beehive::plugin::Directory) -> Vec<LoadingRow> {
    let loading = directory.loading();
    let mut rows: Vec<LoadingRow> = loading
        .iter()
        .map(|l| LoadingRow {
            file: l.path.display().to_string(),
            bytes: l.bytes,
            for_ms: millis(l.since.elapsed().unwrap_or_default()),
        })
        .collect();
    for path in directory.unseen() {
        if loading.iter().all(|l| l.path != path) {
            rows.push(LoadingRow {
                file: path.display().to_string(),
                bytes: std::fs::metadata(&path).map_or(0, |m| m.len()),
                for_ms: 0,
            });
        }
    }
    rows
}

/// A warning for each of `kinds` whose plugin checks specs with its own
/// `validate`: with no host running, only the schema recorded with the
/// kind's registration is checked, and a write that check would refuse is
/// written all the same.
fn unchecked_by_plugins(ctx: &Context, kinds: &[GroupKind]) -> Result<Vec<String>, Failure> {
    let registrations = ctx.store.registrations().map_err(error)?;
    Ok(registrations
        .into_iter()
        .filter(|r| r.validates && kinds.contains(&r.group_kind))
        .map(|r| {
            format!(
                "{}: no host is running, so its plugin's own checks (`validate`) did not run, \
                 only its schema: start `beehive run` to have every check",
                r.group_kind
            )
        })
        .collect())
}

/// The manifest's spec as the kind's plugin reads it now: converted from
/// the `specVersion` it names, or, when it names none, taken as the current
/// version (said once per kind, where the plugin has moved past version 0).
fn spec_as_current(
    client: &RawClient,
    manifest: &Manifest,
    warnings: &mut Warnings,
) -> beehive::Result<Json> {
    let spec = manifest.spec.json().clone();
    if let Some(version) = manifest.spec_version {
        return client.spec_from_version(&manifest.name, version, spec);
    }
    let current = client.current_spec_version()?;
    let kind = client.group_kind().to_string();
    if current > 0 && warnings.unversioned.insert(kind.clone()) {
        warnings.lines.push(format!(
            "{kind} reads spec version {current}: manifests that name no specVersion are taken \
             as written in it (write `specVersion: N` to have an older spec converted)"
        ));
    }
    Ok(spec)
}

/// For a spec refused as invalid: when its manifest names no `specVersion`
/// and the kind's plugin reads a later version than 0, the likely cause and
/// its fix (a manifest written before the plugin's upgrade).
fn unversioned_hint(client: &RawClient, manifest: &Manifest) -> Option<String> {
    if manifest.spec_version.is_some() {
        return None;
    }
    let current = client.current_spec_version().ok().filter(|v| *v > 0)?;
    Some(format!(
        "the manifest names no specVersion, so it was read as version {current}, the one the \
         plugin reads now; if it was written for an earlier version, add `specVersion: N` \
         (N < {current}) to have it converted"
    ))
}

/// Why an apply that outlasted its hold on the store wrote nothing, and
/// what to do instead.
fn too_long(objects: usize) -> String {
    format!(
        "applying {objects} objects held the store past {APPLY_HOLD_LIMIT:?}, the most one apply \
         may, so none was applied: split the manifests into smaller files \
         (20,000 objects apply in about a second)"
    )
}

fn get(ctx: &Context, kind: &str, name: Option<&str>, spec_version: Option<i64>) -> Outcome {
    let group_kind = resolve_kind(&ctx.store, kind)?;
    if let Some(wanted) = spec_version {
        let current = RawClient::new(&ctx.store, group_kind.clone())
            .current_spec_version()
            .map_err(error)?;
        if wanted != current {
            return Err(Failure::new(
                Code::Invalid,
                format!(
                    "{group_kind}'s specs read as spec version {current}; a plugin converts only \
                     upwards, so they cannot be shown as version {wanted}"
                ),
            ));
        }
    }
    let with_owner = Loads::none().owner();
    let client = RawClient::new(&ctx.store, group_kind);
    let objects = match name {
        Some(name) => vec![client.get_by_name_with(name, with_owner).map_err(error)?],
        None => client.list_with(with_owner).map_err(error)?,
    };
    let mut owners = OwnerNames::new(&ctx.store);
    let failed_at = |o: &RawObject| {
        let host = ctx.host.as_ref()?;
        let at = host.last_failed_pass(&o.meta.group_kind, o.meta.id)?;
        Some(beehive::object::Timestamp::from(at))
    };
    Ok(Reply::Objects {
        objects: objects
            .iter()
            .map(|o| crate::protocol::ObjectView {
                last_pass_failed_at: failed_at(o),
                ..owners.view(o)
            })
            .collect(),
    })
}

fn describe(ctx: &Context, kind: &str, name: &str) -> Outcome {
    let (client, object) = find(&ctx.store, kind, name)?;
    let id = object.meta.id;
    let related = |refs: Vec<ObjectRef>| -> Vec<Related> {
        refs.into_iter()
            .map(|r| self::related(&ctx.store, r))
            .collect()
    };
    let events = client
        .list_events(id, &EventFilter::all())
        .map_err(error)?
        .into_iter()
        .map(event_view)
        .collect();
    let next_pass = ctx.host.as_ref().map(|host| NextPass {
        at: host
            .schedule(client.group_kind(), id)
            .next_requeue_at
            .map(beehive::object::Timestamp::from),
    });
    Ok(Reply::Described(Box::new(Description {
        owner: client
            .get_owner(id)
            .map_err(error)?
            .map(|r| related(vec![r]).remove(0)),
        children: related(client.list_owned(id).map_err(error)?),
        dependencies: related(client.list_dependencies(id).map_err(error)?),
        dependents: related(client.list_dependents(id).map_err(error)?),
        next_pass,
        events,
        object: ObjectDocument::from(&object),
    })))
}

/// Names a related object; one removed meanwhile shows its id.
fn related(store: &Store, r: ObjectRef) -> Related {
    let name = RawClient::new(store, r.group_kind.clone())
        .get(r.id)
        .map(|o| o.meta.name)
        .unwrap_or_else(|_| format!("#{}", r.id));
    Related {
        kind: r.group_kind.to_string(),
        name,
    }
}

/// An event run as the CLI shows it.
pub fn event_view(event: beehive::event::Event) -> EventView {
    EventView {
        category: event.category,
        warning: event.type_ == EventType::Warning,
        reason: event.reason,
        message: event.message,
        detail: event.detail.as_ref().map(Json::to_value),
        count: event.count,
        first_at: event.first_at,
        last_at: event.last_at,
    }
}

async fn delete(ctx: &Context, kind: &str, name: &str) -> Outcome {
    let (client, object) = find(&ctx.store, kind, name)?;
    client.delete(object.meta.id).await.map_err(error)?;
    let label = object.meta.label();
    let message = if ctx.host.is_none() {
        format!("{label} marked for deletion (a running host collects it)")
    } else if object.meta.finalizers.is_empty() {
        format!("{label} marked for deletion (collected once nothing holds it)")
    } else {
        format!(
            "{label} marked for deletion (waiting on finalizers: {})",
            object.meta.finalizers.join(", ")
        )
    };
    Ok(Reply::Done { message })
}

fn events(ctx: &Context, kind: &str, name: &str, category: Option<String>) -> Outcome {
    let (client, object) = find(&ctx.store, kind, name)?;
    let filter = match category {
        Some(category) => EventFilter::all().category(category),
        None => EventFilter::all(),
    };
    let events = client
        .list_events(object.meta.id, &filter)
        .map_err(error)?
        .into_iter()
        .map(event_view)
        .collect();
    Ok(Reply::Events { events })
}

/// Whether `until` holds for `name` of the client's kind; an error for an
/// object that cannot be waited on.
pub fn holds(client: &RawClient, name: &str, until: &Until) -> Result<bool, Failure> {
    match client.get_by_name(name) {
        Ok(object) => Ok(holds_for(Some(&object), until)),
        Err(beehive::Error::NotFound { .. }) if *until == Until::Deleted => Ok(true),
        Err(e) => Err(error(e)),
    }
}

/// Whether `until` holds for the object as it is (`None`: gone).
fn holds_for(object: Option<&beehive::RawObject>, until: &Until) -> bool {
    let Some(object) = object else {
        return *until == Until::Deleted;
    };
    match until {
        Until::Settled => object.meta.is_observed(),
        Until::Deleted => false,
        Until::Condition { type_, status } => object
            .meta
            .condition(type_)
            .is_some_and(|c| c.status.as_str().eq_ignore_ascii_case(status)),
    }
}

/// Waits on a watch of the object: each change is checked as it arrives.
async fn wait(ctx: &Context, kind: &str, name: &str, until: &Until, timeout: Duration) -> Outcome {
    use futures_util::StreamExt;
    let done = || {
        Ok(Reply::Done {
            message: format!("{kind}/{name}: {}", describe_until(until)),
        })
    };
    let client = watching_client(ctx, resolve_kind(&ctx.store, kind)?);
    let id = match client.get_by_name(name) {
        Ok(object) => object.meta.id,
        Err(beehive::Error::NotFound { .. }) if *until == Until::Deleted => return done(),
        Err(e) => return Err(error(e)),
    };
    let mut stream = client
        .watch(id, beehive::client::WatchOptions::new())
        .map_err(error)?;
    if holds_for(stream.snapshot.as_ref(), until) {
        return done();
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let change = match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(change))) => change,
            Ok(Some(Err(e))) => return Err(error(e)),
            Ok(None) => return Err("the host stopped".into()),
            Err(_) => {
                return Err(Failure::timeout(format!(
                    "timed out after {} waiting until {kind}/{name} is {}",
                    humantime::format_duration(timeout),
                    describe_until(until)
                )));
            }
        };
        let now = match change.change {
            beehive::client::ChangeType::Deleted => None,
            _ => change.object.as_ref(),
        };
        if holds_for(now, until) {
            return done();
        }
        if now.is_none() {
            return Err(format!(
                "{kind}/{name} was deleted before it was {}",
                describe_until(until)
            )
            .into());
        }
    }
}

/// What `until` reads as in a sentence.
pub fn describe_until(until: &Until) -> String {
    match until {
        Until::Settled => "settled".into(),
        Until::Deleted => "deleted".into(),
        Until::Condition { type_, status } => format!("{type_}={status}"),
    }
}

/// The schemas recorded with `kind`'s registration.
fn explain(ctx: &Context, kind: &str) -> Outcome {
    let group_kind = resolve_kind(&ctx.store, kind)?;
    let registration = ctx
        .store
        .registrations()
        .map_err(error)?
        .into_iter()
        .find(|r| r.group_kind == group_kind)
        .ok_or_else(|| {
            Failure::not_found(format!(
                "no plugin serves {group_kind}, so nothing describes its fields"
            ))
        })?;
    Ok(Reply::Schemas(KindSchemas {
        kind: group_kind.to_string(),
        source: Some(registration.source),
        spec_version: registration.spec_version,
        spec: registration.spec_schema,
        status: registration.status_schema,
    }))
}

fn plugins(ctx: &Context) -> Outcome {
    let mut not_ready = ctx.host.as_ref().and_then(|_| ctx.store.write_outage());
    let active_host = match ctx.store.is_postgres() {
        true => match ctx.store.lease_holder() {
            Ok(holder) => holder.map(|h| ActiveHostView {
                holder: h.holder,
                tenure: h.token,
                live: h.live,
            }),
            // A host cut off from its store still says what it serves.
            Err(e) if ctx.host.is_some() => {
                not_ready.get_or_insert_with(|| format!("the store does not answer: {e}"));
                None
            }
            Err(e) => return Err(error(e)),
        },
        false => None,
    };
    let view = match &ctx.plugins {
        Some(directory) => PluginsView {
            running: true,
            active_host,
            not_ready,
            plugins: directory
                .served()
                .into_iter()
                .map(|s| PluginRow {
                    kind: s.group_kind.to_string(),
                    source: s.path.display().to_string(),
                    content_hash: Some(s.content_hash),
                    limits: Some(LimitsView {
                        concurrency: s.limits.concurrency,
                        pass_deadline_ms: millis(s.limits.pass_deadline),
                        pass_wall_limit_ms: millis(s.limits.pass_wall_limit),
                        memory_bytes: s.limits.memory,
                        grants: grants_of(&s.policy),
                        http: (!s.policy.http.allow.is_empty()).then(|| HttpLimitsView {
                            connect_timeout_ms: millis(s.limits.http.connect_timeout),
                            first_byte_timeout_ms: millis(s.limits.http.first_byte_timeout),
                            max_response_bytes: s.limits.http.max_response_bytes,
                            max_concurrent_requests: s.limits.http.max_concurrent_requests,
                        }),
                    }),
                })
                .collect(),
            failures: directory
                .failures()
                .into_iter()
                .map(|f| PluginFailure {
                    file: f.path.display().to_string(),
                    error: f.error.to_string(),
                })
                .collect(),
            loading: loading_rows(directory),
            started: ctx.started.load(std::sync::atomic::Ordering::SeqCst),
        },
        None => PluginsView {
            running: false,
            active_host,
            not_ready,
            plugins: ctx
                .store
                .registrations()
                .map_err(error)?
                .into_iter()
                .map(|r| PluginRow {
                    kind: r.group_kind.to_string(),
                    source: r.source,
                    content_hash: r.content_hash,
                    limits: None,
                })
                .collect(),
            failures: Vec::new(),
            loading: Vec::new(),
            started: false,
        },
    };
    Ok(Reply::Plugins(view))
}

fn metrics(ctx: &Context) -> Outcome {
    if ctx.host.is_none() {
        return Err(Failure::unreachable(
            "metrics are a running host's: start one with `beehive run` (or scrape its --metrics-addr)",
        ));
    }
    Ok(Reply::Metrics {
        text: ctx.store.metrics().encode(),
    })
}

/// A plugin's grants as `beehive plugins` lists them: directories as
/// `GUEST=HOST:ro|rw`, hosts as `http:PATTERN`, store kinds as
/// `store:write|read:PATTERN`, config as `config:KEY(SOURCE)`; never a value.
pub fn grants_of(policy: &beehive::plugin::Policy) -> Vec<String> {
    let files = policy.files.iter().map(ToString::to_string);
    let hosts = policy.http.allow.iter().map(|host| format!("http:{host}"));
    let store = policy
        .store
        .describe()
        .into_iter()
        .map(|g| format!("store:{g}"));
    let config = policy
        .config
        .iter()
        .map(|(key, value)| format!("config:{key}({})", value.source));
    files.chain(hosts).chain(store).chain(config).collect()
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Removes `finalizer` from the object, and records that on its timeline:
/// whatever cleanup the finalizer held the object for was skipped by hand.
async fn remove_finalizer(ctx: &Context, kind: &str, name: &str, finalizer: &str) -> Outcome {
    let (client, object) = find(&ctx.store, kind, name)?;
    let label = object.meta.label();
    if !object.meta.finalizers.iter().any(|f| f == finalizer) {
        let has = match object.meta.finalizers.is_empty() {
            true => "none".to_string(),
            false => object.meta.finalizers.join(", "),
        };
        return Err(Failure::not_found(format!(
            "{label} has no finalizer {finalizer} (it has: {has})"
        )));
    }
    let admin = AdminClient::new(&ctx.store, client.group_kind().clone());
    let id = object.meta.id;
    admin.delete_finalizer(id, finalizer).await.map_err(error)?;
    let event = EventSpec::warning("FinalizerRemoved").message(format!(
        "finalizer {finalizer} removed by an operator; its cleanup was skipped"
    ));
    // The object may be collected the moment its last finalizer goes: then
    // there is no timeline left to record on, and nothing is lost.
    let _ = admin.add_event(id, event).await;
    let then = if object.meta.deletion_requested_at.is_some() {
        "; it is collected once nothing else holds it"
    } else {
        ""
    };
    Ok(Reply::Done {
        message: format!("{label}: finalizer {finalizer} removed, its cleanup skipped{then}"),
    })
}

fn requeue(ctx: &Context, kind: &str, name: &str) -> Outcome {
    let (client, object) = find(&ctx.store, kind, name)?;
    let Some(host) = &ctx.host else {
        return Err(Failure::unreachable(
            "requeue needs a running host: start one with `beehive run` (objects that owe a pass get one when it starts)",
        ));
    };
    host.requeue(client.group_kind(), object.meta.id, true)
        .map_err(error)?;
    Ok(Reply::Done {
        message: format!("{} queued for a pass", object.meta.label()),
    })
}
