//! Reads: `get`, `describe`, `events`, `explain` and `rollout`.

use beehive::{
    Json, RawClient, RawObject, Store,
    event::{EventFilter, EventType},
    object::{Loads, ObjectDocument, ObjectRef},
};

use super::kinds::resolve_kind;
use super::{Context, error, find};
use crate::failure::{Code, Failure};
use crate::object_view::OwnerNames;
use crate::protocol::{
    Description, EventView, KindRow, KindSchemas, NextPass, Outcome, Related, Reply, RolloutView,
};

pub(super) fn get(
    ctx: &Context,
    kind: &str,
    name: Option<&str>,
    spec_version: Option<i64>,
    selector: Option<&str>,
) -> Outcome {
    let group_kind = resolve_kind(&ctx.store, kind)?;
    let selector = selector.map(parse_selector).transpose()?;
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
    let objects = match (name, &selector) {
        (Some(name), _) => vec![client.get_by_name_with(name, with_owner).map_err(error)?],
        (None, Some(selector)) => client
            .list_selected_with(selector, with_owner)
            .map_err(error)?,
        (None, None) => client.list_with(with_owner).map_err(error)?,
    };
    Ok(Reply::Objects {
        objects: views(ctx, &objects),
    })
}

/// How `get` shows `objects`: with their owners' names, and when their
/// latest pass failed, if the running host saw it fail.
fn views(ctx: &Context, objects: &[RawObject]) -> Vec<crate::protocol::ObjectView> {
    let mut owners = OwnerNames::new(&ctx.store);
    let failed_at = |o: &RawObject| {
        let host = ctx.host.as_ref()?;
        let at = host.last_failed_pass(&o.meta.group_kind, o.meta.id)?;
        Some(beehive::object::Timestamp::from(at))
    };
    objects
        .iter()
        .map(|o| crate::protocol::ObjectView {
            last_pass_failed_at: failed_at(o),
            ..owners.view(o)
        })
        .collect()
}

/// A page of `kind`'s objects, by id: at most `limit` with ids above
/// `after` (those `selector` picks, when given), and the id to go on after
/// when there may be more. What a paged reader (the console) asks, so a
/// page of a large kind reads a page, not the kind.
pub(crate) fn objects_page(
    ctx: &Context,
    kind: &str,
    selector: Option<&str>,
    after: Option<i64>,
    limit: usize,
) -> Result<(Vec<crate::protocol::ObjectView>, Option<i64>), Failure> {
    let group_kind = resolve_kind(&ctx.store, kind)?;
    let client = RawClient::new(&ctx.store, group_kind);
    let (objects, next) = match selector.map(parse_selector).transpose()? {
        Some(selector) => client.list_selected_page(&selector, after, limit),
        None => client.list_page(after, limit),
    }
    .map_err(error)?;
    Ok((views(ctx, &objects), next))
}

/// The newest Warning event runs of any object, at most `limit`, each
/// with its object as `Kind.group/name` in `object`.
pub(crate) fn recent_warnings(ctx: &Context, limit: usize) -> Result<Vec<EventView>, Failure> {
    let warnings = ctx.store.recent_warnings(limit).map_err(error)?;
    Ok(warnings
        .into_iter()
        .map(|(group_kind, name, run)| EventView {
            object: Some(format!("{group_kind}/{name}")),
            ..event_view(run)
        })
        .collect())
}

/// `kind`'s objects whose latest pass failed, the most recent failure
/// first, at most `limit`: what the running host remembers, read by id.
pub(crate) fn failing_objects(
    ctx: &Context,
    kind: &str,
    limit: usize,
) -> Result<Vec<crate::protocol::ObjectView>, Failure> {
    let group_kind = resolve_kind(&ctx.store, kind)?;
    let Some(host) = &ctx.host else {
        return Ok(Vec::new());
    };
    let client = RawClient::new(&ctx.store, group_kind.clone());
    let objects: Vec<RawObject> = host
        .failing_objects(&group_kind, limit)
        .into_iter()
        .filter_map(|(id, _)| client.get_with(id, Loads::none().owner()).ok())
        .collect();
    Ok(views(ctx, &objects))
}

pub(super) fn describe(ctx: &Context, kind: &str, name: &str) -> Outcome {
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
        last_pass_trace: client.last_pass_trace(id).map_err(error)?,
        events,
        object: ObjectDocument::from(&object),
    })))
}

/// Names a related object; one removed meanwhile shows its id.
pub(super) fn related(store: &Store, r: ObjectRef) -> Related {
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
        object: None,
        category: event.category,
        warning: event.type_ == EventType::Warning,
        reason: event.reason,
        message: event.message,
        detail: event.detail.as_ref().map(Json::to_value),
        count: event.count,
        first_at: event.first_at,
        last_at: event.last_at,
        trace_id: event.trace_id,
    }
}

