//! Watching a directory: a callback shortly after the directory goes quiet,
//! and on a slow cadence behind that, so a missed notification costs latency
//! only.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use notify::Watcher;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long a directory must be quiet before the callback runs: writes and
/// renames come as bursts of notifications.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// Runs `on_change` shortly after anything in `dir` changes, and every
/// `rescan` regardless, until the handle is stopped or dropped. Calls never
/// overlap. Must be called inside a tokio runtime.
///
/// # Errors
/// What the file system says when `dir` cannot be watched.
pub fn watch_directory<F, Fut>(
    dir: &Path,
    rescan: Duration,
    mut on_change: F,
) -> std::io::Result<WatchHandle>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (notified, mut notifications) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // A read changes nothing, and the callback's own reading of the
        // directory is one: passed on, it would call the callback again,
        // forever.
        if matches!(&event, Ok(e) if e.kind.is_access()) {
            return;
        }
        // The receiver is gone only once watching has stopped.
        let _ = notified.send(event);
    })
    .map_err(std::io::Error::other)?;
    watcher
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .map_err(std::io::Error::other)?;
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                event = notifications.recv() => {
                    if event.is_none() {
                        return;
                    }
                    quiet(&mut notifications).await;
                }
                // On the grid the host's backstop passes keep, so an idle
                // host's rescans and scans share their wake-ups.
                _ = crate::engine::grid::sleep(rescan) => {}
            }
            // A stop does not wait for a callback: a plugin compiling for
            // half a minute would hold the host's shutdown that long.
            tokio::select! {
                _ = stop.cancelled() => return,
                () = on_change() => {}
            }
        }
    });
    Ok(WatchHandle {
        _watcher: watcher,
        cancel,
        task: Some(task),
    })
}

/// Waits until no notification has come for [`DEBOUNCE`].
async fn quiet<T>(notifications: &mut mpsc::UnboundedReceiver<T>) {
    while let Ok(Some(_)) = tokio::time::timeout(DEBOUNCE, notifications.recv()).await {}
}

/// Keeps a directory watched; dropping it stops watching.
#[must_use = "dropping the handle stops watching"]
pub struct WatchHandle {
    _watcher: notify::RecommendedWatcher,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl WatchHandle {
    /// Stops watching. A callback in progress is dropped at its next await
    /// (so it must leave nothing half-done there: a transaction rolls back,
    /// a load is abandoned); this waits until it is.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            // A callback that panicked has nothing left to wait for.
            let _ = task.await;
        }
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl std::fmt::Debug for WatchHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchHandle").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reading_the_directory_does_not_call_back_again() {
        let dir = tempfile::tempdir().unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let (seen, path) = (calls.clone(), dir.path().to_path_buf());
        let handle = watch_directory(dir.path(), Duration::from_secs(3600), move || {
            seen.fetch_add(1, Ordering::SeqCst);
            // What a directory sync does: list it and read its files.
            for entry in std::fs::read_dir(&path).unwrap() {
                let _ = std::fs::read(entry.unwrap().path());
            }
            async {}
        })
        .unwrap();
        std::fs::write(dir.path().join("a.wasm"), b"x").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while calls.load(Ordering::SeqCst) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the write was never seen"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Twenty debounce windows: a callback whose own reads woke it again
        // would have run many times by now. (The write itself may come as
        // two bursts on a busy machine.)
        tokio::time::sleep(DEBOUNCE * 20).await;
        let calls = calls.load(Ordering::SeqCst);
        assert!(calls <= 2, "{calls} callbacks for one write");
        handle.stop().await;
    }
}
