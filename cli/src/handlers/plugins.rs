//! What the host serves: `plugins` and `metrics`.

use super::{Context, error, millis};
use crate::failure::Failure;
use crate::protocol::{
    ActiveHostView, HttpLimitsView, LimitsView, LoadingRow, Outcome, PluginFailure, PluginRow,
    PluginsView, Reply, StoreView, VersionView,
};

pub(super) fn plugins(ctx: &Context) -> Outcome {
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
                    content_hash: Some(s.content_hash.clone()),
                    tier: Some(s.tier().to_string()),
                    contract: Some(s.contract().version().to_string()),
                    signer: Some(
                        s.signer
                            .as_ref()
                            .map_or_else(|| "unsigned".to_string(), ToString::to_string),
                    ),
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
                    tier: None,
                    contract: None,
                    signer: None,
                })
                .collect(),
            failures: Vec::new(),
            loading: Vec::new(),
            started: false,
        },
    };
    Ok(Reply::Plugins(view))
}

/// The files the host is loading, then those it has not noticed yet (just
/// dropped, changed or removed): `plugins --wait` waits for both.
pub(super) fn loading_rows(directory: &beehive::plugin::Directory) -> Vec<LoadingRow> {
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

pub(super) fn metrics(ctx: &Context) -> Outcome {
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

/// Which build answers `version`, the contract it serves and the store's
/// schema; a host names its process.
pub(super) fn version(ctx: &Context) -> Reply {
    Reply::Version(VersionView {
        version: env!("CARGO_PKG_VERSION").to_string(),
        contracts: beehive::plugin::Contract::SERVED
            .iter()
            .map(ToString::to_string)
            .collect(),
        host_pid: ctx.host.as_ref().map(|_| std::process::id()),
        store: StoreView {
            location: ctx.store.path().display().to_string(),
            backend: match ctx.store.is_postgres() {
                true => "PostgreSQL".into(),
                false => "SQLite".into(),
            },
            schema_version: ctx.store.schema_version(),
        },
    })
}
