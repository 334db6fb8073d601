//! How replies are printed: tables and descriptions for people, JSON and
//! YAML for scripts.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use beehive::{ConditionStatus, object::Timestamp};
use clap::ValueEnum;

use beehive::naming::escape;

use crate::protocol::{
    Description, EventView, LimitsView, LogLineView, ObjectView, PluginsView, Related,
};
use beehive::object::ObjectDocument;

/// `-o` for `get`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table: NAME, GENERATION, OBSERVED, READY, AGE.
    Table,
    /// The table with the kind, id, conditions and deletion.
    Wide,
    /// JSON: one object, or a list.
    Json,
    /// YAML: one object, or a list.
    Yaml,
    /// `Kind.group/name`, one per line.
    Name,
}

/// Objects as `format` says; `single` when one was asked for by name.
pub fn objects(objects: &[ObjectView], format: Format, single: bool) -> String {
    match format {
        Format::Json if single => json(&objects[0]),
        Format::Json => json(&objects),
        Format::Yaml if single => yaml(&objects[0]),
        Format::Yaml => yaml(&objects),
        Format::Name => objects
            .iter()
            .map(|o| format!("{}/{}\n", kind_of(&o.document), o.document.meta.name))
            .collect(),
        Format::Table | Format::Wide => table(objects, format == Format::Wide),
    }
}

/// Pretty JSON with a final newline, timestamps as RFC 3339.
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    // Serializing plain data to a string cannot fail.
    serde_json::to_string_pretty(&for_people(value)).unwrap_or_default() + "\n"
}

/// YAML, timestamps as RFC 3339.
pub fn yaml<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_norway::to_string(&for_people(value)).unwrap_or_default()
}

/// `value` as JSON with the host's timestamps (milliseconds since the
/// epoch, in fields named `…At`) written as RFC 3339, as kubectl prints
/// them. Documents (`spec`, `status`, an event's `detail`) are the user's
/// and are left as they are.
/// An object as `-o json` prints it, for jsonpath templates and columns.
pub fn document(object: &ObjectView) -> serde_json::Value {
    for_people(object)
}

pub fn for_people<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Value {
    let mut value = serde_json::to_value(value).unwrap_or_default();
    rfc3339_times(&mut value);
    value
}

fn rfc3339_times(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                if matches!(key.as_str(), "spec" | "status" | "detail") {
                    continue;
                }
                match field.as_i64() {
                    Some(ms) if key.ends_with("At") || key.ends_with("_at") => {
                        let at = system_time(Timestamp::from_millis(ms));
                        let text = humantime::format_rfc3339_millis(at).to_string();
                        *field = serde_json::Value::String(text);
                    }
                    _ => rfc3339_times(field),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(rfc3339_times),
        _ => {}
    }
}

fn kind_of(object: &ObjectDocument) -> String {
    if object.meta.group_kind.group.is_empty() {
        object.meta.group_kind.kind.clone()
    } else {
        format!(
            "{}.{}",
            object.meta.group_kind.kind, object.meta.group_kind.group
        )
    }
}

fn table(objects: &[ObjectView], wide: bool) -> String {
    table_with(objects, wide, false)
}

/// The table, with a LABELS column (`--show-labels`): `k=v,k=v`, or
/// `<none>`.
pub fn labelled_table(objects: &[ObjectView], wide: bool) -> String {
    table_with(objects, wide, true)
}

fn table_with(objects: &[ObjectView], wide: bool, labels: bool) -> String {
    if objects.is_empty() {
        return "No objects found.\n".into();
    }
    let mut header = table_header(wide);
    if labels {
        header.push("LABELS");
    }
    columns(
        &header,
        objects.iter().map(|o| {
            let mut row = table_row(&o.document, wide);
            if let Some(at) = o.last_pass_failed_at {
                row[3] = format!("{} (last pass failed {} ago)", row[3], age(at));
            }
            if labels {
                row.push(labels_text(&o.document.meta.labels));
            }
            row
        }),
    )
}

