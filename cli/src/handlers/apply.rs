//! `apply`: manifests written in one transaction, all or none.

use std::time::Duration;

use beehive::trace::{Span, SpanKind, SpanStatus, TraceContext};
use beehive::{
    CreateOptions, GroupKind, Json, RawClient, RawObject,
    object::{Loads, ObjectRef},
};

use super::kinds::{kinds_of, still_starting, until_started, while_starting};
use super::{Context, error};
use crate::failure::{Code, Failure};
use crate::manifest::Manifest;
use crate::protocol::{Applied, Compared, Outcome, Reply, TraceAsk};

/// How long `apply` may hold the writer for one batch of manifests.
pub(super) const APPLY_HOLD_LIMIT: Duration = Duration::from_secs(10);

/// How an apply goes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct How {
    /// A kind nothing knows may be created.
    pub(crate) new_kinds: bool,
    /// A manifest's `generation` is ignored.
    pub(crate) force_conflicts: bool,
    /// Everything is checked and written, then rolled back.
    pub(crate) dry_run: bool,
}

/// Creates or updates every manifest in one transaction: all or none. A
/// kind nothing knows is refused unless `how.new_kinds` allows it.
pub(super) async fn apply(
    ctx: &Context,
    manifests: Vec<Manifest>,
    how: How,
    trace: Option<TraceAsk>,
) -> Outcome {
    let span = ApplySpan::open(ctx, trace.filter(|_| !how.dry_run), manifests.len())?;
    let applied = apply_traced(ctx, manifests, how, span.as_ref().map(ApplySpan::context)).await;
    match (span, applied) {
        (
            Some(span),
            Ok(Reply::Applied {
                results, warnings, ..
            }),
        ) => {
            let trace_id = span.end(None);
            Ok(Reply::Applied {
                results,
                warnings,
                trace_id: Some(trace_id),
            })
        }
        (Some(span), Err(failure)) => {
            span.end(Some(&failure.message));
            Err(failure)
        }
        (_, applied) => applied,
    }
}

/// The trace an apply's writes join: a span of the host's tracer when it
/// traces (so the apply shows in the trace, above the passes it causes),
/// else the caller's context as given (or a new one for `--trace`), kept
/// with the writes for a host that traces later.
enum ApplySpan {
    Traced(Span),
    Untraced(TraceContext),
}

impl ApplySpan {
    fn open(
        ctx: &Context,
        ask: Option<TraceAsk>,
        objects: usize,
    ) -> Result<Option<ApplySpan>, Failure> {
        let parent = match ask {
            None => return Ok(None),
            Some(TraceAsk::New) => None,
            Some(TraceAsk::Parent(text)) => Some(
                TraceContext::parse(&text)
                    .map_err(|e| Failure::usage(format!("TRACEPARENT: {e}")))?,
            ),
        };
        let tracer = ctx.host.as_ref().and_then(|host| host.tracer());
        Ok(Some(match tracer {
            Some(tracer) => {
                let span = tracer.open("apply", SpanKind::Internal, parent);
                span.set("beehive.objects", objects as i64);
                ApplySpan::Traced(span)
            }
            None => ApplySpan::Untraced(parent.unwrap_or_else(|| TraceContext::new_root(true))),
        }))
    }

    fn context(&self) -> TraceContext {
        match self {
            ApplySpan::Traced(span) => span.context(),
            ApplySpan::Untraced(context) => *context,
        }
    }

    /// Ends the span (with the failure, if any); the trace's id.
    fn end(self, failure: Option<&str>) -> String {
        let trace_id = self.context().trace_id.to_string();
        if let ApplySpan::Traced(span) = self {
            span.end(match failure {
                Some(why) => SpanStatus::Error(why.to_string()),
                None => SpanStatus::Unset,
            });
        }
        trace_id
    }
}

