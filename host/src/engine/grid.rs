//! The grid the host's periodic passes fire on: instants a whole number of
//! intervals after one epoch for the whole process.
//!
//! The owed passes of every kind, the garbage-collection sweep and the
//! stale-dependents pass each sleep on their own timer. Started a few
//! milliseconds apart, each timer woke the process on its own, and on an
//! idle host every wake costs more than the work it does: the thread, the
//! runtime's timer wheel and the store's structures are touched cold again
//! each time (tens of microseconds a page where the machine reclaims memory
//! left alone). On one grid, passes of the same interval (all of them by
//! default: 30 s, and 60 s for the stale-dependents pass) fall due at the
//! same instant, and the runtime serves them in one wake. The plugin
//! directory's rescan keeps the same grid.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The first instant on the grid of `interval` after `now`. A zero interval
/// (which the options refuse) is due at once.
pub(crate) fn next_after(now: tokio::time::Instant, interval: Duration) -> tokio::time::Instant {
    let now = now.into_std();
    tokio::time::Instant::from_std(next_on_grid(*EPOCH, now, interval))
}

/// Sleeps until the next instant on the grid of `interval`.
pub(crate) async fn sleep(interval: Duration) {
    tokio::time::sleep_until(next_after(tokio::time::Instant::now(), interval)).await;
}

fn next_on_grid(epoch: Instant, now: Instant, interval: Duration) -> Instant {
    if interval.is_zero() {
        return now;
    }
    let since = now.saturating_duration_since(epoch);
    let steps = since.as_nanos() / interval.as_nanos() + 1;
    interval
        .as_nanos()
        .checked_mul(steps)
        .and_then(|nanos| u64::try_from(nanos).ok())
        .and_then(|nanos| epoch.checked_add(Duration::from_nanos(nanos)))
        // An interval so long the grid overflows: counted from now instead,
        // and never later than the clock can say.
        .or_else(|| now.checked_add(interval))
        .unwrap_or_else(|| now + FAR)
}

/// A century: later than any interval means in practice.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_instant_is_a_whole_number_of_intervals_after_the_epoch() {
        let epoch = Instant::now();
        let second = Duration::from_secs(1);
        let at = |millis| epoch + Duration::from_millis(millis);
        assert_eq!(next_on_grid(epoch, epoch, second), at(1000));
        assert_eq!(next_on_grid(epoch, at(1), second), at(1000));
        assert_eq!(next_on_grid(epoch, at(999), second), at(1000));
        assert_eq!(
            next_on_grid(epoch, at(1000), second),
            at(2000),
            "strictly after"
        );
        assert_eq!(next_on_grid(epoch, at(2500), second), at(3000));
    }

    #[test]
    fn passes_of_one_interval_fall_due_together_whenever_they_started() {
        let epoch = Instant::now();
        let interval = Duration::from_secs(30);
        let early = next_on_grid(epoch, epoch + Duration::from_millis(3), interval);
        let late = next_on_grid(epoch, epoch + Duration::from_millis(40), interval);
        assert_eq!(early, late);
    }

    #[test]
    fn a_zero_or_huge_interval_does_not_panic() {
        let now = Instant::now();
        assert_eq!(next_on_grid(now, now, Duration::ZERO), now);
        let huge = Duration::from_secs(u64::MAX / 4);
        let _ = next_on_grid(now - Duration::from_secs(1), now, huge);
    }
}
