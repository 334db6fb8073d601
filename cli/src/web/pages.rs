//! The console's pages, each made from the answers the socket's read
//! requests give (`kinds`, `get`, `describe`, `plugins`): the console sees
//! what the CLI sees, and has no way to ask for a write.

use std::collections::BTreeMap;
use std::fmt::Write;

use beehive::object::{ConditionStatus, Timestamp};

use crate::failure::Code;
use crate::handlers::{self, Context};
use crate::output::{age, labels_text, rfc3339};
use crate::protocol::{Description, EventView, Related, Reply, Request};
use crate::top::KindRow;
use crate::web::html::{page, segment, text};
use crate::web::{graph, timeline};

/// The most objects a kind's page lists; the page says when there are more.
pub const MAX_ROWS: usize = 500;

/// A page, or why there is none (the status and a sentence).
pub type Answer = Result<String, (u16, String)>;

async fn ask(ctx: &Context, request: Request) -> Result<Reply, (u16, String)> {
    handlers::execute(ctx, request).await.map_err(refused)
}

/// The HTTP status that says what a refused request's exit code says.
fn status_of(code: Code) -> u16 {
    match code {
        Code::NotFound => 404,
        Code::Usage | Code::Invalid => 400,
        Code::Conflict => 409,
        Code::Timeout => 504,
        Code::Unreachable => 503,
        Code::Failure => 500,
    }
}

fn refused(failure: crate::failure::Failure) -> (u16, String) {
    (status_of(failure.code), failure.message)
}

fn unexpected() -> (u16, String) {
    (500, "the host answered with something else".to_string())
}

/// `/`: every kind, who serves it, its objects, the unsettled and the
/// failing ones, passes per second and the 99th-percentile pass time over
/// the interval since the previous reading (`rates`); how many plugins
/// serve and how many files failed to load.
pub async fn first_screen(ctx: &Context, rates: &BTreeMap<String, KindRow>) -> Answer {
    let Reply::Kinds { kinds } = ask(ctx, Request::Kinds).await? else {
        return Err(unexpected());
    };
    let plugins = match ask(ctx, Request::Plugins).await? {
        Reply::Plugins(view) => Some(view),
        _ => None,
    };
    let version_of = |kind: &str| {
        let row = plugins.as_ref()?.plugins.iter().find(|p| p.kind == kind)?;
        let hash = row.content_hash.as_deref()?;
        Some(hash.chars().take(12).collect::<String>())
    };
    let mut body = String::from(
        "<h2>Kinds</h2><table><tr><th>Kind</th><th>Served by</th><th>Version</th>\
<th>Objects</th><th>Unsettled</th><th>Failing or backing off</th><th>Passes/s</th><th>p99 pass</th></tr>",
    );
    for row in &kinds {
        let kind = full_kind(&row.kind, &row.group);
        let unsettled = match row.unsettled {
            0 => "<td class=\"n ok\">0</td>".to_string(),
            n => format!("<td class=\"n bad\">{n}</td>"),
        };
        let rate = rates.get(&kind);
        let failing = match rate.map_or(0, |r| r.failing) {
            0 => "<td class=\"n ok\">0</td>".to_string(),
            n => format!(
                "<td class=\"n bad\"><a href=\"/kinds/{}?failing\">{n}</a></td>",
                segment(&kind)
            ),
        };
        let _ = write!(
            body,
            "<tr><td><a href=\"/kinds/{link}\">{name}</a></td><td>{source}</td><td>{version}</td>\
<td class=\"n\">{objects}</td>{unsettled}{failing}<td class=\"n\">{passes}</td><td class=\"n\">{p99}</td></tr>",
            link = segment(&kind),
            name = text(&kind),
            source = text(row.source.as_deref().unwrap_or("(no controller)")),
            version = text(&version_of(&kind).unwrap_or_default()),
            objects = row.objects,
            passes = rate.map_or("-".to_string(), |r| format!("{:.1}", r.passes_per_second)),
            p99 = rate.and_then(|r| r.p99).map_or("-".to_string(), p99_text),
        );
    }
    body.push_str("</table>");
    if kinds.is_empty() {
        body.push_str(
            "<p class=\"muted\">No kinds yet: a plugin's kind appears once a host serves it.</p>",
        );
    }
    warnings(ctx, &mut body)?;
    if let Some(view) = &plugins {
        let _ = write!(
            body,
            "<h2>Plugins</h2><p><a href=\"/plugins\">{} serving</a>{}</p>",
            view.plugins.len(),
            match view.failures.len() {
                0 => String::new(),
                n => format!(", <span class=\"bad\">{n} failing to load</span>"),
            }
        );
    }
    Ok(page("Control plane", &body))
}

/// The most Warning runs the first screen lists.
const WARNINGS_SHOWN: usize = 20;

