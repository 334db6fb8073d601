//! How long a kind's passes take, and so how many of them a worker may take
//! at once without keeping the rest of the line waiting.
//!
//! A worker takes a fair share of the ready line so that slow passes spread
//! across the kind's workers. Quick passes gain nothing from that spread:
//! a commit of eight objects split four ways made batches of one or two, and
//! loading each object alone cost more than the passes (four workers ran
//! 10–15 % slower than one). So a worker may also take as many passes as run
//! within [`SLICE`], whatever the share.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long the passes a worker takes beyond its fair share may keep the
/// last of them waiting.
pub(crate) const SLICE: Duration = Duration::from_millis(1);

/// Until a pass has been timed, passes count as slow: the fair share alone.
const UNTIMED: u64 = u64::MAX;

/// The running mean of a kind's pass times: each new time moves it an
/// eighth of the way, so one slow pass does not swing it and a change of
/// controller shows within a few dozen passes.
#[derive(Debug)]
pub(crate) struct Pace {
    mean_nanos: AtomicU64,
}

impl Pace {
    pub(crate) fn new() -> Self {
        Pace {
            mean_nanos: AtomicU64::new(UNTIMED),
        }
    }

    /// Counts a pass that took `took`.
    pub(crate) fn record(&self, took: Duration) {
        let sample = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX - 1);
        // Workers record concurrently; a lost update only skips one sample.
        let mean = self.mean_nanos.load(Ordering::Relaxed);
        let next = if mean == UNTIMED {
            sample
        } else if sample >= mean {
            mean + (sample - mean) / 8
        } else {
            mean - (mean - sample) / 8
        };
        self.mean_nanos.store(next, Ordering::Relaxed);
    }

    /// How many passes run within [`SLICE`] at the current mean: none before
    /// the first is timed.
    pub(crate) fn passes_per_slice(&self) -> usize {
        let mean = self.mean_nanos.load(Ordering::Relaxed);
        if mean == UNTIMED {
            return 0;
        }
        let slice = SLICE.as_nanos() as u64;
        usize::try_from(slice / mean.max(1)).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untimed_passes_count_as_slow() {
        assert_eq!(Pace::new().passes_per_slice(), 0);
    }

    #[test]
    fn quick_passes_fill_the_slice() {
        let pace = Pace::new();
        pace.record(Duration::from_micros(20));
        assert_eq!(pace.passes_per_slice(), 50);
    }

    #[test]
    fn passes_slower_than_the_slice_add_none() {
        let pace = Pace::new();
        pace.record(Duration::from_millis(5));
        assert_eq!(pace.passes_per_slice(), 0);
    }

    #[test]
    fn one_slow_pass_moves_the_mean_an_eighth_of_the_way() {
        let pace = Pace::new();
        pace.record(Duration::from_micros(10));
        pace.record(Duration::from_micros(810));
        // 10 µs + 800 µs / 8 = 110 µs: nine passes in a millisecond.
        assert_eq!(pace.passes_per_slice(), 9);
        for _ in 0..100 {
            pace.record(Duration::from_millis(10));
        }
        assert_eq!(pace.passes_per_slice(), 0, "a slower controller shows");
    }
}
