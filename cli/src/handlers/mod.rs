//! What each request does, against a store and, when this process is the
//! host, the running host. The host serves requests with this module and a
//! command with no host to reach runs it itself. One file per family of
//! requests: `apply`, reads (`read`), `wait`, writes by hand (`writes`),
//! what the host serves (`plugins`), and the requests that stream
//! (`streams`); `kinds` resolves the kind a command names.

pub(crate) mod apply;
mod kinds;
mod plugins;
mod read;
mod streams;
mod wait;
mod writes;

pub use self::kinds::resolve_kind;
pub use self::plugins::grants_of;
pub(crate) use self::read::parse_selector;
pub use self::streams::{Following, follow};
pub use self::wait::{describe_until, holds};

use std::sync::Arc;
use std::time::Duration;

use beehive::plugin::Directory;
use beehive::{GroupKind, Host, RawClient, RawObject, Store};

use self::apply::apply;
use self::plugins::{metrics, plugins, version};
use self::read::{describe, events, explain, get, kinds, names, rollouts, selected_events};
pub(crate) use self::read::{failing_objects, objects_page, recent_warnings};
use self::streams::logs;
use self::wait::wait;
use self::writes::{delete, label, patch_spec, remove_finalizer, replace_spec, requeue};
use crate::failure::Failure;
use crate::protocol::{Outcome, Reply, Request};

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
        Request::Apply {
            objects,
            new_kinds,
            force_conflicts,
            dry_run,
            trace,
        } => {
            let how = apply::How {
                new_kinds,
                force_conflicts,
                dry_run,
            };
            apply(ctx, objects, how, trace).await
        }
        Request::Get {
            kind,
            name,
            spec_version,
            selector,
        } => get(
            ctx,
            &kind,
            name.as_deref(),
            spec_version,
            selector.as_deref(),
        ),
        Request::Label {
            kind,
            name,
            set,
            remove,
            overwrite,
        } => label(ctx, &kind, &name, set, remove, overwrite).await,
        Request::Describe { kind, name } => describe(ctx, &kind, &name),
        Request::Delete { kind, name } => delete(ctx, &kind, &name).await,
        Request::ReplaceSpec {
            kind,
            name,
            generation,
            spec,
        } => replace_spec(ctx, &kind, &name, generation, &spec).await,
        Request::Patch {
            kind,
            name,
            patch_type,
            patch,
        } => patch_spec(ctx, &kind, &name, patch_type, &patch).await,
        Request::Events {
            kind,
            name: _,
            category,
            selector: Some(selector),
        } => selected_events(ctx, &kind, &selector, category),
        Request::Events {
            kind,
            name,
            category,
            selector: None,
        } => events(ctx, &kind, &name, category),
        Request::Wait {
            kind,
            name,
            until,
            timeout_ms,
        } => wait(ctx, &kind, &name, &until, Duration::from_millis(timeout_ms)).await,
        Request::Plugins => plugins(ctx),
        Request::Version => Ok(version(ctx)),
        Request::Kinds => kinds(ctx),
        Request::Rollout { kind, history } => rollouts(ctx, &kind, history),
        Request::Backup { file } => crate::backup::take(&ctx.store, file)
            .await
            .map(Reply::BackedUp),
        Request::Names {
            kind,
            prefix,
            limit,
        } => names(ctx, &kind, &prefix, limit),
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

fn find(store: &Store, kind: &str, name: &str) -> Result<(RawClient, RawObject), Failure> {
    let group_kind = resolve_kind(store, kind)?;
    let client = RawClient::new(store, group_kind);
    let object = client.get_by_name(name).map_err(error)?;
    Ok((client, object))
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
