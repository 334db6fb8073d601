//! Requests that stream: a watch of objects or of an object's events, and
//! plugin log lines, each until either side hangs up.

use std::sync::Arc;

use beehive::plugin::Directory;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use super::kinds::resolve_kind;
use super::read::event_view;
use super::{Context, error, find, watching_client};
use crate::failure::Failure;
use crate::object_view::OwnerNames;
use crate::protocol::{Change, LogLineView, Outcome, Reply, Request};

/// What a watch request answers: a snapshot, then a reply per change until
/// the stream ends; its last item says why.
pub struct Following {
    pub snapshot: Reply,
    pub replies: BoxStream<'static, Outcome>,
}

/// Starts the watch a streaming request (`Watch`, `WatchEvents`) asks for.
pub fn follow(ctx: &Context, request: Request) -> Result<Following, Failure> {
    match request {
        Request::Watch {
            kind,
            name,
            selector,
        } => watch(ctx, &kind, name.as_deref(), selector.as_deref()),
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
pub(super) fn logs(ctx: &Context, kind: &str, name: Option<&str>) -> Outcome {
    let (directory, filter) = log_filter(ctx, kind, name)?;
    Ok(Reply::Logs {
        lines: log_views(directory.logs().recent(), &filter),
        missed: 0,
    })
}

/// Those lines, then each such line as a plugin logs it.
pub(super) fn follow_logs(
    ctx: &Context,
    kind: &str,
    name: Option<&str>,
) -> Result<Following, Failure> {
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
pub(super) struct LogFilter {
    /// `Kind.group/`, how the objects' labels start.
    prefix: String,
    name: Option<String>,
    /// The plugin serving the kind: its lines outside passes are the kind's.
    plugin: Option<String>,
}

impl LogFilter {
    pub(super) fn matches(&self, line: &beehive::plugin::LogLine) -> bool {
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

pub(super) fn log_filter(
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

pub(super) fn log_views(
    lines: Vec<beehive::plugin::LogLine>,
    filter: &LogFilter,
) -> Vec<LogLineView> {
    lines
        .into_iter()
        .filter(|line| filter.matches(line))
        .map(log_view)
        .collect()
}

pub(super) fn log_view(line: beehive::plugin::LogLine) -> LogLineView {
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
pub(super) fn watch_events(
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
pub(super) fn watch(
    ctx: &Context,
    kind: &str,
    name: Option<&str>,
    selector: Option<&str>,
) -> Result<Following, Failure> {
    let mut options = beehive::client::WatchOptions::new();
    if let Some(selector) = selector {
        options = options.selector(super::parse_selector(selector)?);
    }
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

pub(super) fn change_reply(
    change: beehive::client::ObjectChange,
    owners: &mut OwnerNames,
) -> Reply {
    Reply::Change(Box::new(Change {
        change: format!("{:?}", change.change).to_uppercase(),
        id: change.id,
        object: change.object.as_ref().map(|o| owners.view(o)),
        resource_version: Some(change.resource_version),
    }))
}
