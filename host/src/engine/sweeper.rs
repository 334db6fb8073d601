//! The host's background loops, each on its own cadence and each only
//! reading until it finds work: the garbage-collection sweep (with log
//! retention and free pages), the stale-dependents pass, and the object
//! counts behind the metrics, taken when they are exported.

use std::collections::HashMap;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::engine::grid;
use crate::engine::kind::{self, Kinds};
use crate::engine::options::HostOptions;
use crate::engine::queue::Wake;
use crate::engine::quiet::QuietGate;
use crate::engine::waker;
use crate::error::Result;
use crate::object::GroupKind;
use crate::store::ops;
use crate::store::{Retention, Store};
use crate::sync::read;

/// The stale-dependents pass: at start, then every interval.
pub(super) async fn stale_loop(
    store: &Store,
    kinds: &Kinds,
    options: &HostOptions,
    cancel: &CancellationToken,
) {
    let mut gate = QuietGate::new();
    loop {
        let wake = |dependents, wake| {
            kind::wake(kinds, dependents, wake);
        };
        if let Err(error) = waker::stale_dependents(store, &mut gate, wake) {
            tracing::warn!(%error, "the stale-dependents pass failed");
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = grid::sleep(options.stale_dependents_interval) => {}
        }
    }
}

/// The garbage-collection sweeper: every deletion-pending object of a
/// registered kind is queued (a backstop under the pushes); those of kinds
/// with no controller are collected here. Then retention and free pages.
/// Between rounds, `controllerless` (rung by a commit touching a kind with
/// no controller) has such deletions collected at once.
pub(super) async fn sweep_loop(
    store: &Store,
    kinds: &Kinds,
    options: &HostOptions,
    controllerless: &Notify,
    cancel: &CancellationToken,
) {
    let mut gate = QuietGate::new();
    loop {
        let swept = match gate.enter(store) {
            // Nothing committed since a sweep that found nothing: no
            // deletion, no log entry, no freed page can be waiting.
            None => Ok(()),
            Some(scan) => {
                let swept = sweep(store, kinds, options).await;
                gate.scanned(scan, swept.as_ref().ok().copied());
                swept.map(drop)
            }
        };
        match swept {
            Ok(()) => store.metrics().gc_swept(),
            Err(error) => tracing::warn!(%error, "garbage-collection sweep failed"),
        }
        let next_round = grid::sleep(options.gc_interval);
        tokio::pin!(next_round);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = &mut next_round => break,
                _ = controllerless.notified() => {
                    if let Err(error) = collect_controllerless(store, kinds).await {
                        tracing::warn!(%error, "garbage collection failed");
                    }
                }
            }
        }
    }
}

/// Collects the deletion-pending objects of kinds with no controller;
/// whether any object at all is being deleted.
async fn collect_controllerless(store: &Store, kinds: &Kinds) -> Result<bool> {
    let deleting = store.read(|r| r.deleting())?;
    let found_work = !deleting.is_empty();
    let mut client_only = Vec::new();
    {
        let kinds = read(kinds);
        for (id, group_kind) in deleting {
            match kinds.get(&group_kind) {
                Some(kind) => kind.queue.wake(id, Wake::Ordinary),
                None => client_only.push(id),
            }
        }
    }
    if !client_only.is_empty() {
        store
            .write(move |tx| {
                for id in client_only {
                    ops::collect(tx, id)?;
                }
                Ok(())
            })
            .await?;
    }
    Ok(found_work)
}

/// One sweep; returns whether it found objects being deleted (those of
/// registered kinds are still there after it, waiting for their passes).
async fn sweep(store: &Store, kinds: &Kinds, options: &HostOptions) -> Result<bool> {
    let found_work = collect_controllerless(store, kinds).await?;
    store
        .apply_retention(Retention {
            write_log_max_age_ms: options.write_log_max_age.as_millis() as i64,
            write_log_per_kind: options.write_log_per_kind,
            event_runs_per_timeline: options.event_runs_per_timeline,
            event_max_age_ms: options.event_max_age.as_millis() as i64,
        })
        .await?;
    Ok(found_work)
}

/// Brings the object gauges up to date: one grouped count for the store,
/// the failing ones from each kind's queue.
pub(super) fn count_objects(store: &Store, kinds: &Kinds, metrics: &crate::metrics::Metrics) {
    let counts = match store.read(|r| r.counts_by_kind()) {
        Ok(counts) => counts,
        Err(error) => {
            tracing::warn!(%error, "cannot count objects for the metrics");
            return;
        }
    };
    let counts: HashMap<GroupKind, (i64, i64)> = counts
        .into_iter()
        .map(|(gk, total, unsettled)| (gk, (total, unsettled)))
        .collect();
    for (group_kind, kind) in read(kinds).iter() {
        let (total, unsettled) = counts.get(group_kind).copied().unwrap_or((0, 0));
        let failing = i64::try_from(kind.queue.failing()).unwrap_or(i64::MAX);
        metrics.set_objects(&group_kind.to_string(), total, unsettled, failing);
    }
}
