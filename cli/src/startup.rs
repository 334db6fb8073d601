//! What a host does behind its socket once it serves: it loads its plugins
//! (each serves as soon as it has loaded, however long another takes to
//! compile), then applies its manifest directory, whose kinds the plugins
//! make known.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use beehive::directory_watch::WatchHandle;
use beehive::plugin::{Change, Directory};

use crate::handlers::Context;
use crate::manifest_watch::watch_manifests;

/// The line logged when the first load of the plugin directory is done;
/// scripts (and the tests) wait for it.
pub const FIRST_LOAD_DONE: &str = "first plugin load done";

/// Loads every plugin, logging each as it serves, then applies
/// `manifests` and marks the host started; returns the manifest watch, if
/// there is one to stop.
pub async fn load_plugins_then_manifests(
    ctx: Context,
    plugins: Arc<Directory>,
    manifests: Option<PathBuf>,
    rescan: Duration,
) -> Option<WatchHandle> {
    let started = Instant::now();
    if let Err(error) = plugins.sync_with(Change::log).await {
        tracing::error!("plugin directory: {error}");
    }
    let (served, failed) = (plugins.served().len(), plugins.failures().len());
    if served == 0 && failed == 0 {
        tracing::warn!(
            "no plugins in {}: objects are stored but nothing reconciles them",
            plugins.dir().display()
        );
    }
    tracing::info!(
        "{FIRST_LOAD_DONE} in {:.1?}: {served} serving, {failed} failed",
        started.elapsed()
    );
    let watch = match manifests {
        Some(dir) => watch_manifests(&ctx, &dir, rescan)
            .await
            .inspect_err(|error| tracing::error!("manifests: {error}"))
            .ok(),
        None => None,
    };
    ctx.started.store(true, Ordering::SeqCst);
    watch
}
