//! Runs a parsed command: through the running host's socket, or, when none
//! runs, on the database itself under its lock.

use std::time::{Duration, Instant};

use crate::endpoint::{Endpoint, Paths};
use crate::failure::{Code, Failure};
use crate::flags::{
    Addressed, Cli, Command, Named, PluginsAction, Printed, RolloutAction, addressed,
};
use crate::get_format::{self, GetOutput};
use crate::handlers::{self, Context};
use crate::output::{self, Format};
use crate::protocol::{Outcome, PluginsView, Reply, Request, TraceAsk, Until};
use crate::{endpoint, explain, failover, manifest, plugin_check, run, scaffold, top};

/// Runs a command and returns what to print.
pub(crate) async fn execute(cli: Cli) -> Result<String, Failure> {
    let mut paths = Paths::new(&cli.db);
    paths.request_timeout = (!cli.request_timeout.is_zero()).then_some(cli.request_timeout);
    let request = match cli.command {
        Command::Run(args) => {
            return run::run(&cli.db, *args).await.map(|()| String::new());
        }
        Command::New {
            name,
            lang,
            kind,
            sdk,
        } => {
            return scaffold::create(&scaffold::NewPlugin {
                name: &name,
                lang,
                kind: kind.as_deref(),
                sdk: sdk.as_deref(),
                parent: std::path::Path::new("."),
            });
        }
        Command::Version { printed } => return version(&paths, printed).await,
        Command::ApiResources { printed } => {
            return match dispatch(&paths, Request::Kinds).await? {
                Reply::Kinds { kinds } => Ok(printed.show(&kinds, |k| output::kinds(k))),
                other => Err(unexpected(&other)),
            };
        }
        Command::Label {
            kind,
            rest,
            overwrite,
        } => {
            let request = label_request(kind, rest, overwrite)?;
            return match dispatch(&paths, request).await? {
                Reply::Done { message } => Ok(message + "\n"),
                other => Err(unexpected(&other)),
            };
        }
        Command::Backup { file } => return crate::backup::backup(&paths, &file).await,
        Command::Restore {
            file: Some(file), ..
        } => return crate::backup::restore(&paths, &file),
        Command::Restore {
            file: None,
            take_lease,
            ..
        } => return crate::backup::prepare_restored(&paths, take_lease).await,
        Command::Rollout { action } => {
            return match action {
                RolloutAction::Status {
                    kind,
                    watch,
                    timeout,
                } => crate::rollout::status(&paths, kind, watch, timeout).await,
                RolloutAction::History { kind, printed } => {
                    crate::rollout::history(&paths, kind, printed).await
                }
            };
        }
        Command::Completions { shell } => return Ok(crate::completion::script(shell)),
        Command::Complete { words } => {
            return Ok(crate::completion::candidates(&paths, words).await);
        }
        Command::Wait {
            object,
            until,
            timeout,
        } => {
            let selector = object.selector.clone();
            if let Some(selector) = &selector {
                crate::handlers::parse_selector(selector)?;
            }
            return wait_on(&paths, object.addressed()?, selector, until, timeout).await;
        }
        Command::Apply {
            file,
            new_kind,
            force_conflicts,
            dry_run,
            trace,
        } => Request::Apply {
            objects: manifest::load(&file)?,
            new_kinds: new_kind,
            force_conflicts,
            dry_run: dry_run.is_some(),
            trace: trace_ask(trace)?,
        },
        Command::Diff { file } => return crate::diff::diff(&paths, &file).await,
        Command::Get {
            kind,
            names,
            output,
            watch: true,
            selector,
            ..
        } => {
            let Addressed { kind, mut names } = addressed(kind, names)?;
            if names.len() > 1 {
                return Err(Failure::usage("get -w follows a kind or one object"));
            }
            let format = output
                .plain()
                .ok_or_else(|| Failure::usage("get -w prints table, wide, json, yaml or name"))?;
            if let Some(selector) = &selector {
                crate::handlers::parse_selector(selector)?;
                if !names.is_empty() {
                    return Err(Failure::usage(
                        "a selector (-l) picks objects of a kind: give the kind alone, without names",
                    ));
                }
            }
            return watch_objects(&paths, kind, names.pop(), format, selector).await;
        }
        Command::Get {
            kind,
            names,
            output,
            sort_by,
            spec_version,
            no_headers,
            selector,
            show_labels,
            kubernetes,
            ..
        } => {
            let listing = Listing {
                output,
                sort_by,
                headers: !no_headers,
                selector,
                show_labels,
                kubernetes,
            };
            return get(&paths, addressed(kind, names)?, &listing, spec_version).await;
        }
        Command::Describe { object, printed } => {
            let Named { kind, name } = object.named()?;
            return match dispatch(&paths, Request::Describe { kind, name }).await? {
                Reply::Described(d) => Ok(printed.show(&*d, output::description)),
                other => Err(unexpected(&other)),
            };
        }
        Command::Logs { kind, name, follow } => {
            let Addressed { kind, mut names } = addressed(kind, name.into_iter().collect())?;
            if names.len() > 1 {
                return Err(Failure::usage("logs takes a kind, or one object"));
            }
            let request = Request::Logs {
                kind,
                name: names.pop(),
                follow,
            };
            return match follow {
                true => follow_logs(&paths, request).await,
                false => match dispatch(&paths, request).await? {
                    Reply::Logs { lines, .. } => Ok(output::log_lines(&lines)),
                    other => Err(unexpected(&other)),
                },
            };
        }
        Command::Events {
            object,
            category,
            watch: true,
            ..
        } => return watch_events(&paths, object.named()?, category).await,
        Command::Events {
            object,
            category,
            printed,
            selector,
            ..
        } => {
            let (kind, name) = match &selector {
                Some(_) => (object.kind_alone()?, String::new()),
                None => {
                    let Named { kind, name } = object.named()?;
                    (kind, name)
                }
            };
            let request = Request::Events {
                kind,
                name,
                category,
                selector,
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
        Command::Plugins {
            printed,
            wait,
            timeout,
            ..
        } => {
            let view = match wait {
                true => plugins_loaded(&paths, timeout).await?,
                false => plugins_view(&paths).await?,
            };
            return Ok(printed.show(&view, output::plugins));
        }
        Command::Top { interval, once } => {
            let mut source = MetricsSource {
                paths: &paths,
                answered: false,
            };
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
        Command::Explain { target, printed } => {
            let (kind, path) = explain::split_target(&target);
            return match dispatch(&paths, Request::Explain { kind }).await? {
                Reply::Schemas(schemas) => match printed.output {
                    Some(_) => Ok(printed.show(&explain::document(&schemas), |_| String::new())),
                    None => explain::explain(&schemas, &path).map_err(Failure::not_found),
                },
                other => Err(unexpected(&other)),
            };
        }
        Command::Metrics => {
            return match dispatch(&paths, Request::Metrics).await? {
                Reply::Metrics { text } => Ok(text),
                other => Err(unexpected(&other)),
            };
        }
        Command::Delete {
            kind: Some(kind),
            selector: Some(selector),
            ignore_not_found,
            ..
        } => {
            crate::handlers::parse_selector(&selector)?;
            let names = names_of(&paths, &kind, Some(selector)).await?;
            if names.is_empty() {
                eprintln!("No objects found.");
            }
            let objects = names.into_iter().map(|name| (kind.clone(), name));
            return delete_each(&paths, objects.collect(), ignore_not_found).await;
        }
        Command::Delete {
            kind: Some(kind),
            all: true,
            ignore_not_found,
            ..
        } => {
            let names = match names_of(&paths, &kind, None).await {
                Ok(names) => names,
                Err(failure) if ignore_not_found && failure.code == Code::NotFound => Vec::new(),
                Err(failure) => return Err(failure),
            };
            if names.is_empty() {
                eprintln!("No objects found.");
            }
            let objects = names.into_iter().map(|name| (kind.clone(), name));
            return delete_each(&paths, objects.collect(), ignore_not_found).await;
        }
        Command::Delete {
            kind: Some(kind),
            names,
            ignore_not_found,
            ..
        } => {
            let Addressed { kind, names } = addressed(kind, names)?;
            if names.is_empty() {
                return Err(Failure::usage(
                    "name the objects: KIND NAME... or KIND/NAME, or --all",
                ));
            }
            let objects = names.into_iter().map(|name| (kind.clone(), name));
            return delete_each(&paths, objects.collect(), ignore_not_found).await;
        }
        Command::Delete {
            file,
            ignore_not_found,
            ..
        } => {
            let file = file.ok_or_else(|| Failure::usage("name the objects, or -f FILE"))?;
            let objects = manifest::load(&file)?
                .iter()
                .map(|m| (m.kind_text(), m.name.clone()))
                .collect();
            return delete_each(&paths, objects, ignore_not_found).await;
        }
        Command::Edit { object } => return crate::edit::edit(&paths, object.named()?).await,
        Command::Patch {
            object,
            patch,
            patch_type,
        } => {
            let Named { kind, name } = object.named()?;
            Request::Patch {
                kind,
                name,
                patch_type,
                patch,
            }
        }
        Command::Requeue { object } => {
            let Named { kind, name } = object.named()?;
            Request::Requeue { kind, name }
        }
        Command::Finalize { object, remove } => {
            let Named { kind, name } = object.named()?;
            Request::RemoveFinalizer {
                kind,
                name,
                finalizer: remove,
            }
        }
    };
    match dispatch(&paths, request).await? {
        Reply::Done { message } => Ok(message + "\n"),
        Reply::Applied {
            results,
            warnings,
            trace_id,
        } => {
            for warning in warnings {
                eprintln!("warning: {warning}");
            }
            if let Some(trace_id) = trace_id {
                eprintln!("trace {trace_id}");
            }
            Ok(results
                .iter()
                .map(|r| match r.after.is_some() {
                    true => format!("{}/{} {} (server dry run)\n", r.kind, r.name, r.action),
                    false => format!("{}/{} {}\n", r.kind, r.name, r.action),
                })
                .collect())
        }
        other => Err(unexpected(&other)),
    }
}

/// How an apply joins a trace: `--trace` starts one; else a `TRACEPARENT`
/// in the environment is its parent, checked here so a malformed one is a
/// usage error before anything is sent.
fn trace_ask(new_trace: bool) -> Result<Option<TraceAsk>, Failure> {
    if new_trace {
        return Ok(Some(TraceAsk::New));
    }
    let Some(parent) = std::env::var("TRACEPARENT")
        .ok()
        .filter(|v| !v.trim().is_empty())
    else {
        return Ok(None);
    };
    beehive::trace::TraceContext::parse(&parent)
        .map_err(|e| Failure::usage(format!("TRACEPARENT: {e}")))?;
    Ok(Some(TraceAsk::Parent(parent)))
}

/// How `get` prints what it found.
struct Listing {
    output: GetOutput,
    sort_by: Option<crate::jsonpath::Path>,
    headers: bool,
    selector: Option<String>,
    show_labels: bool,
    kubernetes: bool,
}

/// `get`: a kind's objects, one object, or several, in one listing.
async fn get(
    paths: &Paths,
    Addressed { kind, names }: Addressed,
    listing: &Listing,
    spec_version: Option<i64>,
) -> Result<String, Failure> {
    if kind.eq_ignore_ascii_case("all") && names.is_empty() {
        return get_all(paths, listing).await;
    }
    if listing.selector.is_some() && !names.is_empty() {
        return Err(Failure::usage(
            "a selector (-l) picks objects of a kind: give the kind alone, without names",
        ));
    }
    if let Some(selector) = &listing.selector {
        crate::handlers::parse_selector(selector)?;
    }
    let single = names.len() == 1;
    let asked: Vec<Option<String>> = match names.is_empty() {
        true => vec![None],
        false => names.into_iter().map(Some).collect(),
    };
    let mut objects = Vec::new();
    for name in asked {
        let request = Request::Get {
            kind: kind.clone(),
            name,
            spec_version,
            selector: listing.selector.clone(),
        };
        match dispatch(paths, request).await? {
            Reply::Objects { objects: found } => objects.extend(found),
            other => return Err(unexpected(&other)),
        }
    }
    let for_people = matches!(
        listing.output,
        GetOutput::Plain(Format::Table | Format::Wide) | GetOutput::Columns(_)
    );
    if objects.is_empty() && for_people {
        // On stderr, as kubectl's: a script reading stdout gets nothing.
        eprintln!("No objects found.");
        return Ok(String::new());
    }
    if let Some(path) = &listing.sort_by {
        objects = get_format::sort(objects, path);
    }
    if listing.kubernetes {
        return kubernetes_shaped(&listing.output, &objects, single);
    }
    if let (GetOutput::Plain(format @ (Format::Table | Format::Wide)), true) =
        (&listing.output, listing.show_labels)
    {
        let table = output::labelled_table(&objects, *format == Format::Wide);
        return Ok(match listing.headers {
            true => table,
            false => table
                .split_once('\n')
                .map_or_else(String::new, |(_, rows)| rows.to_string()),
        });
    }
    Ok(listing.output.render(&objects, single, listing.headers))
}

/// The names of `kind`'s objects: those `selector` picks, or all of them.
async fn names_of(
    paths: &Paths,
    kind: &str,
    selector: Option<String>,
) -> Result<Vec<String>, Failure> {
    let request = Request::Get {
        kind: kind.to_string(),
        name: None,
        spec_version: None,
        selector,
    };
    match dispatch(paths, request).await? {
        Reply::Objects { objects } => {
            Ok(objects.into_iter().map(|o| o.document.meta.name).collect())
        }
        other => Err(unexpected(&other)),
    }
}

/// `get --kubernetes`: the objects as `-o json|yaml` in Kubernetes' shape.
fn kubernetes_shaped(
    output: &GetOutput,
    objects: &[crate::protocol::ObjectView],
    single: bool,
) -> Result<String, Failure> {
    let shaped: Vec<serde_json::Value> = objects
        .iter()
        .map(|o| crate::kube_shape::to_kubernetes(&output::document(o)))
        .collect();
    let value = match (single, shaped.as_slice()) {
        (true, [one]) => one.clone(),
        _ => serde_json::Value::Array(shaped),
    };
    match output.plain() {
        Some(Format::Json) => Ok(output::json(&value)),
        Some(Format::Yaml) => Ok(output::yaml(&value)),
        _ => Err(Failure::usage("--kubernetes prints -o json or -o yaml")),
    }
}

/// `get all`: the objects of every kind that has some, as kubectl's: a
/// table per kind with each name as `Kind.group/name`; in any other format
/// one listing of them all.
async fn get_all(paths: &Paths, listing: &Listing) -> Result<String, Failure> {
    let kinds = match dispatch(paths, Request::Kinds).await? {
        Reply::Kinds { kinds } => kinds,
        other => return Err(unexpected(&other)),
    };
    let mut sections = Vec::new();
    for row in kinds.into_iter().filter(|k| k.objects > 0) {
        let kind = match row.group.is_empty() {
            true => row.kind,
            false => format!("{}.{}", row.kind, row.group),
        };
        let request = Request::Get {
            kind: kind.clone(),
            name: None,
            spec_version: None,
            selector: listing.selector.clone(),
        };
        match dispatch(paths, request).await? {
            Reply::Objects { objects } if !objects.is_empty() => sections.push((kind, objects)),
            Reply::Objects { .. } => {}
            other => return Err(unexpected(&other)),
        }
    }
    if sections.is_empty() {
        eprintln!("No objects found.");
        return Ok(String::new());
    }
    let table = matches!(
        listing.output,
        GetOutput::Plain(Format::Table | Format::Wide)
    );
    if !table {
        let all: Vec<_> = sections
            .into_iter()
            .flat_map(|(_, objects)| objects)
            .collect();
        return Ok(listing.output.render(&all, false, listing.headers));
    }
    let tables: Vec<String> = sections
        .into_iter()
        .map(|(kind, mut objects)| {
            for object in &mut objects {
                object.document.meta.name = format!("{kind}/{}", object.document.meta.name);
            }
            listing.output.render(&objects, false, listing.headers)
        })
        .collect();
    Ok(tables.join("\n"))
}

/// `delete KIND NAME...` or `delete -f FILE`, each object as (kind, name).
/// One object fails as its request does. With several, as kubectl does:
/// each deletion is printed as it lands, each refusal as it comes, and a
/// closing error carries the first refusal's exit code.
async fn delete_each(
    paths: &Paths,
    objects: Vec<(String, String)>,
    ignore_not_found: bool,
) -> Result<String, Failure> {
    let missing = |failure: &Failure| ignore_not_found && failure.code == Code::NotFound;
    if let [(kind, name)] = objects.as_slice() {
        return match delete_one(paths, kind, name).await {
            Err(failure) if missing(&failure) => Ok(String::new()),
            done => done.map(|done| done + "\n"),
        };
    }
    let mut first_refusal: Option<Failure> = None;
    let mut refusals = 0;
    for (kind, name) in &objects {
        match delete_one(paths, kind, name).await {
            Ok(done) => output::print_now(&format!("{done}\n")),
            Err(failure) if missing(&failure) => {}
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
            format!("{refusals} of {} objects not deleted", objects.len()),
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
    /// Whether a host has answered: then a failure means it went away.
    answered: bool,
}

impl top::Source for MetricsSource<'_> {
    async fn fetch(&mut self) -> Result<String, Failure> {
        let reply = dispatch(self.paths, Request::Metrics)
            .await
            .map_err(|failure| match (failure.code, self.answered) {
                (Code::Unreachable, true) => Failure::unreachable(format!(
                    "the host serving {} stopped: top has nothing left to show",
                    self.paths.shown
                )),
                (Code::Unreachable, false) => Failure::unreachable(format!(
                    "top shows a running host's activity, and none serves {}: start one with `beehive run`",
                    self.paths.shown
                )),
                _ => failure,
            })?;
        match reply {
            Reply::Metrics { text } => {
                self.answered = true;
                Ok(text)
            }
            other => Err(unexpected(&other)),
        }
    }
}

pub(crate) fn unexpected(reply: &Reply) -> Failure {
    Failure::from(format!("unexpected reply from the host: {reply:?}"))
}

/// `get -w`: the host streams the snapshot and each change; printed as they
/// come. With a selector the host sends only the objects it picks, and an
/// object that leaves the selection as DELETED, with its new labels.
async fn watch_objects(
    paths: &Paths,
    kind: String,
    name: Option<String>,
    format: Format,
    selector: Option<String>,
) -> Result<String, Failure> {
    let mut printer = output::WatchPrinter::new(format);
    let request = Request::Watch {
        kind,
        name,
        selector,
    };
    follow(paths, request, move |reply| {
        match reply {
            Reply::Objects { objects } => printer.snapshot(&objects),
            Reply::Change(c) => {
                printer.change(&c.change, c.id, c.object.as_ref(), c.resource_version);
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

/// `logs -f`: the lines kept, then each line as it is logged.
async fn follow_logs(paths: &Paths, request: Request) -> Result<String, Failure> {
    follow(paths, request, |reply| {
        match reply {
            Reply::Logs { lines, missed } => {
                if missed > 0 {
                    eprintln!("({missed} lines missed: this reader fell behind)");
                }
                output::print_now(&output::log_lines(&lines));
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

/// `version`: this build, then whoever holds the store; a store that does
/// not exist yet is said so, not made.
async fn version(paths: &Paths, printed: Printed) -> Result<String, Failure> {
    let answered = match no_database(paths) {
        true => None,
        false => match dispatch(paths, Request::Version).await? {
            Reply::Version(view) => Some(view),
            other => return Err(unexpected(&other)),
        },
    };
    let report = output::VersionReport {
        client: output::ClientVersion {
            version: env!("CARGO_PKG_VERSION").to_string(),
            contracts: beehive::plugin::Contract::SERVED
                .iter()
                .map(ToString::to_string)
                .collect(),
        },
        host: answered
            .as_ref()
            .filter(|v| v.host_pid.is_some())
            .map(|v| output::HostVersion {
                version: v.version.clone(),
                contracts: v.contracts.clone(),
                pid: v.host_pid.unwrap_or_default(),
            }),
        store: answered.map(|v| v.store),
        shown: paths.shown.clone(),
    };
    Ok(printed.show(&report, output::version))
}

/// Runs `request` on the host, or here under the lock when none runs.
async fn plugins_view(paths: &Paths) -> Result<PluginsView, Failure> {
    match dispatch(paths, Request::Plugins).await? {
        Reply::Plugins(view) => Ok(view),
        other => Err(unexpected(&other)),
    }
}

/// The plugins once a host serves, has loaded its plugin directory and
/// applied its manifests, and nothing is loading; polled, as a start takes
/// seconds (a host still starting may not have made its database yet).
async fn plugins_loaded(paths: &Paths, timeout: Duration) -> Result<PluginsView, Failure> {
    let deadline = Instant::now() + timeout;
    loop {
        let view = match no_database(paths) {
            true => None,
            false => Some(plugins_view(paths).await?),
        };
        let started = |v: &PluginsView| v.started && v.loading.is_empty();
        match view {
            Some(view) if started(&view) => return Ok(view),
            view if Instant::now() >= deadline => return Err(not_started(paths, view, timeout)),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Why `plugins --wait` gave up: no host came, or its plugins still load.
fn not_started(paths: &Paths, view: Option<PluginsView>, waited: Duration) -> Failure {
    let waited = humantime::format_duration(waited);
    match view.filter(|v| v.running) {
        None => Failure::unreachable(format!(
            "no host served {} within {waited}: start one with `beehive run`",
            paths.shown
        )),
        Some(view) => {
            let files: Vec<&str> = view.loading.iter().map(|l| l.file.as_str()).collect();
            Failure::timeout(format!(
                "plugins still loading after {waited}: {}",
                or_the_directory(&files)
            ))
        }
    }
}

fn or_the_directory(files: &[&str]) -> String {
    match files {
        [] => "the plugin directory".into(),
        files => files.join(", "),
    }
}

pub(crate) async fn dispatch(paths: &Paths, request: Request) -> Outcome {
    let creates = matches!(request, Request::Apply { .. });
    if !creates && no_database(paths) {
        // Refused before the lock is taken, so a failed read leaves no
        // lock file behind in a directory that holds no store.
        return Err(Failure::not_found(format!(
            "no database at {}: nothing has been applied yet (`beehive apply` or `beehive run` make one)",
            paths.shown
        )));
    }
    if paths.is_postgres() {
        return dispatch_riding_out_faults(paths, request).await;
    }
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
            if creates && no_database(paths) {
                eprintln!(
                    "warning: no database at {}: making a new one (pass --db to use another)",
                    paths.shown
                );
            }
            let ctx = open_directly(paths, creates)?;
            handlers::execute(&ctx, request).await
        }
    }
}

/// [`dispatch`] on a PostgreSQL store: a request safe to repeat is sent
/// again when its host stops serving or the database restarts, within the
/// request timeout (see `failover.rs`).
async fn dispatch_riding_out_faults(paths: &Paths, request: Request) -> Outcome {
    let mut attempts = failover::Attempts::new(paths, &request);
    loop {
        let (outcome, back) = attempt(paths, request.clone(), attempts).await?;
        attempts = back;
        match outcome {
            Err(failure) if attempts.again(&failure) => {
                tokio::time::sleep(failover::BETWEEN_ATTEMPTS).await;
            }
            Err(failure) => return Err(attempts.unrepeated(failure)),
            reply => return reply,
        }
    }
}

/// One attempt at `request`: through the host serving the store here, or
/// on the database directly.
async fn attempt(
    paths: &Paths,
    request: Request,
    mut attempts: failover::Attempts,
) -> Result<(Outcome, failover::Attempts), Failure> {
    let through_host = tokio::task::spawn_blocking(move || {
        let endpoint = match attempts.reach() {
            Ok(endpoint) => endpoint,
            Err(failure) => return (Some(Err(failure)), request, attempts),
        };
        let Endpoint::Host(stream) = endpoint else {
            return (None, request, attempts);
        };
        if let Err(failure) = endpoint::be_patient(&stream, attempts.patience()) {
            return (Some(Err(failure)), request, attempts);
        }
        let peer = endpoint::peer_pid(&stream);
        let outcome = endpoint::ask_unless(stream, &request, &mut || attempts.replaced(peer));
        (Some(outcome), request, attempts)
    })
    .await
    .map_err(|e| e.to_string())?;
    let (outcome, request, attempts) = through_host;
    let outcome = match outcome {
        Some(outcome) => outcome,
        None => match open_directly(paths, true) {
            Ok(ctx) => handlers::execute(&ctx, request).await,
            Err(failure) => Err(failure),
        },
    };
    Ok((outcome, attempts))
}

async fn plugins_action(paths: &Paths, action: PluginsAction) -> Result<String, Failure> {
    match action {
        PluginsAction::Check {
            file,
            policy,
            limits,
        } => plugin_check::check(&file, policy.as_deref(), &limits, paths).await,
        PluginsAction::Push {
            file,
            reference: Some(reference),
            ..
        } => crate::registry::push(&file, &reference).await,
        PluginsAction::Pull {
            reference,
            output,
            timeout,
        } => crate::registry::pull(&reference, output.as_deref(), timeout).await,
        pushed => pushed_plugins_action(paths, pushed).await,
    }
}

/// push, remove and list: a PostgreSQL store's plugin set.
async fn pushed_plugins_action(paths: &Paths, action: PluginsAction) -> Result<String, Failure> {
    if !paths.is_postgres() {
        return Err(format!(
            "{}: plugins are pushed into a PostgreSQL store; a SQLite host serves its plugin directory",
            paths.shown
        )
        .into());
    }
    let store = paths.open_store()?;
    match action {
        PluginsAction::Push {
            file, name, policy, ..
        } => {
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
        PluginsAction::Check { .. } | PluginsAction::Pull { .. } => Err(Failure::usage(
            "check and pull work on files, not the store",
        )),
    }
}

/// The database, opened by a command that holds the lock. Reads never
/// create it.
/// Whether `--db` names a SQLite file that does not exist (and no host is
/// serving one there).
pub(crate) fn no_database(paths: &Paths) -> bool {
    !paths.is_postgres() && !paths.db.exists() && !paths.socket.exists()
}

fn open_directly(paths: &Paths, create: bool) -> Result<Context, Failure> {
    if !create && no_database(paths) {
        return Err(Failure::not_found(format!(
            "no database at {}: nothing has been applied yet (`beehive apply` or `beehive run` make one)",
            paths.shown
        )));
    }
    let store = paths.open_store()?;
    Ok(Context {
        store,
        host: None,
        plugins: None,
        started: Default::default(),
    })
}

/// `wait` on the object addressed, or on every object of the kind when no
/// name is (`--all`): each in turn, within one timeout.
async fn wait_on(
    paths: &Paths,
    Addressed { kind, names }: Addressed,
    selector: Option<String>,
    until: Until,
    timeout: Duration,
) -> Result<String, Failure> {
    let names = match names.is_empty() {
        false => names,
        true => names_of(paths, &kind, selector).await?,
    };
    if names.is_empty() && until != Until::Deleted {
        return Err(Failure::new(
            Code::NotFound,
            format!("no {kind} objects to wait on"),
        ));
    }
    let deadline = Instant::now() + timeout;
    let mut said = String::new();
    for name in names {
        let named = Named {
            kind: kind.clone(),
            name,
        };
        said.push_str(&wait(paths, named, until.clone(), deadline, timeout).await?);
    }
    Ok(said)
}

/// `wait`: a host answers once the condition holds; with no host, the
/// command looks again every 100 ms, taking the lock only to look, so a
/// host can start meanwhile.
/// It gives up at `deadline`; `timeout` is what the operator asked for,
/// for the message.
async fn wait(
    paths: &Paths,
    Named { kind, name }: Named,
    until: Until,
    deadline: Instant,
    timeout: Duration,
) -> Result<String, Failure> {
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
                // The host answers when the wait ends: give it that long too.
                endpoint::be_patient(&stream, paths.request_timeout.map(|t| t + left))?;
                let request = Request::Wait {
                    kind: kind.clone(),
                    name: name.clone(),
                    until: until.clone(),
                    timeout_ms: left.as_millis() as u64,
                };
                let reply = tokio::task::spawn_blocking(move || endpoint::ask(stream, &request))
                    .await
                    .map_err(|e| e.to_string())?;
                return match reply {
                    Ok(Reply::Done { message }) => Ok(message + "\n"),
                    Ok(other) => Err(unexpected(&other)),
                    // The host was given what was left of the timeout: say
                    // the one the operator asked for.
                    Err(failure) if failure.code == Code::Timeout => {
                        Err(Failure::timeout(format!(
                            "timed out after {} waiting until {kind}/{name} is {}",
                            humantime::format_duration(timeout),
                            handlers::describe_until(&until)
                        )))
                    }
                    Err(failure) => Err(failure),
                };
            }
            Endpoint::Direct(_lock) => {
                let ctx = open_directly(paths, false)?;
                let group_kind = handlers::resolve_kind(&ctx.store, &kind)?;
                handlers::holds(
                    &beehive::RawClient::new(&ctx.store, group_kind),
                    &name,
                    &until,
                )?
            }
        };
        if holds {
            return Ok(format!(
                "{kind}/{name}: {}\n",
                handlers::describe_until(&until)
            ));
        }
        if left.is_zero() {
            return Err(Failure::timeout(format!(
                "timed out after {} waiting until {kind}/{name} is {} (no host is running)",
                humantime::format_duration(timeout),
                handlers::describe_until(&until)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100).min(left)).await;
    }
}

/// `label KIND NAME CHANGES...` (or `label KIND/NAME CHANGES...`) as its
/// request: `k=v` sets, `k-` removes.
fn label_request(kind: String, mut rest: Vec<String>, overwrite: bool) -> Result<Request, Failure> {
    let (kind, name) = match kind.split_once('/') {
        Some((kind, name)) => (kind.to_string(), name.to_string()),
        None if !rest.is_empty() => (kind, rest.remove(0)),
        None => return Err(Failure::usage("name the object: KIND NAME or KIND/NAME")),
    };
    if rest.is_empty() {
        return Err(Failure::usage(
            "say what to change: key=value sets a label, key- removes one",
        ));
    }
    let (mut set, mut remove) = (std::collections::BTreeMap::new(), Vec::new());
    for change in rest {
        if let Some((key, value)) = change.split_once('=') {
            if let Some(problem) = beehive::object::label_problem(key, value) {
                return Err(Failure::usage(problem));
            }
            set.insert(key.to_string(), value.to_string());
        } else if let Some(key) = change.strip_suffix('-') {
            remove.push(key.to_string());
        } else {
            return Err(Failure::usage(format!(
                "{change:?} is not a change: key=value sets a label, key- removes one"
            )));
        }
    }
    Ok(Request::Label {
        kind,
        name,
        set,
        remove,
        overwrite,
    })
}