pub(super) fn events(ctx: &Context, kind: &str, name: &str, category: Option<String>) -> Outcome {
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

/// The most objects `events -l` reads timelines of.
const MAX_SELECTED_TIMELINES: usize = 1000;

/// The most runs `events -l` reads of one object, and shows in all.
const MAX_SELECTED_RUNS: usize = 1000;

/// The runs of every object of `kind` that `selector` picks, newest first,
/// each with its object's name.
pub(super) fn selected_events(
    ctx: &Context,
    kind: &str,
    selector: &str,
    category: Option<String>,
) -> Outcome {
    let group_kind = resolve_kind(&ctx.store, kind)?;
    let selector = parse_selector(selector)?;
    let client = RawClient::new(&ctx.store, group_kind.clone());
    let objects = client.list_selected(&selector).map_err(error)?;
    if objects.len() > MAX_SELECTED_TIMELINES {
        return Err(Failure::usage(format!(
            "the selector picks {} objects of {group_kind}; events -l reads at most \
             {MAX_SELECTED_TIMELINES} timelines: narrow it",
            objects.len()
        )));
    }
    let mut filter = EventFilter::all().limit(MAX_SELECTED_RUNS);
    if let Some(category) = category {
        filter = filter.category(category);
    }
    let mut events = Vec::new();
    for object in objects {
        let runs = client.list_events(object.meta.id, &filter).map_err(error)?;
        events.extend(runs.into_iter().map(|run| EventView {
            object: Some(object.meta.name.clone()),
            ..event_view(run)
        }));
    }
    events.sort_by_key(|run| std::cmp::Reverse(run.last_at));
    events.truncate(MAX_SELECTED_RUNS);
    Ok(Reply::Events { events })
}

/// The schemas recorded with `kind`'s registration.
pub(super) fn explain(ctx: &Context, kind: &str) -> Outcome {
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

/// Every kind the store knows, registered or holding objects, with who
/// serves it and how many objects it holds.
pub(super) fn kinds(ctx: &Context) -> Outcome {
    let registrations = ctx.store.registrations().map_err(error)?;
    let counts = ctx.store.object_counts().map_err(error)?;
    let rows = ctx
        .store
        .kinds()
        .map_err(error)?
        .into_iter()
        .map(|group_kind| {
            let registered = registrations.iter().find(|r| r.group_kind == group_kind);
            let (objects, unsettled) = counts
                .iter()
                .find(|(counted, _, _)| *counted == group_kind)
                .map_or((0, 0), |(_, total, unsettled)| (*total, *unsettled));
            KindRow {
                kind: group_kind.kind.clone(),
                group: group_kind.group.clone(),
                source: registered.map(|r| r.source.clone()),
                spec_version: registered.map(|r| r.spec_version),
                status_version: registered.map(|r| r.status_version),
                objects,
                unsettled,
            }
        })
        .collect();
    Ok(Reply::Kinds { kinds: rows })
}

/// `kind`'s newest revision, live from the running host if it serves the
/// kind, or with `history` every revision the store keeps.
pub(super) fn rollouts(ctx: &Context, kind: &str, history: bool) -> Outcome {
    let group_kind = resolve_kind(&ctx.store, kind)?;
    let mut revisions = ctx.store.rollouts(&group_kind).map_err(error)?;
    // Live only where this host serves the kind: a kind whose plugin was
    // removed keeps its last revision rolling, and nothing moves it.
    let live = ctx
        .host
        .as_ref()
        .is_some_and(|host| host.kinds().contains(&group_kind));
    if !history {
        let newest = match &ctx.host {
            Some(host) => host.rollout(&group_kind).map_err(error)?,
            None => revisions.pop(),
        };
        revisions = newest.into_iter().collect();
        if revisions.is_empty() {
            return Err(Failure::not_found(format!(
                "{group_kind} has never been served by a controller, so it has no rollout: \
                 `beehive api-resources` lists the kinds and who serves them"
            )));
        }
    }
    let loading = match (&ctx.plugins, revisions.last()) {
        (Some(directory), Some(newest)) => super::plugins::loading_rows(directory)
            .into_iter()
            .map(|row| row.file)
            .find(|file| *file == newest.source),
        _ => None,
    };
    Ok(Reply::Rollouts {
        revisions: revisions.into_iter().map(RolloutView::from).collect(),
        live,
        loading,
    })
}

/// Up to `limit` (at most [`MAX_CANDIDATES`]) names of `kind`'s objects
/// that start with `prefix`.
///
/// [`MAX_CANDIDATES`]: crate::completion::MAX_CANDIDATES
pub(super) fn names(ctx: &Context, kind: &str, prefix: &str, limit: usize) -> Outcome {
    let group_kind = resolve_kind(&ctx.store, kind)?;
    let limit = limit.min(crate::completion::MAX_CANDIDATES);
    let names = ctx
        .store
        .object_names(&group_kind, prefix, limit)
        .map_err(error)?;
    Ok(Reply::Names { names })
}

/// `text` as a label selector, or a usage error naming where it breaks.
pub(crate) fn parse_selector(text: &str) -> Result<beehive::object::Selector, Failure> {
    beehive::object::Selector::parse(text)
        .map_err(|e| Failure::usage(format!("invalid selector {text:?}: {e}")))
}