/// The newest Warning event runs of any object, each linked to its object.
fn warnings(ctx: &Context, body: &mut String) -> Result<(), (u16, String)> {
    let warnings = handlers::recent_warnings(ctx, WARNINGS_SHOWN).map_err(refused)?;
    body.push_str("<h2>Warnings</h2>");
    if warnings.is_empty() {
        body.push_str("<p class=\"muted\">None lately.</p>");
        return Ok(());
    }
    body.push_str(
        "<table><tr><th>Last</th><th>Object</th><th>Reason</th><th>Message</th><th>Count</th></tr>",
    );
    for run in &warnings {
        let object = run.object.as_deref().unwrap_or("");
        let link = match object.split_once('/') {
            Some((kind, name)) => format!(
                "<a href=\"/objects/{}/{}\">{}</a>",
                segment(kind),
                segment(name),
                text(object)
            ),
            None => text(object),
        };
        let _ = write!(
            body,
            "<tr><td>{} ago</td><td>{link}</td><td class=\"bad\">{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
            age(run.last_at),
            text(&run.reason),
            text(&run.message),
            run.count
        );
    }
    body.push_str("</table>");
    Ok(())
}

/// `/plugins`: each plugin with its version, digest, contract, signer,
/// grants and limits, the memory its instances hold; the files loading and
/// those that failed to load, with why.
pub async fn plugins_page(ctx: &Context) -> Answer {
    let Reply::Plugins(view) = ask(ctx, Request::Plugins).await? else {
        return Err(unexpected());
    };
    let memory = match ask(ctx, Request::Metrics).await {
        Ok(Reply::Metrics { text }) => text,
        _ => String::new(),
    };
    let mut body = String::from(
        "<table><tr><th>Kind</th><th>File</th><th>Version</th><th>Contract</th><th>Code</th>\
<th>Signer</th><th>Limits</th><th>Grants</th><th>Memory held</th></tr>",
    );
    for plugin in &view.plugins {
        let limits = plugin.limits.as_ref().map_or(String::new(), |l| {
            let mut shown = format!(
                "{} at once; {} ms CPU, {} ms wall a pass; {} MiB memory",
                l.concurrency,
                l.pass_deadline_ms,
                l.pass_wall_limit_ms,
                l.memory_bytes >> 20
            );
            if let Some(http) = &l.http {
                let _ = write!(
                    shown,
                    "; HTTP: connect {} ms, first byte {} ms, {} KiB answers, {} at once",
                    http.connect_timeout_ms,
                    http.first_byte_timeout_ms,
                    http.max_response_bytes >> 10,
                    http.max_concurrent_requests
                );
            }
            shown
        });
        let grants = plugin
            .limits
            .as_ref()
            .map(|l| {
                l.grants
                    .iter()
                    .map(|g| text(g))
                    .collect::<Vec<_>>()
                    .join("<br>")
            })
            .unwrap_or_default();
        let held = memory_held(&memory, plugin_name(&plugin.source));
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{grants}</td><td class=\"n\">{}</td></tr>",
            text(&plugin.kind),
            text(&plugin.source),
            text(plugin.content_hash.as_deref().unwrap_or("")),
            text(plugin.contract.as_deref().unwrap_or("")),
            text(plugin.tier.as_deref().unwrap_or("")),
            text(plugin.signer.as_deref().unwrap_or("")),
            text(&limits),
            held.map_or("-".to_string(), |bytes| format!(
                "{:.1} MiB",
                bytes / 1048576.0
            )),
        );
    }
    body.push_str("</table>");
    if !view.loading.is_empty() {
        body.push_str("<h2>Loading</h2><ul>");
        for loading in &view.loading {
            let _ = write!(
                body,
                "<li>{} ({} bytes, for {} ms)</li>",
                text(&loading.file),
                loading.bytes,
                loading.for_ms
            );
        }
        body.push_str("</ul>");
    }
    if !view.failures.is_empty() {
        body.push_str("<h2>Failed to load</h2><table><tr><th>File</th><th>Why</th></tr>");
        for failure in &view.failures {
            let _ = write!(
                body,
                "<tr><td>{}</td><td class=\"bad\">{}</td></tr>",
                text(&failure.file),
                text(&failure.error)
            );
        }
        body.push_str("</table>");
    }
    Ok(page("Plugins", &body))
}

/// A plugin's name: its file's stem.
fn plugin_name(source: &str) -> &str {
    let file = source.rsplit('/').next().unwrap_or(source);
    file.strip_suffix(".wasm").unwrap_or(file)
}

