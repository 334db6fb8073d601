//! `beehive run --manifests DIR`: every manifest applied at start, and each
//! file again when its content changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::handlers::{self, Context};
use crate::manifest;
use crate::protocol::{Reply, Request};

/// Applies every manifest file now, then each file again when it changes.
pub(super) async fn watch_manifests(
    ctx: &Context,
    dir: &Path,
    rescan: Duration,
) -> Result<beehive::directory_watch::WatchHandle, String> {
    let applied: Arc<Mutex<BTreeMap<PathBuf, String>>> = Arc::default();
    apply_changed(ctx, dir, &applied).await;
    let (ctx, dir_owned) = (ctx.clone(), dir.to_path_buf());
    beehive::directory_watch::watch_directory(dir, rescan, move || {
        let (ctx, dir, applied) = (ctx.clone(), dir_owned.clone(), applied.clone());
        async move { apply_changed(&ctx, &dir, &applied).await }
    })
    .map_err(|e| format!("cannot watch {}: {e}", dir.display()))
}

/// Applies the manifest files whose content changed since they were last
/// applied. A file that fails is logged and retried when it changes.
async fn apply_changed(ctx: &Context, dir: &Path, applied: &Mutex<BTreeMap<PathBuf, String>>) {
    let files = match manifest::manifest_files(dir) {
        Ok(files) => files,
        Err(error) => return tracing::warn!("manifests: {error}"),
    };
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let seen = applied.lock().unwrap_or_else(|p| p.into_inner()).get(&file) == Some(&text);
        if seen {
            continue;
        }
        match apply_file(ctx, &file).await {
            Ok(()) => {}
            Err(error) => tracing::warn!("manifest {error}"),
        }
        applied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(file, text);
    }
}

async fn apply_file(ctx: &Context, file: &Path) -> Result<(), String> {
    let objects = manifest::load(file)?;
    let reply = handlers::execute(
        ctx,
        Request::Apply {
            objects,
            new_kinds: false,
            // The directory is the desired state: a `generation` copied
            // into one of its files would be stale after its first apply.
            force_conflicts: true,
            dry_run: false,
            trace: None,
        },
    )
    .await
    .map_err(|e| format!("{}: {e}", file.display()))?;
    if let Reply::Applied {
        results, warnings, ..
    } = reply
    {
        for warning in warnings {
            tracing::warn!("manifest {}: {warning}", file.display());
        }
        for r in results.iter().filter(|r| r.action != "unchanged") {
            tracing::info!(
                "manifest {}: {}/{} {}",
                file.display(),
                r.kind,
                r.name,
                r.action
            );
        }
    }
    Ok(())
}