async fn apply_traced(
    ctx: &Context,
    manifests: Vec<Manifest>,
    how: How,
    trace: Option<TraceContext>,
) -> Outcome {
    let How {
        new_kinds,
        force_conflicts,
        dry_run,
    } = how;
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
        if let Some(trace) = trace {
            options = options.trace(trace);
        }
        if let Some(labels) = &manifest.labels {
            options = options.labels(labels.clone());
        }
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
        if !force_conflicts {
            unchanged_since_read(&label, manifest, before.as_ref(), &spec)?;
        }
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
        let action = match (created, &before) {
            (true, _) => "created",
            (false, Some(b))
                if b.meta.generation == after.meta.generation
                    && b.meta.labels == after.meta.labels =>
            {
                "unchanged"
            }
            (false, _) => "configured",
        };
        let compared = |o: &RawObject| Compared {
            labels: o.meta.labels.clone(),
            spec: o.spec.to_value(),
        };
        results.push(Applied {
            kind: group_kind.to_string(),
            name: manifest.name.clone(),
            action: action.into(),
            before: before.as_ref().filter(|_| dry_run).map(compared),
            after: dry_run.then(|| compared(&after)),
        });
    }
    let ended = match dry_run {
        true => tx.rollback(),
        false => tx.commit(),
    };
    ended.map_err(|e| match e {
        beehive::Error::TransactionTimedOut => Failure::from(too_long(manifests.len())),
        e => error(e),
    })?;
    Ok(Reply::Applied {
        results,
        warnings: warnings.lines,
        trace_id: None,
    })
}

/// Refuses a re-apply that would change what is set only when an object is
/// created: its owner, and finalizers (added by controllers as they go, and
/// removed only by them or `beehive finalize`). A manifest that leaves them
/// out, or lists what is stored (as `get -o yaml` prints it), applies.
pub(super) fn set_at_creation_only(
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

/// Refuses a manifest read from an object (it carries the `generation` it
/// was read at) when someone changed the object's spec since, or deleted
/// it: applying would silently undo their change. A spec already equal to
/// the manifest's is no conflict, so a retried apply that had in fact
/// committed still succeeds. The resource version is not the test: it
/// moves with every status a controller writes, which would refuse nearly
/// every read-edit-apply of a busy object.
pub(super) fn unchanged_since_read(
    label: &str,
    manifest: &Manifest,
    stored: Option<&RawObject>,
    spec: &Json,
) -> Result<(), Failure> {
    let Some(read_at) = manifest.generation else {
        return Ok(());
    };
    let fix = "read it again (`beehive get KIND NAME -o yaml`) and reapply, or apply with \
               --force-conflicts to overwrite";
    match stored {
        None => Err(Failure::conflict(format!(
            "{label}: the manifest was read at generation {read_at}, but the object no longer \
             exists (deleted since?): remove `generation` to create it anew, or apply with \
             --force-conflicts"
        ))),
        Some(stored) if stored.meta.generation != read_at && stored.spec != *spec => {
            Err(Failure::conflict(format!(
                "{label}: its spec changed since the manifest was read (generation {read_at}, \
                 now {}): {fix}",
                stored.meta.generation
            )))
        }
        Some(_) => Ok(()),
    }
}

/// Warnings of one apply, each said once.
#[derive(Default)]
pub(super) struct Warnings {
    lines: Vec<String>,
    unversioned: std::collections::BTreeSet<String>,
}

/// A warning for each of `kinds` whose plugin checks specs with its own
/// `validate`: with no host running, only the schema recorded with the
/// kind's registration is checked, and a write that check would refuse is
/// written all the same.
pub(super) fn unchecked_by_plugins(
    ctx: &Context,
    kinds: &[GroupKind],
) -> Result<Vec<String>, Failure> {
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
pub(super) fn spec_as_current(
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
pub(super) fn unversioned_hint(client: &RawClient, manifest: &Manifest) -> Option<String> {
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
pub(super) fn too_long(objects: usize) -> String {
    format!(
        "applying {objects} objects held the store past {APPLY_HOLD_LIMIT:?}, the most one apply \
         may, so none was applied: split the manifests into smaller files \
         (20,000 objects apply in about a second)"
    )
}
