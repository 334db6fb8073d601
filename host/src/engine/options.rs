//! Host-wide settings, and the per-kind settings resolved from them.

use std::time::Duration;

use crate::engine::cadence::{self, Cadence, Resolved};
use crate::engine::controller::ControllerOptions;
use crate::error::{Error, Result};
use crate::trace::Tracer;

/// Settings for a whole host. A kind's [`ControllerOptions`] override its
/// concurrency and its [`Cadence`].
///
/// ```
/// use std::time::Duration;
/// use beehive::engine::Cadence;
///
/// let options = beehive::HostOptions::new()
///     .cadence(Cadence::new().owed_pass_interval(Duration::from_secs(10)))
///     .gc_interval(Duration::from_secs(5));
/// ```
#[derive(Clone, Debug)]
pub struct HostOptions {
    pub(crate) concurrency: usize,
    pub(crate) cadence: Cadence,
    pub(crate) gc_interval: Duration,
    pub(crate) requeue_floor: Duration,
    pub(crate) queue_capacity: usize,
    pub(crate) write_log_max_age: Duration,
    pub(crate) write_log_per_kind: usize,
    pub(crate) event_runs_per_timeline: usize,
    pub(crate) event_max_age: Duration,
    pub(crate) transaction_hold_limit: Duration,
    pub(crate) stale_dependents_interval: Duration,
    pub(crate) tracer: Option<Tracer>,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            concurrency: 1,
            cadence: Cadence::new(),
            gc_interval: Duration::from_secs(30),
            requeue_floor: Duration::from_secs(1),
            queue_capacity: crate::engine::queue::CAPACITY,
            write_log_max_age: Duration::from_secs(24 * 60 * 60),
            write_log_per_kind: 0,
            event_runs_per_timeline: 0,
            event_max_age: Duration::ZERO,
            transaction_hold_limit: Duration::from_secs(1),
            stale_dependents_interval: Duration::from_secs(60),
            tracer: None,
        }
    }
}

impl HostOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Workers per kind, unless a kind says otherwise (default 1).
    pub fn concurrency(mut self, workers: usize) -> Self {
        self.concurrency = workers;
        self
    }

    /// Every kind's cadence, unless a kind sets its own; the values set here
    /// replace those set before.
    pub fn cadence(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence.over(self.cadence);
        self
    }

    /// How often the garbage-collection sweeper runs (default 30 s). Cannot be
    /// disabled: non-positive is refused.
    pub fn gc_interval(mut self, interval: Duration) -> Self {
        self.gc_interval = interval;
        self
    }

    /// The per-object re-enqueue floor (default 1 s).
    pub fn requeue_floor(mut self, floor: Duration) -> Self {
        self.requeue_floor = floor;
        self
    }

    /// The most objects a kind's work queue tracks at once (default 65,536,
    /// about 10 MiB; at least 2). Past it, wakes for work the store records
    /// as owed are left to an owed scan, paged to the room the queue has, so
    /// a store owing a million passes converges without holding them all.
    pub fn queue_capacity(mut self, objects: usize) -> Self {
        self.queue_capacity = objects.max(2);
        self
    }

    /// Write-log retention: entries older than `max_age` (default 24 h; zero
    /// keeps them forever) and beyond the newest `per_kind` of each kind
    /// (default 0: no count bound) are removed by the sweeper.
    pub fn write_log_retention(mut self, per_kind: usize, max_age: Duration) -> Self {
        self.write_log_per_kind = per_kind;
        self.write_log_max_age = max_age;
        self
    }

    /// Event retention: at most `per_timeline` runs per (object, category) and
    /// none that ended more than `max_age` ago; zero leaves a bound off
    /// (both off by default).
    pub fn event_retention(mut self, per_timeline: usize, max_age: Duration) -> Self {
        self.event_runs_per_timeline = per_timeline;
        self.event_max_age = max_age;
        self
    }

    /// How long a pass may hold a transaction open before it is rolled back
    /// (default 1 s): a transaction holds the store's single writer.
    pub fn transaction_hold_limit(mut self, limit: Duration) -> Self {
        self.transaction_hold_limit = limit;
        self
    }

    /// How often the stale-dependents pass looks for dependents whose targets
    /// moved past what their last pass saw (default 60 s): the backstop under
    /// the dependency waker. Cannot be disabled: non-positive is refused.
    pub fn stale_dependents_interval(mut self, interval: Duration) -> Self {
        self.stale_dependents_interval = interval;
        self
    }

    /// Makes a span of every pass, with children for its store writes and
    /// for each HTTP request a plugin sends, and hands them to `tracer`'s
    /// sink (default: none, and no span is made).
    pub fn tracer(mut self, tracer: Tracer) -> Self {
        self.tracer = Some(tracer);
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        require_positive("stale-dependents interval", self.stale_dependents_interval)?;
        cadence::resolve(self.cadence)?;
        require_positive("GC interval", self.gc_interval)?;
        require_positive("transaction hold limit", self.transaction_hold_limit)?;
        Ok(())
    }

    /// The settings of one kind: its own options over these.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a cadence that cannot be used.
    pub(crate) fn resolve(&self, options: &ControllerOptions) -> Result<KindSettings> {
        Ok(KindSettings {
            concurrency: options.concurrency.unwrap_or(self.concurrency).max(1),
            cadence: cadence::resolve(options.cadence.over(self.cadence))?,
            transaction_hold_limit: self.transaction_hold_limit,
        })
    }
}

fn require_positive(what: &str, interval: Duration) -> Result<()> {
    if interval.is_zero() {
        Err(Error::InvalidOption(format!(
            "the {what} must be positive: it cannot be turned off"
        )))
    } else {
        Ok(())
    }
}

/// A kind's effective settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KindSettings {
    pub(crate) concurrency: usize,
    pub(crate) cadence: Resolved,
    pub(crate) transaction_hold_limit: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cadences_that_cannot_be_disabled_refuse_zero() {
        let zero = Duration::ZERO;
        assert!(
            HostOptions::new()
                .cadence(Cadence::new().owed_pass_interval(zero))
                .validate()
                .is_err()
        );
        assert!(HostOptions::new().gc_interval(zero).validate().is_err());
        assert!(
            HostOptions::new()
                .stale_dependents_interval(zero)
                .validate()
                .is_err()
        );
        assert!(
            HostOptions::new()
                .transaction_hold_limit(zero)
                .validate()
                .is_err()
        );
        assert!(
            HostOptions::new()
                .cadence(Cadence::new().full_pass_interval(zero))
                .validate()
                .is_ok()
        );
        let per_kind = ControllerOptions::new().cadence(Cadence::new().owed_pass_interval(zero));
        assert!(matches!(
            HostOptions::new().resolve(&per_kind),
            Err(Error::InvalidOption(_))
        ));
    }

    #[test]
    fn kind_options_override_host_options() {
        let host = HostOptions::new()
            .concurrency(2)
            .cadence(Cadence::new().max_retry_interval(Duration::from_secs(5)));
        let settings = host.resolve(&ControllerOptions::new()).unwrap();
        assert_eq!(settings.concurrency, 2);
        assert_eq!(settings.cadence.max_retry_interval, Duration::from_secs(5));
        let zero =
            ControllerOptions::new().cadence(Cadence::new().max_retry_interval(Duration::ZERO));
        assert!(
            matches!(host.resolve(&zero), Err(Error::InvalidOption(_))),
            "a zero backoff cap is refused, as everywhere"
        );
        let settings = host
            .resolve(&ControllerOptions::new().concurrency(4))
            .unwrap();
        assert_eq!(settings.concurrency, 4);
    }
}