/// What `beehive_plugin_memory_bytes` says plugin `name`'s instances hold.
fn memory_held(metrics: &str, name: &str) -> Option<f64> {
    let prefix = format!("beehive_plugin_memory_bytes{{plugin=\"{name}\"");
    metrics
        .lines()
        .find(|line| line.starts_with(&prefix))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

/// `/kinds/KIND`: a page of its objects (at most [`MAX_ROWS`], those
/// whose ids come after `after`), only those whose labels match
/// `selector` when given, or when `failing` only those whose latest pass
/// failed (read by id from what the host remembers), with why.
pub async fn kind_page(
    ctx: &Context,
    kind: &str,
    selector: Option<String>,
    failing: bool,
    after: Option<i64>,
) -> Answer {
    let (shown, next) = match failing {
        true => (
            handlers::failing_objects(ctx, kind, MAX_ROWS).map_err(refused)?,
            None,
        ),
        false => handlers::objects_page(ctx, kind, selector.as_deref(), after, MAX_ROWS)
            .map_err(refused)?,
    };
    let mut body = String::from("<nav>");
    let _ = write!(
        body,
        "<a href=\"/kinds/{link}\">all</a><a href=\"/kinds/{link}?failing\">failing or backing off</a></nav>",
        link = segment(kind)
    );
    if let Some(selector) = &selector {
        let _ = write!(
            body,
            "<p>Labels matching <code>{}</code></p>",
            text(selector)
        );
    }
    body.push_str(
        "<table><tr><th>Name</th><th>Generation</th><th>Observed</th><th>Conditions</th>\
<th>Labels</th><th>Last pass</th><th>Age</th></tr>",
    );
    for object in &shown {
        let meta = &object.document.meta;
        let conditions: Vec<String> = meta
            .conditions
            .iter()
            .map(|c| {
                let class = match c.status {
                    ConditionStatus::True => "ok",
                    ConditionStatus::False => "bad",
                    ConditionStatus::Unknown => "muted",
                };
                format!(
                    "<span class=\"{class}\">{}={:?}</span>",
                    text(&c.type_),
                    c.status
                )
            })
            .collect();
        let last_pass = match object.last_pass_failed_at {
            Some(at) => {
                let why = match failing {
                    true => why_failed(ctx, kind, &meta.name).await,
                    false => None,
                };
                format!(
                    "<span class=\"bad\">failed {} ago</span>{}",
                    age(at),
                    why.map(|why| format!(": {}", text(&why)))
                        .unwrap_or_default()
                )
            }
            None => String::new(),
        };
        let _ = write!(
            body,
            "<tr><td><a href=\"/objects/{kind_link}/{name_link}\">{name}</a></td>\
<td class=\"n\">{generation}</td><td class=\"n\">{observed}</td><td>{conditions}</td>\
<td>{labels}</td><td>{last_pass}</td><td>{age}</td></tr>",
            kind_link = segment(kind),
            name_link = segment(&meta.name),
            name = text(&meta.name),
            generation = meta.generation,
            observed = meta
                .observed_generation
                .map_or("-".to_string(), |g| g.to_string()),
            conditions = conditions.join(" "),
            labels = text(&labels_text(&meta.labels)),
            age = age(meta.created_at),
        );
    }
    body.push_str("</table>");
    let _ = write!(body, "<p class=\"muted\">{} shown", shown.len());
    if let Some(next) = next {
        let selected = selector
            .as_deref()
            .map(|l| format!("&amp;l={}", segment(l)))
            .unwrap_or_default();
        let _ = write!(
            body,
            "; <a href=\"/kinds/{}?after={next}{selected}\">next page</a>",
            segment(kind)
        );
    }
    body.push_str(".</p>");
    let title = if failing {
        format!("{kind}: failing or backing off")
    } else {
        kind.to_string()
    };
    Ok(page(&title, &body))
}

/// What the latest failed pass of `kind`/`name` said: its newest
/// `ReconcileFailed` run's message.
async fn why_failed(ctx: &Context, kind: &str, name: &str) -> Option<String> {
    let request = Request::Events {
        kind: kind.to_string(),
        name: name.to_string(),
        category: Some("reconcile".to_string()),
        selector: None,
    };
    let Ok(Reply::Events { events }) = ask(ctx, request).await else {
        return None;
    };
    events
        .into_iter()
        .filter(|event| event.warning)
        .max_by_key(|event| event.last_at)
        .map(|event| event.message)
}

/// `/objects/KIND/NAME`: what `describe` shows, with its relations as
/// links.
pub async fn object_page(ctx: &Context, kind: &str, name: &str) -> Answer {
    let request = Request::Describe {
        kind: kind.to_string(),
        name: name.to_string(),
    };
    let Reply::Described(description) = ask(ctx, request).await? else {
        return Err(unexpected());
    };
    let mut body = String::new();
    metadata(&mut body, &description);
    conditions(&mut body, &description);
    relations(&mut body, &description);
    let graph = graph::svg(&description, kind, name);
    if !graph.is_empty() {
        body.push_str("<h2>Owner and dependency graph</h2>");
        body.push_str(&graph);
    }
    for (title, value) in [
        ("Spec", Some(&description.object.spec)),
        ("Status", description.object.status.as_ref()),
    ] {
        let shown = value.map_or("(none)".to_string(), |v| {
            serde_json::to_string_pretty(v).unwrap_or_default()
        });
        let _ = write!(body, "<h2>{title}</h2><pre>{}</pre>", text(&shown));
    }
    if !description.events.is_empty() {
        body.push_str("<h2>Event timeline</h2>");
        body.push_str(&timeline::svg(&description.events, Timestamp::now()));
    }
    events(&mut body, &description.events);
    Ok(page(&format!("{kind}/{name}"), &body))
}

fn metadata(body: &mut String, description: &Description) {
    let meta = &description.object.meta;
    let mut rows = vec![
        ("Id", meta.id.to_string()),
        ("Generation", meta.generation.to_string()),
        (
            "Observed generation",
            meta.observed_generation
                .map_or("-".to_string(), |g| g.to_string()),
        ),
        ("Resource version", meta.resource_version.to_string()),
        ("Labels", labels_text(&meta.labels)),
        ("Finalizers", meta.finalizers.join(", ")),
        ("Created", rfc3339(meta.created_at)),
        ("Updated", rfc3339(meta.updated_at)),
    ];
    if let Some(at) = meta.deletion_requested_at {
        rows.push(("Deletion requested", rfc3339(at)));
    }
    if let Some(trace) = &description.last_pass_trace {
        rows.push(("Last trace", trace.clone()));
    }
    body.push_str("<table>");
    for (name, value) in rows {
        let _ = write!(body, "<tr><th>{name}</th><td>{}</td></tr>", text(&value));
    }
    body.push_str("</table>");
}

fn conditions(body: &mut String, description: &Description) {
    let conditions = &description.object.meta.conditions;
    if conditions.is_empty() {
        return;
    }
    body.push_str(
        "<h2>Conditions</h2><table><tr><th>Type</th><th>Status</th><th>Held for</th>\
<th>Reason</th><th>Message</th></tr>",
    );
    for condition in conditions {
        let class = match condition.status {
            ConditionStatus::True => "ok",
            ConditionStatus::False => "bad",
            ConditionStatus::Unknown => "muted",
        };
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"{class}\">{:?}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            text(&condition.type_),
            condition.status,
            held_for(condition.transitioned_at),
            text(&condition.reason),
            text(&condition.message),
        );
    }
    body.push_str("</table>");
}

