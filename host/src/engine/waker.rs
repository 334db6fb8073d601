//! The dependency waker and the stale-dependents pass behind it.
//!
//! The waker has no tick: each commit that grew the write log wakes it, and it
//! reads the log above its cursor (store-wide, so a target of a kind with no
//! controller wakes its dependents too), and queues the dependents of every
//! object that moved. A burst of writes costs one batched read per page of
//! log, not a read per write. The cursor is persisted now and then, so a
//! restart resumes close to where it stopped.
//!
//! The stale-dependents pass compares current state instead: every dependent
//! whose targets moved past the watermark its last successful pass recorded.
//! It recovers any lost wake, whatever lost it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::engine::queue::Wake;
use crate::engine::quiet::QuietGate;
use crate::error::Result;
use crate::object::{GroupKind, ObjectId};
use crate::store::{Store, ops};

/// Log entries read per page.
const PAGE: usize = 4096;

/// How long an advanced cursor may stay unsaved.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// Where the waker starts: its saved cursor, or the log's head on a first
/// start (older writes are the stale-dependents pass's to find). Never above
/// the head, which a restored backup could otherwise leave it.
pub(crate) fn seed(store: &Store) -> Result<i64> {
    let head = store.resource_version();
    let saved = store.read(|r| r.waker_cursor())?;
    Ok(saved.unwrap_or(head).min(head))
}

/// Runs the waker until `cancel`.
pub(crate) async fn run(
    store: &Store,
    commits: &Notify,
    cancel: &CancellationToken,
    mut cursor: i64,
    seen: &AtomicI64,
    wake: impl Fn(Vec<(ObjectId, GroupKind)>, Wake),
) {
    let mut saved = cursor;
    let mut saved_at = Instant::now();
    loop {
        match drain(store, &mut cursor, &wake) {
            Ok(()) => {}
            Err(error) => tracing::warn!(%error, "the dependency waker could not read the log"),
        }
        // After the wakes: whoever sees the cursor at a position sees the
        // dependents of every write up to it already queued.
        seen.store(cursor, Ordering::SeqCst);
        if cursor != saved && saved_at.elapsed() >= SAVE_EVERY {
            save(store, cursor).await;
            (saved, saved_at) = (cursor, Instant::now());
        }
        let unsaved = cursor != saved;
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = commits.notified() => {}
            _ = tokio::time::sleep(SAVE_EVERY), if unsaved => {}
        }
    }
    if cursor != saved {
        save(store, cursor).await;
    }
}

/// Reads the log above `cursor` page by page, waking the dependents of what moved.
fn drain(
    store: &Store,
    cursor: &mut i64,
    wake: &impl Fn(Vec<(ObjectId, GroupKind)>, Wake),
) -> Result<()> {
    if !store.may_have_dependency_edges() {
        // No dependent exists to wake. The head is read after that check:
        // an edge created since would be seen by the pass that created it,
        // which is owed a pass for exactly this.
        *cursor = (*cursor).max(store.resource_version());
        return Ok(());
    }
    loop {
        let entries = store.read(|r| r.log_above(*cursor, PAGE))?;
        let Some(&(last, _)) = entries.last() else {
            return Ok(());
        };
        // Each object's latest position in the page: a dependent that has
        // seen it has seen the earlier ones too.
        let moved: Vec<(ObjectId, i64)> = entries
            .iter()
            .map(|&(position, id)| (id, position))
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        let dependents = store.read(|r| r.dependents_of(&moved))?;
        if !dependents.is_empty() {
            wake(dependents, Wake::Ordinary);
        }
        *cursor = last;
    }
}

async fn save(store: &Store, cursor: i64) {
    if let Err(error) = store
        .write(move |tx| ops::save_waker_cursor(tx, cursor))
        .await
    {
        tracing::warn!(%error, "could not save the dependency waker's cursor");
    }
}

/// Queues every dependent whose targets moved past its watermark, unless
/// `gate` says nothing was committed since a pass that found none stale:
/// a target moves only by a commit, and a new edge records its dependent's
/// watermark at the head, so nothing can be stale then and the edges are
/// not read (a settled host does not scan them every interval).
pub(crate) fn stale_dependents(
    store: &Store,
    gate: &mut QuietGate,
    wake: impl Fn(Vec<(ObjectId, GroupKind)>, Wake),
) -> Result<()> {
    let Some(scan) = gate.enter(store) else {
        return Ok(());
    };
    store.metrics().stale_scanned();
    let stale = store.read(|r| r.stale_dependents());
    gate.scanned(scan, stale.as_ref().ok().map(|stale| !stale.is_empty()));
    let stale = stale?;
    if !stale.is_empty() {
        wake(stale, Wake::Ordinary);
    }
    Ok(())
}
