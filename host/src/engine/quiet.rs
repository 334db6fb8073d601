//! Lets a backstop scan (the owed pass, the garbage-collection sweep, the
//! stale-dependents pass) skip a store in which nothing was committed since
//! the same scan last found nothing to do.
//!
//! Each of these scans looks for state that only a commit can create: an
//! unobserved generation, an owed count, a pending deletion, a target moved
//! past a watermark, free pages. If nothing was committed since a scan found
//! none, there is none now, and the scan would only read the same empty
//! answer again. On a settled host that reading was most of what it did: and
//! where the machine reclaims memory left untouched (a VM's balloon, the
//! host's page reclaim), every page a tick touches costs a fault, so an idle
//! host that reads nothing costs next to nothing.
//!
//! The count is the store's commit count, which moves with every commit
//! through this store and every commit it hears of from another process
//! (PostgreSQL's notifications, and the catch-up after a lost listener
//! connection). A store is still scanned once every [`QUIET_RESCAN`] while
//! quiet: a write no notification carries (another process writing the same
//! SQLite file, which the CLI's lock forbids but a library user can do) and
//! the age-based trims of retention are found by then.

use std::time::{Duration, Instant};

use crate::store::Store;

/// How long a quiet store goes without a scan at most.
pub(crate) const QUIET_RESCAN: Duration = Duration::from_secs(10 * 60);

/// One scan's memory of when it last found nothing.
#[derive(Debug, Default)]
pub(crate) struct QuietGate {
    /// The commit count read before the last scan, and when it ran, if that
    /// scan found nothing to do.
    quiet_since: Option<(u64, Instant)>,
}

/// A scan let through by [`QuietGate::enter`]: it carries the commit count
/// read before the scan read anything, which is the point it is known to be
/// complete as of.
#[must_use = "tell the gate what the scan found"]
pub(crate) struct Scan {
    commits_before: u64,
}

impl QuietGate {
    /// A gate that lets the first scan through.
    pub(crate) fn new() -> Self {
        QuietGate::default()
    }

    /// `None` when the scan may be skipped: nothing was committed since it
    /// last found nothing, and that was less than [`QUIET_RESCAN`] ago.
    pub(crate) fn enter(&self, store: &Store) -> Option<Scan> {
        let scan = Self::always(store);
        match self.quiet_since {
            Some((count, at)) if count == scan.commits_before && at.elapsed() < QUIET_RESCAN => {
                None
            }
            _ => Some(scan),
        }
    }

    /// A scan asked for whatever the gate says (a wake from another
    /// process, a queue with room again).
    pub(crate) fn always(store: &Store) -> Scan {
        // Read before the scan's own reads begin: a commit that lands
        // during the scan then moves the count past this, so the next tick
        // scans again even if this scan's snapshot missed it.
        Scan {
            commits_before: store.commit_count(),
        }
    }

    /// Records what a scan let through found: whether there was work, or
    /// `None` when it failed. Only a scan that read and found nothing makes
    /// the store quiet, as of the count read before it.
    pub(crate) fn scanned(&mut self, scan: Scan, found_work: Option<bool>) {
        self.quiet_since =
            (found_work == Some(false)).then(|| (scan.commits_before, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_gate_skips_only_while_nothing_is_committed_after_an_empty_scan() {
        let store = Store::temporary().unwrap();
        let mut gate = QuietGate::new();
        let first = gate.enter(&store).expect("the first scan runs");
        gate.scanned(first, Some(true));
        let found_work = gate
            .enter(&store)
            .expect("a scan that found work runs again");
        gate.scanned(found_work, Some(false));
        assert!(gate.enter(&store).is_none(), "a quiet store is skipped");

        store.write(|_| Ok(())).await.unwrap();
        let after_commit = gate.enter(&store).expect("a commit brings the scan back");
        gate.scanned(after_commit, Some(false));
        assert!(gate.enter(&store).is_none());
        gate.scanned(QuietGate::always(&store), None);
        assert!(gate.enter(&store).is_some(), "a failed scan is not quiet");
    }

    #[tokio::test]
    async fn a_commit_during_a_scan_keeps_the_next_one() {
        let store = Store::temporary().unwrap();
        let mut gate = QuietGate::new();
        let scan = gate.enter(&store).unwrap();
        store.write(|_| Ok(())).await.unwrap();
        gate.scanned(scan, Some(false));
        assert!(gate.enter(&store).is_some());
    }

    #[test]
    fn a_quiet_store_is_scanned_again_after_the_rescan_interval() {
        let store = Store::temporary().unwrap();
        let long_ago = Instant::now().checked_sub(QUIET_RESCAN);
        let gate = QuietGate {
            quiet_since: long_ago.map(|at| (store.commit_count(), at)),
        };
        assert!(gate.enter(&store).is_some());
    }
}