/// How long a condition has held its status.
fn held_for(since: Timestamp) -> String {
    format!("{} (since {})", age(since), rfc3339(since))
}

fn relations(body: &mut String, description: &Description) {
    let groups: [(&str, Vec<&Related>); 4] = [
        ("Owner", description.owner.iter().collect()),
        ("Owns", description.children.iter().collect()),
        ("Depends on", description.dependencies.iter().collect()),
        ("Dependents", description.dependents.iter().collect()),
    ];
    if groups.iter().all(|(_, related)| related.is_empty()) {
        return;
    }
    body.push_str("<h2>Relations</h2><table>");
    for (title, related) in groups {
        if related.is_empty() {
            continue;
        }
        let links: Vec<String> = related
            .iter()
            .map(|r| {
                format!(
                    "<a href=\"/objects/{}/{}\">{}/{}</a>",
                    segment(&r.kind),
                    segment(&r.name),
                    text(&r.kind),
                    text(&r.name)
                )
            })
            .collect();
        let _ = write!(
            body,
            "<tr><th>{title}</th><td>{}</td></tr>",
            links.join("<br>")
        );
    }
    body.push_str("</table>");
}

fn events(body: &mut String, events: &[EventView]) {
    if events.is_empty() {
        return;
    }
    body.push_str(
        "<h2>Events</h2><table><tr><th>Category</th><th>Type</th><th>Reason</th>\
<th>Message</th><th>Count</th><th>First</th><th>Last</th></tr>",
    );
    for event in events {
        let kind = if event.warning {
            "<span class=\"bad\">Warning</span>"
        } else {
            "Normal"
        };
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{kind}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            text(&event.category),
            text(&event.reason),
            text(&event.message),
            event.count,
            rfc3339(event.first_at),
            rfc3339(event.last_at),
        );
    }
    body.push_str("</table>");
}

/// A p99 pass time: the upper bound of its histogram bucket.
fn p99_text(seconds: f64) -> String {
    match seconds.is_finite() {
        true => format!("≤ {} ms", seconds * 1000.0),
        false => "over the largest bucket".to_string(),
    }
}

/// `Kind.group`, as links and requests name a kind.
fn full_kind(kind: &str, group: &str) -> String {
    match group {
        "" => kind.to_string(),
        group => format!("{kind}.{group}"),
    }
}