/// Labels as kubectl lists them: `k=v,k=v`, or `<none>`.
pub fn labels_text(labels: &beehive::object::Labels) -> String {
    match labels.is_empty() {
        true => "<none>".into(),
        false => labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn table_header(wide: bool) -> Vec<&'static str> {
    let mut header = vec!["NAME", "GENERATION", "OBSERVED", "READY", "AGE"];
    if wide {
        header.extend(["KIND", "ID", "CONDITIONS", "DELETING"]);
    }
    header
}

fn table_row(o: &ObjectDocument, wide: bool) -> Vec<String> {
    let mut row = vec![
        o.meta.name.clone(),
        o.meta.generation.to_string(),
        o.meta
            .observed_generation
            .map_or_else(|| "-".into(), |g| g.to_string()),
        ready(o),
        age(o.meta.created_at),
    ];
    if wide {
        let conditions: Vec<String> = o
            .meta
            .conditions
            .iter()
            .map(|c| format!("{}={}", c.type_, c.status.as_str()))
            .collect();
        row.extend([
            kind_of(o),
            o.meta.id.to_string(),
            or_dash(conditions.join(",")),
            o.meta.deletion_requested_at.map_or_else(|| "-".into(), age),
        ]);
    }
    row
}

/// Prints a watch as it goes: a table row, a name or a JSON line per change,
/// the snapshot first, each as `ADDED`.
pub struct WatchPrinter {
    format: Format,
    /// The last state of each object seen, to show what a deletion removed.
    seen: std::collections::HashMap<i64, ObjectView>,
    widths: Vec<usize>,
}

impl WatchPrinter {
    pub fn new(format: Format) -> Self {
        WatchPrinter {
            format,
            seen: Default::default(),
            widths: Vec::new(),
        }
    }

    pub fn snapshot(&mut self, objects: &[ObjectView]) {
        if !matches!(self.format, Format::Table | Format::Wide) {
            for o in objects {
                self.change("ADDED", o.document.meta.id, Some(o), None);
            }
            return;
        }
        let mut header = vec!["EVENT".to_string()];
        header.extend(
            table_header(self.format == Format::Wide)
                .iter()
                .map(|h| h.to_string()),
        );
        let rows: Vec<Vec<String>> = objects
            .iter()
            .map(|o| self.row("ADDED", &o.document))
            .collect();
        // Later rows reuse these widths; "MODIFIED" is the widest event.
        self.widths = (0..header.len())
            .map(|i| {
                let widest = rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
                widest.max(header[i].len()).max(if i == 0 { 8 } else { 0 })
            })
            .collect();
        let mut text = self.padded(&header);
        for row in &rows {
            text.push_str(&self.padded(row));
        }
        print_now(&text);
        for o in objects {
            self.seen.insert(o.document.meta.id, o.clone());
        }
    }

    fn padded(&self, cells: &[String]) -> String {
        let mut line = String::new();
        for (cell, width) in cells.iter().zip(&self.widths) {
            let _ = write!(line, "{cell:<width$}  ");
        }
        format!("{}\n", line.trim_end())
    }

    fn row(&self, event: &str, o: &ObjectDocument) -> Vec<String> {
        let mut row = vec![event.to_string()];
        row.extend(table_row(o, self.format == Format::Wide));
        row
    }

    /// Prints one change; `position` is where a reader may resume after
    /// it (none for the snapshot's lines).
    pub fn change(
        &mut self,
        event: &str,
        id: i64,
        object: Option<&ObjectView>,
        position: Option<i64>,
    ) {
        // A deletion without its final state shows the last one seen.
        let last = match object {
            Some(o) => Some(o.clone()),
            None => self.seen.get(&id).cloned(),
        };
        if event == "DELETED" {
            self.seen.remove(&id);
        } else if let Some(o) = &last {
            self.seen.insert(id, o.clone());
        }
        let text = match (self.format, &last) {
            (Format::Json | Format::Yaml, _) => {
                let mut change = serde_json::json!({ "type": event, "id": id, "object": object });
                if let Some(position) = position {
                    change["resourceVersion"] = position.into();
                }
                match self.format {
                    // One YAML document per change, as `kubectl get -w -o yaml`.
                    Format::Yaml => format!("---\n{}", yaml(&change)),
                    _ => format!("{}\n", for_people(&change)),
                }
            }
            (Format::Name, Some(o)) => {
                format!(
                    "{event} {}/{}\n",
                    kind_of(&o.document),
                    o.document.meta.name
                )
            }
            (Format::Table | Format::Wide, Some(o)) => self.padded(&self.row(event, &o.document)),
            (_, None) => format!("{event} #{id}\n"),
        };
        print_now(&text);
    }
}

/// Plugin log lines: when, the level, the object of the pass (or the plugin,
/// outside one), and the message.
pub fn log_lines(lines: &[LogLineView]) -> String {
    let mut out = String::new();
    for line in lines {
        let at = humantime::format_rfc3339_millis(system_time(line.at));
        let about = match line.object.is_empty() {
            true => format!("[{}]", line.plugin),
            false => line.object.clone(),
        };
        let _ = writeln!(
            out,
            "{at} {:<5} {}: {}",
            line.level,
            escape(&about),
            escape(&line.message)
        );
    }
    out
}

/// Prints and flushes at once: streamed output must not sit in a buffer.
pub fn print_now(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    // A closed stdout (a pipe to `head`) ends the watch on the next write.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// The READY column: `Deleting` once deletion was requested (the row stays
/// until finalizers and owned children let it go), else the `Ready`
/// condition if there is one, otherwise how many conditions are True,
/// otherwise `-`.
fn ready(object: &ObjectDocument) -> String {
    if object.meta.deletion_requested_at.is_some() {
        return "Deleting".into();
    }
    if let Some(ready) = object.meta.condition("Ready") {
        return ready.status.as_str().into();
    }
    if object.meta.conditions.is_empty() {
        return "-".into();
    }
    let holding = object
        .meta
        .conditions
        .iter()
        .filter(|c| c.status == ConditionStatus::True)
        .count();
    format!("{holding}/{}", object.meta.conditions.len())
}

fn or_dash(text: String) -> String {
    if text.is_empty() { "-".into() } else { text }
}

/// Left-aligned columns, two spaces apart.
/// Every cell is escaped: stored text never moves the terminal's cursor or
/// starts a line of its own.
pub fn columns(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut all: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    all.extend(rows.map(|row| row.iter().map(|c| escape(c).into_owned()).collect()));
    // A column is padded to its widest cell, up to a bound: a format width
    // past u16::MAX panics, and a row stored before names had a limit may
    // hold any length.
    const WIDEST: usize = 256;
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            all.iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                .min(WIDEST)
        })
        .collect();
    let mut out = String::new();
    for row in all {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A limit in milliseconds, short: `300ms`, `10s`, `2m`.
fn short_millis(ms: u64) -> String {
    if ms < 1000 || !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else {
        short_duration(Duration::from_millis(ms))
    }
}

/// How long ago, kubectl style: `42s`, `5m`, `3h`, `2d`.
pub fn age(at: Timestamp) -> String {
    short_duration(at.elapsed())
}

fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn system_time(at: Timestamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(at.as_millis().max(0) as u64)
}

/// `2026-11-30T16:40:00Z`.
pub fn rfc3339(at: Timestamp) -> String {
    humantime::format_rfc3339_seconds(system_time(at)).to_string()
}

/// `16:40:00`, UTC.
fn clock(at: Timestamp) -> String {
    rfc3339(at)[11..19].to_string()
}

fn related_list(items: &[Related]) -> String {
    if items.is_empty() {
        return "<none>".into();
    }
    items
        .iter()
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A JSON document indented under a heading.
fn indented_json(value: &serde_json::Value) -> String {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
    pretty.lines().map(|l| format!("  {l}\n")).collect()
}

/// `describe`'s page.
pub fn description(d: &Description) -> String {
    let o = &d.object;
    let mut out = String::new();
    let mut field = |name: &str, value: String| {
        let _ = writeln!(out, "{:<14}{}", format!("{name}:"), escape(&value));
    };
    field("Name", o.meta.name.clone());
    field("Kind", kind_of(o));
    field("Id", o.meta.id.to_string());
    field("Labels", labels_text(&o.meta.labels));
    let observed = o
        .meta
        .observed_generation
        .map_or_else(|| "never observed".into(), |g| format!("observed {g}"));
    field("Generation", format!("{} ({observed})", o.meta.generation));
    field(
        "Created",
        format!(
            "{} ({} ago)",
            rfc3339(o.meta.created_at),
            age(o.meta.created_at)
        ),
    );
    if let Some(at) = o.meta.deletion_requested_at {
        field(
            "Deleting",
            format!("since {} ({} ago)", rfc3339(at), age(at)),
        );
    }
    field("Finalizers", or_none(o.meta.finalizers.join(", ")));
    field(
        "Owner",
        d.owner
            .as_ref()
            .map_or_else(|| "<none>".into(), |r| format!("{}/{}", r.kind, r.name)),
    );
    field("Children", related_list(&d.children));
    field("Depends on", related_list(&d.dependencies));
    field("Dependents", related_list(&d.dependents));
    field("Next pass", next_pass(d));
    if let Some(trace) = &d.last_pass_trace {
        field("Last trace", trace.clone());
    }
    out.push_str("Spec:\n");
    out.push_str(&indented_json(&o.spec));
    out.push_str("Status:\n");
    match &o.status {
        Some(status) => out.push_str(&indented_json(status)),
        None => out.push_str("  <none>\n"),
    }
    out.push_str("Conditions:\n");
    out.push_str(&conditions(o));
    out.push_str("Events (newest first):\n");
    if d.events.is_empty() {
        out.push_str("  <none>\n");
    } else {
        for line in events(&d.events).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

fn or_none(text: String) -> String {
    if text.is_empty() {
        "<none>".into()
    } else {
        text
    }
}

fn next_pass(d: &Description) -> String {
    match &d.next_pass {
        None => "no host is running".into(),
        Some(next) => match next.at {
            None => "none scheduled (drivers may still pick it up)".into(),
            Some(at) => {
                let wait = system_time(at)
                    .duration_since(SystemTime::now())
                    .unwrap_or_default();
                if wait.is_zero() {
                    "now".into()
                } else {
                    format!("in {}", short_duration(wait))
                }
            }
        },
    }
}

fn conditions(o: &ObjectDocument) -> String {
    if o.meta.conditions.is_empty() {
        return "  <none>\n".into();
    }
    let rows = o.meta.conditions.iter().map(|c| {
        let since = if c.unconfirmed {
            "unconfirmed since restart".into()
        } else {
            age(c.transitioned_at)
        };
        vec![
            c.type_.clone(),
            c.status.as_str().into(),
            or_dash(c.reason.clone()),
            since,
            c.message.clone(),
        ]
    });
    columns(&["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"], rows)
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect()
}

/// An event timeline, newest first: time, ✓/✗, reason, ×count, window, message.
pub fn events(events: &[EventView]) -> String {
    if events.is_empty() {
        return "No events.\n".into();
    }
    // Several objects' runs (`events -l`): which object each is.
    if events.iter().any(|e| e.object.is_some()) {
        let header: Vec<&str> = std::iter::once("OBJECT").chain(EVENT_HEADER).collect();
        let rows = events.iter().map(|e| {
            let object = e
                .object
                .as_deref()
                .map_or_else(String::new, |o| escape(o).into_owned());
            std::iter::once(object).chain(event_cells(e)).collect()
        });
        return columns(&header, rows);
    }
    columns(&EVENT_HEADER, events.iter().map(event_cells))
}

const EVENT_HEADER: [&str; 6] = ["TIME", "REASON", "COUNT", "WINDOW", "CATEGORY", "MESSAGE"];

fn event_cells(e: &EventView) -> Vec<String> {
    let mark = if e.warning { "✗" } else { "✓" };
    let window = if e.count > 1 {
        format!("{}–{}", clock(e.first_at), clock(e.last_at))
    } else {
        String::new()
    };
    let category = if e.category.is_empty() {
        String::new()
    } else {
        format!("[{}]", e.category)
    };
    let message = if e.message.is_empty() {
        String::new()
    } else {
        format!("{:?}", e.message)
    };
    vec![
        clock(e.last_at),
        format!("{mark} {}", e.reason),
        format!("×{}", e.count),
        window,
        category,
        message,
    ]
}

/// `events -w`: the timeline so far, then each run as it is written (a new
/// run, or one an occurrence extended), one line each.
pub fn event_run(e: &EventView) -> String {
    let cells = event_cells(e);
    let line = cells
        .iter()
        .filter(|c| !c.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join("  ");
    format!("{line}\n")
}

/// `plugins`' table.
pub fn plugins(view: &PluginsView) -> String {
    let mut out = String::new();
    if let Some(active) = &view.active_host {
        out.push_str(&match active.live {
            true => format!(
                "Active host: {} (tenure {})\n",
                active.holder, active.tenure
            ),
            false => format!(
                "No active host: the last, {} (tenure {}), let its lease lapse\n",
                active.holder, active.tenure
            ),
        });
    }
    if let Some(why) = &view.not_ready {
        out.push_str(&format!("Not ready: {why}\n"));
    }
    if !view.running {
        out.push_str("No host is running; the registrations it last recorded:\n");
    }
    if view.plugins.is_empty() {
        out.push_str("No plugins.\n");
    } else {
        let rows = view.plugins.iter().map(|p| {
            let limits = |f: fn(&LimitsView) -> String| p.limits.as_ref().map_or("-".into(), f);
            vec![
                p.kind.clone(),
                p.content_hash
                    .as_deref()
                    .map_or_else(|| "-".into(), |h| h.chars().take(12).collect()),
                p.contract.clone().unwrap_or_else(|| "-".into()),
                limits(|l| l.concurrency.to_string()),
                limits(|l| short_millis(l.pass_deadline_ms)),
                limits(|l| short_millis(l.pass_wall_limit_ms)),
                limits(|l| format!("{}Mi", l.memory_bytes >> 20)),
                p.source.clone(),
                limits(|l| {
                    if l.grants.is_empty() {
                        "-".into()
                    } else {
                        l.grants.join(",")
                    }
                }),
                p.signer
                    .as_deref()
                    .map_or_else(|| "-".into(), |s| escape(s).into_owned()),
            ]
        });
        out.push_str(&columns(
            &[
                "KIND", "VERSION", "CONTRACT", "WORKERS", "CPU", "WALL", "MEMORY", "SOURCE",
                "GRANTS", "SIGNER",
            ],
            rows,
        ));
    }
    for plugin in view
        .plugins
        .iter()
        .filter(|p| p.tier.as_deref() == Some("baseline"))
    {
        let _ = writeln!(
            out,
            "BASELINE {}: served from quick baseline code until its optimized code is compiled",
            escape(&plugin.source)
        );
    }
    for failure in &view.failures {
        let _ = writeln!(out, "FAILED  {}", escape(&failure.error));
    }
    for loading in &view.loading {
        let _ = writeln!(
            out,
            "LOADING {} ({:.1} MB, for {})",
            escape(&loading.file),
            loading.bytes as f64 / 1e6,
            short_millis(loading.for_ms)
        );
    }
    if view.running && !view.started && view.loading.is_empty() {
        out.push_str("STARTING: loading the plugin directory, then applying manifests\n");
    }
    out
}

/// `api-resources`'s table: a row per kind.
pub fn kinds(kinds: &[crate::protocol::KindRow]) -> String {
    if kinds.is_empty() {
        return "No kinds yet.\n".into();
    }
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let rows = kinds.iter().map(|k| {
        vec![
            k.kind.clone(),
            or_dash(Some(k.group.clone()).filter(|g| !g.is_empty())),
            or_dash(k.source.clone()),
            or_dash(k.spec_version.map(|v| v.to_string())),
            or_dash(k.status_version.map(|v| v.to_string())),
            k.objects.to_string(),
            k.unsettled.to_string(),
        ]
    });
    columns(
        &[
            "KIND",
            "GROUP",
            "SERVED BY",
            "SPEC",
            "STATUS",
            "OBJECTS",
            "UNSETTLED",
        ],
        rows,
    )
}

/// What `version` prints: this build, the host that answered (if one
/// runs) and the store.
#[derive(serde::Serialize)]
pub struct VersionReport {
    pub client: ClientVersion,
    pub host: Option<HostVersion>,
    pub store: Option<crate::protocol::StoreView>,
    /// The store as `--db` names it, for the text when there is none.
    #[serde(skip)]
    pub shown: String,
}

/// This build.
#[derive(serde::Serialize)]
pub struct ClientVersion {
    pub version: String,
    pub contracts: Vec<String>,
}

/// The running host that answered.
#[derive(serde::Serialize)]
pub struct HostVersion {
    pub version: String,
    pub contracts: Vec<String>,
    pub pid: u32,
}

/// `version`'s text: one line for each of the client, the host and the
/// store.
pub fn version(report: &VersionReport) -> String {
    let client = &report.client;
    let host = match &report.host {
        Some(h) => format!(
            "beehive {}, pid {}, contract {}",
            h.version,
            h.pid,
            h.contracts.join(", ")
        ),
        None => "none running".into(),
    };
    let store = match &report.store {
        Some(s) => format!(
            "{} ({}), schema version {}",
            s.location, s.backend, s.schema_version
        ),
        None => format!("none at {} yet", report.shown),
    };
    format!(
        "Client:  beehive {}, contract {}\nHost:    {host}\nStore:   {store}\n",
        client.version,
        client.contracts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::PluginRow;

    #[test]
    fn a_plugin_on_baseline_code_gets_a_line_saying_so() {
        let row = |source: &str, tier: &str| PluginRow {
            kind: "Service.py.example.dev".into(),
            source: source.into(),
            content_hash: None,
            limits: None,
            tier: Some(tier.into()),
            contract: Some("0.2.0".into()),
            signer: Some("unsigned".into()),
        };
        let view = PluginsView {
            running: true,
            active_host: None,
            not_ready: None,
            plugins: vec![
                row("plugins/a.wasm", "baseline"),
                row("plugins/b.wasm", "optimized"),
            ],
            failures: Vec::new(),
            loading: Vec::new(),
            started: true,
        };
        let shown = plugins(&view);
        assert!(shown.contains("BASELINE plugins/a.wasm: served from quick baseline code"));
        assert!(!shown.contains("BASELINE plugins/b.wasm"), "{shown}");
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(short_duration(Duration::from_secs(5)), "5s");
        assert_eq!(short_duration(Duration::from_secs(300)), "5m");
        assert_eq!(short_duration(Duration::from_secs(3 * 3600)), "3h");
        assert_eq!(short_duration(Duration::from_secs(3 * 86_400)), "3d");
    }

    #[test]
    fn cells_of_any_length_or_content_print_on_one_line() {
        let huge = "g".repeat(200 << 10);
        let rows = vec![
            vec![huge.clone(), "1".into()],
            vec!["forged\nERROR line\x1b[2J".into(), "2".into()],
        ];
        let table = columns(&["KIND", "N"], rows.into_iter());
        assert_eq!(table.lines().count(), 3, "{}", &table[..200]);
        assert!(!table.contains('\x1b'));
    }

    #[test]
    fn timestamps_print_as_rfc3339_but_documents_stay_as_written() {
        let value = serde_json::json!({
            "createdAt": 1_700_000_000_123i64,
            "conditions": [{"transitionedAt": 0}],
            "spec": {"createdAt": 5},
        });
        let printed = for_people(&value);
        assert_eq!(printed["createdAt"], "2023-11-14T22:13:20.123Z");
        assert_eq!(
            printed["conditions"][0]["transitionedAt"],
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(printed["spec"]["createdAt"], 5);
    }

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["a".to_string(), "1".into()],
            vec!["long".into(), "2".into()],
        ];
        assert_eq!(
            columns(&["NAME", "N"], rows.into_iter()),
            "NAME  N\na     1\nlong  2\n"
        );
    }
}
